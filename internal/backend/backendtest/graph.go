package backendtest

import (
	"errors"
	"sync"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Scenarios of graphs, streams and events: order, child graphs, invalid
// calls, node parameters.

func graphOrder(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	g := NewGraph(t, d)
	var mu sync.Mutex
	var order []int
	note := func(i int) func() { return func() { mu.Lock(); order = append(order, i); mu.Unlock() } }
	n0 := Must[*gg.Node](t)(g.AddHostNode(note(0)))
	n1 := Must[*gg.Node](t)(g.AddKernelNode(kp(KA), n0))
	n2 := Must[*gg.Node](t)(g.AddHostNode(note(2), n1))
	child := NewGraph(t, d)
	Must[*gg.Node](t)(child.AddHostNode(note(3)))
	n3 := Must[*gg.Node](t)(g.AddChildGraphNode(child, n2))
	Must[*gg.Node](t)(g.AddHostNode(note(4), n3))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, e.Launch(s))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	want := []int{0, 2, 3, 4, 0, 2, 3, 4}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

func eventsAcrossStreams(t *testing.T, d *gg.Device) {
	a, b := NewStream(t, d), NewStream(t, d)
	e := Must[*gg.Event](t)(d.NewEvent(0))
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	note := func(x string) func() { return func() { mu.Lock(); order = append(order, x); mu.Unlock() } }
	OK(t, a.LaunchHostFunc(func() { <-release }))
	OK(t, a.LaunchHostFunc(note("a")))
	OK(t, a.Record(e))
	OK(t, b.Wait(e))
	OK(t, b.LaunchHostFunc(note("b")))
	IsCode(t, e.Query(), gg.ErrNotReady)
	IsCode(t, b.Query(), gg.ErrNotReady)
	close(release)
	OK(t, b.Synchronize())
	OK(t, e.Query())
	if len(order) != 2 || order[0] != "a" || order[1] != "b" {
		t.Fatalf("order %v", order)
	}
}

func invalidCalls(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(256))
	IsCode(t, s.Memcpy(gg.HtoD(p, make([]byte, 257))), gg.ErrInvalidValue)
	IsCode(t, s.LaunchKernel(gg.KernelParams{Kernel: KA, Grid: gg.Dim3{}, Block: one}), gg.ErrInvalidConfiguration)
	IsCode(t, d.Free(p+1), gg.ErrInvalidValue)
	g := NewGraph(t, d)
	a := Must[*gg.Node](t)(g.AddEmptyNode())
	b := Must[*gg.Node](t)(g.AddEmptyNode(a))
	IsCode(t, g.AddDependency(b, a), gg.ErrInvalidValue)
	IsCode(t, g.AddDependency(a, b), gg.ErrInvalidValue)
	OK(t, d.Free(p))
	OK(t, s.Synchronize())
}

// streamLaunchRechecks: every stream launch is checked, also one of the
// kernel and configuration the stream launched last, whose checked
// lowering the stream reuses (Stream.launchKernel): wrong argument counts
// and types, a changed configuration and another kernel are refused, and a
// refusal does not disturb the next launch; the arguments of every launch
// reach its kernel.
func streamLaunchRechecks(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	set := func(grid gg.Dim3, i int, v uint32) error { return s.Launch(setU32, grid, one, p, i, v) }
	OK(t, set(one, 0, 10))
	OK(t, set(one, 1, 11)) // the same kernel and configuration: new arguments
	for _, c := range []struct {
		name string
		err  error
		code *gg.Code
	}{
		{"too few arguments", s.Launch(setU32, one, one, p, 0), gg.ErrInvalidValue},
		{"too many arguments", s.Launch(setU32, one, one, p, 0, uint32(1), 2), gg.ErrInvalidValue},
		{"no arguments", s.Launch(setU32, one, one), gg.ErrInvalidValue},
		{"an argument of the wrong type", s.Launch(setU32, one, one, p, 0, "x"), gg.ErrInvalidValue},
		{"an empty grid", set(gg.Dim3{}, 0, 1), gg.ErrInvalidConfiguration},
		{"negative shared memory", s.LaunchKernel(gg.KernelParams{Kernel: setU32, Grid: one, Block: one, SharedMem: -1, Args: []any{p, 0, uint32(1)}}), gg.ErrInvalidValue},
		{"a nil kernel", s.Launch(nil, one, one), gg.ErrInvalidDeviceFunction},
		{"arguments to a kernel without parameters", s.Launch(KA, one, one, 1), gg.ErrInvalidValue},
	} {
		if !errors.Is(c.err, c.code) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.code)
		}
		OK(t, set(one, 2, 12)) // and the same launch as before still runs
	}
	OK(t, set(gg.Dim1(2), 3, 13))
	OK(t, s.Launch(KA, one, one))
	OK(t, s.Launch(KA, one, one))
	IsCode(t, s.Launch(KA, one, one, p), gg.ErrInvalidValue)
	OK(t, set(one, 4, 14))
	OK(t, set(one, 5, 15))
	OK(t, s.Synchronize())
	equalU32(t, ReadU32(t, d, p, 6), 10, 11, 12, 13, 14, 15)
}

// setParams: a node's new parameters reach later
// instantiations, not executable graphs made before.
func setParams(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	g := NewGraph(t, d)
	n := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p, 1, 16)))
	e1 := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, n.SetParams(gg.Memset32(p, 2, 16)))
	IsCode(t, n.SetParams(gg.Memset32(p, 2, 17)), gg.ErrInvalidValue)
	IsCode(t, n.SetParams(gg.EmptyParams{}), gg.ErrInvalidValue)
	e2 := Must[*gg.Exec](t)(g.Instantiate(0))
	read := func() uint32 {
		out := make([]uint32, 16)
		OK(t, d.Memcpy(gg.DtoH(gg.Bytes(out), p)))
		return out[15]
	}
	OK(t, e1.Launch(s))
	OK(t, s.Synchronize())
	if v := read(); v != 1 {
		t.Fatalf("the executable graph made before SetParams wrote %d, want 1", v)
	}
	OK(t, e2.Launch(s))
	OK(t, s.Synchronize())
	if v := read(); v != 2 {
		t.Fatalf("the executable graph made after SetParams wrote %d, want 2", v)
	}
	if got := Must[gg.NodeParams](t)(n.Params()); got != gg.NodeParams(gg.Memset32(p, 2, 16)) {
		t.Fatalf("params %+v", got)
	}
}

// editEmbeddedGraph: the graph embedded in a child graph node
// belongs to the node, and edits of it change what the node runs.
func editEmbeddedGraph(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	var mu sync.Mutex
	var ran []string
	note := func(x string) func() { return func() { mu.Lock(); ran = append(ran, x); mu.Unlock() } }
	child := NewGraph(t, d)
	Must[*gg.Node](t)(child.AddHostNode(note("first")))
	g := NewGraph(t, d)
	cn := Must[*gg.Node](t)(g.AddChildGraphNode(child, Must[*gg.Node](t)(g.AddEmptyNode())))
	Must[*gg.Node](t)(child.AddHostNode(note("not in the node"))) // the original is the caller's
	emb := Must[*gg.Graph](t)(cn.ChildGraph())
	first := Must[[]*gg.Node](t)(emb.Nodes())[0]
	Must[*gg.Node](t)(emb.AddHostNode(note("second"), first))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	if len(ran) != 2 || ran[0] != "first" || ran[1] != "second" {
		t.Fatalf("ran %v, want [first second]", ran)
	}
}
