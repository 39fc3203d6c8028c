package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestLaunchAllocs checks that the cuda launch paths allocate nothing per
// launch, stream launches and graph launches alike: the driver copies
// kernel arguments at the call. The stream launches include the calls of
// BenchmarkCUDALaunchPath (Stream.Launch of a kernel without arguments)
// and launches alternating two kernels (the stream's cache of the last
// kernel's function misses at every launch). Parameters are built once, as a loop that
// launches the same work does (Args given to Launch are boxed by the
// caller: the caller's allocation, not the launch path's). On host the
// bounds are looser: a queued stream launch keeps a copy of its argument
// words until it runs (one allocation; none without arguments); a graph
// launch takes a recycled launch record, and allocates one only while more
// of its launches are in flight than ever before (here up to 200 are
// queued before a synchronize: at most one per launch), and none when
// each launch is waited for.
func TestLaunchAllocs(t *testing.T) {
	for _, c := range []struct {
		backend string
		open    func(testing.TB) *gg.Device
	}{
		{"host", open},
		{"cuda", openCUDA},
	} {
		t.Run(c.backend, func(t *testing.T) {
			d := c.open(t)
			s := stream(t, d)
			const n = 256
			x := must[gg.DevicePtr](t)(d.Malloc(4 * n))
			ok(t, d.Memset(gg.Memset32(x, 0, n)))
			p := gg.KernelParams{Kernel: addOne, Grid: gg.Dim1(1), Block: gg.Dim1(n), Args: []any{x, x, int32(n)}} // in place
			g := graph(t, d)
			must[*gg.Node](t)(g.AddKernelNode(p))
			e := must[*gg.Exec](t)(g.Instantiate(0))
			launches := 0 // of addOne
			addOne := func(launch func() error) error {
				launches++
				return launch()
			}
			one := gg.Dim1(1)
			for _, l := range []struct {
				what   string
				launch func() error
				// hostMax bounds the allocations per run on host, where
				// a queued stream launch keeps a copy of its argument
				// words, and a graph launch allocates a launch record
				// while more are in flight than ever before.
				hostMax  float64
				hostOnly bool // synchronizes too: no claim about cuda's synchronize
			}{
				{"stream launch", func() error { return addOne(func() error { return s.LaunchKernel(p) }) }, 1, false},
				{"stream launch without arguments", func() error { return s.Launch(nopKernel, one, one) }, 0, false},
				{"two stream launches of different kernels", func() error { // a run of two: AllocsPerRun rounds down
					if err := s.Launch(nopKernel, one, one); err != nil {
						return err
					}
					return addOne(func() error { return s.LaunchKernel(p) })
				}, 1, false},
				{"graph launch", func() error { return addOne(func() error { return e.Launch(s) }) }, 1, false},
				// With one launch in flight at a time, the records are
				// recycled: none is allocated.
				{"graph launch and synchronize", func() error {
					if err := addOne(func() error { return e.Launch(s) }); err != nil {
						return err
					}
					return s.Synchronize()
				}, 0, true},
			} {
				if l.hostOnly && c.backend != "host" {
					continue
				}
				ok(t, l.launch()) // warm up: module load, queue growth
				ok(t, s.Synchronize())
				var err error
				allocs := testing.AllocsPerRun(200, func() {
					if err == nil {
						err = l.launch()
					}
				})
				ok(t, err)
				ok(t, s.Synchronize())
				want := 0.0
				if c.backend == "host" {
					want = l.hostMax
				}
				if allocs > want {
					t.Errorf("%s allocates %.1f times per launch, want at most %.0f", l.what, allocs, want)
				}
			}
			for i, v := range readU32(t, d, x, n) {
				if int(v) != launches {
					t.Fatalf("x[%d] = %d after %d launches", i, v, launches)
				}
			}
		})
	}
}

// nopKernel takes no arguments and does nothing.
var nopKernel = &gg.Kernel{Name: "nop", Go: func(gg.Block, gg.Args) {}, CUDA: `extern "C" __global__ void nop() {}`}
