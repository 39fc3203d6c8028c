package backendtest

import (
	"errors"
	"fmt"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Scenarios of graph memory nodes and memory pools.

// memoryNodes: the graph memory rules every backend shares
// (docs/driver-memnodes.txt for the driver's answers).
func memoryNodes(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	const size = 4 << 20
	// Address reuse along dependency order.
	g := NewGraph(t, d)
	a, pa := AddAlloc(t, g, size)
	fa := addFree(t, g, pa, a)
	_, pb := AddAlloc(t, g, size, fa)
	cn, pc := AddAlloc(t, g, size, a)
	if pb != pa || pc == pa {
		t.Fatalf("a %#x, b (after a's free) %#x, c (not after it) %#x", pa, pb, pc)
	}
	// Refusals.
	_, _, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 0})
	IsCode(t, err, gg.ErrInvalidValue)
	fc := addFree(t, g, pc, cn)
	_, err = g.AddMemFreeNode(pc, fc) // a second free of c
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = g.Clone()
	IsCode(t, err, gg.ErrNotSupported)
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	_, err = g.Instantiate(0)
	IsCode(t, err, gg.ErrNotSupported)
	OK(t, e.Destroy())

	// Relaunch with a live allocation, then AutoFreeOnLaunch.
	h := NewGraph(t, d)
	an, x := AddAlloc(t, h, size)
	Must[*gg.Node](t)(h.AddMemsetNode(gg.Memset32(x, 7, size/4), an))
	eh := Must[*gg.Exec](t)(h.Instantiate(0))
	OK(t, eh.Launch(s))
	IsCode(t, eh.Launch(s), gg.ErrInvalidValue)
	OK(t, s.Synchronize())
	out := make([]uint32, 4)
	OK(t, d.Memcpy(gg.DtoH(gg.Bytes(out), x)))
	if out[0] != 7 {
		t.Fatalf("graph allocation read %v after the launch", out)
	}
	OK(t, s.FreeAsync(x))
	OK(t, eh.Launch(s))
	OK(t, s.Synchronize())
	OK(t, d.Free(x))
	OK(t, eh.Destroy())
	ea := Must[*gg.Exec](t)(h.Instantiate(gg.InstantiateAutoFreeOnLaunch))
	OK(t, ea.Launch(s))
	OK(t, ea.Launch(s))
	OK(t, s.Synchronize())
	OK(t, d.Free(x))

	// Graphs launched into one stream share memory; trim returns it.
	OK(t, d.TrimGraphMem())
	OK(t, d.ResetGraphMemHigh())
	var execs []*gg.Exec
	for i := 0; i < 3; i++ {
		gi := NewGraph(t, d)
		n, p := AddAlloc(t, gi, 64<<20)
		Must[*gg.Node](t)(gi.AddMemFreeNode(p, Must[*gg.Node](t)(gi.AddMemsetNode(gg.Memset8(p, 1, 64<<20), n))))
		execs = append(execs, Must[*gg.Exec](t)(gi.Instantiate(0)))
	}
	for _, e := range execs {
		OK(t, e.Launch(s))
	}
	OK(t, s.Synchronize())
	st := Must[gg.GraphMemStats](t)(d.GraphMemStats())
	if st.ReservedCurrent != 64<<20 {
		t.Fatalf("three 64 MiB graphs in one stream reserve %d MiB, want 64", st.ReservedCurrent>>20)
	}
	OK(t, d.TrimGraphMem())
	if st := Must[gg.GraphMemStats](t)(d.GraphMemStats()); st.ReservedCurrent != 0 {
		t.Fatalf("after trim: reserved %d", st.ReservedCurrent)
	}
}

// twoStreams: graphs running at the same time in two streams
// need memory of their own; trim returns all of it once they are done.
func twoStreams(t *testing.T, d *gg.Device) {
	s1, s2 := NewStream(t, d), NewStream(t, d)
	const size = 64 << 20
	OK(t, d.TrimGraphMem())
	OK(t, d.ResetGraphMemHigh())
	hold := make(chan struct{})
	var execs []*gg.Exec
	for i := 0; i < 2; i++ {
		g := NewGraph(t, d)
		n, p := AddAlloc(t, g, size)
		m := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(p, 1, size), n))
		if i == 0 { // the first graph waits inside its launch
			m = Must[*gg.Node](t)(g.AddHostNode(func() { <-hold }, m))
		}
		Must[*gg.Node](t)(g.AddMemFreeNode(p, m))
		execs = append(execs, Must[*gg.Exec](t)(g.Instantiate(0)))
	}
	OK(t, execs[0].Launch(s1))
	OK(t, execs[1].Launch(s2))
	OK(t, s2.Synchronize())
	close(hold)
	OK(t, s1.Synchronize())
	st := Must[gg.GraphMemStats](t)(d.GraphMemStats())
	if st.ReservedHigh < 2*size {
		t.Fatalf("two graphs running at once reserved %d MiB at most, want at least %d", st.ReservedHigh>>20, 2*size>>20)
	}
	OK(t, d.TrimGraphMem())
	if st := Must[gg.GraphMemStats](t)(d.GraphMemStats()); st.ReservedCurrent != 0 {
		t.Fatalf("after trim: reserved %d", st.ReservedCurrent)
	}
}

// memPools: stream-ordered allocation from an explicit pool,
// its release threshold, trim and statistics.
func memPools(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	pool := Must[*gg.MemPool](t)(d.NewMemPool(gg.MemPoolProps{}))
	defer pool.Destroy()
	p := Must[gg.DevicePtr](t)(s.MallocFromPoolAsync(8<<20, pool))
	OK(t, s.Memset(gg.Memset8(p, 3, 8<<20)))
	out := make([]byte, 16)
	OK(t, s.Memcpy(gg.DtoH(out, p)))
	if st := pool.Stats(); st.UsedCurrent < 8<<20 || st.ReservedCurrent < st.UsedCurrent {
		t.Fatalf("stats while allocated %+v", st)
	}
	OK(t, s.FreeAsync(p))
	OK(t, s.Synchronize()) // release threshold 0: idle memory goes back here
	if out[15] != 3 {
		t.Fatalf("read %v", out)
	}
	if st := pool.Stats(); st.UsedCurrent != 0 || st.ReservedCurrent != 0 {
		t.Fatalf("after free and synchronize with threshold 0: %+v", st)
	}
	OK(t, pool.SetReleaseThreshold(1<<40))
	if pool.ReleaseThreshold() != 1<<40 {
		t.Fatalf("threshold %d", pool.ReleaseThreshold())
	}
	p = Must[gg.DevicePtr](t)(s.MallocFromPoolAsync(8<<20, pool))
	OK(t, s.FreeAsync(p))
	OK(t, s.Synchronize())
	if st := pool.Stats(); st.ReservedCurrent == 0 {
		t.Fatal("memory released despite a high threshold")
	}
	OK(t, pool.TrimTo(0))
	if st := pool.Stats(); st.ReservedCurrent != 0 {
		t.Fatalf("after TrimTo(0): %+v", st)
	}
	IsCode(t, pool.SetAccess(0, gg.AccessRead), gg.ErrNotSupported)
	IsCode(t, d.DefaultMemPool().Destroy(), gg.ErrInvalidValue)
}

// AddAlloc adds a memory alloc node of size bytes, or fails the test.
func AddAlloc(t *testing.T, g *gg.Graph, size int, deps ...*gg.Node) (*gg.Node, gg.DevicePtr) {
	t.Helper()
	n, p, err := g.AddMemAllocNode(gg.MemAllocParams{Size: size}, deps...)
	if err != nil {
		t.Fatal(err)
	}
	return n, p
}

func addFree(t *testing.T, g *gg.Graph, p gg.DevicePtr, deps ...*gg.Node) *gg.Node {
	t.Helper()
	return Must[*gg.Node](t)(g.AddMemFreeNode(p, deps...))
}

// memcpyForeignAllocation: a memcpy or memset node added with the explicit
// API cannot copy to or from, or set, an allocation that another graph
// allocates and frees (cuGraphAddMemcpyNode, cuGraphAddMemsetNode:
// CUDA_ERROR_INVALID_VALUE), be it a graph of its own or one about to
// become a child graph of the allocating graph; the allocating graph itself
// may. A refused node leaves its graph as it was. An allocation that its
// graph leaves live, or that a third graph frees, is open to every graph;
// a memset node added before the allocating graph's free node keeps its
// graph from being instantiated, a memcpy node does not
// (docs/driver-foreignmem.txt).
func memcpyForeignAllocation(t *testing.T, d *gg.Device) {
	const size = 1 << 20
	buf := Must[gg.DevicePtr](t)(d.Malloc(size))
	defer d.Free(buf)
	a := NewGraph(t, d)
	an, p := AddAlloc(t, a, size)
	own := Must[*gg.Node](t)(a.AddMemcpyNode(gg.DtoD(buf, p, size), an))
	addFree(t, a, p, own)

	b := NewGraph(t, d)
	_, err := b.AddMemcpyNode(gg.DtoD(buf, p, size))
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = b.AddNode(gg.DtoD(p+64, buf, 64))
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = b.AddMemcpyNode(gg.DtoH(make([]byte, 64), p))
	IsCode(t, err, gg.ErrInvalidValue)
	if ns := Must[[]*gg.Node](t)(b.Nodes()); len(ns) != 0 {
		t.Fatalf("refused nodes left %d nodes in the graph", len(ns))
	}
	// A node of b set to copy a's allocation keeps its parameters.
	other := Must[gg.DevicePtr](t)(d.Malloc(size))
	defer d.Free(other)
	n := Must[*gg.Node](t)(b.AddMemcpyNode(gg.DtoD(other, buf, size)))
	IsCode(t, n.SetParams(gg.DtoD(other, p, size)), gg.ErrInvalidValue)
	if got := Must[gg.NodeParams](t)(n.Params()).(gg.MemcpyParams); got.Src != buf {
		t.Fatalf("after a refused SetParams the node copies from %#x, want %#x", got.Src, buf)
	}
	// A graph to be embedded in a is another graph when the node is added.
	child := NewGraph(t, d)
	_, err = child.AddMemcpyNode(gg.DtoD(buf, p, size))
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = b.AddMemsetNode(gg.Memset32(p, 1, 16))
	IsCode(t, err, gg.ErrInvalidValue)
	OK(t, b.Destroy())
	OK(t, child.Destroy())
	OK(t, a.Destroy())

	// Left live by its graph, or freed by a third: open to other graphs.
	for _, thirdFrees := range []bool{false, true} {
		a := NewGraph(t, d)
		_, p := AddAlloc(t, a, size)
		var c *gg.Graph
		if thirdFrees {
			c = NewGraph(t, d)
			addFree(t, c, p)
		}
		b := NewGraph(t, d)
		Must[*gg.Node](t)(b.AddMemcpyNode(gg.DtoD(buf, p, 64)))
		Must[*gg.Node](t)(b.AddMemcpyNode(gg.DtoD(p+64, buf, 64)))
		Must[*gg.Node](t)(b.AddMemsetNode(gg.Memset32(p+128, 1, 16)))
		OK(t, b.Destroy())
		if c != nil {
			OK(t, c.Destroy())
		}
		OK(t, a.Destroy())
	}

	// Nodes added before the allocating graph frees the allocation.
	a = NewGraph(t, d)
	an, p = AddAlloc(t, a, size)
	ms, cp := NewGraph(t, d), NewGraph(t, d)
	Must[*gg.Node](t)(ms.AddMemsetNode(gg.Memset32(p, 1, 16)))
	Must[*gg.Node](t)(cp.AddMemcpyNode(gg.DtoD(p+64, buf, 64)))
	addFree(t, a, p, an)
	_, err = ms.Instantiate(0)
	IsCode(t, err, gg.ErrInvalidValue)
	e := Must[*gg.Exec](t)(cp.Instantiate(0))
	OK(t, e.Destroy())
	OK(t, ms.Destroy())
	OK(t, cp.Destroy())
	OK(t, a.Destroy())
}

// execSetParamsGraphMemSource: an update of a memcpy node cannot move its
// source or its destination between a graph allocation and cudaMalloc
// memory, either way, while a memset's destination may move
// (docs/driver-condupdate.txt). A memcpy node of a child graph or a
// conditional body on an allocation that the graph frees takes no update
// at all; a memset there does, and so does the copy when the graph leaves
// the allocation live (docs/driver-freedset.txt).
func execSetParamsGraphMemSource(t *testing.T, d *gg.Device) {
	const size = 1 << 16
	a := Must[gg.DevicePtr](t)(d.Malloc(size))
	defer d.Free(a)
	b := Must[gg.DevicePtr](t)(d.Malloc(size))
	defer d.Free(b)
	g := NewGraph(t, d)
	an, p := AddAlloc(t, g, size)
	cp := Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(a, p, 64), an))
	into := Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(p+1024, a, 64), an))
	out := Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(b+1024, a, 64), an))
	ms := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(p+256, 1, 64), an))
	addFree(t, g, p, cp, into, out, ms)
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	defer e.Destroy()
	IsCode(t, e.SetParams(cp, gg.DtoD(a, b, 64)), gg.ErrInvalidValue)       // source leaves graph memory
	IsCode(t, e.SetParams(into, gg.DtoD(b, a, 64)), gg.ErrInvalidValue)     // destination leaves it
	IsCode(t, e.SetParams(out, gg.DtoD(p+2048, a, 64)), gg.ErrInvalidValue) // destination enters it
	OK(t, e.SetParams(cp, gg.DtoD(a+8, p+16, 32)))
	OK(t, e.SetParams(cp, gg.DtoD(b, p, 64)))
	OK(t, e.SetParams(into, gg.DtoD(p+17, a+5, 3)))
	OK(t, e.SetParams(ms, gg.Memset8(b, 2, 64)))
	s := NewStream(t, d)
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())

	// In a child graph and an IF body, with and without a free node.
	for _, body := range []bool{false, true} {
		for _, freed := range []bool{false, true} {
			what := fmt.Sprintf("in an IF body %v, the graph frees the allocation %v", body, freed)
			g := NewGraph(t, d)
			an, p := AddAlloc(t, g, size)
			var holder *gg.Node
			var in *gg.Graph
			if body {
				h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, 0))
				holder = Must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}, an))
				in = Must[[]*gg.Graph](t)(holder.ConditionalBodies())[0]
			} else {
				in = NewGraph(t, d)
			}
			cp := Must[*gg.Node](t)(in.AddMemcpyNode(gg.DtoD(a, p, 64)))
			into := Must[*gg.Node](t)(in.AddMemcpyNode(gg.DtoD(p+1024, a+1024, 64)))
			ms := Must[*gg.Node](t)(in.AddMemsetNode(gg.Memset8(p+2048, 1, 64)))
			if !body {
				holder = Must[*gg.Node](t)(g.AddChildGraphNode(in, an))
				nodes := Must[[]*gg.Node](t)(Must[*gg.Graph](t)(holder.ChildGraph()).Nodes())
				cp, into, ms = nodes[0], nodes[1], nodes[2]
			}
			if freed {
				addFree(t, g, p, holder)
			}
			e := Must[*gg.Exec](t)(g.Instantiate(0))
			for _, c := range []struct {
				n *gg.Node
				p gg.NodeParams
			}{
				{cp, gg.DtoD(a+8, p+16, 32)}, {into, gg.DtoD(p+1032, a+8, 32)}, {cp, gg.DtoD(a+4096, p, 64)},
			} {
				if err := e.SetParams(c.n, c.p); freed != errors.Is(err, gg.ErrInvalidValue) || !freed && err != nil {
					t.Errorf("%s: SetParams %+v: %v, want invalid value %v", what, c.p, err, freed)
				}
			}
			OK(t, e.SetParams(ms, gg.Memset8(p+2056, 2, 64)))
			launchSync(t, e, s)
			OK(t, e.Destroy())
		}
	}
}
