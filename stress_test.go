package gpugraph_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Stress: 8 streams, each launching its own executable graph with memory
// nodes over and over, changing its parameters between launches while
// other streams launch (the change applies to the next launch, never to one
// in flight), toggling a node, and destroying an executable graph with a
// launch in flight. Every launch writes a checksum to its own slot; every
// slot is checked. Short in CI; GPUGRAPH_STRESS_LAUNCHES=10000 for the
// long run (docs/reliability.md).

const stressN = 1024 // elements of each launch's graph allocation

var (
	stressFill = &gg.Kernel{
		Name:   "stress_fill",
		Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Uint32},
		Go: func(b gg.Block, a gg.Args) {
			p, seed := gg.Slice[uint32](a.Ptr(0), a.Int(1)), a.Uint32(2)
			for t := 0; t < b.Dim.X; t++ {
				if i := b.Idx.X*b.Dim.X + t; i < len(p) {
					p[i] = seed*uint32(i) + 1
				}
			}
		},
		CUDA: `extern "C" __global__ void stress_fill(unsigned* p, int n, unsigned seed) {
			int i = blockIdx.x * blockDim.x + threadIdx.x;
			if (i < n) p[i] = seed * (unsigned)i + 1u;
		}`,
	}
	stressSum = &gg.Kernel{
		Name:   "stress_sum",
		Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Pointer},
		Go: func(b gg.Block, a gg.Args) {
			p, out := gg.Slice[uint32](a.Ptr(0), a.Int(1)), gg.Slice[uint32](a.Ptr(2), 1)
			var s uint32
			for t := 0; t < b.Dim.X; t++ {
				if i := b.Idx.X*b.Dim.X + t; i < len(p) {
					s += p[i]
				}
			}
			atomic.AddUint32(&out[0], s)
		},
		CUDA: `extern "C" __global__ void stress_sum(const unsigned* p, int n, unsigned* out) {
			int i = blockIdx.x * blockDim.x + threadIdx.x;
			if (i < n) atomicAdd(out, p[i]);
		}`,
	}
	// stressBump adds 1 to the checksum: the node SetEnabled toggles.
	stressBump = &gg.Kernel{
		Name:   "stress_bump",
		Params: []gg.ParamType{gg.Pointer},
		Go:     func(b gg.Block, a gg.Args) { atomic.AddUint32(&gg.Slice[uint32](a.Ptr(0), 1)[0], 1) },
		CUDA:   `extern "C" __global__ void stress_bump(unsigned* out) { atomicAdd(out, 1u); }`,
	}
)

func stressWant(seed uint32, bumped bool) uint32 {
	var s uint32
	for i := range uint32(stressN) {
		s += seed*i + 1
	}
	if bumped {
		s++
	}
	return s
}

// stressGraph is one stream's executable graph and the nodes it changes.
type stressGraph struct {
	g                     *gg.Graph // kept: the executable graph's nodes are named by its nodes
	e                     *gg.Exec
	zero, fill, sum, bump *gg.Node
	buf                   gg.DevicePtr // the graph allocation
}

func newStressGraph(t *testing.T, d *gg.Device, slot gg.DevicePtr) stressGraph {
	g := must[*gg.Graph](t)(d.NewGraph())
	sg := stressGraph{g: g}
	sg.zero = must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(slot, 0, 1)))
	a, p, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 4 * stressN})
	ok(t, err)
	sg.buf = p
	sg.fill = must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: stressFill, Grid: gg.Dim1(stressN / 256), Block: gg.Dim1(256), Args: []any{p, stressN, uint32(0)}}, a))
	sg.sum = must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: stressSum, Grid: gg.Dim1(stressN / 256), Block: gg.Dim1(256), Args: []any{p, stressN, slot}}, sg.fill, sg.zero))
	sg.bump = must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: stressBump, Grid: gg.Dim1(1), Block: gg.Dim1(1), Args: []any{slot}}, sg.sum))
	must[*gg.Node](t)(g.AddMemFreeNode(p, sg.sum))
	sg.e = must[*gg.Exec](t)(g.Instantiate(0))
	return sg
}

// point makes graph sg's next launch write seed's checksum to slot.
func (sg stressGraph) point(slot gg.DevicePtr, seed uint32, bump bool) error {
	p := sg.e
	fp := gg.KernelParams{Kernel: stressFill, Grid: gg.Dim1(stressN / 256), Block: gg.Dim1(256), Args: []any{sg.buf, stressN, seed}}
	sp := gg.KernelParams{Kernel: stressSum, Grid: gg.Dim1(stressN / 256), Block: gg.Dim1(256), Args: []any{sg.buf, stressN, slot}}
	for _, err := range []error{
		p.SetParams(sg.zero, gg.Memset32(slot, 0, 1)),
		p.SetParams(sg.fill, fp),
		p.SetParams(sg.sum, sp),
		p.SetParams(sg.bump, gg.KernelParams{Kernel: stressBump, Grid: gg.Dim1(1), Block: gg.Dim1(1), Args: []any{slot}}),
		p.SetEnabled(sg.bump, bump),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

func stressLaunches(t *testing.T, def int) int {
	if v := os.Getenv("GPUGRAPH_STRESS_LAUNCHES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("GPUGRAPH_STRESS_LAUNCHES=%q", v)
		}
		return n
	}
	if testing.Short() {
		return def / 4
	}
	return def
}

func TestStress(t *testing.T) {
	for _, backend := range []string{"host", "cuda"} {
		t.Run(backend, func(t *testing.T) {
			var d *gg.Device
			if backend == "cuda" {
				d = openCUDA(t)
				defer d.Close()
			} else {
				d = open(t)
			}
			stress(t, d, stressLaunches(t, 400))
		})
	}
}

func stress(t *testing.T, d *gg.Device, launches int) {
	const streams, window = 8, 64 // slots per stream, checked every window launches
	slots := must[gg.DevicePtr](t)(d.Malloc(4 * streams * window))
	defer d.Free(slots)
	var mismatches, checked atomic.Int64
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for si := range streams {
		wg.Go(func() {
			errs[si] = func() error {
				s, err := d.NewStream()
				if err != nil {
					return err
				}
				defer s.Destroy()
				base := slots + gg.DevicePtr(4*window*si)
				sg := newStressGraph(t, d, base)
				defer func() { sg.e.Destroy(); sg.g.Destroy() }()
				want := make([]uint32, window)
				got := make([]uint32, window)
				for i := range launches {
					slot := i % window
					seed, bump := uint32(si*1_000_003+i), i%3 == 0
					if err := sg.point(base+gg.DevicePtr(4*slot), seed, bump); err != nil {
						return fmt.Errorf("launch %d: %w", i, err)
					}
					want[slot] = stressWant(seed, bump)
					if err := sg.e.Launch(s); err != nil {
						return fmt.Errorf("launch %d: %w", i, err)
					}
					if i%500 == 250 {
						// Destroy with the launch in flight, and go on with a
						// new executable graph: the launch completes.
						if err := errors.Join(sg.e.Destroy(), sg.g.Destroy()); err != nil {
							return fmt.Errorf("destroy in flight: %w", err)
						}
						sg = newStressGraph(t, d, base)
					}
					if slot == window-1 || i == launches-1 {
						if err := s.Synchronize(); err != nil {
							return err
						}
						if err := s.Memcpy(gg.DtoH(gg.Bytes(got), base)); err != nil {
							return err
						}
						if err := s.Synchronize(); err != nil {
							return err
						}
						for k := 0; k <= slot; k++ {
							checked.Add(1)
							if got[k] != want[k] {
								mismatches.Add(1)
							}
						}
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	ok(t, d.Synchronize())
	ok(t, d.TrimGraphMem())
	st := must[gg.GraphMemStats](t)(d.GraphMemStats())
	t.Logf("%d streams × %d launches: %d checksums checked, %d mismatches; graph memory after trim: reserved %d, used %d bytes",
		streams, launches, checked.Load(), mismatches.Load(), st.ReservedCurrent, st.UsedCurrent)
	if mismatches.Load() != 0 || checked.Load() != int64(streams*launches) {
		t.Fatalf("%d mismatches in %d checksums (want %d checked)", mismatches.Load(), checked.Load(), streams*launches)
	}
	if st.ReservedCurrent != 0 || st.UsedCurrent != 0 {
		t.Fatalf("graph memory left after trim: %+v", st)
	}
}

// The nodes of a destroyed graph cannot name nodes of an executable graph
// instantiated from it: the driver names them by the graph's handles, which
// die with the graph. Refused on both backends alike.
func TestExecNodeOfDestroyedGraph(t *testing.T) {
	d := open(t)
	slot := must[gg.DevicePtr](t)(d.Malloc(4))
	sg := newStressGraph(t, d, slot)
	defer sg.e.Destroy()
	ok(t, sg.g.Destroy())
	for name, err := range map[string]error{
		"SetParams":  sg.e.SetParams(sg.zero, gg.Memset32(slot, 0, 1)),
		"SetEnabled": sg.e.SetEnabled(sg.bump, false),
		"Enabled":    func() error { _, err := sg.e.Enabled(sg.bump); return err }(),
	} {
		if !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("%s: %v, want ErrInvalidValue", name, err)
		}
	}
	s := must[*gg.Stream](t)(d.NewStream())
	ok(t, sg.e.Launch(s)) // the executable graph itself lives on
	ok(t, s.Synchronize())
}
