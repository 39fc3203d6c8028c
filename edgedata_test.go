package gpugraph_test

import (
	"bytes"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

var (
	progEdge   = gg.EdgeData{FromPort: gg.KernelNodePortProgrammatic, Type: gg.DependencyTypeProgrammatic}
	launchEdge = gg.EdgeData{FromPort: gg.KernelNodePortLaunchCompletion, Type: gg.DependencyTypeProgrammatic}
)

// Control words of the programmatic launch kernels, in device memory.
const (
	ctlStarted   = iota // the consumer has started
	ctlOverlap          // the producer saw the consumer start before it finished
	ctlTriggered        // producer blocks that reached their trigger
	ctlEarly            // consumer blocks that started before every producer block triggered
	ctlWords
)

// Producer wait modes.
const (
	waitNone      = 0
	waitConsumer  = 1 // after its trigger, each block waits for the consumer to start
	waitLastBlock = 2 // the last block waits a moment before its trigger
)

// pdlProducer writes data[i] = 3i+1 after its trigger. In mode
// waitConsumer each block first waits (bounded) for the consumer to start,
// which only an early start allows, and records whether it saw that. In
// mode waitLastBlock the last block pauses before it counts itself and
// triggers, so that a consumer started too early shows.
var pdlProducer = &gg.Kernel{
	Name:   "pdlProducer",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Pointer, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		data, ctl := gg.Slice[uint32](a.Ptr(0), a.Int(1)), gg.Slice[uint32](a.Ptr(2), ctlWords)
		started := func(wait time.Duration) bool {
			deadline := time.Now().Add(wait)
			for atomic.LoadUint32(&ctl[ctlStarted]) == 0 && time.Now().Before(deadline) {
				runtime.Gosched()
			}
			return atomic.LoadUint32(&ctl[ctlStarted]) != 0
		}
		if a.Int32(3) == waitLastBlock && b.Idx.X == b.GridDim.X-1 {
			started(50 * time.Millisecond)
		}
		atomic.AddUint32(&ctl[ctlTriggered], 1)
		if a.Int32(4) != 0 {
			b.TriggerProgrammaticLaunchCompletion()
		}
		if a.Int32(3) == waitConsumer && started(10*time.Second) {
			atomic.StoreUint32(&ctl[ctlOverlap], 1)
		}
		for t := 0; t < b.Dim.X; t++ { // a grid-stride loop
			for i := b.Idx.X*b.Dim.X + t; i < len(data); i += b.GridDim.X * b.Dim.X {
				data[i] = uint32(3*i + 1)
			}
		}
	},
	CUDA: `extern "C" __global__ void pdlProducer(unsigned* data, int n, unsigned* ctl, int wait, int trigger) {
	if (wait == 2 && blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
		long long t0 = clock64();
		while (atomicAdd(&ctl[0], 0u) == 0u && clock64() - t0 < 100000000LL) {}
	}
	if (threadIdx.x == 0) { atomicAdd(&ctl[2], 1u); __threadfence(); }
	__syncthreads();
	if (trigger) asm volatile("griddepcontrol.launch_dependents;");
	if (wait == 1) {
		if (threadIdx.x == 0) {
			long long t0 = clock64();
			while (atomicAdd(&ctl[0], 0u) == 0u && clock64() - t0 < 2000000000LL) {}
			if (atomicAdd(&ctl[0], 0u) != 0u) ctl[1] = 1u;
		}
		__syncthreads();
	}
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = 3u * i + 1u;
}`,
}

// pdlConsumer marks that it started, notes whether every producer block
// had triggered by then (want blocks), waits for the producer with
// GridDependencySynchronize and copies its data to out.
var pdlConsumer = &gg.Kernel{
	Name:   "pdlConsumer",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(1)
		data, ctl, out := gg.Slice[uint32](a.Ptr(0), n), gg.Slice[uint32](a.Ptr(2), ctlWords), gg.Slice[uint32](a.Ptr(3), n)
		atomic.StoreUint32(&ctl[ctlStarted], 1)
		if atomic.LoadUint32(&ctl[ctlTriggered]) < a.Uint32(4) {
			atomic.AddUint32(&ctl[ctlEarly], 1)
		}
		b.GridDependencySynchronize()
		for t := 0; t < b.Dim.X; t++ {
			for i := b.Idx.X*b.Dim.X + t; i < n; i += b.GridDim.X * b.Dim.X {
				out[i] = data[i]
			}
		}
	},
	CUDA: `extern "C" __global__ void pdlConsumer(unsigned* data, int n, unsigned* ctl, unsigned* out, int want) {
	if (threadIdx.x == 0) {
		atomicExch(&ctl[0], 1u);
		if (atomicAdd(&ctl[2], 0u) < (unsigned)want) atomicAdd(&ctl[3], 1u);
	}
	asm volatile("griddepcontrol.wait;" ::: "memory");
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = data[i];
}`,
}

// pdlGraph is memset(ctl) -> producer -data-> consumer, grids of blocks
// blocks of 32 threads over n = 32*blocks words.
type pdlGraph struct {
	g                 *gg.Graph
	prod, cons        *gg.Node
	data, ctl, out    gg.DevicePtr
	n, producerBlocks int
}

func newPDLGraph(t *testing.T, d *gg.Device, data gg.EdgeData, prodBlocks, consBlocks int, wait int32, trigger bool) *pdlGraph {
	t.Helper()
	p := &pdlGraph{g: graph(t, d), n: 32 * max(prodBlocks, consBlocks), producerBlocks: prodBlocks}
	p.data = must[gg.DevicePtr](t)(d.Malloc(4 * p.n))
	p.out = must[gg.DevicePtr](t)(d.Malloc(4 * p.n))
	p.ctl = must[gg.DevicePtr](t)(d.Malloc(4 * ctlWords))
	b := func(v bool) int32 {
		if v {
			return 1
		}
		return 0
	}
	clear := must[*gg.Node](t)(p.g.AddMemsetNode(gg.Memset32(p.ctl, 0, ctlWords)))
	clearOut := must[*gg.Node](t)(p.g.AddMemsetNode(gg.Memset32(p.out, 0, p.n)))
	p.prod = must[*gg.Node](t)(p.g.AddKernelNode(gg.KernelParams{Kernel: pdlProducer, Grid: gg.Dim1(prodBlocks), Block: gg.Dim1(32),
		Args: []any{p.data, int32(p.n), p.ctl, wait, b(trigger)}}, clear, clearOut))
	p.cons = must[*gg.Node](t)(p.g.AddNodeWithEdgeData(gg.KernelParams{Kernel: pdlConsumer, Grid: gg.Dim1(consBlocks), Block: gg.Dim1(32),
		Args: []any{p.data, int32(p.n), p.ctl, p.out, int32(prodBlocks)}}, []*gg.Node{p.prod}, []gg.EdgeData{data}))
	return p
}

// run launches the graph and checks that the consumer read every word the
// producer wrote; it returns the control words.
func (p *pdlGraph) run(t *testing.T, d *gg.Device, e *gg.Exec, s *gg.Stream) []uint32 {
	t.Helper()
	ok(t, p.g.Device().Memset(gg.Memset32(p.data, 0, p.n)))
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	out := make([]uint32, p.n)
	ok(t, d.Memcpy(gg.DtoH(gg.Bytes(out), p.out)))
	for i, v := range out {
		if v != uint32(3*i+1) {
			t.Fatalf("out[%d] = %d, want %d: the consumer read data the producer had not written yet", i, v, 3*i+1)
		}
	}
	ctl := make([]uint32, ctlWords)
	ok(t, d.Memcpy(gg.DtoH(gg.Bytes(ctl), p.ctl)))
	return ctl
}

func TestEdgeDataRoundTrip(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	b := must[*gg.Node](t)(g.AddNodeWithEdgeData(kp(kB), []*gg.Node{a}, []gg.EdgeData{progEdge}))
	c := must[*gg.Node](t)(g.AddEmptyNode(a))
	edgeDataRoundTrip(t, d, g, a, b, c)
}

// edgeDataRoundTrip checks queries and removal on a -prog-> b, a -> c.
func edgeDataRoundTrip(t *testing.T, d *gg.Device, g *gg.Graph, a, b, c *gg.Node) {
	t.Helper()
	_, err := a.Dependents()
	isCode(t, err, gg.ErrLossyQuery)
	_, err = b.Dependencies()
	isCode(t, err, gg.ErrLossyQuery)
	if deps := must[[]*gg.Node](t)(c.Dependencies()); len(deps) != 1 || deps[0] != a {
		t.Fatalf("c depends on %v", deps)
	}
	wantOut := []gg.Edge{{From: a, To: b, Data: progEdge}, {From: a, To: c}}
	if es := must[[]gg.Edge](t)(a.DependentEdges()); !equalEdges(es, wantOut) {
		t.Fatalf("a's dependent edges %v, want %v", es, wantOut)
	}
	if es := must[[]gg.Edge](t)(b.DependencyEdges()); !equalEdges(es, wantOut[:1]) {
		t.Fatalf("b's dependency edges %v", es)
	}
	if es := must[[]gg.Edge](t)(g.Edges()); !equalEdges(es, wantOut) {
		t.Fatalf("edges %v, want %v", es, wantOut)
	}

	// The clone keeps the data (on cuda, read back from the driver's clone).
	cl := must[*gg.Graph](t)(g.Clone())
	ca, cb := must[*gg.Node](t)(cl.ClonedNode(a)), must[*gg.Node](t)(cl.ClonedNode(b))
	if es := must[[]gg.Edge](t)(cb.DependencyEdges()); len(es) != 1 || es[0].From != ca || es[0].Data != progEdge {
		t.Fatalf("clone's edges into b: %v", es)
	}
	if !gg.StructurallyEqual(g, cl) {
		t.Fatal("a graph and its clone differ")
	}
	h := graph(t, d)
	ha := must[*gg.Node](t)(h.AddKernelNode(kp(kA)))
	must[*gg.Node](t)(h.AddKernelNode(kp(kB), ha))
	must[*gg.Node](t)(h.AddEmptyNode(ha))
	if gg.StructurallyEqual(g, h) {
		t.Fatal("graphs that differ in edge data are structurally equal")
	}

	// Removal must name the data the edge has.
	isCode(t, g.RemoveDependencies(gg.Edge{From: a, To: b}), gg.ErrInvalidValue)
	isCode(t, g.RemoveDependencies(gg.Edge{From: a, To: b, Data: launchEdge}), gg.ErrInvalidValue)
	isCode(t, g.RemoveDependencies(gg.Edge{From: a, To: c}, gg.Edge{From: a, To: b}), gg.ErrInvalidValue)
	if es := must[[]gg.Edge](t)(g.Edges()); !equalEdges(es, wantOut) {
		t.Fatalf("edges after refused removals %v", es)
	}
	ok(t, g.RemoveDependencies(gg.Edge{From: a, To: b, Data: progEdge}))
	if deps := must[[]*gg.Node](t)(b.Dependencies()); len(deps) != 0 {
		t.Fatalf("b still depends on %v", deps)
	}
	if outs := must[[]*gg.Node](t)(a.Dependents()); len(outs) != 1 || outs[0] != c {
		t.Fatalf("a's dependents %v", outs)
	}
	ok(t, g.AddDependencies(gg.Edge{From: a, To: b, Data: launchEdge}))
	if es := must[[]gg.Edge](t)(b.DependencyEdges()); len(es) != 1 || es[0].Data != launchEdge {
		t.Fatalf("b's edges %v", es)
	}
	ok(t, g.DestroyNode(b))
	if outs := must[[]*gg.Node](t)(a.Dependents()); len(outs) != 1 || outs[0] != c {
		t.Fatalf("a's dependents after destroying b: %v", outs)
	}
}

func equalEdges(a, b []gg.Edge) bool {
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

func TestEdgeDataRules(t *testing.T) {
	d := open(t)
	edgeDataRules(t, d)
}

// edgeDataRules tries every rule on edge data; each refusal changes nothing.
func edgeDataRules(t *testing.T, d *gg.Device) {
	t.Helper()
	g := graph(t, d)
	k1 := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	k2 := must[*gg.Node](t)(g.AddKernelNode(kp(kB)))
	k3 := must[*gg.Node](t)(g.AddKernelNode(kp(kC)))
	em := must[*gg.Node](t)(g.AddEmptyNode())
	child := graph(t, d)
	must[*gg.Node](t)(child.AddKernelNode(kp(kD)))
	cg := must[*gg.Node](t)(g.AddChildGraphNode(child))
	before := must[[]gg.Edge](t)(g.Edges())
	for _, c := range []struct {
		name     string
		from, to *gg.Node
		data     gg.EdgeData
	}{
		{"programmatic into an empty node", k1, em, progEdge},
		{"programmatic into a child graph node", k1, cg, progEdge},
		{"programmatic out of an empty node", em, k1, progEdge},
		{"programmatic out of a child graph node", cg, k1, progEdge},
		{"launch completion port of an empty node", em, k1, gg.EdgeData{FromPort: gg.KernelNodePortLaunchCompletion}},
		{"an incoming port", k1, k2, gg.EdgeData{ToPort: 1}},
		{"an incoming port with programmatic data", k1, k2, gg.EdgeData{FromPort: 1, ToPort: 1, Type: 1}},
		{"an unknown port", k1, k2, gg.EdgeData{FromPort: 3, Type: gg.DependencyTypeProgrammatic}},
		{"an unknown type", k1, k2, gg.EdgeData{FromPort: 1, Type: 2}},
		{"programmatic type from the default port", k1, k2, gg.EdgeData{Type: gg.DependencyTypeProgrammatic}},
		{"programmatic port with the default type", k1, k2, gg.EdgeData{FromPort: gg.KernelNodePortProgrammatic}},
	} {
		t.Run(c.name, func(t *testing.T) {
			isCode(t, g.AddDependencies(gg.Edge{From: c.from, To: c.to, Data: c.data}), gg.ErrInvalidValue)
			p := gg.NodeParams(kp(kD))
			if c.to.Type() != gg.NodeKernel {
				p = gg.EmptyParams{}
			}
			_, err := g.AddNodeWithEdgeData(p, []*gg.Node{c.from}, []gg.EdgeData{c.data})
			isCode(t, err, gg.ErrInvalidValue)
		})
	}
	// A batch with one bad edge adds none; an edge exists once, whatever its data.
	isCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: progEdge}, gg.Edge{From: k2, To: em, Data: progEdge}), gg.ErrInvalidValue)
	isCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: progEdge}, gg.Edge{From: k1, To: k2}), gg.ErrInvalidValue)
	_, err := g.AddNodeWithEdgeData(kp(kD), []*gg.Node{k1, k2}, []gg.EdgeData{progEdge})
	isCode(t, err, gg.ErrInvalidValue)
	if after := must[[]gg.Edge](t)(g.Edges()); !equalEdges(before, after) {
		t.Fatalf("refused calls changed the edges: %v", after)
	}
	if ns := must[[]*gg.Node](t)(g.Nodes()); len(ns) != 5 {
		t.Fatalf("refused calls added nodes: %d", len(ns))
	}
	ok(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: progEdge}))
	isCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2}), gg.ErrInvalidValue)
	isCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: launchEdge}), gg.ErrInvalidValue)
	// A launch completion edge of the default type goes out of a kernel
	// into any node; a programmatic one between kernels.
	ok(t, g.AddDependencies(gg.Edge{From: k2, To: k3, Data: launchEdge}))
	ok(t, g.AddDependencies(gg.Edge{From: k3, To: em, Data: gg.EdgeData{FromPort: gg.KernelNodePortLaunchCompletion}}))
	// So does an edge that a graph with edge data makes inside a child.
	inner := graph(t, d)
	i1 := must[*gg.Node](t)(inner.AddKernelNode(kp(kA)))
	must[*gg.Node](t)(inner.AddNodeWithEdgeData(kp(kB), []*gg.Node{i1}, []gg.EdgeData{progEdge}))
	must[*gg.Node](t)(g.AddChildGraphNode(inner, em))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	s := stream(t, d)
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
}

// A consumer started early by a programmatic edge runs while the producer
// does, and GridDependencySynchronize still shows it all the producer wrote.
func TestEdgeDataProgrammaticOverlap(t *testing.T) {
	for _, c := range []struct {
		name string
		data gg.EdgeData
	}{{"programmatic port", progEdge}, {"launch completion port", launchEdge}} {
		t.Run(c.name, func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			p := newPDLGraph(t, d, c.data, 1, 4, waitConsumer, true)
			e := must[*gg.Exec](t)(p.g.Instantiate(0))
			for rep := 0; rep < 5; rep++ {
				if ctl := p.run(t, d, e, s); ctl[ctlOverlap] != 1 {
					t.Fatalf("launch %d: the consumer did not start before the producer finished", rep)
				}
			}
		})
	}
}

// The consumer starts only once every producer block has triggered (or
// exited, when none triggers); with an ordinary edge, after the producer.
func TestEdgeDataProgrammaticTrigger(t *testing.T) {
	for _, c := range []struct {
		name    string
		data    gg.EdgeData
		trigger bool
	}{
		{"every block triggers", progEdge, true},
		{"no block triggers", progEdge, false},
		{"ordinary edge", gg.EdgeData{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			p := newPDLGraph(t, d, c.data, 8, 8, waitLastBlock, c.trigger)
			e := must[*gg.Exec](t)(p.g.Instantiate(0))
			for rep := 0; rep < 4; rep++ {
				if ctl := p.run(t, d, e, s); ctl[ctlEarly] != 0 || ctl[ctlTriggered] != 8 {
					t.Fatalf("launch %d: %d consumer blocks started before every producer block triggered (%d did)", rep, ctl[ctlEarly], ctl[ctlTriggered])
				}
			}
		})
	}
}

// pdlStage adds 1 to every word of its input into its output: it triggers
// at once, then waits for its producer before reading.
var pdlStage = &gg.Kernel{
	Name:   "pdlStage",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		in, out := gg.Slice[uint32](a.Ptr(0), n), gg.Slice[uint32](a.Ptr(1), n)
		b.TriggerProgrammaticLaunchCompletion()
		b.GridDependencySynchronize()
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				out[i] = in[i] + 1
			}
		}
	},
	CUDA: `extern "C" __global__ void pdlStage(const unsigned* in, unsigned* out, int n) {
	asm volatile("griddepcontrol.launch_dependents;");
	asm volatile("griddepcontrol.wait;" ::: "memory");
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = in[i] + 1u;
}`,
}

// A chain of kernels joined by programmatic edges, every block of each
// blocked in GridDependencySynchronize while its producer runs, inside a
// graph with ordinary work around it and in a child graph: no deadlock on
// a small pool, and each stage sees the previous one's output.
func TestEdgeDataProgrammaticChain(t *testing.T) {
	d := open(t)
	pdlChain(t, d, 12)
}

func pdlChain(t *testing.T, d *gg.Device, launches int) {
	t.Helper()
	const stages, blocks, n = 6, 16, 16 * 32
	bufs := make([]gg.DevicePtr, stages+1)
	for i := range bufs {
		bufs[i] = must[gg.DevicePtr](t)(d.Malloc(4 * n))
	}
	build := func(g *gg.Graph, first []*gg.Node) *gg.Node {
		prev := first
		data := []gg.EdgeData(nil)
		var last *gg.Node
		for i := 0; i < stages; i++ {
			last = must[*gg.Node](t)(g.AddNodeWithEdgeData(gg.KernelParams{Kernel: pdlStage, Grid: gg.Dim1(blocks), Block: gg.Dim1(32),
				Args: []any{bufs[i], bufs[i+1], int32(n)}}, prev, data))
			prev, data = []*gg.Node{last}, []gg.EdgeData{progEdge}
		}
		return last
	}
	g := graph(t, d)
	init := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(bufs[0], 7, n)))
	last := build(g, []*gg.Node{init})
	var hosts atomic.Int32
	side := must[*gg.Node](t)(g.AddHostNode(func() { hosts.Add(1) }, init))
	must[*gg.Node](t)(g.AddEmptyNode(last, side))
	// The same chain as a child graph of another graph.
	outer := graph(t, d)
	must[*gg.Node](t)(outer.AddChildGraphNode(g))
	s := stream(t, d)
	for _, gr := range []*gg.Graph{g, outer} {
		e := must[*gg.Exec](t)(gr.Instantiate(0))
		for rep := 0; rep < launches; rep++ {
			ok(t, d.Memset(gg.Memset32(bufs[stages], 0, n)))
			ok(t, e.Launch(s))
			ok(t, s.Synchronize())
			out := make([]uint32, n)
			ok(t, d.Memcpy(gg.DtoH(gg.Bytes(out), bufs[stages])))
			for i, v := range out {
				if v != 7+stages {
					t.Fatalf("launch %d: out[%d] = %d, want %d", rep, i, v, 7+stages)
				}
			}
		}
	}
}

// In a kernel launched into a stream both calls do nothing.
func TestEdgeDataBlockCallsInStream(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const n = 64
	in, out := must[gg.DevicePtr](t)(d.Malloc(4*n)), must[gg.DevicePtr](t)(d.Malloc(4*n))
	ok(t, s.Memset(gg.Memset32(in, 1, n)))
	ok(t, s.Launch(pdlStage, gg.Dim1(2), gg.Dim1(32), in, out, int32(n)))
	ok(t, s.Synchronize())
	if got := readU32(t, d, out, n); got[n-1] != 2 {
		t.Fatalf("out[%d] = %d", n-1, got[n-1])
	}
}

// Launching an executable graph into a capture keeps its edge data.
func TestEdgeDataLaunchIntoCapture(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	must[*gg.Node](t)(g.AddNodeWithEdgeData(kp(kB), []*gg.Node{a}, []gg.EdgeData{launchEdge}))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	s := stream(t, d)
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	ok(t, e.Launch(s))
	cg := endOK(t, s)
	ns := must[[]*gg.Node](t)(cg.Nodes())
	inner := must[*gg.Graph](t)(ns[0].ChildGraph())
	if !gg.StructurallyEqual(inner, g) {
		var a, b bytes.Buffer
		ok(t, inner.WriteDOT(&a))
		ok(t, g.WriteDOT(&b))
		t.Fatalf("captured launch:\n%s\nwant:\n%s", a.String(), b.String())
	}
}

func TestEdgeDataDOT(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	must[*gg.Node](t)(g.AddNodeWithEdgeData(kp(kB), []*gg.Node{a}, []gg.EdgeData{progEdge}))
	must[*gg.Node](t)(g.AddEmptyNode(a))
	var buf bytes.Buffer
	ok(t, g.WriteDOT(&buf))
	out := buf.String()
	if !strings.Contains(out, `"graph_1_node_0" -> "graph_1_node_1" [style="dashed" label="programmatic port, programmatic"];`) ||
		!strings.Contains(out, `"graph_1_node_0" -> "graph_1_node_2";`) {
		t.Fatalf("DOT output:\n%s", out)
	}
}

func TestEdgeDataCapture(t *testing.T) {
	d := open(t)
	edgeDataCapture(t, d)
}

// edgeDataCapture follows half edges with data through capture.
func edgeDataCapture(t *testing.T, d *gg.Device) {
	t.Helper()
	s := stream(t, d)
	// Into an existing graph, the first captured kernel behind a
	// programmatic edge.
	g := graph(t, d)
	k := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	em := must[*gg.Node](t)(g.AddEmptyNode())
	isCode(t, s.BeginCaptureToGraphWithData(g, []*gg.Node{em}, []gg.EdgeData{progEdge}, gg.CaptureModeGlobal), gg.ErrInvalidValue)
	isCode(t, s.BeginCaptureToGraphWithData(g, []*gg.Node{k, em}, []gg.EdgeData{progEdge}, gg.CaptureModeGlobal), gg.ErrInvalidValue)
	if st := status(t, s); st != gg.CaptureStatusNone {
		t.Fatalf("a refused begin left the stream capturing (%v)", st)
	}
	ok(t, s.BeginCaptureToGraphWithData(g, []*gg.Node{k, em}, []gg.EdgeData{progEdge, {}}, gg.CaptureModeGlobal))
	info := must[gg.CaptureInfo](t)(s.CaptureInfo())
	if len(info.DependencyData) != 2 || info.DependencyData[0] != progEdge || info.DependencyData[1] != (gg.EdgeData{}) {
		t.Fatalf("capture info edge data %v", info.DependencyData)
	}
	ok(t, s.LaunchKernel(kp(kB)))
	info = must[gg.CaptureInfo](t)(s.CaptureInfo())
	if len(info.Dependencies) != 1 || info.DependencyData != nil {
		t.Fatalf("after a kernel: dependencies %v, data %v", info.Dependencies, info.DependencyData)
	}
	ok(t, s.LaunchKernel(kp(kC)))
	g2 := endOK(t, s)
	if g2 != g {
		t.Fatal("EndCapture returned another graph")
	}
	h := graph(t, d)
	hk := must[*gg.Node](t)(h.AddKernelNode(kp(kA)))
	he := must[*gg.Node](t)(h.AddEmptyNode())
	hb := must[*gg.Node](t)(h.AddNodeWithEdgeData(kp(kB), []*gg.Node{hk, he}, []gg.EdgeData{progEdge, {}}))
	must[*gg.Node](t)(h.AddKernelNode(kp(kC), hb))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("captured graph differs from k -prog-> B <- empty, B -> C")
	}

	// UpdateCaptureDependenciesWithData: the next kernel gets the data.
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s.LaunchKernel(kp(kA)))
	ka := must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	isCode(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, nil, 7), gg.ErrInvalidValue)
	isCode(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{{FromPort: 1}}, gg.SetCaptureDependencies), gg.ErrInvalidValue)
	ok(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{launchEdge}, gg.SetCaptureDependencies))
	info = must[gg.CaptureInfo](t)(s.CaptureInfo())
	if len(info.DependencyData) != 1 || info.DependencyData[0] != launchEdge {
		t.Fatalf("capture info edge data %v", info.DependencyData)
	}
	ok(t, s.LaunchKernel(kp(kB)))
	cg := endOK(t, s)
	ns := must[[]*gg.Node](t)(cg.Nodes())
	if es := must[[]gg.Edge](t)(ns[1].DependencyEdges()); len(es) != 1 || es[0].Data != launchEdge {
		t.Fatalf("captured edge %v", es)
	}

	// Other work behind a programmatic half edge is captured, with a full
	// dependency (the driver accepts it and the capture stays valid).
	buf := must[gg.DevicePtr](t)(d.Malloc(64))
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s.LaunchKernel(kp(kA)))
	ka = must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	ok(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{progEdge}, gg.SetCaptureDependencies))
	ok(t, s.Memset(gg.Memset32(buf, 0, 16)))
	if st := status(t, s); st != gg.CaptureStatusActive {
		t.Fatalf("capture status %v after a memset behind a programmatic half edge", st)
	}
	endOK(t, s)

	// A pending half edge with data is discarded at the end of capture.
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s.LaunchKernel(kp(kA)))
	ka = must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	ok(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{progEdge}, gg.SetCaptureDependencies))
	endOK(t, s)
	if st := status(t, s); st != gg.CaptureStatusNone {
		t.Fatalf("the stream is still capturing (%v)", st)
	}

	// An event recorded behind a programmatic half edge carries its data
	// to the stream that waits on it.
	s2 := stream(t, d)
	ev := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s.LaunchKernel(kp(kA)))
	ka = must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	ok(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{progEdge}, gg.SetCaptureDependencies))
	ok(t, s.Record(ev))
	ok(t, s2.Wait(ev))
	info = must[gg.CaptureInfo](t)(s2.CaptureInfo())
	if len(info.DependencyData) != 1 || info.DependencyData[0] != progEdge {
		t.Fatalf("the waiting stream's half edge data %v", info.DependencyData)
	}
	ok(t, s2.LaunchKernel(kp(kB)))
	ok(t, s2.Record(ev))
	ok(t, s.Wait(ev))
	endOK(t, s)
}

// The host executor, run with the race detector and many launches, to
// catch lost wake-ups and deadlocks on a small pool.
func TestEdgeDataProgrammaticStress(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	d := open(t)
	pdlChain(t, d, 40)
	s := stream(t, d)
	p := newPDLGraph(t, d, progEdge, 3, 5, waitNone, true)
	e := must[*gg.Exec](t)(p.g.Instantiate(0))
	for rep := 0; rep < 100; rep++ {
		p.run(t, d, e, s)
	}
	ok(t, e.Destroy())
}
