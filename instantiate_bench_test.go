//go:build linux

package gpugraph

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/cuda"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// argKernel is an empty kernel with one argument, so that updates have a
// parameter to change.
var argKernel = &Kernel{
	Name:   "inst_arg",
	Params: []ParamType{Int32},
	Go:     func(Block, Args) {},
	CUDA:   `extern "C" __global__ void inst_arg(int v) {}`,
}

// instGraph builds a graph of n kernel nodes: chains of 10 fanning out of
// one root, the shape of a training step's layers. v is every kernel's
// argument.
func instGraph(tb testing.TB, d *Device, n, v int) *Graph {
	g, err := d.NewGraph()
	if err != nil {
		tb.Fatal(err)
	}
	p := KernelParams{Kernel: argKernel, Grid: Dim1(1), Block: Dim1(1), Args: []any{v}}
	root, err := g.AddNode(p)
	if err != nil {
		tb.Fatal(err)
	}
	prev := root
	for i := 1; i < n; i++ {
		if i%10 == 0 {
			prev = root
		}
		if prev, err = g.AddNode(p, prev); err != nil {
			tb.Fatal(err)
		}
	}
	return g
}

// BenchmarkInstantiate measures Graph.Instantiate (with Exec.Destroy) and
// Exec.Update per node, for graphs of 10 to 10,000 nodes, on host and on
// cuda. With GG_INST_LOOP naming the library built from
// tools/bench/native/instloop.c, the "c-loop" variants make the same driver calls
// from C on the same graphs in this process: the native reference, with the
// device's context current on the thread as the API makes it for these
// calls (nativeCurrent). -test.count N runs N rounds of the variants of
// each size in turn (launchRounds: repeats are named api#01, ...).
func BenchmarkInstantiate(b *testing.B) {
	var loopInst func(g uintptr, n int32) int32
	var loopUpd func(e, g, h uintptr, n int32) int32
	if lib := os.Getenv("GG_INST_LOOP"); lib != "" {
		h, err := purego.Dlopen(lib, purego.RTLD_NOW)
		if err != nil {
			b.Fatal(err)
		}
		purego.RegisterLibFunc(&loopInst, h, "gg_instantiate_loop")
		purego.RegisterLibFunc(&loopUpd, h, "gg_update_loop")
	}
	rounds := launchRounds(b) // api and c-loop interleaved
	for _, backend := range []string{BackendHost, BackendCUDA} {
		d, err := Open(backend)
		if err != nil {
			continue // no GPU
		}
		for _, n := range []int{10, 100, 1000, 10000} {
			g, h := instGraph(b, d, n, 1), instGraph(b, d, n, 2)
			perNode := func(b *testing.B) {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
			}
			e, err := g.Instantiate(0) // the one Update updates
			if err != nil {
				b.Fatal(err)
			}
			for range rounds {
				b.Run(fmt.Sprintf("%s/instantiate/n=%d/api", backend, n), func(b *testing.B) {
					for b.Loop() {
						e, err := g.Instantiate(0)
						if err != nil {
							b.Fatal(err)
						}
						if err := e.Destroy(); err != nil {
							b.Fatal(err)
						}
					}
					perNode(b)
				})
				if backend == BackendCUDA && loopInst != nil {
					b.Run(fmt.Sprintf("%s/instantiate/n=%d/c-loop", backend, n), func(b *testing.B) {
						drv := nativeCurrent(b, d)
						for b.Loop() {
							if err := loopErr(drv, "gg_instantiate_loop", loopInst(g.NativeGraph(), 1)); err != nil {
								b.Fatal(err)
							}
						}
						perNode(b)
					})
				}
				b.Run(fmt.Sprintf("%s/update/n=%d/api", backend, n), func(b *testing.B) {
					i := 0
					for b.Loop() {
						src := g
						if i++; i&1 == 1 {
							src = h
						}
						if _, err := e.Update(src); err != nil {
							b.Fatal(err)
						}
					}
					perNode(b)
				})
				if backend == BackendCUDA && loopUpd != nil {
					b.Run(fmt.Sprintf("%s/update/n=%d/c-loop", backend, n), func(b *testing.B) {
						drv := nativeCurrent(b, d)
						i := 0
						for b.Loop() {
							// From h and g in turn, as the api variant:
							// each call makes one update, from its graph.
							src := g
							if i++; i&1 == 1 {
								src = h
							}
							if err := loopErr(drv, "gg_update_loop", loopUpd(native(e.be), src.NativeGraph(), src.NativeGraph(), 1)); err != nil {
								b.Fatal(err)
							}
						}
						perNode(b)
					})
				}
			}
			e.Destroy()
			g.Destroy()
			h.Destroy()
		}
		d.Close()
	}
}

// nativeCurrent makes d's context current on the OS thread of b's
// goroutine, locked to it until b ends, and returns the driver binding:
// for C loops of calls that, unlike launches, take their context from the
// thread (cuGraphInstantiate, cuGraphExecUpdate; the API makes it current
// for each such call). Without it a C loop fails with
// CUDA_ERROR_INVALID_CONTEXT (201) on a thread that no earlier API call
// happened to leave the context current on: each b.Run starts a new
// goroutine, which may land on such a thread (the c-loop failures of
// docs/gpu-runs/2026-11-25-determinism-instantiate.txt).
func nativeCurrent(b *testing.B, d *Device) *driver.Driver {
	c := d.be.(*cuda.Device)
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	if err := c.Driver().SetCurrent(c.Context()); err != nil {
		b.Fatal(err)
	}
	return c.Driver()
}
