package backendtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// setU32 stores v at p[i]: one thread, both backends.
var setU32 = &gg.Kernel{
	Name:   "set_u32",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Uint32},
	Go: func(b gg.Block, a gg.Args) {
		gg.Slice[uint32](a.Ptr(0), a.Int(1)+1)[a.Int(1)] = a.Uint32(2)
	},
	CUDA: `extern "C" __global__ void set_u32(unsigned* p, int i, unsigned v) { p[i] = v; }`,
}

// SetAt is a launch of one thread that stores v at p[i].
func SetAt(p gg.DevicePtr, i int, v uint32) gg.KernelParams {
	return gg.KernelParams{Kernel: setU32, Grid: one, Block: one, Args: []any{p, i, v}}
}

// ReadU32 copies n uint32s at p to the host.
func ReadU32(t testing.TB, d *gg.Device, p gg.DevicePtr, n int) []uint32 {
	t.Helper()
	b := make([]byte, 4*n)
	OK(t, d.Memcpy(gg.DtoH(b, p)))
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func equalU32(t testing.TB, got []uint32, want ...uint32) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// ChainOf builds a chain of set_u32 nodes writing vals[i] to p[i].
func ChainOf(t testing.TB, d *gg.Device, p gg.DevicePtr, vals ...uint32) (*gg.Graph, []*gg.Node) {
	g := NewGraph(t, d)
	var nodes []*gg.Node
	var prev []*gg.Node
	for i, v := range vals {
		n := Must[*gg.Node](t)(g.AddKernelNode(SetAt(p, i, v), prev...))
		nodes = append(nodes, n)
		prev = []*gg.Node{n}
	}
	return g, nodes
}

func wholeGraphUpdate(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	g1, _ := ChainOf(t, d, p, 1, 2, 3)
	e := Must[*gg.Exec](t)(g1.Instantiate(0))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 3), 1, 2, 3)

	// The capture-and-update loop of the programming guide.
	for it := uint32(1); it <= 3; it++ {
		OK(t, s.BeginCapture(gg.CaptureModeGlobal))
		for i := 0; i < 3; i++ {
			OK(t, s.Launch(setU32, one, one, p, i, 10*it+uint32(i)))
		}
		g := Must[*gg.Graph](t)(s.EndCapture())
		res, err := e.Update(g)
		if err != nil || res.Result != gg.UpdateSuccess {
			t.Fatalf("update %d: %v %v", it, res, err)
		}
		OK(t, e.Launch(s))
		OK(t, s.Synchronize())
		equalU32(t, ReadU32(t, d, p, 3), 10*it, 10*it+1, 10*it+2)
	}

	// A graph of another shape is refused and changes nothing.
	g2, _ := ChainOf(t, d, p, 7, 7)
	res, err := e.Update(g2)
	if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateErrorTopologyChanged || res.ErrorNode != nil {
		t.Fatalf("fewer nodes: %+v, %v", res, err)
	}
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 3), 30, 31, 32)
}

func updateRefusals(t *testing.T, d *gg.Device) {
	p := Must[gg.DevicePtr](t)(d.Malloc(4096))
	base := func() *gg.Graph { g, _ := ChainOf(t, d, p, 1, 2); return g }
	e := Must[*gg.Exec](t)(base().Instantiate(0))

	host := make([]byte, 16)
	cases := []struct {
		name  string
		build func() *gg.Graph
		want  gg.UpdateResult
		node  int // index (in creation order) of the node the result names; -1 none
	}{
		{"extra sink", func() *gg.Graph {
			g := NewGraph(t, d)
			a := Must[*gg.Node](t)(g.AddKernelNode(SetAt(p, 0, 1)))
			_ = a
			Must[*gg.Node](t)(g.AddKernelNode(SetAt(p, 1, 2)))
			return g
		}, gg.UpdateErrorTopologyChanged, 0},
		{"node type", func() *gg.Graph {
			g := NewGraph(t, d)
			a := Must[*gg.Node](t)(g.AddKernelNode(SetAt(p, 0, 1)))
			Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p, 0, 4), a))
			return g
		}, gg.UpdateErrorNodeTypeChanged, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := c.build()
			nodes := Must[[]*gg.Node](t)(g.Nodes())
			res, err := e.Update(g)
			if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != c.want {
				t.Fatalf("got %v (%v), want %v", res.Result, err, c.want)
			}
			if c.node >= 0 && res.ErrorNode != nodes[c.node] {
				t.Fatalf("error node %v, want %v", res.ErrorNode, nodes[c.node])
			}
		})
	}

	// Parameter limits: a memcpy's kind, a 2D memset's shape.
	g := NewGraph(t, d)
	cp := Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(p+1024, p, 16)))
	ms := Must[*gg.Node](t)(g.AddMemsetNode(gg.MemsetParams{Dst: p, Value: 1, ElementSize: 1, Width: 8, Height: 2, Pitch: 64}, cp))
	e2 := Must[*gg.Exec](t)(g.Instantiate(0))
	IsCode(t, e2.SetParams(cp, gg.DtoH(host, p)), gg.ErrInvalidValue)
	IsCode(t, e2.SetParams(ms, gg.MemsetParams{Dst: p, Value: 1, ElementSize: 1, Width: 16, Height: 2, Pitch: 64}), gg.ErrInvalidValue)
	OK(t, e2.SetParams(ms, gg.MemsetParams{Dst: p + 512, Value: 7, ElementSize: 1, Width: 8, Height: 2, Pitch: 64}))
	OK(t, e2.SetParams(cp, gg.DtoD(p+2048, p, 32)))

	g3 := NewGraph(t, d)
	cp3 := Must[*gg.Node](t)(g3.AddMemcpyNode(gg.HtoD(p, host)))
	Must[*gg.Node](t)(g3.AddMemsetNode(gg.MemsetParams{Dst: p, Value: 1, ElementSize: 1, Width: 8, Height: 2, Pitch: 64}, cp3))
	res, err := e2.Update(g3)
	if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateErrorParametersChanged || res.ErrorNode != cp3 {
		t.Fatalf("memcpy kind change: %+v %v", res, err)
	}
}

func execNodeSetParams(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	g, nodes := ChainOf(t, d, p, 1, 2)
	var hostRuns []string
	h := Must[*gg.Node](t)(g.AddHostNode(func() { hostRuns = append(hostRuns, "old") }, nodes[1]))
	ms := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p+16, 5, 2), h))
	child := NewGraph(t, d)
	Must[*gg.Node](t)(child.AddKernelNode(SetAt(p, 8, 80)))
	cn := Must[*gg.Node](t)(g.AddChildGraphNode(child, ms))
	e := Must[*gg.Exec](t)(g.Instantiate(0))

	OK(t, e.SetParams(nodes[0], SetAt(p, 0, 100)))
	OK(t, e.SetParams(h, gg.HostParams{Fn: func() { hostRuns = append(hostRuns, "new") }}))
	OK(t, e.SetParams(ms, gg.Memset32(p+16, 9, 2)))
	child2 := NewGraph(t, d)
	Must[*gg.Node](t)(child2.AddKernelNode(SetAt(p, 8, 88)))
	OK(t, e.SetParams(cn, gg.ChildGraphParams{Graph: child2}))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	got := ReadU32(t, d, p, 9)
	equalU32(t, got, 100, 2, 0, 0, 9, 9, 0, 0, 88)
	if fmt.Sprint(hostRuns) != "[new]" {
		t.Fatalf("host runs %v", hostRuns)
	}
	// The graph itself is unchanged.
	kp := Must[gg.NodeParams](t)(nodes[0].Params()).(gg.KernelParams)
	if kp.Args[2] != uint32(1) {
		t.Fatalf("graph node changed: %v", kp.Args)
	}

	// Refusals leave e as it was.
	other := NewGraph(t, d)
	foreign := Must[*gg.Node](t)(other.AddKernelNode(SetAt(p, 0, 5)))
	IsCode(t, e.SetParams(foreign, SetAt(p, 0, 5)), gg.ErrInvalidValue)
	IsCode(t, e.SetParams(nodes[0], gg.Memset32(p, 0, 1)), gg.ErrInvalidValue)
	twoNodes := NewGraph(t, d)
	a := Must[*gg.Node](t)(twoNodes.AddKernelNode(SetAt(p, 8, 1)))
	Must[*gg.Node](t)(twoNodes.AddKernelNode(SetAt(p, 8, 2), a))
	IsCode(t, e.SetParams(cn, gg.ChildGraphParams{Graph: twoNodes}), gg.ErrGraphExecUpdateFailure)
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 9), 100, 2, 0, 0, 9, 9, 0, 0, 88)
}

func setEnabled(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	g, nodes := ChainOf(t, d, p, 1, 2)
	h := Must[*gg.Node](t)(g.AddHostNode(func() {}, nodes[1]))
	e := Must[*gg.Exec](t)(g.Instantiate(0))

	on := Must[bool](t)(e.Enabled(nodes[0]))
	if !on {
		t.Fatal("nodes start enabled")
	}
	OK(t, e.SetEnabled(nodes[0], false))
	if Must[bool](t)(e.Enabled(nodes[0])) {
		t.Fatal("still enabled")
	}
	// An update while disabled applies once enabled again, and does not
	// enable the node.
	OK(t, e.SetParams(nodes[0], SetAt(p, 0, 50)))
	OK(t, d.Memset(gg.Memset32(p, 0, 4)))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 2), 0, 2)

	g2, _ := ChainOf(t, d, p, 60, 3)
	Must[*gg.Node](t)(g2.AddHostNode(func() {}, Must[[]*gg.Node](t)(g2.Nodes())[1]))
	res, err := e.Update(g2)
	if err != nil {
		t.Fatal(res, err)
	}
	if Must[bool](t)(e.Enabled(nodes[0])) {
		t.Fatal("an update enabled the node")
	}
	OK(t, e.SetEnabled(nodes[0], true))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 2), 60, 3)

	IsCode(t, e.SetEnabled(h, false), gg.ErrInvalidValue)
	_, err = e.Enabled(h)
	IsCode(t, err, gg.ErrInvalidValue)

	// A 1D memset between two nodes cannot be disabled: the driver would
	// run the node after it before the node before it
	// (docs/driver-disabledmid.txt). One that is a source or a sink, and a
	// 2D memset, can.
	g3 := NewGraph(t, d)
	k1 := Must[*gg.Node](t)(g3.AddKernelNode(SetAt(p, 0, 1)))
	mid := Must[*gg.Node](t)(g3.AddMemsetNode(gg.Memset8(p+16, 7, 8), k1))
	mid2 := Must[*gg.Node](t)(g3.AddMemsetNode(gg.MemsetParams{Dst: p + 32, Value: 7, ElementSize: 1, Width: 4, Height: 2, Pitch: 8}, k1))
	Must[*gg.Node](t)(g3.AddKernelNode(SetAt(p, 1, 2), mid, mid2))
	src := Must[*gg.Node](t)(g3.AddMemsetNode(gg.Memset8(p+48, 7, 4)))
	sink := Must[*gg.Node](t)(g3.AddMemsetNode(gg.Memset8(p+52, 7, 4), k1))
	Must[*gg.Node](t)(g3.AddKernelNode(SetAt(p, 2, 3), src))
	e3 := Must[*gg.Exec](t)(g3.Instantiate(0))
	defer e3.Destroy()
	IsCode(t, e3.SetEnabled(mid, false), gg.ErrNotSupported)
	if !Must[bool](t)(e3.Enabled(mid)) {
		t.Fatal("a refused SetEnabled disabled the memset")
	}
	for _, n := range []*gg.Node{mid2, src, sink} {
		OK(t, e3.SetEnabled(n, false))
	}
	launchSync(t, e3, s)
	equalU32(t, ReadU32(t, d, p, 3), 1, 2, 3)

	// In a child graph a sink counts as between: the node after the child
	// graph node waits for it.
	c := NewGraph(t, d)
	ck := Must[*gg.Node](t)(c.AddKernelNode(SetAt(p, 0, 4)))
	Must[*gg.Node](t)(c.AddMemsetNode(gg.Memset8(p+16, 7, 8), ck))
	g4 := NewGraph(t, d)
	cn := Must[*gg.Node](t)(g4.AddChildGraphNode(c))
	Must[*gg.Node](t)(g4.AddKernelNode(SetAt(p, 1, 5), cn))
	cs := Must[[]*gg.Node](t)(Must[*gg.Graph](t)(cn.ChildGraph()).Nodes())
	e4 := Must[*gg.Exec](t)(g4.Instantiate(0))
	defer e4.Destroy()
	IsCode(t, e4.SetEnabled(cs[1], false), gg.ErrNotSupported)
	OK(t, e4.SetEnabled(cs[0], false)) // the kernel may go
	// A 2D memset that is a source of a child graph with a node after it
	// cannot be disabled either.
	c5 := NewGraph(t, d)
	m5 := Must[*gg.Node](t)(c5.AddMemsetNode(gg.MemsetParams{Dst: p + 32, Value: 7, ElementSize: 1, Width: 4, Height: 2, Pitch: 8}))
	Must[*gg.Node](t)(c5.AddKernelNode(SetAt(p, 0, 6), m5))
	g5 := NewGraph(t, d)
	cn5 := Must[*gg.Node](t)(g5.AddChildGraphNode(c5, Must[*gg.Node](t)(g5.AddKernelNode(SetAt(p, 1, 7)))))
	e5 := Must[*gg.Exec](t)(g5.Instantiate(0))
	defer e5.Destroy()
	IsCode(t, e5.SetEnabled(Must[[]*gg.Node](t)(Must[*gg.Graph](t)(cn5.ChildGraph()).Nodes())[0], false), gg.ErrNotSupported)
}

// launchAndRead returns a function that zeroes n words at p, launches e
// and checks the words against want.
func launchAndRead(t *testing.T, d *gg.Device, s *gg.Stream, e *gg.Exec, p gg.DevicePtr, n int) func(want []uint32) {
	return func(want []uint32) {
		t.Helper()
		OK(t, d.Memset(gg.Memset32(p, 0, n)))
		OK(t, e.Launch(s))
		OK(t, s.Synchronize())
		equalU32(t, ReadU32(t, d, p, n), want...)
	}
}

// nestedSlots returns the nodes of the graph embedded in child graph node
// cn and of the one graph embedded in it, with the word each writes, as
// setEnabledNested lays them out: the innermost graph's two nodes write
// words 0 and 1, the middle graph's own nodes (made before its child graph
// node) words 2, 3, ... in creation order.
func nestedSlots(t *testing.T, cn *gg.Node) (nodes []*gg.Node, slots []int) {
	for _, n := range Must[[]*gg.Node](t)(Must[*gg.Graph](t)(cn.ChildGraph()).Nodes()) {
		if n.Type() == gg.NodeChildGraph {
			for i, m := range Must[[]*gg.Node](t)(Must[*gg.Graph](t)(n.ChildGraph()).Nodes()) {
				nodes, slots = append(nodes, m), append(slots, i)
			}
			continue
		}
		nodes, slots = append(nodes, n), append(slots, 2+len(slots))
	}
	return nodes, slots
}

// setEnabledNested: Exec.SetEnabled and Exec.SetParams on a node of a
// child graph embedded one and two levels deep reach that node and no
// other. On cuda each embedded graph is the driver's clone, whose nodes are
// found in the clone of the graph that holds them (cuGraphNodeFindInClone
// on the embedded graph, not the top one: a node of a nested graph looked
// up in the top graph's clone is another node, or none).
func setEnabledNested(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	c := NewGraph(t, d) // innermost: slots 0, 1
	Must[*gg.Node](t)(c.AddKernelNode(SetAt(p, 0, 10)))
	Must[*gg.Node](t)(c.AddKernelNode(SetAt(p, 1, 11)))
	b := NewGraph(t, d) // middle: slots 2, 3, and c
	Must[*gg.Node](t)(b.AddKernelNode(SetAt(p, 2, 20)))
	Must[*gg.Node](t)(b.AddKernelNode(SetAt(p, 3, 21)))
	Must[*gg.Node](t)(b.AddChildGraphNode(c))
	a := NewGraph(t, d) // top: slots 4, 5, and b
	Must[*gg.Node](t)(a.AddKernelNode(SetAt(p, 4, 30)))
	Must[*gg.Node](t)(a.AddKernelNode(SetAt(p, 5, 31)))
	bn := Must[*gg.Node](t)(a.AddChildGraphNode(b))
	e := Must[*gg.Exec](t)(a.Instantiate(0))
	all := []uint32{10, 11, 20, 21, 30, 31}
	run := launchAndRead(t, d, s, e, p, 6)
	run(all)
	// The kernel nodes of the embedded graphs, and the slot each writes.
	nested, slots := nestedSlots(t, bn)
	if len(nested) != 4 {
		t.Fatalf("%d kernel nodes in the embedded graphs, want 4", len(nested))
	}
	for i, n := range nested {
		OK(t, e.SetEnabled(n, false))
		want := slices.Clone(all)
		want[slots[i]] = 0
		run(want)
		OK(t, e.SetEnabled(n, true))
		// SetParams reaches the same node.
		OK(t, e.SetParams(n, SetAt(p, slots[i], 99)))
		want[slots[i]] = 99
		run(want)
		OK(t, e.SetParams(n, SetAt(p, slots[i], all[slots[i]])))
	}
	run(all)

	// Memset and memcpy nodes of an embedded graph, one and two levels
	// deep: disabled, each leaves its slot as it was.
	q := Must[gg.DevicePtr](t)(d.Malloc(64))
	src := Must[gg.DevicePtr](t)(d.Malloc(64))
	OK(t, d.Memset(gg.Memset32(src, 7, 16)))
	c2 := NewGraph(t, d)
	Must[*gg.Node](t)(c2.AddMemsetNode(gg.Memset32(q, 1, 1)))
	Must[*gg.Node](t)(c2.AddMemcpyNode(gg.DtoD(q+4, src, 4)))
	b2 := NewGraph(t, d)
	Must[*gg.Node](t)(b2.AddMemsetNode(gg.Memset32(q+8, 2, 1)))
	Must[*gg.Node](t)(b2.AddMemcpyNode(gg.DtoD(q+12, src, 4)))
	Must[*gg.Node](t)(b2.AddChildGraphNode(c2))
	a2 := NewGraph(t, d)
	bn2 := Must[*gg.Node](t)(a2.AddChildGraphNode(b2))
	e2 := Must[*gg.Exec](t)(a2.Instantiate(0))
	all2 := []uint32{1, 7, 2, 7}
	run2 := launchAndRead(t, d, s, e2, q, 4)
	run2(all2)
	copies, cslots := nestedSlots(t, bn2)
	for i, n := range copies {
		OK(t, e2.SetEnabled(n, false))
		if on := Must[bool](t)(e2.Enabled(n)); on {
			t.Fatalf("%v node %d reports enabled after SetEnabled(false)", n.Type(), i)
		}
		want := slices.Clone(all2)
		want[cslots[i]] = 0
		run2(want)
		OK(t, e2.SetEnabled(n, true))
		run2(all2)
	}
	// The last enabled node of a child graph cannot be disabled (the
	// driver would drop the child graph node's ordering): refused, the
	// node left enabled. The innermost graph holds only the two copies;
	// the middle one holds the innermost graph's node too, which stays.
	at := func(slot int) *gg.Node { return copies[slices.Index(cslots, slot)] }
	OK(t, e2.SetEnabled(at(0), false))
	IsCode(t, e2.SetEnabled(at(1), false), gg.ErrNotSupported)
	if !Must[bool](t)(e2.Enabled(at(1))) {
		t.Fatal("a refused SetEnabled(false) disabled the node")
	}
	run2([]uint32{0, 7, 2, 7})
	OK(t, e2.SetEnabled(at(0), true))
	OK(t, e2.SetEnabled(at(2), false))
	OK(t, e2.SetEnabled(at(3), false))
	run2([]uint32{1, 7, 0, 0})
	OK(t, e2.SetEnabled(at(2), true))
	OK(t, e2.SetEnabled(at(3), true))
	run2(all2)
}

// A whole-graph update reaches the nodes of conditional bodies (CUDA: "subject
// to the rules above"), from the next launch on: a launch queued before the
// update runs the bodies as they were.
func updateConditionalBodies(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	out := Must[gg.DevicePtr](t)(d.Malloc(64))
	var bodyNode *gg.Node // of the last graph built
	build := func(v uint32) *gg.Graph {
		g := NewGraph(t, d)
		h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		n := Must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
		body := Must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
		bodyNode = Must[*gg.Node](t)(body.AddKernelNode(SetAt(p, 0, v)))
		Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(out, p, 4), n))
		return g
	}
	e := Must[*gg.Exec](t)(build(1).Instantiate(0))
	k := bodyNode
	gate := make(chan struct{})
	OK(t, s.LaunchHostFunc(func() { <-gate }))
	OK(t, e.Launch(s)) // queued: writes 1
	OK(t, s.Memcpy(gg.DtoD(out+4, out, 4)))
	if _, err := e.Update(build(7)); err != nil {
		t.Fatal(err)
	}
	OK(t, e.Launch(s)) // writes 7
	close(gate)
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, out, 2), 7, 1)

	// Exec.SetParams reaches the body's node as well.
	OK(t, e.SetParams(k, SetAt(p, 0, 9)))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, out, 1), 9)

	// So does Exec.SetEnabled (the driver allows it, measured on the H100):
	// disabled, the body's kernel leaves p as it was.
	OK(t, d.Memset(gg.Memset32(p, 0, 1)))
	OK(t, e.SetEnabled(k, false))
	if on := Must[bool](t)(e.Enabled(k)); on {
		t.Fatal("the body's node reports enabled after SetEnabled(false)")
	}
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, out, 1), 0)
	OK(t, e.SetEnabled(k, true))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, out, 1), 9)

	// A body of another shape is a topology change.
	g := NewGraph(t, d)
	h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	n := Must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
	body := Must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
	a := Must[*gg.Node](t)(body.AddKernelNode(SetAt(p, 0, 1)))
	Must[*gg.Node](t)(body.AddKernelNode(SetAt(p, 1, 1), a))
	Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(out, p, 4), n))
	res, err := e.Update(g)
	if res.Result != gg.UpdateErrorTopologyChanged || !errors.Is(err, gg.ErrGraphExecUpdateFailure) {
		t.Fatalf("%+v %v", res, err)
	}
}

// Node.SetParams gives a child graph node a new graph (a clone of it), on
// both backends; later instantiations run it, and it can be edited through
// the node like the one it replaced.
func setChildGraph(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	g := NewGraph(t, d)
	first, _ := ChainOf(t, d, p, 1)
	cn := Must[*gg.Node](t)(g.AddChildGraphNode(first))
	second, _ := ChainOf(t, d, p, 2, 3)
	OK(t, cn.SetParams(gg.ChildGraphParams{Graph: second}))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 2), 2, 3)
	// The embedded graph is second's clone: edit it through the node.
	emb := Must[*gg.Graph](t)(cn.ChildGraph())
	nodes := Must[[]*gg.Node](t)(emb.Nodes())
	OK(t, nodes[0].SetParams(SetAt(p, 0, 20)))
	e2 := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, e2.Launch(s))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 2), 20, 3)
	// second itself is unchanged.
	kp := Must[gg.NodeParams](t)(Must[[]*gg.Node](t)(second.Nodes())[0].Params()).(gg.KernelParams)
	if kp.Args[2] != uint32(2) {
		t.Fatalf("the source graph changed: %v", kp.Args)
	}
}
