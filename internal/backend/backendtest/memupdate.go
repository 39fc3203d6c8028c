package backendtest

import (
	"encoding/binary"
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Scenarios of whole-graph updates of executable graphs with memory nodes,
// the cases of tools/probe/memupdate.cu (docs/driver-memnodes.txt,
// "update"), with the case numbers of its output.

// muPut stores v at p[0], the address p at addr[0] and what it reads back
// at p[0] at val[0] (the probe's put).
var muPut = &gg.Kernel{
	Name:   "mu_put",
	Params: []gg.ParamType{gg.Pointer, gg.Uint32, gg.Pointer, gg.Pointer},
	Go: func(b gg.Block, a gg.Args) {
		p := gg.Slice[uint32](a.Ptr(0), 1)
		p[0] = a.Uint32(1)
		gg.Slice[uint64](a.Ptr(2), 1)[0] = uint64(a.Ptr(0))
		gg.Slice[uint32](a.Ptr(3), 1)[0] = p[0]
	},
	CUDA: `extern "C" __global__ void mu_put(unsigned* p, unsigned v, unsigned long long* addr, unsigned* val) {
	p[0] = v; *addr = (unsigned long long)p; *val = p[0];
}`,
}

// muPut2 is muPut with another function: it stores v+1000 (the probe's
// put2).
var muPut2 = &gg.Kernel{
	Name:   "mu_put2",
	Params: []gg.ParamType{gg.Pointer, gg.Uint32, gg.Pointer, gg.Pointer},
	Go: func(b gg.Block, a gg.Args) {
		p := gg.Slice[uint32](a.Ptr(0), 1)
		p[0] = a.Uint32(1) + 1000
		gg.Slice[uint64](a.Ptr(2), 1)[0] = uint64(a.Ptr(0))
		gg.Slice[uint32](a.Ptr(3), 1)[0] = p[0]
	},
	CUDA: `extern "C" __global__ void mu_put2(unsigned* p, unsigned v, unsigned long long* addr, unsigned* val) {
	p[0] = v + 1000; *addr = (unsigned long long)p; *val = p[0];
}`,
}

// What stands between a graph's alloc node and its kernel node.
const (
	muEmpty  = iota // an empty node
	muMemset        // a memset node on the allocation
	muMemcpy        // a memcpy node into the allocation
)

// muGraph is the probe's graph: alloc -> (empty, memset or memcpy) ->
// kernel (muPut or muPut2 writing v at the allocation, reporting to rep) ->
// free (an empty node if noFree).
type muGraph struct {
	g                        *gg.Graph
	alloc, mid, kernel, free *gg.Node
	p                        gg.DevicePtr
}

type muShape struct {
	size   int
	mid    int
	k      *gg.Kernel
	noFree bool
}

func newMuGraph(t *testing.T, d *gg.Device, rep, src gg.DevicePtr, sh muShape, v uint32) *muGraph {
	t.Helper()
	r := &muGraph{g: NewGraph(t, d)}
	r.alloc, r.p = AddAlloc(t, r.g, sh.size)
	switch sh.mid {
	case muMemset:
		r.mid = Must[*gg.Node](t)(r.g.AddMemsetNode(gg.Memset32(r.p, 0, 16), r.alloc))
	case muMemcpy:
		r.mid = Must[*gg.Node](t)(r.g.AddMemcpyNode(gg.DtoD(r.p, src, 64), r.alloc))
	default:
		r.mid = Must[*gg.Node](t)(r.g.AddEmptyNode(r.alloc))
	}
	k := sh.k
	if k == nil {
		k = muPut
	}
	r.kernel = Must[*gg.Node](t)(r.g.AddKernelNode(gg.KernelParams{Kernel: k, Grid: one, Block: one,
		Args: []any{r.p, v, rep, rep + 8}}, r.mid))
	if sh.noFree {
		r.free = Must[*gg.Node](t)(r.g.AddEmptyNode(r.kernel))
	} else {
		r.free = addFree(t, r.g, r.p, r.kernel)
	}
	return r
}

// muRun launches e into s and returns the address its kernel wrote at and
// the value it read back.
func muRun(t *testing.T, d *gg.Device, s *gg.Stream, e *gg.Exec, rep gg.DevicePtr) (gg.DevicePtr, uint32) {
	t.Helper()
	OK(t, d.Memset(gg.Memset8(rep, 0xff, 16)))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	b := make([]byte, 16)
	OK(t, d.Memcpy(gg.DtoH(b, rep)))
	return gg.DevicePtr(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint32(b[8:])
}

// muWant checks that the launch wrote at p and read v.
func muWant(t *testing.T, what string, gotP gg.DevicePtr, gotV uint32, p gg.DevicePtr, v uint32) {
	t.Helper()
	if gotP != p || gotV != v {
		t.Fatalf("%s: the kernel wrote at %#x and read %d, want %#x and %d", what, gotP, gotV, p, v)
	}
}

// muInstantiable checks whether g can have an executable graph now
// (ErrNotSupported while another one lives).
func muInstantiable(t *testing.T, g *gg.Graph, name string, want bool, flags gg.InstantiateFlags) {
	t.Helper()
	e, err := g.Instantiate(flags)
	if want {
		if err != nil {
			t.Fatalf("instantiate %s: %v", name, err)
		}
		OK(t, e.Destroy())
		return
	}
	if !errors.Is(err, gg.ErrNotSupported) {
		t.Fatalf("instantiate %s: %v, want ErrNotSupported", name, err)
	}
}

// muUpdateTo updates e, instantiated from a with flags fl, to b, which
// must succeed: the next launch writes v at b's allocation, and then b
// cannot be instantiated again while e lives, and a can.
func muUpdateTo(t *testing.T, d *gg.Device, s *gg.Stream, e *gg.Exec, rep gg.DevicePtr, a, b *muGraph, v uint32, fl gg.InstantiateFlags, what string) {
	t.Helper()
	if res, err := e.Update(b.g); err != nil || res.Result != gg.UpdateSuccess {
		t.Fatalf("%s: update to B: %+v %v", what, res, err)
	}
	p, got := muRun(t, d, s, e, rep)
	muWant(t, what+": A updated to B", p, got, b.p, v)
	muInstantiable(t, b.g, "B", false, fl)
	muInstantiable(t, a.g, "A", true, fl)
}

func muSetup(t *testing.T, d *gg.Device) (*gg.Stream, gg.DevicePtr, gg.DevicePtr) {
	t.Helper()
	s := NewStream(t, d)
	rep := Must[gg.DevicePtr](t)(d.Malloc(16))
	src := Must[gg.DevicePtr](t)(d.Malloc(64))
	t.Cleanup(func() { d.Free(rep); d.Free(src) })
	OK(t, d.Memset(gg.Memset8(src, 0, 64)))
	return s, rep, src
}

// updateMemNodes: alloc and free nodes pair like any node, whatever their
// sizes, and a kernel may change its function (cases 13.2, 18, 19, 20):
// the executable graph then allocates B's allocation at B's address and is
// B's (B cannot be instantiated, A can); an update back to A succeeds. The
// graph memory footprint follows (B's allocation is twice A's), and a trim
// returns it all.
func updateMemNodes(t *testing.T, d *gg.Device) {
	s, rep, _ := muSetup(t, d)
	const size = 4 << 20
	fl := gg.InstantiateAutoFreeOnLaunch
	a := newMuGraph(t, d, rep, 0, muShape{size: size}, 1)
	b := newMuGraph(t, d, rep, 0, muShape{size: 2 * size, k: muPut2}, 2)
	e := Must[*gg.Exec](t)(a.g.Instantiate(fl))
	p, v := muRun(t, d, s, e, rep)
	muWant(t, "A", p, v, a.p, 1)
	muUpdateTo(t, d, s, e, rep, a, b, 1002, fl, "B twice the size, another function")
	if st := Must[gg.GraphMemStats](t)(d.GraphMemStats()); st.UsedHigh < 2*size || st.ReservedCurrent < st.UsedCurrent {
		t.Fatalf("after a launch with B's %d MiB allocation: %+v", 2*size>>20, st)
	}
	res, err := e.Update(a.g)
	if err != nil || res.Result != gg.UpdateSuccess {
		t.Fatalf("update back to A: %+v %v", res, err)
	}
	p, v = muRun(t, d, s, e, rep)
	muWant(t, "updated back to A", p, v, a.p, 1)
	muInstantiable(t, a.g, "A", false, fl)
	muInstantiable(t, b.g, "B", true, fl)
	// The same while a launch is queued: it keeps A's allocation, the
	// next one has B's.
	OK(t, d.Memset(gg.Memset8(rep, 0xff, 16)))
	hold := make(chan struct{})
	OK(t, s.LaunchHostFunc(func() { <-hold }))
	OK(t, e.Launch(s))
	res, err = e.Update(b.g)
	close(hold)
	if err != nil || res.Result != gg.UpdateSuccess {
		t.Fatalf("update A to B with a launch queued: %+v %v", res, err)
	}
	OK(t, s.Synchronize())
	buf := make([]byte, 16)
	OK(t, d.Memcpy(gg.DtoH(buf, rep)))
	muWant(t, "the launch queued before the update", gg.DevicePtr(binary.LittleEndian.Uint64(buf)), binary.LittleEndian.Uint32(buf[8:]), a.p, 1)
	p, v = muRun(t, d, s, e, rep)
	muWant(t, "A updated to B with a launch queued", p, v, b.p, 1002)
	OK(t, e.Destroy())
	OK(t, d.TrimGraphMem())
	if st := Must[gg.GraphMemStats](t)(d.GraphMemStats()); st.UsedCurrent != 0 || st.ReservedCurrent != 0 {
		t.Fatalf("after the launches and a trim: %+v", st)
	}
	muInstantiable(t, b.g, "B", true, fl)
}

// updateMemsetRefused: a memset node on an allocation of B that B frees
// refuses the update, UpdateError, naming it (cases 1, 2, 9, 13.1, 13.3,
// 17); nothing changes. A memcpy node into it does not (16), nor a memset
// when B frees nothing (14.1, 14.3, 10). Of two refused nodes, one whose
// parameters cannot change and such a memset, the update names the one
// it checks first (updateRefusalOrder).
func updateMemsetRefused(t *testing.T, d *gg.Device) {
	s, rep, src := muSetup(t, d)
	const size = 1 << 20
	for _, fl := range []gg.InstantiateFlags{gg.InstantiateAutoFreeOnLaunch, 0} {
		a := newMuGraph(t, d, rep, 0, muShape{size: size, mid: muMemset}, 1)
		b := newMuGraph(t, d, rep, 0, muShape{size: 2 * size, mid: muMemset, k: muPut2}, 2)
		e := Must[*gg.Exec](t)(a.g.Instantiate(fl))
		p, v := muRun(t, d, s, e, rep)
		muWant(t, "A", p, v, a.p, 1)
		res, err := e.Update(b.g)
		if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateError || res.ErrorNode != b.mid {
			t.Fatalf("update to B with a memset on its freed allocation: %+v %v, want UpdateError naming the memset", res, err)
		}
		p, v = muRun(t, d, s, e, rep)
		muWant(t, "A after the refused update", p, v, a.p, 1)
		muInstantiable(t, b.g, "B", true, fl)
		muInstantiable(t, a.g, "A", false, fl)
		// The executable graph's own graph updates it.
		res, err = e.Update(a.g)
		if err != nil || res.Result != gg.UpdateSuccess {
			t.Fatalf("update A from A: %+v %v", res, err)
		}
		OK(t, e.Destroy())
	}

	// Case 17: a kernel of another function made first, beside
	// alloc -> memset -> free: the memset is named.
	two := func(k *gg.Kernel) (*gg.Graph, *gg.Node) {
		g := NewGraph(t, d)
		Must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: k, Grid: one, Block: one, Args: []any{src, uint32(1), rep, rep + 8}}))
		an, p := AddAlloc(t, g, size)
		m := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p, 0, 16), an))
		addFree(t, g, p, m)
		return g, m
	}
	ga, _ := two(muPut)
	gb, mb := two(muPut2)
	e := Must[*gg.Exec](t)(ga.Instantiate(gg.InstantiateAutoFreeOnLaunch))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	res, err := e.Update(gb)
	if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateError || res.ErrorNode != mb {
		t.Fatalf("case 17: %+v %v, want UpdateError naming the memset", res, err)
	}
	OK(t, e.Destroy())

	// Two refused nodes: a 2D memset whose shape changes (parameters
	// changed), a sink, and a memset on B's freed allocation (error),
	// made in either order: the sink is checked first (updateRefusalOrder
	// has the rule).
	buf := Must[gg.DevicePtr](t)(d.Malloc(4096))
	defer d.Free(buf)
	for _, shapeFirst := range []bool{true, false} {
		build := func(width int) (*gg.Graph, *gg.Node, *gg.Node) {
			g := NewGraph(t, d)
			var shaped *gg.Node
			shape := func() {
				shaped = Must[*gg.Node](t)(g.AddMemsetNode(gg.MemsetParams{Dst: buf, Value: 1, ElementSize: 4, Width: width, Height: 2, Pitch: 64}))
			}
			if shapeFirst {
				shape()
			}
			an, p := AddAlloc(t, g, size)
			m := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p, 0, 16), an))
			addFree(t, g, p, m)
			if !shapeFirst {
				shape()
			}
			return g, shaped, m
		}
		ga, _, _ := build(4)
		gb, shapedB, mB := build(8)
		e := Must[*gg.Exec](t)(ga.Instantiate(gg.InstantiateAutoFreeOnLaunch))
		res, err := e.Update(gb)
		if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateErrorParametersChanged || res.ErrorNode != shapedB {
			t.Fatalf("two refused nodes, the 2D memset made first %v: %+v %v, want parameters changed naming %v, not %v", shapeFirst, res, err, shapedB, mB)
		}
		OK(t, e.Destroy())
	}

	// A memset in a conditional body on B's freed allocation refuses it
	// too (two-GPU whole-graph differential inputs; the driver names a
	// body's node, which the cuda backend may not name).
	body := func(v uint32) *gg.Graph {
		g := NewGraph(t, d)
		an, p := AddAlloc(t, g, size)
		h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, 0))
		cn := Must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}, an))
		b := Must[[]*gg.Graph](t)(cn.ConditionalBodies())[0]
		Must[*gg.Node](t)(b.AddMemsetNode(gg.Memset32(p, v, 16)))
		addFree(t, g, p, cn)
		return g
	}
	eb := Must[*gg.Exec](t)(body(1).Instantiate(0))
	if res, err := eb.Update(body(2)); !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateError {
		t.Fatalf("a memset in a body on B's freed allocation: %+v %v, want UpdateError", res, err)
	}
	OK(t, eb.Destroy())

	// Case 16: a memcpy node into B's allocation, which B frees.
	a := newMuGraph(t, d, rep, src, muShape{size: size, mid: muMemcpy}, 1)
	b := newMuGraph(t, d, rep, src, muShape{size: size, mid: muMemcpy}, 2)
	e = Must[*gg.Exec](t)(a.g.Instantiate(gg.InstantiateAutoFreeOnLaunch))
	p, v := muRun(t, d, s, e, rep)
	muWant(t, "A (memcpy)", p, v, a.p, 1)
	muUpdateTo(t, d, s, e, rep, a, b, 2, gg.InstantiateAutoFreeOnLaunch, "case 16, memcpy into B's freed allocation")
	OK(t, e.Destroy())

	// Cases 14.1, 14.3 and 10: no free nodes, a memset on B's allocation.
	a = newMuGraph(t, d, rep, 0, muShape{size: size, mid: muMemset, noFree: true}, 1)
	b = newMuGraph(t, d, rep, 0, muShape{size: size, mid: muMemset, noFree: true}, 2)
	e = Must[*gg.Exec](t)(a.g.Instantiate(gg.InstantiateAutoFreeOnLaunch))
	p, v = muRun(t, d, s, e, rep)
	muWant(t, "A (no free)", p, v, a.p, 1)
	muUpdateTo(t, d, s, e, rep, a, b, 2, gg.InstantiateAutoFreeOnLaunch, "case 14.3, memset on B's allocation that B does not free")
	OK(t, d.Free(b.p))
	OK(t, e.Destroy())
}

// updateMemNodesLeftLive: an allocation that A's launch left live (A has
// no free node for it) stays live after an update to B, and it is no
// longer the executable graph's: the next launch, under AutoFreeOnLaunch,
// frees only what B's own launch left, so A's allocation is the user's to
// free (measured on an H200, 2026-11-26: the driver's Free of it
// succeeds), and a trim after both frees leaves no graph memory.
func updateMemNodesLeftLive(t *testing.T, d *gg.Device) {
	s, rep, _ := muSetup(t, d)
	const size = 4 << 20
	OK(t, d.TrimGraphMem())
	a := newMuGraph(t, d, rep, 0, muShape{size: size, noFree: true}, 1)
	b := newMuGraph(t, d, rep, 0, muShape{size: size, noFree: true}, 2)
	e := Must[*gg.Exec](t)(a.g.Instantiate(gg.InstantiateAutoFreeOnLaunch))
	p, v := muRun(t, d, s, e, rep)
	muWant(t, "A", p, v, a.p, 1)
	if res, err := e.Update(b.g); err != nil || res.Result != gg.UpdateSuccess {
		t.Fatalf("update: %+v %v", res, err)
	}
	p, v = muRun(t, d, s, e, rep)
	muWant(t, "A updated to B", p, v, b.p, 2)
	OK(t, d.Free(a.p)) // not freed by the launch: the update let it go
	OK(t, d.Free(b.p))
	OK(t, e.Destroy())
	OK(t, d.TrimGraphMem())
	if st := Must[gg.GraphMemStats](t)(d.GraphMemStats()); st.UsedCurrent != 0 || st.ReservedCurrent != 0 {
		t.Fatalf("after freeing B's allocation and a trim: %+v", st)
	}
}
