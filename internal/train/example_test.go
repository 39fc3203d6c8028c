package train_test

import (
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/train"
)

// Capture one training step into a graph and replay it, refilling the
// static input buffers before each replay, as PyTorch's
// torch.cuda.graph recipe does.
func Example() {
	d, err := gg.Open(gg.BackendHost)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	cfg := train.Small()
	data, err := train.NewDataset(cfg, 8)
	if err != nil {
		log.Fatal(err)
	}
	static, err := train.NewStatic(s, cfg) // batch and loss buffers
	if err != nil {
		log.Fatal(err)
	}
	model, err := train.NewModel(s, cfg)
	if err != nil {
		log.Fatal(err)
	}

	// Capture: the step's kernels, and its MallocAsync/FreeAsync calls as
	// graph alloc and free nodes.
	if err := s.BeginCapture(gg.CaptureModeGlobal); err != nil {
		log.Fatal(err)
	}
	if err := model.Step(s, static.X, static.Y, static.Loss); err != nil {
		log.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		log.Fatal(err)
	}
	step, err := g.Instantiate(0)
	if err != nil {
		log.Fatal(err)
	}

	var first, last float32
	for i := range 100 {
		if err := static.Load(s, data, i); err != nil { // static_input.copy_(batch)
			log.Fatal(err)
		}
		if err := step.Launch(s); err != nil { // g.replay()
			log.Fatal(err)
		}
		if i == 0 {
			first, _ = static.ReadLoss(s)
		}
	}
	last, err = static.ReadLoss(s)
	if err != nil {
		log.Fatal(err)
	}
	kernels, allocs := cfg.StepOps()
	fmt.Printf("%d kernels, %d allocations\n", kernels, allocs)
	fmt.Println("loss halved:", last < first/2)
	// Output:
	// 18 kernels, 6 allocations
	// loss halved: true
}
