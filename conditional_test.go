package gpugraph_test

import (
	"bytes"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

func equal32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// launchSync launches e into s and waits.
func launchSync(t testing.TB, e *gg.Exec, s *gg.Stream) {
	t.Helper()
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
}

func TestConditionalIfElse(t *testing.T) {
	for _, size := range []int{1, 2} {
		ifElseScenario(t, open(t), size, []uint32{0, 1, 7, 0, 0xffffffff})
	}
}

// A WHILE node checks the value before the first iteration: with 0 the
// body never runs.
func TestConditionalWhileChecksFirst(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	ctr := newCondBuf(t, d, 2)
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, gg.ConditionalAssignDefault))
	_, bodies := addCond(t, g, h, gg.ConditionalWhile, 1)
	must[*gg.Node](t)(bodies[0].AddKernelNode(kp(condCountDown, h, ctr.At(0), ctr.At(1))))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ctr.Set(t, 5, 0)
	launchSync(t, e, s)
	if got := ctr.Get(t); !equal32(got, []int32{5, 0}) {
		t.Fatalf("counter, iterations = %v, want [5 0]", got)
	}
}

// With ConditionalAssignDefault the value is the default at every launch;
// without it the default is never applied: the value starts at 0 and keeps
// what kernels set from one launch to the next (CUDA leaves it undefined;
// this is what the H100 does, docs/driver-conditional.txt).
func TestConditionalDefaultResetVersusPersist(t *testing.T) {
	for _, c := range []struct {
		flags gg.ConditionalFlags
		want  []int32 // body runs after each of 3 launches
	}{
		{gg.ConditionalAssignDefault, []int32{1, 2, 3}},
		{0, []int32{0, 0, 0}},
	} {
		d := open(t)
		s := stream(t, d)
		marks := newCondBuf(t, d, 1)
		g := graph(t, d)
		h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, c.flags))
		n, bodies := addCond(t, g, h, gg.ConditionalIf, 1)
		must[*gg.Node](t)(bodies[0].AddKernelNode(kp(condMark, marks.P, 0, 1)))
		must[*gg.Node](t)(g.AddKernelNode(kp(condConst, h, 0), n)) // after the IF: clear for next time
		e := must[*gg.Exec](t)(g.Instantiate(0))
		for i, w := range c.want {
			launchSync(t, e, s)
			if got := marks.Get(t)[0]; got != w {
				t.Fatalf("flags %d, launch %d: body ran %d times in all, want %d", c.flags, i+1, got, w)
			}
		}
		// A new executable graph starts again.
		ok(t, e.Destroy())
		e = must[*gg.Exec](t)(g.Instantiate(0))
		launchSync(t, e, s)
		if got, w := marks.Get(t)[0], c.want[len(c.want)-1]+int32(c.flags); got != w {
			t.Fatalf("flags %d, new executable graph: body ran %d times in all, want %d", c.flags, got, w)
		}
	}
}

// Bodies run on the worker pool with their own fan-out, nested, many times
// per launch: nothing deadlocks, whatever the number of cores.
func TestConditionalNestedParallelBodies(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const width, iters = 8, 50
	ctr := newCondBuf(t, d, 2)
	marks := newCondBuf(t, d, width)
	g := graph(t, d)
	hw := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	hi := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	_, wb := addCond(t, g, hw, gg.ConditionalWhile, 1)
	cd := must[*gg.Node](t)(wb[0].AddKernelNode(kp(condCountDown, hw, ctr.At(0), ctr.At(1))))
	_, ib := addCond(t, wb[0], hi, gg.ConditionalIf, 1, cd)
	fan := must[*gg.Node](t)(ib[0].AddEmptyNode())
	var leaves []*gg.Node
	for i := 0; i < width; i++ {
		// Many blocks: the kernel itself spreads over the pool.
		p := gg.KernelParams{Kernel: condAtomicMark, Grid: gg.Dim1(16), Block: one, Args: []any{marks.P, i}}
		leaves = append(leaves, must[*gg.Node](t)(ib[0].AddKernelNode(p, fan)))
	}
	must[*gg.Node](t)(ib[0].AddEmptyNode(leaves...))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	for rep := 1; rep <= 3; rep++ {
		ctr.Set(t, iters, 0)
		launchSync(t, e, s)
		for i, m := range marks.Get(t) {
			if m != int32(rep*iters*16) {
				t.Fatalf("launch %d: mark %d = %d, want %d", rep, i, m, rep*iters*16)
			}
		}
	}
}

// condAtomicMark adds 1 to a0[a1] once per block, atomically.
var condAtomicMark = &gg.Kernel{
	Name:   "cond_atomic_mark",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		atomic.AddInt32(&gg.Slice[int32](a.Ptr(0), a.Int(1)+1)[a.Int(1)], 1)
	},
	CUDA: `extern "C" __global__ void cond_atomic_mark(int* d, int i) { if (threadIdx.x == 0) atomicAdd(&d[i], 1); }`,
}

// Handles belong to the graph they were created in and serve one node.
func TestConditionalHandleRules(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	other := graph(t, d)

	_, err := g.ConditionalHandleCreate(0, 2)
	isCode(t, err, gg.ErrInvalidValue)

	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	ho := must[gg.ConditionalHandle](t)(other.ConditionalHandleCreate(0, 0))
	for _, c := range []struct {
		name string
		p    gg.ConditionalParams
	}{
		{"no handle", gg.ConditionalParams{Type: gg.ConditionalIf, Size: 1}},
		{"IF of 3", gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 3}},
		{"IF of 0", gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 0}},
		{"WHILE of 2", gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 2}},
		{"SWITCH of 0", gg.ConditionalParams{Handle: h, Type: gg.ConditionalSwitch, Size: 0}},
		{"SWITCH of -1", gg.ConditionalParams{Handle: h, Type: gg.ConditionalSwitch, Size: -1}},
		{"type 3", gg.ConditionalParams{Handle: h, Type: 3, Size: 1}},
		{"handle of another graph", gg.ConditionalParams{Handle: ho, Type: gg.ConditionalIf, Size: 1}},
		{"not a handle", gg.ConditionalParams{Handle: 12345, Type: gg.ConditionalIf, Size: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := g.AddNode(c.p)
			isCode(t, err, gg.ErrInvalidValue)
			if ns := must[[]*gg.Node](t)(g.Nodes()); len(ns) != 0 {
				t.Fatalf("a refused node left %d nodes", len(ns))
			}
		})
	}

	n, bodies := addCond(t, g, h, gg.ConditionalWhile, 1)
	_, err = g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1})
	isCode(t, err, gg.ErrInvalidValue) // one node per handle
	_, err = bodies[0].AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1})
	isCode(t, err, gg.ErrInvalidValue)

	// A handle of the enclosing graph serves a node in a body; a handle of a
	// body cannot serve a node of the graph around it.
	h2 := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	addCond(t, bodies[0], h2, gg.ConditionalIf, 1)
	hb := must[gg.ConditionalHandle](t)(bodies[0].ConditionalHandleCreate(0, 0))
	_, err = g.AddNode(gg.ConditionalParams{Handle: hb, Type: gg.ConditionalIf, Size: 1})
	isCode(t, err, gg.ErrInvalidValue)

	// hb serves nothing: instantiation fails until it does.
	_, err = g.Instantiate(0)
	isCode(t, err, gg.ErrInvalidValue)
	addCond(t, bodies[0], hb, gg.ConditionalSwitch, 3)
	e := must[*gg.Exec](t)(g.Instantiate(0))

	// One executable graph at a time.
	_, err = g.Instantiate(0)
	isCode(t, err, gg.ErrNotSupported)
	ok(t, e.Destroy())
	e = must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Destroy())

	// Not cloned, not a child graph, parameters fixed.
	_, err = g.Clone()
	isCode(t, err, gg.ErrNotSupported)
	_, err = other.AddChildGraphNode(g)
	isCode(t, err, gg.ErrNotSupported)
	isCode(t, n.SetParams(gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 1}), gg.ErrNotSupported)
	p := must[gg.NodeParams](t)(n.Params())
	if p != (gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 1}) {
		t.Fatalf("Params = %+v", p)
	}

	// A body belongs to its node.
	isCode(t, bodies[0].Destroy(), gg.ErrInvalidValue)
	_, err = must[*gg.Node](t)(g.AddEmptyNode()).ConditionalBodies()
	isCode(t, err, gg.ErrInvalidValue)

	// Destroying the node destroys its bodies and frees its handle.
	ok(t, g.DestroyNode(n))
	_, err = bodies[0].AddEmptyNode()
	isCode(t, err, gg.ErrInvalidValue)
	_, err = g.Instantiate(0) // h2 and hb now serve no node of g
	isCode(t, err, gg.ErrInvalidValue)
	_, nb := addCond(t, g, h, gg.ConditionalIf, 1)
	addCond(t, nb[0], h2, gg.ConditionalIf, 1)
	addCond(t, nb[0], must[gg.ConditionalHandle](t)(nb[0].ConditionalHandleCreate(0, 0)), gg.ConditionalIf, 1)
	// hb went with the destroyed body; h and h2 serve nodes again.
	ok(t, must[*gg.Exec](t)(g.Instantiate(0)).Destroy())
}

// A graph with a handle and no conditional node does not instantiate.
func TestConditionalUnusedHandle(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	_, err := g.Instantiate(0)
	isCode(t, err, gg.ErrInvalidValue)
}

// Bodies hold kernel, empty, memset, device memcpy, child graph and
// conditional nodes only. Other nodes are accepted when added and refused
// at instantiation, as the driver does; memory nodes are refused when added.
func TestConditionalBodyRestrictions(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, 0))
	_, bodies := addCond(t, g, h, gg.ConditionalIf, 1)
	body := bodies[0]
	buf := must[gg.DevicePtr](t)(d.Malloc(64))
	ev := must[*gg.Event](t)(d.NewEvent(0))
	hostChild := graph(t, d)
	must[*gg.Node](t)(hostChild.AddHostNode(func() {}))
	kernChild := graph(t, d)
	must[*gg.Node](t)(kernChild.AddKernelNode(kp(kA)))
	hn := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	for _, c := range []struct {
		name string
		p    gg.NodeParams
		want *gg.Code // nil: allowed
	}{
		{"kernel", kp(kA), nil},
		{"empty", gg.EmptyParams{}, nil},
		{"memset", gg.Memset8(buf, 1, 64), nil},
		{"memcpy DtoD", gg.DtoD(buf, buf+32, 32), nil},
		{"child graph of kernels", gg.ChildGraphParams{Graph: kernChild}, nil},
		{"conditional", gg.ConditionalParams{Handle: hn, Type: gg.ConditionalIf, Size: 1}, nil},
		{"host", gg.HostParams{Fn: func() {}}, gg.ErrInvalidValue},
		{"event record", gg.EventRecordParams{Event: ev}, gg.ErrInvalidValue},
		{"event wait", gg.EventWaitParams{Event: ev}, gg.ErrInvalidValue},
		{"memcpy HtoD", gg.HtoD(buf, make([]byte, 8)), gg.ErrInvalidValue},
		{"memcpy DtoH", gg.DtoH(make([]byte, 8), buf), gg.ErrInvalidValue},
		{"mem alloc", gg.MemAllocParams{Size: 1 << 20}, gg.ErrNotSupported},
		{"child graph with a host node", gg.ChildGraphParams{Graph: hostChild}, gg.ErrInvalidValue},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.want == gg.ErrInvalidValue { // accepted, then refused at instantiation
				g2 := graph(t, d)
				h2 := must[gg.ConditionalHandle](t)(g2.ConditionalHandleCreate(1, 0))
				_, b2 := addCond(t, g2, h2, gg.ConditionalIf, 1)
				must[*gg.Node](t)(b2[0].AddNode(c.p))
				_, err := g2.Instantiate(0)
				isCode(t, err, c.want)
				return
			}
			before := len(must[[]*gg.Node](t)(body.Nodes()))
			_, err := body.AddNode(c.p)
			if c.want == nil {
				ok(t, err)
				return
			}
			isCode(t, err, c.want)
			if after := len(must[[]*gg.Node](t)(body.Nodes())); after != before {
				t.Fatalf("a refused node changed the body: %d nodes, was %d", after, before)
			}
		})
	}
	// Nested bodies, and graphs embedded in bodies, follow the same rules.
	nested := must[[]*gg.Node](t)(body.Nodes())
	for _, n := range nested {
		if n.Type() == gg.NodeConditional {
			inner := must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
			_, err := inner.AddNode(gg.MemAllocParams{Size: 1 << 20})
			isCode(t, err, gg.ErrNotSupported)
		}
		if n.Type() == gg.NodeChildGraph {
			child := must[*gg.Graph](t)(n.ChildGraph())
			_, err := child.AddNode(gg.ConditionalParams{Handle: hn, Type: gg.ConditionalIf, Size: 1})
			isCode(t, err, gg.ErrNotSupported) // child graphs hold no conditional nodes
		}
	}
	e := must[*gg.Exec](t)(g.Instantiate(0))
	launchSync(t, e, s)
}

// Setting a handle that is not one of the running graph's is a device-side
// error: the kernel fails with ErrLaunchFailure.
func TestConditionalSetForeignHandle(t *testing.T) {
	t.Run("another graph's handle", func(t *testing.T) {
		d := open(t)
		s := stream(t, d)
		a := graph(t, d)
		ha := must[gg.ConditionalHandle](t)(a.ConditionalHandleCreate(0, 0))
		addCond(t, a, ha, gg.ConditionalIf, 1)
		must[*gg.Exec](t)(a.Instantiate(0))
		b := graph(t, d)
		hb := must[gg.ConditionalHandle](t)(b.ConditionalHandleCreate(0, 0))
		k := must[*gg.Node](t)(b.AddKernelNode(kp(condConst, ha, 1)))
		addCond(t, b, hb, gg.ConditionalIf, 1, k)
		e := must[*gg.Exec](t)(b.Instantiate(0))
		ok(t, e.Launch(s))
		err := s.Synchronize()
		isCode(t, err, gg.ErrLaunchFailure)
		if !strings.Contains(err.Error(), "SetConditional") {
			t.Fatalf("error %q does not say what failed", err)
		}
	})
	t.Run("graph without conditional nodes", func(t *testing.T) {
		d := open(t)
		s := stream(t, d)
		g := graph(t, d)
		must[*gg.Node](t)(g.AddKernelNode(kp(condConst, gg.ConditionalHandle(0xC0D1000000000001), 1)))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(s))
		isCode(t, s.Synchronize(), gg.ErrLaunchFailure)
	})
	t.Run("stream", func(t *testing.T) {
		d := open(t)
		s := stream(t, d)
		ok(t, s.LaunchKernel(kp(condConst, 1, 1)))
		isCode(t, s.Synchronize(), gg.ErrLaunchFailure)
	})
}

// A kernel failing in a body fails the launch, naming the body.
func TestConditionalBodyFailure(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	_, bodies := addCond(t, g, h, gg.ConditionalWhile, 1)
	boom := &gg.Kernel{Name: "boom", Go: func(gg.Block, gg.Args) { panic("boom") }}
	must[*gg.Node](t)(bodies[0].AddKernelNode(kp(boom)))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(s))
	err := s.Synchronize()
	isCode(t, err, gg.ErrLaunchFailure)
	var ge *gg.Error
	if !errors.As(err, &ge) || ge.Node == nil || ge.Node.Type() != gg.NodeConditional || !strings.Contains(ge.Detail, "body 0") {
		t.Fatalf("error %v does not name the conditional node and its body", err)
	}
}

// The programming guide's WHILE example: the body of a node added with the
// graph API is filled by capture into it; the captured body equals one
// built with the graph API.
func TestConditionalCaptureIntoBody(t *testing.T) {
	d := open(t)
	ctr := newCondBuf(t, d, 2)
	build := func(capture bool) *gg.Graph {
		g := graph(t, d)
		h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		_, bodies := addCond(t, g, h, gg.ConditionalWhile, 1)
		if !capture {
			a := must[*gg.Node](t)(bodies[0].AddKernelNode(kp(kA)))
			must[*gg.Node](t)(bodies[0].AddKernelNode(kp(condCountDown, h, ctr.At(0), ctr.At(1)), a))
			return g
		}
		s := stream(t, d)
		ok(t, s.BeginCaptureToGraph(bodies[0], nil, gg.CaptureModeRelaxed))
		ok(t, s.LaunchKernel(kp(kA)))
		ok(t, s.LaunchKernel(kp(condCountDown, h, ctr.At(0), ctr.At(1))))
		if got := endOK(t, s); got != bodies[0] {
			t.Fatal("EndCapture did not return the body it captured into")
		}
		return g
	}
	a, b := build(false), build(true)
	if !gg.StructurallyEqual(a, b) {
		t.Fatal("captured body differs from the built one")
	}
	e := must[*gg.Exec](t)(b.Instantiate(0))
	ctr.Set(t, 4, 0)
	launchSync(t, e, stream(t, d))
	if got := ctr.Get(t); !equal32(got, []int32{0, 4}) {
		t.Fatalf("counter, iterations = %v, want [0 4]", got)
	}
}

// Launching a graph with conditional nodes into a capture is refused: the
// capture would embed it as a child graph.
func TestConditionalLaunchIntoCapture(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	addCond(t, g, h, gg.ConditionalIf, 1)
	e := must[*gg.Exec](t)(g.Instantiate(0))
	s := stream(t, d)
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	isCode(t, e.Launch(s), gg.ErrStreamCaptureUnsupported)
	_, err := s.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)
}

func TestConditionalStructurallyEqual(t *testing.T) {
	d := open(t)
	build := func(typ gg.ConditionalType, size int, bodyKernels int) *gg.Graph {
		g := graph(t, d)
		h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
		_, bodies := addCond(t, g, h, typ, size)
		for i := 0; i < bodyKernels; i++ {
			must[*gg.Node](t)(bodies[0].AddKernelNode(kp(kA)))
		}
		return g
	}
	base := build(gg.ConditionalIf, 2, 1)
	for _, c := range []struct {
		name string
		g    *gg.Graph
		want bool
	}{
		{"same", build(gg.ConditionalIf, 2, 1), true},
		{"other type", build(gg.ConditionalSwitch, 2, 1), false},
		{"other size", build(gg.ConditionalIf, 1, 1), false},
		{"other body", build(gg.ConditionalIf, 2, 2), false},
	} {
		if got := gg.StructurallyEqual(base, c.g); got != c.want {
			t.Errorf("%s: StructurallyEqual = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestConditionalDOT(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	_, bodies := addCond(t, g, h, gg.ConditionalIf, 2)
	must[*gg.Node](t)(bodies[0].AddKernelNode(kp(kA)))
	must[*gg.Node](t)(bodies[1].AddKernelNode(kp(kB)))
	var buf bytes.Buffer
	ok(t, g.WriteDOT(&buf))
	out := buf.String()
	for _, want := range []string{"CONDITIONAL", "IF handle", "2 bodies", "cluster_graph_2", "cluster_graph_3",
		`"graph_1_node_0" -> "graph_2_node_0" [style="dashed" label="then"]`,
		`"graph_1_node_0" -> "graph_3_node_0" [style="dashed" label="else"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT output lacks %q:\n%s", want, out)
		}
	}
}
