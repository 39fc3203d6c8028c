package footprint

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
)

const MiB = 1 << 20

// work stands for a kernel that uses the memory; the footprint depends only
// on the graph's structure.
var work = &gg.Kernel{Name: "work", Go: func(gg.Block, gg.Args) {}, CUDA: `extern "C" __global__ void work() {}`}

// builder adds nodes to a graph, remembering the first error. A serial
// builder also orders every node after the one added before it, as capturing
// the same calls from one stream would.
type builder struct {
	g      *gg.Graph
	err    error
	serial bool
	last   *gg.Node
}

func (b *builder) deps(ds []*gg.Node) []*gg.Node {
	if !b.serial || b.last == nil {
		return ds
	}
	for _, d := range ds {
		if d == b.last {
			return ds
		}
	}
	return append(ds, b.last)
}

func (b *builder) added(n *gg.Node, err error) *gg.Node {
	b.err = err
	if err == nil {
		b.last = n
	}
	return n
}

func (b *builder) alloc(size int, deps ...*gg.Node) (*gg.Node, gg.DevicePtr) {
	if b.err != nil {
		return nil, 0
	}
	n, p, err := b.g.AddMemAllocNode(gg.MemAllocParams{Size: size}, b.deps(deps)...)
	return b.added(n, err), p
}

func (b *builder) free(p gg.DevicePtr, deps ...*gg.Node) *gg.Node {
	if b.err != nil {
		return nil
	}
	return b.added(b.g.AddMemFreeNode(p, b.deps(deps)...))
}

func (b *builder) kernel(deps ...*gg.Node) *gg.Node {
	if b.err != nil {
		return nil
	}
	return b.added(b.g.AddKernelNode(gg.KernelParams{Kernel: work, Grid: gg.Dim1(1), Block: gg.Dim1(1)}, b.deps(deps)...))
}

// use allocates size bytes after deps, runs a kernel on it and frees it,
// returning the free node.
func (b *builder) use(size int, deps ...*gg.Node) *gg.Node {
	a, p := b.alloc(size, deps...)
	return b.free(p, b.kernel(a))
}

// Scenario is a graph whose footprint `gpugraph mem` reports.
type Scenario struct {
	Name  string
	Build func(b *builder)
	// Driver is the graph memory the CUDA driver reserved for the same
	// graph, in MiB, from tools/probe/footprint.cu (docs/driver-footprint.txt).
	Driver int
}

// Scenarios are the graphs of the footprint report.
var Scenarios = []Scenario{
	{"chain: 8 x (alloc 64 MiB, kernel, free)", func(b *builder) {
		var prev *gg.Node
		for i := 0; i < 8; i++ {
			if prev == nil {
				prev = b.use(64 * MiB)
			} else {
				prev = b.use(64*MiB, prev)
			}
		}
	}, 64},
	{"parallel: 8 independent 64 MiB", func(b *builder) {
		for i := 0; i < 8; i++ {
			b.use(64 * MiB)
		}
	}, 512},
	{"diamond: 64 | 64+64 | 128 MiB", func(b *builder) {
		fa := b.use(64 * MiB)
		fb, fc := b.use(64*MiB, fa), b.use(64*MiB, fa)
		b.use(128*MiB, fb, fc)
	}, 256},
	{"fan-out, freed after it: alloc; a; b, c; free", func(b *builder) {
		an, p := b.alloc(64 * MiB)
		ka := b.kernel(an)
		kb, kc := b.kernel(ka), b.kernel(ka)
		b.free(p, kb, kc)
		b.kernel(kc) // d: not before the free, so it must not touch the memory
		b.kernel()   // e: not after the alloc
	}, 64},
	{"reuse: alloc 1, free 1, alloc 2; alloc 3 not after free 2", func(b *builder) {
		f1 := b.use(64 * MiB)
		a2, p2 := b.alloc(64*MiB, f1)
		b.free(p2, b.kernel(a2))
		b.use(64*MiB, a2)
	}, 128},
	{"mlp step, data dependencies only (60 allocations)", buildMLP, 160},
	{"mlp step, in one stream's order (60 allocations)", func(b *builder) { b.serial = true; buildMLP(b) }, 64},
}

// buildMLP is a training step of a 12-layer perceptron (batch 512, width
// 1024, float32), layer by layer: forward keeps pre-activations and
// activations; backward makes activation gradients, pre-activation gradients
// and weight gradients, freeing each as soon as its last user has run.
func buildMLP(b *builder) {
	const layers, act, wgt = 12, 512 * 1024 * 4, 1024 * 1024 * 4
	type layer struct {
		z, a   gg.DevicePtr
		zk, ak *gg.Node // kernels producing z and a
	}
	ls := make([]layer, layers+1)
	var prev *gg.Node // kernel producing the previous activation (nil: the input)
	deps := func(ns ...*gg.Node) []*gg.Node {
		var out []*gg.Node
		for _, n := range ns {
			if n != nil {
				out = append(out, n)
			}
		}
		return out
	}
	for l := 1; l <= layers; l++ {
		zn, z := b.alloc(act, deps(prev)...)
		zk := b.kernel(deps(zn, prev)...)
		an, a := b.alloc(act, zk)
		ak := b.kernel(an, zk)
		ls[l] = layer{z, a, zk, ak}
		prev = ak
	}
	gn, g := b.alloc(act, prev) // loss gradient
	gk := b.kernel(gn, prev)
	b.free(ls[layers].a, gk)
	for l := layers; l >= 1; l-- {
		dzn, dz := b.alloc(act, gk)
		dzk := b.kernel(dzn, gk)
		b.free(g, dzk)
		b.free(ls[l].z, dzk)
		dwn, dw := b.alloc(wgt, dzk)
		dwk := b.kernel(dwn, dzk) // dW = a[l-1]^T dz
		if l > 1 {
			b.free(ls[l-1].a, dwk)
		}
		upd := b.kernel(dwk) // SGD on W[l]
		b.free(dw, upd)
		if l > 1 {
			gn, g = b.alloc(act, dzk)
			gk = b.kernel(gn, dzk) // g[l-1] = dz W^T
			b.free(dz, gk, dwk)
		} else {
			b.free(dz, dwk)
		}
	}
}

// Row is one line of the report.
type Row struct {
	Name        string
	Allocations int
	LowerBound  int64 // bytes
	Reserved    int64 // bytes the host backend reserved, high-water
	Driver      int64 // bytes the driver reserved, 0 if not measured
}

// Measure builds every scenario on d, launches each into its own stream
// after trimming graph memory, and reports reserved memory against the
// lower bound. Then it launches all of them into one stream, and into a
// stream each at once, to show sharing between graphs.
func Measure(d *gg.Device) ([]Row, error) {
	var rows []Row
	var execs []*gg.Exec
	var sum, largest int64
	for _, sc := range Scenarios {
		g, err := d.NewGraph()
		if err != nil {
			return nil, err
		}
		b := &builder{g: g}
		sc.Build(b)
		if b.err != nil {
			return nil, fmt.Errorf("%s: %w", sc.Name, b.err)
		}
		lb, n, err := LowerBound(g)
		if err != nil {
			return nil, err
		}
		e, err := g.Instantiate(0)
		if err != nil {
			return nil, err
		}
		execs = append(execs, e)
		res, err := reserved(d, func(s []*gg.Stream) error { return e.Launch(s[0]) })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.Name, err)
		}
		rows = append(rows, Row{sc.Name, n, lb, res, int64(sc.Driver) * MiB})
		sum += res
		largest = max(largest, res)
	}
	all := func(streams int) func(s []*gg.Stream) error {
		return func(s []*gg.Stream) error {
			for i, e := range execs {
				if err := e.Launch(s[i%streams]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	res, err := reserved(d, all(1))
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{fmt.Sprintf("all %d graphs, one stream (largest %d MiB, sum %d MiB)", len(execs), largest/MiB, sum/MiB), 0, largest, res, 512 * MiB})
	res, err = reserved(d, all(len(execs)))
	if err != nil {
		return nil, err
	}
	rows = append(rows, Row{fmt.Sprintf("all %d graphs, a stream each", len(execs)), 0, largest, res, 576 * MiB})
	for _, e := range execs {
		e.Destroy()
	}
	return rows, d.TrimGraphMem()
}

// reserved trims graph memory, runs launch with fresh streams, and returns
// the reserved high-water mark.
func reserved(d *gg.Device, launch func([]*gg.Stream) error) (int64, error) {
	if err := d.Synchronize(); err != nil {
		return 0, err
	}
	if err := d.TrimGraphMem(); err != nil {
		return 0, err
	}
	if err := d.ResetGraphMemHigh(); err != nil {
		return 0, err
	}
	streams := make([]*gg.Stream, len(Scenarios))
	for i := range streams {
		s, err := d.NewStream()
		if err != nil {
			return 0, err
		}
		defer s.Destroy()
		streams[i] = s
	}
	if err := launch(streams); err != nil {
		return 0, err
	}
	if err := d.Synchronize(); err != nil {
		return 0, err
	}
	st, err := d.GraphMemStats()
	return int64(st.ReservedHigh), err
}
