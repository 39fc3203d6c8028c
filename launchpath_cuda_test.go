//go:build linux

package gpugraph

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/cuda"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

var emptyKernel = &Kernel{Name: "empty", Go: func(Block, Args) {}, CUDA: `extern "C" __global__ void empty() {}`}

// BenchmarkCUDALaunchPath splits the host cost of a launch on the cuda
// backend. Kernel launches of an empty kernel: through the API
// (Stream.Launch) or straight to the driver binding, each from an OS thread
// that has the device's context current or from whatever thread the
// goroutine runs on. Graph launches of a one-node graph of that kernel:
// through the API (Exec.Launch, "graph-api"). 1000 launches and a
// synchronize per op. With GG_LAUNCH_LOOP naming the library built from
// tools/bench/native/launchloop.c, "c-loop" and "graph-c-loop" run the same 1000
// launches as a C loop in this process (cuLaunchKernel, cuGraphLaunch) on
// the same CUfunction, CUgraphExec and CUstream, from the goroutine's
// thread as the API variants: the native reference side by side.
//
// The variants are interleaved: -test.count N runs N rounds of every
// variant in turn (see launchRounds), reported as api, api#01, api#02, ...
func BenchmarkCUDALaunchPath(b *testing.B) {
	d, err := Open("cuda")
	if err != nil {
		b.Skipf("no CUDA device: %v", err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	c := d.be.(*cuda.Device)
	bk := lowerKernel(emptyKernel)
	f, err := c.Function(&bk)
	if err != nil {
		b.Fatal(err)
	}
	one := Dim1(1)
	g, err := d.NewGraph()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := g.AddKernelNode(KernelParams{Kernel: emptyKernel, Grid: one, Block: one}); err != nil {
		b.Fatal(err)
	}
	e, err := g.Instantiate(0)
	if err != nil {
		b.Fatal(err)
	}
	api := func() error { return s.Launch(emptyKernel, one, one) }
	graphAPI := func() error { return e.Launch(s) }
	drv := c.Driver()
	raw := func() error { return drv.Launch(f, dims(one), dims(one), 0, s.NativeStream(), 0) }
	type variant struct {
		name    string
		launch  func() error
		current bool
		batch   func() error // 1000 launches at once
	}
	vs := []variant{{"api", api, false, nil}, {"api-current", api, true, nil}, {"raw", raw, false, nil}, {"raw-current", raw, true, nil}}
	var loop, graphLoop func(handle, stream uintptr, n int32) int32
	if lib := os.Getenv("GG_LAUNCH_LOOP"); lib != "" {
		h, err := purego.Dlopen(lib, purego.RTLD_NOW)
		if err != nil {
			b.Fatal(err)
		}
		purego.RegisterLibFunc(&loop, h, "gg_launch_loop")
		purego.RegisterLibFunc(&graphLoop, h, "gg_graph_launch_loop")
		vs = append(vs, variant{"c-loop", nil, false, func() error {
			return loopErr(drv, "gg_launch_loop: cuLaunchKernel", loop(f, s.NativeStream(), 1000))
		}})
	}
	vs = append(vs, variant{"graph-api", graphAPI, false, nil})
	if graphLoop != nil {
		exec := native(e.be) // the CUgraphExec that Exec.Launch launches
		vs = append(vs, variant{"graph-c-loop", nil, false, func() error {
			return loopErr(drv, "gg_graph_launch_loop: cuGraphLaunch", graphLoop(exec, s.NativeStream(), 1000))
		}})
	}
	for range launchRounds(b) {
		for _, v := range vs {
			b.Run(v.name, func(b *testing.B) {
				if v.current {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					if err := drv.SetCurrent(c.Context()); err != nil {
						b.Fatal(err)
					}
				}
				for b.Loop() {
					if v.batch != nil {
						if err := v.batch(); err != nil {
							b.Fatal(err)
						}
					}
					for i := 0; v.batch == nil && i < 1000; i++ {
						if err := v.launch(); err != nil {
							b.Fatal(err)
						}
					}
					if err := s.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/launch")
			})
		}
	}
	if err := e.Destroy(); err != nil {
		b.Error(err)
	}
	if err := g.Destroy(); err != nil {
		b.Error(err)
	}
}

// launchRounds returns the number of rounds of a benchmark that
// interleaves its variants: -test.count. The testing package repeats each
// leaf benchmark -test.count times in a row (all runs of api, then all of
// raw, ...), so a drift of the machine over the minutes of a run would
// fall on whole variants; the benchmark runs the rounds itself instead,
// every variant once per round, with -test.count set to 1 until b ends.
// The testing package names the repeats of a variant api, api#01,
// api#02, ...: strip "#NN" to group them (tools/gpu/perf.sh does).
func launchRounds(b *testing.B) int {
	f := flag.Lookup("test.count")
	if f == nil {
		return 1
	}
	old := f.Value.String()
	n, err := strconv.Atoi(old)
	if err != nil || n <= 1 {
		return 1
	}
	if err := f.Value.Set("1"); err != nil {
		return 1
	}
	b.Cleanup(func() { f.Value.Set(old) })
	return n
}

// loopErr reports the CUresult r of a C loop (tools/bench), with the
// driver's name for it: nil for CUDA_SUCCESS.
func loopErr(drv *driver.Driver, call string, r int32) error {
	return backendErr(call, drv.Check(call, int(r)))
}
