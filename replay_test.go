package gpugraph_test

import (
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

func TestCaptureArguments(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	_, err := gg.Capture(s, nil, gg.CaptureOptions{})
	isCode(t, err, gg.ErrInvalidValue)
	_, err = gg.Capture(s, func(*gg.Stream) error { return nil }, gg.CaptureOptions{Warmup: -1})
	isCode(t, err, gg.ErrInvalidValue)
	// A failing function ends the capture: the stream is usable again.
	boom := errors.New("boom")
	_, err = gg.Capture(s, func(s *gg.Stream) error { return boom }, gg.CaptureOptions{})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	ok(t, s.Synchronize())
}

// A graph allocation made after another one's free node reuses its address,
// and the layout shows it; on the host backend it also shows the physical
// chunks, shared by both.
func TestMemLayoutReuse(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	a, pa := must2(t)(g.AddMemAllocNode(gg.MemAllocParams{Size: 1 << 20}))
	fa := must[*gg.Node](t)(g.AddMemFreeNode(pa, a))
	b, pb := must2(t)(g.AddMemAllocNode(gg.MemAllocParams{Size: 1 << 20}, fa))
	must[*gg.Node](t)(g.AddMemFreeNode(pb, b))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	l := must[gg.MemLayout](t)(e.MemLayout())
	if len(l.Nodes) != 4 || len(l.Allocs) != 2 {
		t.Fatalf("layout: %d nodes, %d allocations", len(l.Nodes), len(l.Allocs))
	}
	x, y := l.Allocs[0], l.Allocs[1]
	if x.Ptr != pa || y.Ptr != pb || x.Offset != y.Offset || x.End > y.Start {
		t.Fatalf("layout %+v %+v: want the second allocation at the first one's offset, after its free", x, y)
	}
	if len(x.Phys) == 0 || x.Phys[0] < 0 || x.Phys[0] != y.Phys[0] {
		t.Fatalf("physical chunks %v and %v: want the same, known", x.Phys, y.Phys)
	}
}

// Graphs replayed in one stream share graph memory, as graphs sharing a
// memory pool do in PyTorch: two captured steps of 4 MiB and 6 MiB of
// temporaries reserve what the larger one needs, not the sum.
func TestCapturedGraphsShareMemory(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	step := func(n int) func(*gg.Stream) error {
		return func(s *gg.Stream) error {
			p, err := s.MallocAsync(n)
			if err != nil {
				return err
			}
			if err := s.Memset(gg.Memset8(p, 1, n)); err != nil {
				return err
			}
			return s.FreeAsync(p)
		}
	}
	a := must[*gg.CapturedGraph](t)(gg.Capture(s, step(4<<20), gg.CaptureOptions{}))
	b := must[*gg.CapturedGraph](t)(gg.Capture(s, step(6<<20), gg.CaptureOptions{}))
	for range 3 {
		ok(t, a.Replay())
		ok(t, b.Replay())
	}
	ok(t, s.Synchronize())
	st := must[gg.MemoryStats](t)(d.MemoryStats())
	if st.GraphReservedPeak != 6<<20 {
		t.Fatalf("graph memory reserved at peak %d, want %d (the larger graph's)", st.GraphReservedPeak, 6<<20)
	}
	ok(t, a.Destroy())
	ok(t, b.Destroy())
}
