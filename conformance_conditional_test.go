package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Conformance scenarios for conditional nodes: the CUDA samples'
// graphConditionalNodes graphs (IF, IF/ELSE, do-while, captured while,
// SWITCH), nesting, and the rules the driver documents. Kernels have Go and
// CUDA bodies; the CUDA bodies call cudaGraphSetConditional through
// gg.SetConditionalCUDA (NVRTC, no device runtime library).

func TestConformanceConditionalIf(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		ifElseScenario(t, d, 1, []uint32{0, 1, 2, 0})
	})
}

func TestConformanceConditionalIfElse(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		ifElseScenario(t, d, 2, []uint32{0, 1, 2, 0, 0xffffffff})
	})
}

func TestConformanceConditionalDoWhile(t *testing.T) {
	eachBackend(t, whileScenario)
}

func TestConformanceConditionalCapturedWhile(t *testing.T) {
	eachBackend(t, capturedWhileScenario)
}

func TestConformanceConditionalSwitch(t *testing.T) {
	eachBackend(t, switchScenario)
}

func TestConformanceConditionalNested(t *testing.T) {
	eachBackend(t, nestedScenario)
}

// ConditionalAssignDefault resets the value at every launch. (Without the
// flag CUDA leaves the value at launch undefined, so that case is not a
// conformance scenario.)
func TestConformanceConditionalAssignDefault(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		marks := newCondBuf(t, d, 2)
		g := graph(t, d)
		h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		n, bodies := addCond(t, g, h, gg.ConditionalIf, 2)
		must[*gg.Node](t)(bodies[0].AddKernelNode(kp(condMark, marks.p, 0, 1)))
		must[*gg.Node](t)(bodies[1].AddKernelNode(kp(condMark, marks.p, 1, 1)))
		must[*gg.Node](t)(g.AddKernelNode(kp(condConst, h, 0), n))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		for i := 1; i <= 3; i++ {
			launchSync(t, e, s)
			if got := marks.get(t); !equal32(got, []int32{int32(i), 0}) {
				t.Fatalf("launch %d: bodies ran %v times, want [%d 0]", i, got, i)
			}
		}
	})
}

// refused checks that adding a node was refused with want. Where it was
// not (the driver may check at instantiation instead), it reports what
// instantiating the graph then does, for the record.
func refused(t *testing.T, what string, addErr error, g *gg.Graph, want *gg.Code) {
	t.Helper()
	if addErr != nil {
		isCode(t, addErr, want)
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
func TestConformanceConditionalRules(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		newCond := func(t *testing.T, typ gg.ConditionalType, size int) (*gg.Graph, gg.ConditionalHandle, *gg.Node, []*gg.Graph) {
			g := graph(t, d)
			h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
			n, bodies := addCond(t, g, h, typ, size)
			return g, h, n, bodies
		}
		t.Run("handle flags", func(t *testing.T) {
			_, err := graph(t, d).ConditionalHandleCreate(0, 2)
			isCode(t, err, gg.ErrInvalidValue)
		})
		t.Run("sizes", func(t *testing.T) {
			for _, c := range []struct {
				typ  gg.ConditionalType
				size int
			}{{gg.ConditionalIf, 3}, {gg.ConditionalWhile, 2}, {gg.ConditionalSwitch, 0}} {
				g := graph(t, d)
				h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
				_, err := g.AddNode(gg.ConditionalParams{Handle: h, Type: c.typ, Size: c.size})
				isCode(t, err, gg.ErrInvalidValue)
			}
		})
		t.Run("handle of another graph", func(t *testing.T) {
			g, other := graph(t, d), graph(t, d)
			h := must[gg.ConditionalHandle](t)(other.ConditionalHandleCreate(0, 0))
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
			h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
			addCond(t, bodies[0], h, gg.ConditionalIf, 1)
			must[*gg.Exec](t)(g.Instantiate(0)).Destroy()
		})
		t.Run("unused handle", func(t *testing.T) {
			g, _, _, _ := newCond(t, gg.ConditionalIf, 1)
			must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
			_, err := g.Instantiate(0)
			isCode(t, err, gg.ErrInvalidValue)
		})
		t.Run("one executable graph", func(t *testing.T) {
			g, _, _, _ := newCond(t, gg.ConditionalIf, 1)
			e := must[*gg.Exec](t)(g.Instantiate(0))
			_, err := g.Instantiate(0)
			isCode(t, err, gg.ErrNotSupported)
			ok(t, e.Destroy())
			ok(t, must[*gg.Exec](t)(g.Instantiate(0)).Destroy())
		})
		t.Run("clone and child graph", func(t *testing.T) {
			g, _, _, _ := newCond(t, gg.ConditionalIf, 1)
			_, err := g.Clone()
			isCode(t, err, gg.ErrNotSupported)
			_, err = graph(t, d).AddChildGraphNode(g)
			isCode(t, err, gg.ErrNotSupported)
		})
		t.Run("set params", func(t *testing.T) {
			_, h, n, _ := newCond(t, gg.ConditionalIf, 1)
			isCode(t, n.SetParams(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 2}), gg.ErrNotSupported)
		})
		t.Run("destroy a body", func(t *testing.T) {
			_, _, _, bodies := newCond(t, gg.ConditionalIf, 1)
			isCode(t, bodies[0].Destroy(), gg.ErrInvalidValue)
		})
		buf := must[gg.DevicePtr](t)(d.Malloc(64))
		ev := must[*gg.Event](t)(d.NewEvent(0))
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
				must[*gg.Node](t)(bodies[0].AddNode(c.p)) // accepted when added,
				_, err := g.Instantiate(0)                // refused here
				isCode(t, err, gg.ErrInvalidValue)
			})
		}
		t.Run("allowed in a body", func(t *testing.T) {
			g, _, _, bodies := newCond(t, gg.ConditionalIf, 1)
			kids := graph(t, d)
			must[*gg.Node](t)(kids.AddKernelNode(kp(kA)))
			b := bodies[0]
			a := must[*gg.Node](t)(b.AddKernelNode(kp(kA)))
			m := must[*gg.Node](t)(b.AddMemsetNode(gg.Memset8(buf, 1, 64), a))
			c := must[*gg.Node](t)(b.AddMemcpyNode(gg.DtoD(buf, buf+32, 32), m))
			must[*gg.Node](t)(b.AddChildGraphNode(kids, c))
			must[*gg.Node](t)(b.AddEmptyNode(c))
			launchSync(t, must[*gg.Exec](t)(g.Instantiate(0)), stream(t, d))
		})
	})
}
