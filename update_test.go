package gpugraph_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

func equalU32(t testing.TB, got []uint32, want ...uint32) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
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

// TestUpdateMemoryNodesNewGraphHasExec: an update to a graph with memory
// nodes that has an executable graph already is refused, UpdateErrorNotSupported,
// and changes nothing; once that executable graph is destroyed it succeeds.
// (The host backend's choice: the driver's answer is not measured.)
func TestUpdateMemoryNodesNewGraphHasExec(t *testing.T) {
	d := open(t)
	build := func() *gg.Graph {
		g := graph(t, d)
		a, ptr := must2(t)(g.AddMemAllocNode(gg.MemAllocParams{Size: 1 << 20}))
		must[*gg.Node](t)(g.AddMemFreeNode(ptr, a))
		return g
	}
	ga, gb := build(), build()
	e := must[*gg.Exec](t)(ga.Instantiate(0))
	eb := must[*gg.Exec](t)(gb.Instantiate(0))
	res, err := e.Update(gb)
	if !errors.Is(err, gg.ErrGraphExecUpdateFailure) || res.Result != gg.UpdateErrorNotSupported || res.ErrorNode != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := ga.Instantiate(0); !errors.Is(err, gg.ErrNotSupported) {
		t.Fatalf("A after the refused update: %v", err)
	}
	ok(t, eb.Destroy())
	if res, err := e.Update(gb); err != nil || res.Result != gg.UpdateSuccess {
		t.Fatalf("%+v %v", res, err)
	}
	eb = must[*gg.Exec](t)(ga.Instantiate(0))
	ok(t, eb.Destroy())
	ok(t, e.Destroy())
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

// TestExecRecordsFollowUpdates: a launch marks the events its record nodes
// record, as they are after Update and SetParams, so that a capture
// waiting on one asks for WaitExternal (ErrStreamCaptureIsolation) instead
// of dropping the dependency as for an event never recorded.
func TestExecRecordsFollowUpdates(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	ev := func() *gg.Event { return must[*gg.Event](t)(d.NewEvent(0)) }
	// recordGraph: a record node of e, in a child graph when nested.
	recordGraph := func(e *gg.Event, nested bool) (*gg.Graph, *gg.Node) {
		g := must[*gg.Graph](t)(d.NewGraph())
		if !nested {
			return g, must[*gg.Node](t)(g.AddEventRecordNode(e))
		}
		c := must[*gg.Graph](t)(d.NewGraph())
		must[*gg.Node](t)(c.AddEventRecordNode(e))
		return g, must[*gg.Node](t)(g.AddChildGraphNode(c))
	}
	cases := []struct {
		name   string
		nested bool
		change func(x *gg.Exec, n *gg.Node, to *gg.Event) error
	}{
		{"Update", false, func(x *gg.Exec, _ *gg.Node, to *gg.Event) error {
			g, _ := recordGraph(to, false)
			_, err := x.Update(g)
			return err
		}},
		{"Update of a child graph", true, func(x *gg.Exec, _ *gg.Node, to *gg.Event) error {
			g, _ := recordGraph(to, true)
			_, err := x.Update(g)
			return err
		}},
		{"SetParams", false, func(x *gg.Exec, n *gg.Node, to *gg.Event) error {
			return x.SetParams(n, gg.EventRecordParams{Event: to})
		}},
		{"SetParams of a child graph node", true, func(x *gg.Exec, n *gg.Node, to *gg.Event) error {
			c := must[*gg.Graph](t)(d.NewGraph())
			must[*gg.Node](t)(c.AddEventRecordNode(to))
			return x.SetParams(n, gg.ChildGraphParams{Graph: c})
		}},
		{"SetParams after Update", false, func(x *gg.Exec, n *gg.Node, to *gg.Event) error {
			g, _ := recordGraph(ev(), false)
			if _, err := x.Update(g); err != nil {
				return err
			}
			return x.SetParams(n, gg.EventRecordParams{Event: to})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := ev()
			g, n := recordGraph(from, tc.nested)
			x := must[*gg.Exec](t)(g.Instantiate(0))
			to := ev()
			ok(t, tc.change(x, n, to))
			ok(t, x.Launch(s))
			ok(t, s.Synchronize())
			capS := stream(t, d)
			ok(t, capS.BeginCapture(gg.CaptureModeGlobal))
			if tc.name != "SetParams after Update" { // marks from too (setRecordParams)
				ok(t, capS.Wait(from)) // never recorded: nothing to wait for
			}
			isCode(t, capS.Wait(to), gg.ErrStreamCaptureIsolation)
			_, err := capS.EndCapture()
			isCode(t, err, gg.ErrStreamCaptureInvalidated)
		})
	}
}

// TestUpdateMemoryNodesFootprint: an executable graph updated back and forth
// between a 4 MiB and an 8 MiB graph in one stream, launched after each
// update, keeps the footprint of the larger one (the arena is shared), and a
// trim returns all of it. (Host backend; the driver's figures are not
// measured.)
func TestUpdateMemoryNodesFootprint(t *testing.T) {
	d := open(t)
	s := must[*gg.Stream](t)(d.NewStream())
	build := func(size int) *gg.Graph {
		g := graph(t, d)
		a, ptr := must2(t)(g.AddMemAllocNode(gg.MemAllocParams{Size: size}))
		m := must[*gg.Node](t)(g.AddKernelNode(setAt(ptr, 0, uint32(size)), a))
		must[*gg.Node](t)(g.AddMemFreeNode(ptr, m))
		return g
	}
	ga, gb := build(4<<20), build(8<<20)
	e := must[*gg.Exec](t)(ga.Instantiate(0))
	for i := range 6 {
		g := ga
		if i%2 == 0 {
			g = gb
		}
		if _, err := e.Update(g); err != nil {
			t.Fatal(err)
		}
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		st := must[gg.GraphMemStats](t)(d.GraphMemStats())
		if st.UsedCurrent != 8<<20 || st.ReservedCurrent != 8<<20 || st.UsedHigh != 8<<20 {
			t.Fatalf("after update %d and a launch: %+v, want 8 MiB used and reserved", i, st)
		}
	}
	ok(t, d.TrimGraphMem())
	if st := must[gg.GraphMemStats](t)(d.GraphMemStats()); st.UsedCurrent != 0 || st.ReservedCurrent != 0 {
		t.Fatalf("after trim: %+v", st)
	}
	ok(t, e.Destroy())
}
