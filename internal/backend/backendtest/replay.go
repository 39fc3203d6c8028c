package backendtest

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// AddOne writes out[i] = in[i] + 1 over n uint32s.
var AddOne = &gg.Kernel{
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
func captureReplay(t *testing.T, d *gg.Device) {
	const n = 1000
	s := NewStream(t, d)
	in := Must[gg.DevicePtr](t)(s.MallocAsync(4 * n))
	out := Must[gg.DevicePtr](t)(s.MallocAsync(4 * n))
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
		if err := s.Launch(AddOne, grid, gg.Dim1(256), in, tmp, n); err != nil {
			return err
		}
		if err := s.Launch(AddOne, grid, gg.Dim1(256), tmp, out, n); err != nil {
			return err
		}
		if err := s.Memcpy(gg.DtoD(static, out, 4*n)); err != nil {
			return err
		}
		return s.FreeAsync(tmp)
	}
	// Warm-up runs eagerly: its static outputs are ordinary allocations.
	var warm []gg.DevicePtr
	c := Must[*gg.CapturedGraph](t)(gg.Capture(s, func(s *gg.Stream) error {
		err := step(s)
		warm = append(warm, static)
		return err
	}, gg.CaptureOptions{Warmup: 2}))
	for _, p := range warm[:2] {
		OK(t, s.FreeAsync(p))
	}
	captured := static
	for it := uint32(0); it < 3; it++ {
		vals := make([]uint32, n)
		for i := range vals {
			vals[i] = it*10 + uint32(i)
		}
		OK(t, s.Memcpy(gg.HtoD(in, gg.Bytes(vals))))
		OK(t, c.Replay())
		got := make([]uint32, n)
		OK(t, s.Memcpy(gg.DtoH(gg.Bytes(got), captured)))
		OK(t, s.Synchronize())
		for i := range got {
			if got[i] != vals[i]+2 {
				t.Fatalf("replay %d: static output[%d] = %d, want %d", it, i, got[i], vals[i]+2)
			}
		}
	}
	ms := Must[gg.MemoryStats](t)(d.MemoryStats())
	if ms.GraphReserved == 0 || ms.Allocated < 2*4*n {
		t.Fatalf("memory stats %+v: want graph memory reserved and the static buffers allocated", ms)
	}
	l := Must[gg.MemLayout](t)(c.Exec().MemLayout())
	if len(l.Allocs) != 2 {
		t.Fatalf("%d graph allocations, want 2", len(l.Allocs))
	}
	for _, a := range l.Allocs {
		if a.Size != 4*n || a.Start >= a.End || a.Alloc == nil {
			t.Fatalf("allocation %+v", a)
		}
	}
	OK(t, c.Destroy())
	IsCode(t, c.Replay(), gg.ErrInvalidResourceHandle)
}
