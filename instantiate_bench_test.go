//go:build linux

package gpugraph

import (
	"fmt"
	"os"
	"testing"

	"github.com/ebitengine/purego"
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
// tools/bench/instloop.c, the "c-loop" variants make the same driver calls
// from C on the same graphs in this process: the native reference.
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
					for b.Loop() {
						if r := loopInst(g.NativeGraph(), 1); r != 0 {
							b.Fatalf("CUresult %d", r)
						}
					}
					perNode(b)
				})
			}
			e, err := g.Instantiate(0)
			if err != nil {
				b.Fatal(err)
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
					for b.Loop() {
						if r := loopUpd(native(e.be), g.NativeGraph(), h.NativeGraph(), 1); r != 0 {
							b.Fatalf("CUresult %d", r)
						}
					}
					perNode(b)
				})
			}
			e.Destroy()
			g.Destroy()
			h.Destroy()
		}
		d.Close()
	}
}
