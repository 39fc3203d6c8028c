package gpugraph_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

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

func setAt(p gg.DevicePtr, i int, v uint32) gg.KernelParams {
	return gg.KernelParams{Kernel: setU32, Grid: one, Block: one, Args: []any{p, i, v}}
}

func readU32(t testing.TB, d *gg.Device, p gg.DevicePtr, n int) []uint32 {
	t.Helper()
	b := make([]byte, 4*n)
	ok(t, d.Memcpy(gg.DtoH(b, p)))
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

// chainOf builds a chain of set_u32 nodes writing vals[i] to p[i].
func chainOf(t testing.TB, d *gg.Device, p gg.DevicePtr, vals ...uint32) (*gg.Graph, []*gg.Node) {
	g := graph(t, d)
	var nodes []*gg.Node
	var prev []*gg.Node
	for i, v := range vals {
		n := must[*gg.Node](t)(g.AddKernelNode(setAt(p, i, v), prev...))
		nodes = append(nodes, n)
		prev = []*gg.Node{n}
	}
	return g, nodes
}

func TestConformanceWholeGraphUpdate(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(64))
		g1, _ := chainOf(t, d, p, 1, 2, 3)
		e := must[*gg.Exec](t)(g1.Instantiate(0))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		equalU32(t, readU32(t, d, p, 3), 1, 2, 3)

		// The capture-and-update loop of the programming guide.
		for it := uint32(1); it <= 3; it++ {
			ok(t, s.BeginCapture(gg.CaptureModeGlobal))
			for i := 0; i < 3; i++ {
				ok(t, s.Launch(setU32, one, one, p, i, 10*it+uint32(i)))
			}
			g := must[*gg.Graph](t)(s.EndCapture())
			res, err := e.Update(g)
			if err != nil || res.Result != gg.UpdateSuccess {
				t.Fatalf("update %d: %v %v", it, res, err)
			}
			ok(t, e.Launch(s))
			ok(t, s.Synchronize())
			equalU32(t, readU32(t, d, p, 3), 10*it, 10*it+1, 10*it+2)
		}

		// A graph of another shape is refused and changes nothing.
		g2, _ := chainOf(t, d, p, 7, 7)
		res, err := e.Update(g2)
		if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateErrorTopologyChanged || res.ErrorNode != nil {
			t.Fatalf("fewer nodes: %+v, %v", res, err)
		}
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		equalU32(t, readU32(t, d, p, 3), 30, 31, 32)
	})
}

func TestConformanceUpdateRefusals(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		p := must[gg.DevicePtr](t)(d.Malloc(4096))
		base := func() *gg.Graph { g, _ := chainOf(t, d, p, 1, 2); return g }
		e := must[*gg.Exec](t)(base().Instantiate(0))

		host := make([]byte, 16)
		cases := []struct {
			name  string
			build func() *gg.Graph
			want  gg.UpdateResult
			node  int // index (in creation order) of the node the result names; -1 none
		}{
			{"extra sink", func() *gg.Graph {
				g := graph(t, d)
				a := must[*gg.Node](t)(g.AddKernelNode(setAt(p, 0, 1)))
				_ = a
				must[*gg.Node](t)(g.AddKernelNode(setAt(p, 1, 2)))
				return g
			}, gg.UpdateErrorTopologyChanged, 0},
			{"node type", func() *gg.Graph {
				g := graph(t, d)
				a := must[*gg.Node](t)(g.AddKernelNode(setAt(p, 0, 1)))
				must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p, 0, 4), a))
				return g
			}, gg.UpdateErrorNodeTypeChanged, 1},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				g := c.build()
				nodes := must[[]*gg.Node](t)(g.Nodes())
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
		g := graph(t, d)
		cp := must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(p+1024, p, 16)))
		ms := must[*gg.Node](t)(g.AddMemsetNode(gg.MemsetParams{Dst: p, Value: 1, ElementSize: 1, Width: 8, Height: 2, Pitch: 64}, cp))
		e2 := must[*gg.Exec](t)(g.Instantiate(0))
		isCode(t, e2.SetParams(cp, gg.DtoH(host, p)), gg.ErrInvalidValue)
		isCode(t, e2.SetParams(ms, gg.MemsetParams{Dst: p, Value: 1, ElementSize: 1, Width: 16, Height: 2, Pitch: 64}), gg.ErrInvalidValue)
		ok(t, e2.SetParams(ms, gg.MemsetParams{Dst: p + 512, Value: 7, ElementSize: 1, Width: 8, Height: 2, Pitch: 64}))
		ok(t, e2.SetParams(cp, gg.DtoD(p+2048, p, 32)))

		g3 := graph(t, d)
		cp3 := must[*gg.Node](t)(g3.AddMemcpyNode(gg.HtoD(p, host)))
		must[*gg.Node](t)(g3.AddMemsetNode(gg.MemsetParams{Dst: p, Value: 1, ElementSize: 1, Width: 8, Height: 2, Pitch: 64}, cp3))
		res, err := e2.Update(g3)
		if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateErrorParametersChanged || res.ErrorNode != cp3 {
			t.Fatalf("memcpy kind change: %+v %v", res, err)
		}
	})
}

func TestConformanceExecNodeSetParams(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(64))
		g, nodes := chainOf(t, d, p, 1, 2)
		var hostRuns []string
		h := must[*gg.Node](t)(g.AddHostNode(func() { hostRuns = append(hostRuns, "old") }, nodes[1]))
		ms := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p+16, 5, 2), h))
		child := graph(t, d)
		must[*gg.Node](t)(child.AddKernelNode(setAt(p, 8, 80)))
		cn := must[*gg.Node](t)(g.AddChildGraphNode(child, ms))
		e := must[*gg.Exec](t)(g.Instantiate(0))

		ok(t, e.SetParams(nodes[0], setAt(p, 0, 100)))
		ok(t, e.SetParams(h, gg.HostParams{Fn: func() { hostRuns = append(hostRuns, "new") }}))
		ok(t, e.SetParams(ms, gg.Memset32(p+16, 9, 2)))
		child2 := graph(t, d)
		must[*gg.Node](t)(child2.AddKernelNode(setAt(p, 8, 88)))
		ok(t, e.SetParams(cn, gg.ChildGraphParams{Graph: child2}))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		got := readU32(t, d, p, 9)
		equalU32(t, got, 100, 2, 0, 0, 9, 9, 0, 0, 88)
		if fmt.Sprint(hostRuns) != "[new]" {
			t.Fatalf("host runs %v", hostRuns)
		}
		// The graph itself is unchanged.
		kp := must[gg.NodeParams](t)(nodes[0].Params()).(gg.KernelParams)
		if kp.Args[2] != uint32(1) {
			t.Fatalf("graph node changed: %v", kp.Args)
		}

		// Refusals leave e as it was.
		other := graph(t, d)
		foreign := must[*gg.Node](t)(other.AddKernelNode(setAt(p, 0, 5)))
		isCode(t, e.SetParams(foreign, setAt(p, 0, 5)), gg.ErrInvalidValue)
		isCode(t, e.SetParams(nodes[0], gg.Memset32(p, 0, 1)), gg.ErrInvalidValue)
		twoNodes := graph(t, d)
		a := must[*gg.Node](t)(twoNodes.AddKernelNode(setAt(p, 8, 1)))
		must[*gg.Node](t)(twoNodes.AddKernelNode(setAt(p, 8, 2), a))
		isCode(t, e.SetParams(cn, gg.ChildGraphParams{Graph: twoNodes}), gg.ErrGraphExecUpdateFailure)
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		equalU32(t, readU32(t, d, p, 9), 100, 2, 0, 0, 9, 9, 0, 0, 88)
	})
}

func TestConformanceSetEnabled(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(64))
		g, nodes := chainOf(t, d, p, 1, 2)
		h := must[*gg.Node](t)(g.AddHostNode(func() {}, nodes[1]))
		e := must[*gg.Exec](t)(g.Instantiate(0))

		on := must[bool](t)(e.Enabled(nodes[0]))
		if !on {
			t.Fatal("nodes start enabled")
		}
		ok(t, e.SetEnabled(nodes[0], false))
		if must[bool](t)(e.Enabled(nodes[0])) {
			t.Fatal("still enabled")
		}
		// An update while disabled applies once enabled again, and does not
		// enable the node.
		ok(t, e.SetParams(nodes[0], setAt(p, 0, 50)))
		ok(t, d.Memset(gg.Memset32(p, 0, 4)))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		equalU32(t, readU32(t, d, p, 2), 0, 2)

		g2, _ := chainOf(t, d, p, 60, 3)
		must[*gg.Node](t)(g2.AddHostNode(func() {}, must[[]*gg.Node](t)(g2.Nodes())[1]))
		res, err := e.Update(g2)
		if err != nil {
			t.Fatal(res, err)
		}
		if must[bool](t)(e.Enabled(nodes[0])) {
			t.Fatal("an update enabled the node")
		}
		ok(t, e.SetEnabled(nodes[0], true))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		equalU32(t, readU32(t, d, p, 2), 60, 3)

		isCode(t, e.SetEnabled(h, false), gg.ErrInvalidValue)
		_, err = e.Enabled(h)
		isCode(t, err, gg.ErrInvalidValue)
	})
}

// An update never changes a launch already queued.
func TestUpdateSparesQueuedLaunch(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	out := must[gg.DevicePtr](t)(d.Malloc(64))
	g, nodes := chainOf(t, d, p, 1)
	must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(out, p, 4), nodes[0]))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	gate := make(chan struct{})
	ok(t, s.LaunchHostFunc(func() { <-gate }))
	ok(t, e.Launch(s)) // queued behind the gate with value 1
	ok(t, e.SetParams(nodes[0], setAt(p, 0, 2)))
	ok(t, e.SetEnabled(nodes[0], true))
	ok(t, s.Memcpy(gg.DtoD(out+4, out, 4)))
	ok(t, e.Launch(s)) // value 2
	close(gate)
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, out, 2), 2, 1)
}

func TestUpdateAtomicOnFailure(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	build := func(v uint32, cp gg.MemcpyParams) (*gg.Graph, *gg.Node) {
		g := graph(t, d)
		a := must[*gg.Node](t)(g.AddKernelNode(setAt(p, 0, v)))
		c := must[*gg.Node](t)(g.AddMemcpyNode(cp, a))
		return g, c
	}
	g, _ := build(1, gg.DtoD(p+4, p, 4))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	// The copy's new source has been freed: nothing is applied, not even
	// the kernel's valid change.
	q := must[gg.DevicePtr](t)(d.Malloc(64))
	g2, bad := build(9, gg.DtoD(p+4, q, 4))
	ok(t, d.Free(q))
	res, err := e.Update(g2)
	if err == nil || res.Result == gg.UpdateSuccess || res.ErrorNode != bad {
		t.Fatalf("update with freed memory: %+v %v", res, err)
	}
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, p, 2), 1, 1)
}

func TestUpdateArguments(t *testing.T) {
	d := open(t)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	g, nodes := chainOf(t, d, p, 1)
	e := must[*gg.Exec](t)(g.Instantiate(0))
	_, err := e.Update(nil)
	isCode(t, err, gg.ErrInvalidValue)
	d2 := open(t)
	_, err = e.Update(graph(t, d2))
	isCode(t, err, gg.ErrInvalidValue)
	isCode(t, e.SetParams(nil, setAt(p, 0, 1)), gg.ErrInvalidValue)
	isCode(t, e.SetParams(nodes[0], nil), gg.ErrInvalidValue)
	isCode(t, e.SetEnabled(nil, true), gg.ErrInvalidValue)
	ok(t, e.Destroy())
	_, err = e.Update(g)
	isCode(t, err, gg.ErrInvalidResourceHandle)
	isCode(t, e.SetParams(nodes[0], setAt(p, 0, 1)), gg.ErrInvalidResourceHandle)
}

// Sinks pair in the order they became sinks, dependencies in edge order:
// two graphs built by the same calls pair node for node even when their
// nodes are interchangeable, and a removed edge makes a later sink.
func TestUpdatePairingOrder(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	build := func(v uint32) (*gg.Graph, []*gg.Node) {
		g := graph(t, d)
		root := must[*gg.Node](t)(g.AddEmptyNode())
		a := must[*gg.Node](t)(g.AddKernelNode(setAt(p, 0, v), root))
		b := must[*gg.Node](t)(g.AddKernelNode(setAt(p, 1, v+1), root))
		c := must[*gg.Node](t)(g.AddEmptyNode(a))
		ok(t, g.RemoveDependencies(gg.Edge{From: a, To: c})) // a is a sink again, after b
		ok(t, g.AddDependency(root, c))
		return g, []*gg.Node{a, b, c}
	}
	g1, n1 := build(1)
	e := must[*gg.Exec](t)(g1.Instantiate(0))
	g2, _ := build(10)
	if _, err := e.Update(g2); err != nil {
		t.Fatal(err)
	}
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, p, 2), 10, 11)
	// The node of g1 still names its op after the update.
	ok(t, e.SetParams(n1[0], setAt(p, 0, 99)))
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, p, 2), 99, 11)

	// The same graph built without the removed edge has its sinks in
	// creation order (a, b, c instead of b, c, a): an empty node then
	// pairs with a kernel node.
	g3 := graph(t, d)
	root := must[*gg.Node](t)(g3.AddEmptyNode())
	must[*gg.Node](t)(g3.AddKernelNode(setAt(p, 0, 1), root))
	b := must[*gg.Node](t)(g3.AddKernelNode(setAt(p, 1, 2), root))
	must[*gg.Node](t)(g3.AddEmptyNode(root))
	res, err := e.Update(g3)
	if res.Result != gg.UpdateErrorNodeTypeChanged || res.ErrorNode != b || !errors.Is(err, gg.ErrGraphExecUpdateFailure) {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestUpdateMemoryNodesNotSupported(t *testing.T) {
	d := open(t)
	build := func() *gg.Graph {
		g := graph(t, d)
		a, ptr := must2(t)(g.AddMemAllocNode(gg.MemAllocParams{Size: 1 << 20}))
		must[*gg.Node](t)(g.AddMemFreeNode(ptr, a))
		return g
	}
	e := must[*gg.Exec](t)(build().Instantiate(0))
	g := build()
	res, err := e.Update(g)
	if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateErrorNotSupported {
		t.Fatalf("%+v %v", res, err)
	}
}

func must2(t testing.TB) func(*gg.Node, gg.DevicePtr, error) (*gg.Node, gg.DevicePtr) {
	return func(n *gg.Node, p gg.DevicePtr, err error) (*gg.Node, gg.DevicePtr) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n, p
	}
}

// A whole-graph update swaps the executable graph's user object references
// for those of the new graph (seed 003 §3.2.8.7.4).
func TestUpdateReplacesUserObjects(t *testing.T) {
	d := open(t)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	gone := make(chan string, 2)
	build := func(name string) *gg.Graph {
		g, _ := chainOf(t, d, p, 1)
		o := must[*gg.UserObject](t)(d.NewUserObject(func() { gone <- name }, 1, gg.UserObjectNoDestructorSync))
		ok(t, g.RetainUserObject(o, 1, gg.GraphUserObjectMove))
		return g
	}
	g1 := build("first")
	e := must[*gg.Exec](t)(g1.Instantiate(0))
	ok(t, g1.Destroy()) // e alone holds "first" now
	g2 := build("second")
	if _, err := e.Update(g2); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-gone:
		if name != "first" {
			t.Fatalf("destroyed %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced reference was never released")
	}
	ok(t, g2.Destroy())
	ok(t, e.Destroy())
	if name := <-gone; name != "second" {
		t.Fatalf("destroyed %q", name)
	}
}

// A whole-graph update takes the new graph's conditional handle defaults.
func TestUpdateConditionalDefaults(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	build := func(def uint32) *gg.Graph {
		g := graph(t, d)
		h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(def, gg.ConditionalAssignDefault))
		n := must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
		body := must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
		must[*gg.Node](t)(body.AddKernelNode(setAt(p, 0, 7)))
		return g
	}
	e := must[*gg.Exec](t)(build(0).Instantiate(0))
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, p, 1), 0)
	if _, err := e.Update(build(1)); err != nil {
		t.Fatal(err)
	}
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, p, 1), 7)

	// A conditional node of another type is a parameter change.
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, 0))
	must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 1}))
	res, err := e.Update(g)
	if res.Result != gg.UpdateErrorParametersChanged || !errors.Is(err, gg.ErrGraphExecUpdateFailure) {
		t.Fatalf("%+v %v", res, err)
	}
}

// Edge data is part of the topology update compares.
func TestUpdateEdgeDataIsTopology(t *testing.T) {
	d := open(t)
	build := func(data gg.EdgeData) *gg.Graph {
		g := graph(t, d)
		a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
		must[*gg.Node](t)(g.AddNodeWithEdgeData(kp(kB), []*gg.Node{a}, []gg.EdgeData{data}))
		return g
	}
	prog := gg.EdgeData{FromPort: gg.KernelNodePortProgrammatic, Type: gg.DependencyTypeProgrammatic}
	e := must[*gg.Exec](t)(build(gg.EdgeData{}).Instantiate(0))
	res, err := e.Update(build(prog))
	if res.Result != gg.UpdateErrorTopologyChanged || !errors.Is(err, gg.ErrGraphExecUpdateFailure) {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := e.Update(build(gg.EdgeData{})); err != nil {
		t.Fatal(err)
	}
}

// The number of semaphores of an external semaphore node cannot change.
func TestUpdateExtSemCount(t *testing.T) {
	d := open(t)
	a := must[*gg.ExternalSemaphore](t)(d.NewExternalSemaphore())
	b := must[*gg.ExternalSemaphore](t)(d.NewExternalSemaphore())
	g := graph(t, d)
	n := must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: []*gg.ExternalSemaphore{a}, Values: []uint64{1}}))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.SetParams(n, gg.ExtSemaphoreSignalParams{Semaphores: []*gg.ExternalSemaphore{b}, Values: []uint64{5}}))
	isCode(t, e.SetParams(n, gg.ExtSemaphoreSignalParams{Semaphores: []*gg.ExternalSemaphore{a, b}, Values: []uint64{1, 1}}), gg.ErrInvalidValue)
	s := stream(t, d)
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	if v := must[uint64](t)(b.Value()); v != 5 {
		t.Fatalf("b = %d, want 5", v)
	}
	if v := must[uint64](t)(a.Value()); v != 0 {
		t.Fatalf("a = %d, want 0", v)
	}
}

// A whole-graph update reaches the nodes of conditional bodies (CUDA: "subject
// to the rules above"), from the next launch on: a launch queued before the
// update runs the bodies as they were.
func TestConformanceUpdateConditionalBodies(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) { updateConditionalBodies(t, d) })
}

func updateConditionalBodies(t *testing.T, d *gg.Device) {
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	out := must[gg.DevicePtr](t)(d.Malloc(64))
	var bodyNode *gg.Node // of the last graph built
	build := func(v uint32) *gg.Graph {
		g := graph(t, d)
		h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		n := must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
		body := must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
		bodyNode = must[*gg.Node](t)(body.AddKernelNode(setAt(p, 0, v)))
		must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(out, p, 4), n))
		return g
	}
	e := must[*gg.Exec](t)(build(1).Instantiate(0))
	k := bodyNode
	gate := make(chan struct{})
	ok(t, s.LaunchHostFunc(func() { <-gate }))
	ok(t, e.Launch(s)) // queued: writes 1
	ok(t, s.Memcpy(gg.DtoD(out+4, out, 4)))
	if _, err := e.Update(build(7)); err != nil {
		t.Fatal(err)
	}
	ok(t, e.Launch(s)) // writes 7
	close(gate)
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, out, 2), 7, 1)

	// Exec.SetParams reaches the body's node as well.
	ok(t, e.SetParams(k, setAt(p, 0, 9)))
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, out, 1), 9)

	// A body of another shape is a topology change.
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	n := must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
	body := must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
	a := must[*gg.Node](t)(body.AddKernelNode(setAt(p, 0, 1)))
	must[*gg.Node](t)(body.AddKernelNode(setAt(p, 1, 1), a))
	must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(out, p, 4), n))
	res, err := e.Update(g)
	if res.Result != gg.UpdateErrorTopologyChanged || !errors.Is(err, gg.ErrGraphExecUpdateFailure) {
		t.Fatalf("%+v %v", res, err)
	}
}

// Exec.SetParams reaches a node of a conditional body too.
func TestExecSetParamsInConditionalBody(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	n := must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
	body := must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
	k := must[*gg.Node](t)(body.AddKernelNode(setAt(p, 0, 1)))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.SetParams(k, setAt(p, 0, 5)))
	isCode(t, e.SetParams(k, gg.Memset32(p, 0, 1)), gg.ErrInvalidValue)
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	equalU32(t, readU32(t, d, p, 1), 5)
}

// Node.SetParams gives a child graph node a new graph (a clone of it), on
// both backends; later instantiations run it, and it can be edited through
// the node like the one it replaced.
func TestConformanceSetChildGraph(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(64))
		g := graph(t, d)
		first, _ := chainOf(t, d, p, 1)
		cn := must[*gg.Node](t)(g.AddChildGraphNode(first))
		second, _ := chainOf(t, d, p, 2, 3)
		ok(t, cn.SetParams(gg.ChildGraphParams{Graph: second}))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		equalU32(t, readU32(t, d, p, 2), 2, 3)
		// The embedded graph is second's clone: edit it through the node.
		emb := must[*gg.Graph](t)(cn.ChildGraph())
		nodes := must[[]*gg.Node](t)(emb.Nodes())
		ok(t, nodes[0].SetParams(setAt(p, 0, 20)))
		e2 := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e2.Launch(s))
		ok(t, s.Synchronize())
		equalU32(t, readU32(t, d, p, 2), 20, 3)
		// second itself is unchanged.
		kp := must[gg.NodeParams](t)(must[[]*gg.Node](t)(second.Nodes())[0].Params()).(gg.KernelParams)
		if kp.Args[2] != uint32(2) {
			t.Fatalf("the source graph changed: %v", kp.Args)
		}
	})
}
