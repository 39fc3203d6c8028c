package gpugraph_test

import (
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// Capture a step that uses a temporary buffer, then replay it with new
// input copied into the static input buffer each time, as PyTorch's
// CUDAGraph is used. The temporary becomes graph memory.
func ExampleCapture() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s, _ := dev.NewStream()
	const n = 4
	in, _ := s.MallocAsync(4 * n)  // static input
	out, _ := s.MallocAsync(4 * n) // static output
	step := func(s *gg.Stream) error {
		tmp, err := s.MallocAsync(4 * n)
		if err != nil {
			return err
		}
		s.Launch(addOne, gg.Dim1(1), gg.Dim1(n), in, tmp, n)
		s.Launch(addOne, gg.Dim1(1), gg.Dim1(n), tmp, out, n)
		return s.FreeAsync(tmp)
	}
	g, err := gg.Capture(s, step, gg.CaptureOptions{Warmup: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Destroy()
	for _, start := range []uint32{10, 20} {
		x := []uint32{start, start + 1, start + 2, start + 3}
		s.Memcpy(gg.HtoD(in, gg.Bytes(x)))
		g.Replay()
		s.Memcpy(gg.DtoH(gg.Bytes(x), out))
		if err := s.Synchronize(); err != nil {
			log.Fatal(err)
		}
		fmt.Println(x)
	}
	st, _ := dev.MemoryStats()
	fmt.Println("graph memory reserved:", st.GraphReserved > 0)
	// Output:
	// [12 13 14 15]
	// [22 23 24 25]
	// graph memory reserved: true
}
