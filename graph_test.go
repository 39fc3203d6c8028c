package gpugraph_test

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

var update = flag.Bool("update", false, "rewrite golden files")

func edges(t *testing.T, g *gg.Graph) []gg.Edge { return must[[]gg.Edge](t)(g.Edges()) }

func TestNodeTypesAndParams(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	e := must[*gg.Event](t)(d.NewEvent(0))
	child := graph(t, d)
	must[*gg.Node](t)(child.AddEmptyNode())
	host := make([]byte, 64)
	kp := gg.KernelParams{Kernel: fill32, Grid: one, Block: gg.Dim1(16), Args: []any{p, float32(2), 16}}
	cases := []struct {
		params gg.NodeParams
		typ    gg.NodeType
	}{
		{kp, gg.NodeKernel},
		{gg.HtoD(p, host), gg.NodeMemcpy},
		{gg.Memset8(p, 1, 64), gg.NodeMemset},
		{gg.HostParams{Fn: func() {}}, gg.NodeHost},
		{gg.EmptyParams{}, gg.NodeEmpty},
		{gg.EventRecordParams{Event: e}, gg.NodeEventRecord},
		{gg.EventWaitParams{Event: e}, gg.NodeEventWait},
		{gg.ChildGraphParams{Graph: child}, gg.NodeChildGraph},
	}
	for _, tc := range cases {
		t.Run(tc.typ.String(), func(t *testing.T) {
			n := must[*gg.Node](t)(g.AddNode(tc.params))
			if n.Type() != tc.typ {
				t.Fatalf("type %v, want %v", n.Type(), tc.typ)
			}
			got := must[gg.NodeParams](t)(n.Params())
			switch tc.typ {
			case gg.NodeHost:
				if got.(gg.HostParams).Fn == nil {
					t.Fatal("host function lost")
				}
			case gg.NodeChildGraph:
				if got.(gg.ChildGraphParams).Graph == child {
					t.Fatal("child graph was not cloned")
				}
			default:
				if !reflect.DeepEqual(got, tc.params) {
					t.Fatalf("params %+v, want %+v", got, tc.params)
				}
			}
		})
	}
	// Params returns a copy: changing it does not change the node.
	n := must[*gg.Node](t)(g.AddKernelNode(kp))
	got := must[gg.NodeParams](t)(n.Params()).(gg.KernelParams)
	got.Args[1] = float32(99)
	again := must[gg.NodeParams](t)(n.Params()).(gg.KernelParams)
	if again.Args[1] != float32(2) {
		t.Fatal("Params exposed the node's argument slice")
	}
}

func TestAddNodeRejectsBadDependencies(t *testing.T) {
	d := open(t)
	g, other := graph(t, d), graph(t, d)
	a := must[*gg.Node](t)(g.AddEmptyNode())
	x := must[*gg.Node](t)(other.AddEmptyNode())
	dead := must[*gg.Node](t)(g.AddEmptyNode())
	ok(t, g.DestroyNode(dead))
	for name, deps := range map[string][]*gg.Node{
		"nil":            {nil},
		"foreign":        {x},
		"destroyed":      {dead},
		"listed twice":   {a, a},
		"one of many ok": {a, x},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := g.AddEmptyNode(deps...)
			isCode(t, err, gg.ErrInvalidValue)
			if ns := must[[]*gg.Node](t)(g.Nodes()); len(ns) != 1 {
				t.Fatalf("graph changed: %d nodes", len(ns))
			}
		})
	}
	var nilGraph *gg.Graph
	_, err := nilGraph.AddEmptyNode()
	isCode(t, err, gg.ErrInvalidValue)
	_, err = g.AddNode(nil)
	isCode(t, err, gg.ErrInvalidValue)
}

func TestDependencies(t *testing.T) {
	d := open(t)
	g, other := graph(t, d), graph(t, d)
	a := must[*gg.Node](t)(g.AddEmptyNode())
	b := must[*gg.Node](t)(g.AddEmptyNode(a))
	c := must[*gg.Node](t)(g.AddEmptyNode(a))
	dn := must[*gg.Node](t)(g.AddEmptyNode())
	x := must[*gg.Node](t)(other.AddEmptyNode())
	ok(t, g.AddDependencies(gg.Edge{From: b, To: dn}, gg.Edge{From: c, To: dn}))

	if deps := must[[]*gg.Node](t)(dn.Dependencies()); !reflect.DeepEqual(deps, []*gg.Node{b, c}) {
		t.Fatalf("dependencies of d: %v", deps)
	}
	if outs := must[[]*gg.Node](t)(a.Dependents()); !reflect.DeepEqual(outs, []*gg.Node{b, c}) {
		t.Fatalf("dependents of a: %v", outs)
	}
	if roots := must[[]*gg.Node](t)(g.RootNodes()); !reflect.DeepEqual(roots, []*gg.Node{a}) {
		t.Fatalf("roots: %v", roots)
	}
	before := edges(t, g)
	if len(before) != 4 {
		t.Fatalf("edges %v", before)
	}

	bad := []struct {
		name  string
		edges []gg.Edge
	}{
		{"self edge", []gg.Edge{{From: a, To: a}}},
		{"existing edge", []gg.Edge{{From: a, To: b}}},
		{"listed twice", []gg.Edge{{From: b, To: c}, {From: b, To: c}}},
		{"cycle", []gg.Edge{{From: dn, To: a}}},
		{"cycle in batch", []gg.Edge{{From: b, To: c}, {From: c, To: b}}},
		{"foreign node", []gg.Edge{{From: a, To: x}}},
		{"nil node", []gg.Edge{{From: nil, To: a}}},
		{"valid then invalid", []gg.Edge{{From: b, To: c}, {From: a, To: a}}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			isCode(t, g.AddDependencies(tc.edges...), gg.ErrInvalidValue)
			if after := edges(t, g); !reflect.DeepEqual(after, before) {
				t.Fatalf("edges changed by a failed call: %v", after)
			}
		})
	}
	isCode(t, g.RemoveDependencies(gg.Edge{From: b, To: c}), gg.ErrInvalidValue)
	isCode(t, g.RemoveDependencies(gg.Edge{From: a, To: b}, gg.Edge{From: b, To: c}), gg.ErrInvalidValue)
	if after := edges(t, g); !reflect.DeepEqual(after, before) {
		t.Fatalf("failed remove changed edges: %v", after)
	}
	ok(t, g.RemoveDependencies(gg.Edge{From: a, To: b}))
	if roots := must[[]*gg.Node](t)(g.RootNodes()); !reflect.DeepEqual(roots, []*gg.Node{a, b}) {
		t.Fatalf("roots after remove: %v", roots)
	}
}

func TestDestroyNode(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddEmptyNode())
	b := must[*gg.Node](t)(g.AddEmptyNode(a))
	c := must[*gg.Node](t)(g.AddEmptyNode(b))
	ok(t, g.DestroyNode(b))
	if es := edges(t, g); len(es) != 0 {
		t.Fatalf("edges of destroyed node remain: %v", es)
	}
	for _, err := range []error{
		g.DestroyNode(b),
		g.AddDependency(a, b),
		b.SetParams(gg.EmptyParams{}),
	} {
		isCode(t, err, gg.ErrInvalidValue)
	}
	_, err := b.Dependencies()
	isCode(t, err, gg.ErrInvalidValue)
	_, err = b.Params()
	isCode(t, err, gg.ErrInvalidValue)
	if roots := must[[]*gg.Node](t)(g.RootNodes()); len(roots) != 2 || roots[1] != c {
		t.Fatalf("roots %v", roots)
	}
}

func TestSetParams(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	n := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(p, 1, 64)))
	isCode(t, n.SetParams(gg.EmptyParams{}), gg.ErrInvalidValue)     // another type
	isCode(t, n.SetParams(gg.Memset8(p, 1, 65)), gg.ErrInvalidValue) // out of range
	isCode(t, n.SetParams(nil), gg.ErrInvalidValue)
	if got := must[gg.NodeParams](t)(n.Params()); got != gg.NodeParams(gg.Memset8(p, 1, 64)) {
		t.Fatalf("failed SetParams changed the node: %+v", got)
	}
	ok(t, n.SetParams(gg.Memset8(p, 2, 32)))
	if got := must[gg.NodeParams](t)(n.Params()); got != gg.NodeParams(gg.Memset8(p, 2, 32)) {
		t.Fatalf("SetParams did not apply: %+v", got)
	}
}

func TestGraphDestroy(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	n := must[*gg.Node](t)(g.AddEmptyNode())
	ok(t, g.Destroy())
	_, err := g.AddEmptyNode()
	isCode(t, err, gg.ErrInvalidValue)
	_, err = n.Dependents()
	isCode(t, err, gg.ErrInvalidValue)
	_, err = g.Instantiate(0)
	isCode(t, err, gg.ErrInvalidValue)
	isCode(t, g.Destroy(), gg.ErrInvalidValue)
}

func TestCloneAndClonedNode(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	inner := graph(t, d)
	i0 := must[*gg.Node](t)(inner.AddEmptyNode())
	a := must[*gg.Node](t)(g.AddEmptyNode())
	b := must[*gg.Node](t)(g.AddChildGraphNode(inner, a))
	c := must[*gg.Node](t)(g.AddHostNode(func() {}, a, b))
	cl := must[*gg.Graph](t)(g.Clone())
	if !gg.StructurallyEqual(g, cl) {
		t.Fatal("clone differs in structure")
	}
	for _, n := range []*gg.Node{a, b, c} {
		m := must[*gg.Node](t)(cl.ClonedNode(n))
		if m == n || m.Type() != n.Type() || m.ID() != n.ID() || m.Graph() != cl {
			t.Fatalf("ClonedNode(%v) = %v", n, m)
		}
	}
	_, err := cl.ClonedNode(i0) // i0 is in inner, which b holds a copy of
	isCode(t, err, gg.ErrInvalidValue)
	_, err = g.ClonedNode(a) // g is not a clone
	isCode(t, err, gg.ErrInvalidValue)
	// The clone is independent.
	must[*gg.Node](t)(cl.AddEmptyNode(must[*gg.Node](t)(cl.ClonedNode(c))))
	if len(must[[]*gg.Node](t)(g.Nodes())) != 3 {
		t.Fatal("editing the clone changed the original")
	}
	if gg.StructurallyEqual(g, cl) {
		t.Fatal("graphs of different structure compare equal")
	}
}

func TestChildGraphIsClonedAtAdd(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	child := graph(t, d)
	must[*gg.Node](t)(child.AddEmptyNode())
	n := must[*gg.Node](t)(g.AddChildGraphNode(child))
	must[*gg.Node](t)(child.AddEmptyNode()) // after the add: not in the node
	emb := must[*gg.Graph](t)(n.ChildGraph())
	if k := len(must[[]*gg.Node](t)(emb.Nodes())); k != 1 {
		t.Fatalf("embedded graph has %d nodes, want 1", k)
	}
	must[*gg.Node](t)(emb.AddEmptyNode()) // the embedded graph is the node's
	if k := len(must[[]*gg.Node](t)(must[*gg.Graph](t)(n.ChildGraph()).Nodes())); k != 2 {
		t.Fatalf("embedded graph edit not reflected: %d nodes", k)
	}
	isCode(t, emb.Destroy(), gg.ErrInvalidValue)
	_, err := g.AddChildGraphNode(g)
	isCode(t, err, gg.ErrInvalidValue)
	_, err = g.AddChildGraphNode(nil)
	isCode(t, err, gg.ErrInvalidValue)
	other := open(t)
	_, err = g.AddChildGraphNode(graph(t, other))
	isCode(t, err, gg.ErrInvalidValue)
	_, err = n.ChildGraph()
	ok(t, err)
	_, err = must[*gg.Node](t)(g.AddEmptyNode()).ChildGraph()
	isCode(t, err, gg.ErrInvalidValue)
}

func TestWriteDOT(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(1024))
	cp := must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(p, make([]byte, 1024))))
	k1 := must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: fill32, Grid: gg.Dim1(2), Block: gg.Dim1(128), Args: []any{p, float32(1), 256}}, cp))
	child := graph(t, d)
	c0 := must[*gg.Node](t)(child.AddMemsetNode(gg.Memset32(p, 0, 256)))
	must[*gg.Node](t)(child.AddEmptyNode(c0))
	k2 := must[*gg.Node](t)(g.AddChildGraphNode(child, cp))
	must[*gg.Node](t)(g.AddHostNode(func() {}, k1, k2))
	var buf bytes.Buffer
	ok(t, g.WriteDOT(&buf))
	golden := "testdata/graph.dot"
	if *update {
		ok(t, os.WriteFile(golden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	ok(t, err)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("DOT output differs from %s (run with -update):\n%s", golden, buf.String())
	}
}

func TestDestroyReachesEmbeddedGraphs(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	child := graph(t, d)
	must[*gg.Node](t)(child.AddEmptyNode())
	n := must[*gg.Node](t)(g.AddChildGraphNode(child))
	emb := must[*gg.Graph](t)(n.ChildGraph())
	ok(t, g.Destroy())
	_, err := emb.AddEmptyNode()
	isCode(t, err, gg.ErrInvalidValue)
	must[*gg.Node](t)(child.AddEmptyNode()) // the original is the caller's
}
