package gpugraph_test

import (
	"cmp"
	"errors"
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// A graph set runs one computation at several batch sizes, one graph per
// size: captured largest first, a batch of 3 padded up to the graph of 4.
// The graphs share one stream's graph memory, so the set needs its largest
// graph's, known before anything runs; an output is valid until the next
// replay.
func ExampleGraphSet() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s, _ := dev.NewStream()
	in, _ := dev.Malloc(4 * 8) // static input: room for the largest batch
	defer dev.Free(in)
	s.Memcpy(gg.HtoD(in, gg.Bytes([]uint32{10, 20, 30, 40, 50, 60, 70, 80})))

	// The work for a batch of n: a temporary of n MiB (graph memory the
	// graph frees) and an output of n values (returned: the set copies it
	// out of graph memory).
	forward := func(s *gg.Stream, n int) ([]gg.DevicePtr, error) {
		tmp, _ := s.MallocAsync(n << 20)
		out, _ := s.MallocAsync(4 * n)
		s.Launch(addOne, gg.Dim1(1), gg.Dim1(n), in, tmp, n)
		s.Launch(addOne, gg.Dim1(1), gg.Dim1(n), tmp, out, n)
		return []gg.DevicePtr{out}, s.FreeAsync(tmp)
	}
	set, err := gg.NewGraphSet(s, forward, gg.GraphSetConfig[int]{
		Keys:      []int{1, 2, 4, 8},
		Compare:   cmp.Compare[int],
		OnMissing: gg.MissingPad,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close()
	st := set.Stats()
	fmt.Printf("graphs %v: graph memory %d MiB (the sum would be %d MiB)\n", set.Keys(), st.GraphBytes>>20, st.SumGraphBytes>>20)

	outs, _ := set.Replay(3)
	got := make([]uint32, 3)
	outs[0].Read(gg.Bytes(got))
	fmt.Println(outs[0], got)

	set.Replay(8)
	err = outs[0].Read(gg.Bytes(got))
	var stale *gg.StaleOutputError
	fmt.Println(errors.As(err, &stale), stale.OverwrittenBy)
	// Output:
	// graphs [1 2 4 8]: graph memory 10 MiB (the sum would be 22 MiB)
	// output 0 of replay 1 (key 3, padded to 4) [12 22 32]
	// true 2
}
