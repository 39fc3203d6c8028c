package gpugraph_test

import (
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// addOne writes out[i] = in[i] + 1 over n uint32s.
var addOne = &gg.Kernel{
	Name:   "add_one",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		in, out := gg.Slice[uint32](a.Ptr(0), n), gg.Slice[uint32](a.Ptr(1), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				out[i] = in[i] + 1
			}
		}
	},
	CUDA: `extern "C" __global__ void add_one(const unsigned* in, unsigned* out, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = in[i] + 1;
}`,
}

// The replay pattern: static input and output buffers, a step function
// with temporaries of its own (graph memory once captured) and a static
// output it allocates and keeps, captured after a warm-up and replayed.
func TestConformanceCaptureReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		const n = 1000
		s := stream(t, d)
		in := must[gg.DevicePtr](t)(s.MallocAsync(4 * n))
		out := must[gg.DevicePtr](t)(s.MallocAsync(4 * n))
		var static gg.DevicePtr // allocated by the step and kept: a static output
		grid := gg.Dim1((n + 255) / 256)
		step := func(s *gg.Stream) error {
			tmp, err := s.MallocAsync(4 * n)
			if err != nil {
				return err
			}
			if static, err = s.MallocAsync(4 * n); err != nil {
				return err
			}
			if err := s.Launch(addOne, grid, gg.Dim1(256), in, tmp, n); err != nil {
				return err
			}
			if err := s.Launch(addOne, grid, gg.Dim1(256), tmp, out, n); err != nil {
				return err
			}
			if err := s.Memcpy(gg.DtoD(static, out, 4*n)); err != nil {
				return err
			}
			return s.FreeAsync(tmp)
		}
		// Warm-up runs eagerly: its static outputs are ordinary allocations.
		var warm []gg.DevicePtr
		c := must[*gg.CapturedGraph](t)(gg.Capture(s, func(s *gg.Stream) error {
			err := step(s)
			warm = append(warm, static)
			return err
		}, gg.CaptureOptions{Warmup: 2}))
		for _, p := range warm[:2] {
			ok(t, s.FreeAsync(p))
		}
		captured := static
		for it := uint32(0); it < 3; it++ {
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = it*10 + uint32(i)
			}
			ok(t, s.Memcpy(gg.HtoD(in, gg.Bytes(vals))))
			ok(t, c.Replay())
			got := make([]uint32, n)
			ok(t, s.Memcpy(gg.DtoH(gg.Bytes(got), captured)))
			ok(t, s.Synchronize())
			for i := range got {
				if got[i] != vals[i]+2 {
					t.Fatalf("replay %d: static output[%d] = %d, want %d", it, i, got[i], vals[i]+2)
				}
			}
		}
		ms := must[gg.MemoryStats](t)(d.MemoryStats())
		if ms.GraphReserved == 0 || ms.Allocated < 2*4*n {
			t.Fatalf("memory stats %+v: want graph memory reserved and the static buffers allocated", ms)
		}
		l := must[gg.MemLayout](t)(c.Exec().MemLayout())
		if len(l.Allocs) != 2 {
			t.Fatalf("%d graph allocations, want 2", len(l.Allocs))
		}
		for _, a := range l.Allocs {
			if a.Size != 4*n || a.Start >= a.End || a.Alloc == nil {
				t.Fatalf("allocation %+v", a)
			}
		}
		ok(t, c.Destroy())
		isCode(t, c.Replay(), gg.ErrInvalidResourceHandle)
	})
}

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
