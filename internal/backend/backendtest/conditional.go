package backendtest

import (
	"slices"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Conformance scenarios for conditional nodes: the CUDA samples'
// graphConditionalNodes graphs (IF, IF/ELSE, do-while, captured while,
// SWITCH), nesting, and the rules the driver documents. Kernels have Go and
// CUDA bodies; the CUDA bodies call cudaGraphSetConditional through
// gg.SetConditionalCUDA (NVRTC, no device runtime library).

func conditionalIf(t *testing.T, d *gg.Device) {
	IfElseScenario(t, d, 1, []uint32{0, 1, 2, 0})
}

func conditionalIfElse(t *testing.T, d *gg.Device) {
	IfElseScenario(t, d, 2, []uint32{0, 1, 2, 0, 0xffffffff})
}

// ConditionalAssignDefault resets the value at every launch. (Without the
// flag CUDA leaves the value at launch undefined, so that case is not a
// conformance scenario.)
func conditionalAssignDefault(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	marks := NewCondBuf(t, d, 2)
	g := NewGraph(t, d)
	h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	n, bodies := AddCond(t, g, h, gg.ConditionalIf, 2)
	Must[*gg.Node](t)(bodies[0].AddKernelNode(kp(CondMark, marks.P, 0, 1)))
	Must[*gg.Node](t)(bodies[1].AddKernelNode(kp(CondMark, marks.P, 1, 1)))
	Must[*gg.Node](t)(g.AddKernelNode(kp(CondConst, h, 0), n))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	for i := 1; i <= 3; i++ {
		launchSync(t, e, s)
		if got := marks.Get(t); !slices.Equal(got, []int32{int32(i), 0}) {
			t.Fatalf("launch %d: bodies ran %v times, want [%d 0]", i, got, i)
		}
	}
}

// refused checks that adding a node was refused with want. Where it was
// not (the driver may check at instantiation instead), it reports what
// instantiating the graph then does, for the record.
func refused(t *testing.T, what string, addErr error, g *gg.Graph, want *gg.Code) {
	t.Helper()
	if addErr != nil {
		IsCode(t, addErr, want)
		return
	}
	e, err := g.Instantiate(0)
	if err == nil {
		e.Destroy()
	}
	t.Fatalf("%s: accepted when added; instantiating the graph then returns %v; want %s when added", what, err, want.Name())
}

// The rules: parameters, handle ownership, body contents, and what a graph
// with conditional nodes cannot do. Each case uses a fresh graph.
func conditionalRules(t *testing.T, d *gg.Device) {
	newCond := func(t *testing.T, typ gg.ConditionalType, size int) (*gg.Graph, gg.ConditionalHandle, *gg.Node, []*gg.Graph) {
		g := NewGraph(t, d)
		h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		n, bodies := AddCond(t, g, h, typ, size)
		return g, h, n, bodies
	}
	t.Run("handle flags", func(t *testing.T) {
		_, err := NewGraph(t, d).ConditionalHandleCreate(0, 2)
		IsCode(t, err, gg.ErrInvalidValue)
	})
	t.Run("sizes", func(t *testing.T) {
		for _, c := range []struct {
			typ  gg.ConditionalType
			size int
		}{{gg.ConditionalIf, 3}, {gg.ConditionalWhile, 2}, {gg.ConditionalSwitch, 0}} {
			g := NewGraph(t, d)
			h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
			_, err := g.AddNode(gg.ConditionalParams{Handle: h, Type: c.typ, Size: c.size})
			IsCode(t, err, gg.ErrInvalidValue)
		}
	})
	t.Run("handle of another graph", func(t *testing.T) {
		g, other := NewGraph(t, d), NewGraph(t, d)
		h := Must[gg.ConditionalHandle](t)(other.ConditionalHandleCreate(0, 0))
		_, err := g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1})
		refused(t, "a handle of another graph", err, g, gg.ErrInvalidValue)
	})
	t.Run("handle used twice", func(t *testing.T) {
		g, h, _, _ := newCond(t, gg.ConditionalIf, 1)
		_, err := g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1})
		refused(t, "a handle used twice", err, g, gg.ErrInvalidValue)
	})
	t.Run("handle of the graph in a body", func(t *testing.T) {
		g, _, _, bodies := newCond(t, gg.ConditionalWhile, 1)
		h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
		AddCond(t, bodies[0], h, gg.ConditionalIf, 1)
		Must[*gg.Exec](t)(g.Instantiate(0)).Destroy()
	})
	t.Run("unused handle", func(t *testing.T) {
		g, _, _, _ := newCond(t, gg.ConditionalIf, 1)
		Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
		_, err := g.Instantiate(0)
		IsCode(t, err, gg.ErrInvalidValue)
	})
	t.Run("one executable graph", func(t *testing.T) {
		g, _, _, _ := newCond(t, gg.ConditionalIf, 1)
		e := Must[*gg.Exec](t)(g.Instantiate(0))
		_, err := g.Instantiate(0)
		IsCode(t, err, gg.ErrNotSupported)
		OK(t, e.Destroy())
		OK(t, Must[*gg.Exec](t)(g.Instantiate(0)).Destroy())
	})
	t.Run("clone and child graph", func(t *testing.T) {
		g, _, _, _ := newCond(t, gg.ConditionalIf, 1)
		_, err := g.Clone()
		IsCode(t, err, gg.ErrNotSupported)
		_, err = NewGraph(t, d).AddChildGraphNode(g)
		IsCode(t, err, gg.ErrNotSupported)
	})
	t.Run("set params", func(t *testing.T) {
		_, h, n, _ := newCond(t, gg.ConditionalIf, 1)
		IsCode(t, n.SetParams(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 2}), gg.ErrNotSupported)
	})
	t.Run("destroy a body", func(t *testing.T) {
		_, _, _, bodies := newCond(t, gg.ConditionalIf, 1)
		IsCode(t, bodies[0].Destroy(), gg.ErrInvalidValue)
	})
	buf := Must[gg.DevicePtr](t)(d.Malloc(64))
	ev := Must[*gg.Event](t)(d.NewEvent(0))
	for _, c := range []struct {
		name string
		p    gg.NodeParams
	}{
		{"host node in a body", gg.HostParams{Fn: func() {}}},
		{"event record node in a body", gg.EventRecordParams{Event: ev}},
		{"event wait node in a body", gg.EventWaitParams{Event: ev}},
		{"copy from pageable host memory in a body", gg.HtoD(buf, make([]byte, 8))},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _, _, bodies := newCond(t, gg.ConditionalIf, 1)
			Must[*gg.Node](t)(bodies[0].AddNode(c.p)) // accepted when added,
			_, err := g.Instantiate(0)                // refused here
			IsCode(t, err, gg.ErrInvalidValue)
		})
	}
	t.Run("allowed in a body", func(t *testing.T) {
		g, _, _, bodies := newCond(t, gg.ConditionalIf, 1)
		kids := NewGraph(t, d)
		Must[*gg.Node](t)(kids.AddKernelNode(kp(KA)))
		b := bodies[0]
		a := Must[*gg.Node](t)(b.AddKernelNode(kp(KA)))
		m := Must[*gg.Node](t)(b.AddMemsetNode(gg.Memset8(buf, 1, 64), a))
		c := Must[*gg.Node](t)(b.AddMemcpyNode(gg.DtoD(buf, buf+32, 32), m))
		Must[*gg.Node](t)(b.AddChildGraphNode(kids, c))
		Must[*gg.Node](t)(b.AddEmptyNode(c))
		launchSync(t, Must[*gg.Exec](t)(g.Instantiate(0)), NewStream(t, d))
	})
	// docs/driver-conditional.txt, "memcpy from pinned host memory": then
	// instantiate, success.
	t.Run("copy from pinned host memory in a body", func(t *testing.T) {
		pinned := Must[[]byte](t)(d.MallocHost(32))
		defer d.FreeHost(pinned)
		for i := range pinned {
			pinned[i] = byte(i + 1)
		}
		g, _, _, bodies := newCond(t, gg.ConditionalIf, 1)
		Must[*gg.Node](t)(bodies[0].AddMemcpyNode(gg.HtoD(buf, pinned)))
		launchSync(t, Must[*gg.Exec](t)(g.Instantiate(0)), NewStream(t, d))
		out := make([]byte, 32)
		OK(t, d.Memcpy(gg.DtoH(out, buf)))
		if string(out) != string(pinned) {
			t.Fatalf("the body copied % x, want % x", out, pinned)
		}
	})
}

// Kernels for conditional nodes, with Go and CUDA bodies. Each runs as one
// thread (Grid and Block one).
var (
	// condSet sets handle a0 to *a1, a uint32 in device memory.
	condSet = &gg.Kernel{
		Name:   "cond_set",
		Params: []gg.ParamType{gg.Uint64, gg.Pointer},
		Go: func(b gg.Block, a gg.Args) {
			b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), gg.Slice[uint32](a.Ptr(1), 1)[0])
		},
		CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void cond_set(cudaGraphConditionalHandle h, const unsigned int* v) {
	cudaGraphSetConditional(h, *v);
}`,
	}
	// CondConst sets handle a0 to a1.
	CondConst = &gg.Kernel{
		Name:   "cond_const",
		Params: []gg.ParamType{gg.Uint64, gg.Uint32},
		Go: func(b gg.Block, a gg.Args) {
			b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), a.Uint32(1))
		},
		CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void cond_const(cudaGraphConditionalHandle h, unsigned int v) {
	cudaGraphSetConditional(h, v);
}`,
	}
	// CondCountDown decrements *a1, counts the call in *a2, and clears
	// handle a0 when *a1 reaches zero: the body of a WHILE loop.
	CondCountDown = &gg.Kernel{
		Name:   "cond_count_down",
		Params: []gg.ParamType{gg.Uint64, gg.Pointer, gg.Pointer},
		Go: func(b gg.Block, a gg.Args) {
			c, it := gg.Slice[int32](a.Ptr(1), 1), gg.Slice[int32](a.Ptr(2), 1)
			it[0]++
			if c[0]--; c[0] <= 0 {
				b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), 0)
			}
		},
		CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void cond_count_down(cudaGraphConditionalHandle h, int* c, int* iters) {
	++*iters;
	if (--*c <= 0) cudaGraphSetConditional(h, 0);
}`,
	}
	// CondMark adds a2 to a0[a1]: which body ran, and how often.
	CondMark = &gg.Kernel{
		Name:   "cond_mark",
		Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Int32},
		Go: func(b gg.Block, a gg.Args) {
			gg.Slice[int32](a.Ptr(0), a.Int(1)+1)[a.Int(1)] += a.Int32(2)
		},
		CUDA: `extern "C" __global__ void cond_mark(int* d, int i, int v) { d[i] += v; }`,
	}
)

// CondBuf is a small int32 buffer in device memory.
type CondBuf struct {
	d *gg.Device
	P gg.DevicePtr // its address
	n int
}

// NewCondBuf returns a buffer of n zeros.
func NewCondBuf(t testing.TB, d *gg.Device, n int) CondBuf {
	t.Helper()
	b := CondBuf{d, Must[gg.DevicePtr](t)(d.Malloc(4 * n)), n}
	b.Set(t, make([]int32, n)...)
	return b
}

// Set copies v to the buffer.
func (b CondBuf) Set(t testing.TB, v ...int32) {
	t.Helper()
	OK(t, b.d.Memcpy(gg.HtoD(b.P, gg.Bytes(v))))
}

// Get returns the buffer's contents.
func (b CondBuf) Get(t testing.TB) []int32 {
	t.Helper()
	out := make([]int32, b.n)
	OK(t, b.d.Memcpy(gg.DtoH(gg.Bytes(out), b.P)))
	return out
}

// At returns the address of element i.
func (b CondBuf) At(i int) gg.DevicePtr { return b.P + gg.DevicePtr(4*i) }

// AddCond adds a conditional node to g and returns it with its bodies.
func AddCond(t testing.TB, g *gg.Graph, h gg.ConditionalHandle, typ gg.ConditionalType, size int, deps ...*gg.Node) (*gg.Node, []*gg.Graph) {
	t.Helper()
	n := Must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: typ, Size: size}, deps...))
	bodies := Must[[]*gg.Graph](t)(n.ConditionalBodies())
	if len(bodies) != size {
		t.Fatalf("%d bodies, want %d", len(bodies), size)
	}
	return n, bodies
}

// launchSync launches e into s and waits.
func launchSync(t testing.TB, e *gg.Exec, s *gg.Stream) {
	t.Helper()
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
}

// IfElseScenario: A sets the handle from device memory, B is an IF node
// whose body i marks marks[i] (the CUDA sample's simpleIfElseGraph).
func IfElseScenario(t *testing.T, d *gg.Device, size int, values []uint32) {
	s := NewStream(t, d)
	in := NewCondBuf(t, d, 1)
	marks := NewCondBuf(t, d, 2)
	g := NewGraph(t, d)
	h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	a := Must[*gg.Node](t)(g.AddKernelNode(kp(condSet, h, in.P)))
	_, bodies := AddCond(t, g, h, gg.ConditionalIf, size, a)
	for i, b := range bodies {
		Must[*gg.Node](t)(b.AddKernelNode(kp(CondMark, marks.P, i, 1)))
	}
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	want := make([]int32, 2)
	for _, v := range values {
		in.Set(t, int32(v))
		launchSync(t, e, s)
		if v != 0 {
			want[0]++
		} else if size == 2 {
			want[1]++
		}
		if got := marks.Get(t); !slices.Equal(got, want) {
			t.Fatalf("size %d, after value %d: bodies ran %v times, want %v", size, v, got, want)
		}
	}
	OK(t, e.Destroy())
}

// whileScenario is the CUDA sample's simpleDoWhileGraph: the handle's
// default (1, assigned at every launch) enters the loop, and the body's
// kernel counts a counter in device memory down and ends the loop at zero.
func whileScenario(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	ctr := NewCondBuf(t, d, 2) // counter, iterations
	g := NewGraph(t, d)
	h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	_, bodies := AddCond(t, g, h, gg.ConditionalWhile, 1)
	b0 := Must[*gg.Node](t)(bodies[0].AddEmptyNode())
	b1 := Must[*gg.Node](t)(bodies[0].AddKernelNode(kp(CondMark, ctr.P, 1, 0), b0))
	Must[*gg.Node](t)(bodies[0].AddKernelNode(kp(CondCountDown, h, ctr.At(0), ctr.At(1)), b1))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	for _, start := range []int32{10, 3, 1} {
		ctr.Set(t, start, 0)
		launchSync(t, e, s)
		if got := ctr.Get(t); !slices.Equal(got, []int32{0, start}) {
			t.Fatalf("start %d: counter, iterations = %v, want [0 %d]", start, got, start)
		}
	}
	OK(t, e.Destroy())
}

// switchScenario is the CUDA sample's simpleSwitchGraph: body n runs when
// the value is n, none when it is at least the number of bodies.
func switchScenario(t *testing.T, d *gg.Device) {
	const size = 4
	s := NewStream(t, d)
	in := NewCondBuf(t, d, 1)
	marks := NewCondBuf(t, d, size)
	g := NewGraph(t, d)
	h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	a := Must[*gg.Node](t)(g.AddKernelNode(kp(condSet, h, in.P)))
	_, bodies := AddCond(t, g, h, gg.ConditionalSwitch, size, a)
	for i, b := range bodies {
		Must[*gg.Node](t)(b.AddKernelNode(kp(CondMark, marks.P, i, 1)))
	}
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	want := make([]int32, size)
	for _, v := range []uint32{0, 1, 2, 3, 4, 100, 3, 0xffffffff} {
		in.Set(t, int32(v))
		launchSync(t, e, s)
		if v < size {
			want[v]++
		}
		if got := marks.Get(t); !slices.Equal(got, want) {
			t.Fatalf("after value %d: bodies ran %v times, want %v", v, got, want)
		}
	}
}

// nestedScenario: a WHILE loop counts down from 6; in each iteration a
// kernel sets an IF/ELSE handle to the counter's parity and a SWITCH handle
// to the counter modulo 3; the IF's THEN body holds the SWITCH node.
//
//	WHILE [ countdown -> setIf, setSwitch -> IF [ SWITCH [ mark 2+k ] | mark 1 ] ]
func nestedScenario(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	ctr := NewCondBuf(t, d, 2)
	marks := NewCondBuf(t, d, 5)
	g := NewGraph(t, d)
	hw := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
	hi := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	_, wb := AddCond(t, g, hw, gg.ConditionalWhile, 1)
	body := wb[0]
	// The switch handle is created in the loop's body, where its node goes.
	hs := Must[gg.ConditionalHandle](t)(body.ConditionalHandleCreate(0, 0))
	cd := Must[*gg.Node](t)(body.AddKernelNode(kp(CondCountDown, hw, ctr.At(0), ctr.At(1))))
	// The counter after the count-down: parity and modulo 3, computed on
	// the device by a kernel of the body.
	par := Must[*gg.Node](t)(body.AddKernelNode(kp(condParity, hi, hs, ctr.At(0)), cd))
	_, ib := AddCond(t, body, hi, gg.ConditionalIf, 2, par)
	_, sb := AddCond(t, ib[0], hs, gg.ConditionalSwitch, 3)
	for k, b := range sb {
		Must[*gg.Node](t)(b.AddKernelNode(kp(CondMark, marks.P, 2+k, 1)))
	}
	Must[*gg.Node](t)(ib[1].AddKernelNode(kp(CondMark, marks.P, 1, 1)))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	ctr.Set(t, 6, 0)
	launchSync(t, e, s)
	// Counter after each count-down: 5 4 3 2 1 0. Odd: 5 3 1 (switch on
	// 5%3=2, 3%3=0, 1%3=1); even: 4 2 0 (else body).
	if got, want := marks.Get(t), []int32{0, 3, 1, 1, 1}; !slices.Equal(got, want) {
		t.Fatalf("marks %v, want %v", got, want)
	}
	if got := ctr.Get(t); !slices.Equal(got, []int32{0, 6}) {
		t.Fatalf("counter, iterations = %v, want [0 6]", got)
	}
}

// condParity sets handle a0 to *a2 & 1 and handle a1 to *a2 % 3.
var condParity = &gg.Kernel{
	Name:   "cond_parity",
	Params: []gg.ParamType{gg.Uint64, gg.Uint64, gg.Pointer},
	Go: func(b gg.Block, a gg.Args) {
		c := gg.Slice[int32](a.Ptr(2), 1)[0]
		b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), uint32(c&1))
		b.SetConditional(gg.ConditionalHandle(a.Uint64(1)), uint32(c%3))
	},
	CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void cond_parity(cudaGraphConditionalHandle hi, cudaGraphConditionalHandle hs, const int* c) {
	cudaGraphSetConditional(hi, *c & 1);
	cudaGraphSetConditional(hs, *c % 3);
}`,
}

// capturedWhileScenario is the CUDA sample's capturedWhileGraph: the
// conditional node is inserted into a capture with CaptureInfo, AddNode and
// UpdateCaptureDependencies, and its body is filled by capturing into it.
//
//	A -> B [ C ] -> D      A and C: counter--, handle = counter
func capturedWhileScenario(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	ctr := NewCondBuf(t, d, 3) // counter, iterations of C, runs of D
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	info := Must[gg.CaptureInfo](t)(s.CaptureInfo())
	h := Must[gg.ConditionalHandle](t)(info.Graph.ConditionalHandleCreate(0, 0))
	OK(t, s.LaunchKernel(kp(condDecSet, h, ctr.At(0), ctr.At(1), 0))) // A
	info = Must[gg.CaptureInfo](t)(s.CaptureInfo())
	n := Must[*gg.Node](t)(info.Graph.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 1}, info.Dependencies...))
	body := Must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
	OK(t, s.UpdateCaptureDependencies([]*gg.Node{n}, gg.SetCaptureDependencies))
	OK(t, s.LaunchKernel(kp(CondMark, ctr.P, 2, 1))) // D
	g := EndOK(t, s)

	bs := NewStream(t, d)
	OK(t, bs.BeginCaptureToGraph(body, nil, gg.CaptureModeGlobal))
	OK(t, bs.LaunchKernel(kp(condDecSet, h, ctr.At(0), ctr.At(1), 1))) // C
	EndOK(t, bs)

	ns := Must[[]*gg.Node](t)(g.Nodes())
	if len(ns) != 3 || ns[1].Type() != gg.NodeConditional {
		t.Fatalf("captured graph has %d nodes, want A -> conditional -> D", len(ns))
	}
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	for _, c := range []struct{ start, iters int32 }{{0, 0}, {10, 9}, {1, 0}, {2, 1}} {
		ctr.Set(t, c.start, 0, 0)
		launchSync(t, e, s)
		if got := ctr.Get(t); !slices.Equal(got, []int32{0, c.iters, 1}) {
			t.Fatalf("start %d: counter, C runs, D runs = %v, want [0 %d 1]", c.start, got, c.iters)
		}
	}
}

// condDecSet decrements *a1 if it is positive, adds a3 to *a2 and sets
// handle a0 to *a1 (the sample's capturedWhileKernel).
var condDecSet = &gg.Kernel{
	Name:   "cond_dec_set",
	Params: []gg.ParamType{gg.Uint64, gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		c, it := gg.Slice[int32](a.Ptr(1), 1), gg.Slice[int32](a.Ptr(2), 1)
		if c[0] > 0 {
			c[0]--
		}
		it[0] += a.Int32(3)
		b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), uint32(c[0]))
	},
	CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void cond_dec_set(cudaGraphConditionalHandle h, int* c, int* it, int add) {
	if (*c > 0) --*c;
	*it += add;
	cudaGraphSetConditional(h, *c);
}`,
}

// loopsSideBySide: two WHILE loops of three iterations side by side, a
// chain of kernels beside them, and a third loop in an IF node's body
// beside a kernel of the body. The driver loses the context when a loop
// repeats its body while other nodes of its graph run (tools/probe/lostctx.cu
// lost it within 132 launches of a smaller graph, every run): on cuda the
// package orders loops alone in the driver's graph, and leaves the graph's
// own edges as they were. Launched 300 times, then updated to a graph of
// the same topology and launched 300 times more.
func loopsSideBySide(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	ctr := NewCondBuf(t, d, 6)   // counter, iterations of each loop
	marks := NewCondBuf(t, d, 2) // the chain beside the loops, the child's kernel
	build := func(step int32) (*gg.Graph, int) {
		g := NewGraph(t, d)
		for i := range 2 {
			h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
			_, bodies := AddCond(t, g, h, gg.ConditionalWhile, 1)
			Must[*gg.Node](t)(bodies[0].AddKernelNode(kp(CondCountDown, h, ctr.At(2*i), ctr.At(2*i+1))))
		}
		var prev []*gg.Node
		for range 4 {
			prev = []*gg.Node{Must[*gg.Node](t)(g.AddKernelNode(kp(CondMark, marks.P, 0, step), prev...))}
		}
		hi := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		_, ifBody := AddCond(t, g, hi, gg.ConditionalIf, 1)
		h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		_, bodies := AddCond(t, ifBody[0], h, gg.ConditionalWhile, 1)
		Must[*gg.Node](t)(bodies[0].AddKernelNode(kp(CondCountDown, h, ctr.At(4), ctr.At(5))))
		Must[*gg.Node](t)(ifBody[0].AddKernelNode(kp(CondMark, marks.P, 1, step)))
		return g, len(Must[[]gg.Edge](t)(g.Edges()))
	}
	ga, edges := build(1)
	e := Must[*gg.Exec](t)(ga.Instantiate(0))
	if n := len(Must[[]gg.Edge](t)(ga.Edges())); n != edges {
		t.Fatalf("the graph has %d edges after instantiation, %d before", n, edges)
	}
	want := []int32{0, 0}
	run := func(step int32) {
		for l := range 300 {
			ctr.Set(t, 3, 0, 3, 0, 3, 0)
			launchSync(t, e, s)
			want[0] += 4 * step
			want[1] += step
			if got := ctr.Get(t); !slices.Equal(got, []int32{0, 3, 0, 3, 0, 3}) {
				t.Fatalf("step %d, launch %d: counters and iterations %v, want [0 3 0 3 0 3]", step, l, got)
			}
		}
		if got := marks.Get(t); !slices.Equal(got, want) {
			t.Fatalf("step %d: marks %v, want %v", step, got, want)
		}
	}
	run(1)
	gb, _ := build(2)
	if _, err := e.Update(gb); err != nil {
		t.Fatalf("update to a graph of the same topology: %v", err)
	}
	if n := len(Must[[]gg.Edge](t)(gb.Edges())); n != edges {
		t.Fatalf("the new graph has %d edges after the update, %d before", n, edges)
	}
	run(2)
	OK(t, e.Destroy())
}
