package gpugraph_test

import (
	"errors"
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// produce fills x[i] = i; it lets its dependents start first thing.
var produce = &gg.Kernel{
	Name:   "produce",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		b.TriggerProgrammaticLaunchCompletion()
		x := gg.Slice[float32](a.Ptr(0), a.Int(1))
		for i := range x {
			x[i] = float32(i)
		}
	},
	CUDA: `extern "C" __global__ void produce(float* x, int n) {
		asm volatile("griddepcontrol.launch_dependents;");
		for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = i;
	}`,
}

// consume doubles what produce wrote, once it has it.
var consume = &gg.Kernel{
	Name:   "consume",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		// Work that does not read x could run here, overlapping produce.
		b.GridDependencySynchronize()
		x := gg.Slice[float32](a.Ptr(0), a.Int(1))
		for i := range x {
			x[i] *= 2
		}
	},
	CUDA: `extern "C" __global__ void consume(float* x, int n) {
		asm volatile("griddepcontrol.wait;" ::: "memory");
		for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= 2;
	}`,
}

// Join two kernel nodes with a programmatic edge (programmatic dependent
// launch): the consumer may start as soon as the producer triggers, and
// waits for the producer's results with GridDependencySynchronize.
func ExampleGraph_AddNodeWithEdgeData() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	const n = 8
	x, _ := dev.Malloc(4 * n)
	g, _ := dev.NewGraph()
	p, _ := g.AddKernelNode(gg.KernelParams{Kernel: produce, Grid: gg.Dim1(1), Block: gg.Dim1(32), Args: []any{x, n}})
	edge := gg.EdgeData{FromPort: gg.KernelNodePortProgrammatic, Type: gg.DependencyTypeProgrammatic}
	c, err := g.AddNodeWithEdgeData(gg.KernelParams{Kernel: consume, Grid: gg.Dim1(1), Block: gg.Dim1(32), Args: []any{x, n}},
		[]*gg.Node{p}, []gg.EdgeData{edge})
	if err != nil {
		log.Fatal(err)
	}

	// Asking for the dependencies alone would lose the edge's data.
	_, err = c.Dependencies()
	fmt.Println(errors.Is(err, gg.ErrLossyQuery))
	es, _ := c.DependencyEdges()
	fmt.Println(es[0].From == p, es[0].Data)

	e, _ := g.Instantiate(0)
	s, _ := dev.NewStream()
	e.Launch(s)
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	out := make([]float32, n)
	dev.Memcpy(gg.DtoH(gg.Bytes(out), x))
	fmt.Println(out)
	// Output:
	// true
	// true programmatic port, programmatic
	// [0 2 4 6 8 10 12 14]
}
