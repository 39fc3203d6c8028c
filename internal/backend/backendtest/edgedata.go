package backendtest

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// Conformance scenarios for edge data and programmatic dependent launch.
// On cuda the kernels use griddepcontrol, which needs compute capability
// 9.0.

var (
	progEdge   = gg.EdgeData{FromPort: gg.KernelNodePortProgrammatic, Type: gg.DependencyTypeProgrammatic}
	launchEdge = gg.EdgeData{FromPort: gg.KernelNodePortLaunchCompletion, Type: gg.DependencyTypeProgrammatic}
)

// edgeDataRoundTrip checks queries and removal on a -prog-> b, a -> c.
func edgeDataRoundTrip(t *testing.T, d *gg.Device) {
	g := NewGraph(t, d)
	a := Must[*gg.Node](t)(g.AddKernelNode(kp(KA)))
	b := Must[*gg.Node](t)(g.AddNodeWithEdgeData(kp(KB), []*gg.Node{a}, []gg.EdgeData{progEdge}))
	c := Must[*gg.Node](t)(g.AddEmptyNode(a))
	_, err := a.Dependents()
	IsCode(t, err, gg.ErrLossyQuery)
	_, err = b.Dependencies()
	IsCode(t, err, gg.ErrLossyQuery)
	if deps := Must[[]*gg.Node](t)(c.Dependencies()); len(deps) != 1 || deps[0] != a {
		t.Fatalf("c depends on %v", deps)
	}
	wantOut := []gg.Edge{{From: a, To: b, Data: progEdge}, {From: a, To: c}}
	if es := Must[[]gg.Edge](t)(a.DependentEdges()); !slices.Equal(es, wantOut) {
		t.Fatalf("a's dependent edges %v, want %v", es, wantOut)
	}
	if es := Must[[]gg.Edge](t)(b.DependencyEdges()); !slices.Equal(es, wantOut[:1]) {
		t.Fatalf("b's dependency edges %v", es)
	}
	if es := Must[[]gg.Edge](t)(g.Edges()); !slices.Equal(es, wantOut) {
		t.Fatalf("edges %v, want %v", es, wantOut)
	}

	// The clone keeps the data (on cuda, read back from the driver's clone).
	cl := Must[*gg.Graph](t)(g.Clone())
	ca, cb := Must[*gg.Node](t)(cl.ClonedNode(a)), Must[*gg.Node](t)(cl.ClonedNode(b))
	if es := Must[[]gg.Edge](t)(cb.DependencyEdges()); len(es) != 1 || es[0].From != ca || es[0].Data != progEdge {
		t.Fatalf("clone's edges into b: %v", es)
	}
	if !gg.StructurallyEqual(g, cl) {
		t.Fatal("a graph and its clone differ")
	}
	h := NewGraph(t, d)
	ha := Must[*gg.Node](t)(h.AddKernelNode(kp(KA)))
	Must[*gg.Node](t)(h.AddKernelNode(kp(KB), ha))
	Must[*gg.Node](t)(h.AddEmptyNode(ha))
	if gg.StructurallyEqual(g, h) {
		t.Fatal("graphs that differ in edge data are structurally equal")
	}

	// Removal must name the data the edge has.
	IsCode(t, g.RemoveDependencies(gg.Edge{From: a, To: b}), gg.ErrInvalidValue)
	IsCode(t, g.RemoveDependencies(gg.Edge{From: a, To: b, Data: launchEdge}), gg.ErrInvalidValue)
	IsCode(t, g.RemoveDependencies(gg.Edge{From: a, To: c}, gg.Edge{From: a, To: b}), gg.ErrInvalidValue)
	if es := Must[[]gg.Edge](t)(g.Edges()); !slices.Equal(es, wantOut) {
		t.Fatalf("edges after refused removals %v", es)
	}
	OK(t, g.RemoveDependencies(gg.Edge{From: a, To: b, Data: progEdge}))
	if deps := Must[[]*gg.Node](t)(b.Dependencies()); len(deps) != 0 {
		t.Fatalf("b still depends on %v", deps)
	}
	if outs := Must[[]*gg.Node](t)(a.Dependents()); len(outs) != 1 || outs[0] != c {
		t.Fatalf("a's dependents %v", outs)
	}
	OK(t, g.AddDependencies(gg.Edge{From: a, To: b, Data: launchEdge}))
	if es := Must[[]gg.Edge](t)(b.DependencyEdges()); len(es) != 1 || es[0].Data != launchEdge {
		t.Fatalf("b's edges %v", es)
	}
	OK(t, g.DestroyNode(b))
	if outs := Must[[]*gg.Node](t)(a.Dependents()); len(outs) != 1 || outs[0] != c {
		t.Fatalf("a's dependents after destroying b: %v", outs)
	}
}

// edgeDataRules tries every rule on edge data; each refusal changes nothing.
func edgeDataRules(t *testing.T, d *gg.Device) {
	t.Helper()
	g := NewGraph(t, d)
	k1 := Must[*gg.Node](t)(g.AddKernelNode(kp(KA)))
	k2 := Must[*gg.Node](t)(g.AddKernelNode(kp(KB)))
	k3 := Must[*gg.Node](t)(g.AddKernelNode(kp(KC)))
	em := Must[*gg.Node](t)(g.AddEmptyNode())
	child := NewGraph(t, d)
	Must[*gg.Node](t)(child.AddKernelNode(kp(KD)))
	cg := Must[*gg.Node](t)(g.AddChildGraphNode(child))
	before := Must[[]gg.Edge](t)(g.Edges())
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
			IsCode(t, g.AddDependencies(gg.Edge{From: c.from, To: c.to, Data: c.data}), gg.ErrInvalidValue)
			p := gg.NodeParams(kp(KD))
			if c.to.Type() != gg.NodeKernel {
				p = gg.EmptyParams{}
			}
			_, err := g.AddNodeWithEdgeData(p, []*gg.Node{c.from}, []gg.EdgeData{c.data})
			IsCode(t, err, gg.ErrInvalidValue)
		})
	}
	// A batch with one bad edge adds none; an edge exists once, whatever its data.
	IsCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: progEdge}, gg.Edge{From: k2, To: em, Data: progEdge}), gg.ErrInvalidValue)
	IsCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: progEdge}, gg.Edge{From: k1, To: k2}), gg.ErrInvalidValue)
	_, err := g.AddNodeWithEdgeData(kp(KD), []*gg.Node{k1, k2}, []gg.EdgeData{progEdge})
	IsCode(t, err, gg.ErrInvalidValue)
	if after := Must[[]gg.Edge](t)(g.Edges()); !slices.Equal(before, after) {
		t.Fatalf("refused calls changed the edges: %v", after)
	}
	if ns := Must[[]*gg.Node](t)(g.Nodes()); len(ns) != 5 {
		t.Fatalf("refused calls added nodes: %d", len(ns))
	}
	OK(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: progEdge}))
	IsCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2}), gg.ErrInvalidValue)
	IsCode(t, g.AddDependencies(gg.Edge{From: k1, To: k2, Data: launchEdge}), gg.ErrInvalidValue)
	// A launch completion edge of the default type goes out of a kernel
	// into any node; a programmatic one between kernels.
	OK(t, g.AddDependencies(gg.Edge{From: k2, To: k3, Data: launchEdge}))
	OK(t, g.AddDependencies(gg.Edge{From: k3, To: em, Data: gg.EdgeData{FromPort: gg.KernelNodePortLaunchCompletion}}))
	// So does an edge that a graph with edge data makes inside a child.
	inner := NewGraph(t, d)
	i1 := Must[*gg.Node](t)(inner.AddKernelNode(kp(KA)))
	Must[*gg.Node](t)(inner.AddNodeWithEdgeData(kp(KB), []*gg.Node{i1}, []gg.EdgeData{progEdge}))
	Must[*gg.Node](t)(g.AddChildGraphNode(inner, em))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	s := NewStream(t, d)
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
}

// edgeDataCapture follows half edges with data through capture.
func edgeDataCapture(t *testing.T, d *gg.Device) {
	t.Helper()
	s := NewStream(t, d)
	// Into an existing graph, the first captured kernel behind a
	// programmatic edge.
	g := NewGraph(t, d)
	k := Must[*gg.Node](t)(g.AddKernelNode(kp(KA)))
	em := Must[*gg.Node](t)(g.AddEmptyNode())
	IsCode(t, s.BeginCaptureToGraphWithData(g, []*gg.Node{em}, []gg.EdgeData{progEdge}, gg.CaptureModeGlobal), gg.ErrInvalidValue)
	IsCode(t, s.BeginCaptureToGraphWithData(g, []*gg.Node{k, em}, []gg.EdgeData{progEdge}, gg.CaptureModeGlobal), gg.ErrInvalidValue)
	if st := status(t, s); st != gg.CaptureStatusNone {
		t.Fatalf("a refused begin left the stream capturing (%v)", st)
	}
	OK(t, s.BeginCaptureToGraphWithData(g, []*gg.Node{k, em}, []gg.EdgeData{progEdge, {}}, gg.CaptureModeGlobal))
	info := Must[gg.CaptureInfo](t)(s.CaptureInfo())
	if len(info.DependencyData) != 2 || info.DependencyData[0] != progEdge || info.DependencyData[1] != (gg.EdgeData{}) {
		t.Fatalf("capture info edge data %v", info.DependencyData)
	}
	OK(t, s.LaunchKernel(kp(KB)))
	info = Must[gg.CaptureInfo](t)(s.CaptureInfo())
	if len(info.Dependencies) != 1 || info.DependencyData != nil {
		t.Fatalf("after a kernel: dependencies %v, data %v", info.Dependencies, info.DependencyData)
	}
	OK(t, s.LaunchKernel(kp(KC)))
	g2 := EndOK(t, s)
	if g2 != g {
		t.Fatal("EndCapture returned another graph")
	}
	h := NewGraph(t, d)
	hk := Must[*gg.Node](t)(h.AddKernelNode(kp(KA)))
	he := Must[*gg.Node](t)(h.AddEmptyNode())
	hb := Must[*gg.Node](t)(h.AddNodeWithEdgeData(kp(KB), []*gg.Node{hk, he}, []gg.EdgeData{progEdge, {}}))
	Must[*gg.Node](t)(h.AddKernelNode(kp(KC), hb))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("captured graph differs from k -prog-> B <- empty, B -> C")
	}

	// UpdateCaptureDependenciesWithData: the next kernel gets the data.
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KA)))
	ka := Must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	IsCode(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, nil, 7), gg.ErrInvalidValue)
	IsCode(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{{FromPort: 1}}, gg.SetCaptureDependencies), gg.ErrInvalidValue)
	OK(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{launchEdge}, gg.SetCaptureDependencies))
	info = Must[gg.CaptureInfo](t)(s.CaptureInfo())
	if len(info.DependencyData) != 1 || info.DependencyData[0] != launchEdge {
		t.Fatalf("capture info edge data %v", info.DependencyData)
	}
	OK(t, s.LaunchKernel(kp(KB)))
	cg := EndOK(t, s)
	ns := Must[[]*gg.Node](t)(cg.Nodes())
	if es := Must[[]gg.Edge](t)(ns[1].DependencyEdges()); len(es) != 1 || es[0].Data != launchEdge {
		t.Fatalf("captured edge %v", es)
	}

	// Other work behind a programmatic half edge is captured, with a full
	// dependency (the driver accepts it and the capture stays valid).
	buf := Must[gg.DevicePtr](t)(d.Malloc(64))
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KA)))
	ka = Must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	OK(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{progEdge}, gg.SetCaptureDependencies))
	OK(t, s.Memset(gg.Memset32(buf, 0, 16)))
	if st := status(t, s); st != gg.CaptureStatusActive {
		t.Fatalf("capture status %v after a memset behind a programmatic half edge", st)
	}
	EndOK(t, s)

	// A pending half edge with data is discarded at the end of capture.
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KA)))
	ka = Must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	OK(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{progEdge}, gg.SetCaptureDependencies))
	EndOK(t, s)
	if st := status(t, s); st != gg.CaptureStatusNone {
		t.Fatalf("the stream is still capturing (%v)", st)
	}

	// An event recorded behind a programmatic half edge carries its data
	// to the stream that waits on it.
	s2 := NewStream(t, d)
	ev := Must[*gg.Event](t)(d.NewEvent(0))
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KA)))
	ka = Must[gg.CaptureInfo](t)(s.CaptureInfo()).Dependencies[0]
	OK(t, s.UpdateCaptureDependenciesWithData([]*gg.Node{ka}, []gg.EdgeData{progEdge}, gg.SetCaptureDependencies))
	OK(t, s.Record(ev))
	OK(t, s2.Wait(ev))
	info = Must[gg.CaptureInfo](t)(s2.CaptureInfo())
	if len(info.DependencyData) != 1 || info.DependencyData[0] != progEdge {
		t.Fatalf("the waiting stream's half edge data %v", info.DependencyData)
	}
	OK(t, s2.LaunchKernel(kp(KB)))
	OK(t, s2.Record(ev))
	OK(t, s.Wait(ev))
	EndOK(t, s)
}

// The consumer of a programmatic edge may start before its producer ends,
// and sees all the producer wrote after GridDependencySynchronize. On the
// host backend the early start always happens and is checked; on a GPU it
// is a chance, so there only the results are checked (PDLGraph.Run).
func edgeDataProgrammaticLaunch(t *testing.T, d *gg.Device) {
	gpu := d.Properties().Backend == gg.BackendCUDA
	s := NewStream(t, d)
	for _, c := range []struct {
		name string
		data gg.EdgeData
	}{{"programmatic port", progEdge}, {"launch completion port", launchEdge}} {
		p := NewPDLGraph(t, d, c.data, 1, 4, WaitConsumer, true)
		e := Must[*gg.Exec](t)(p.G.Instantiate(0))
		for rep := 0; rep < 2; rep++ {
			ctl := p.Run(t, d, e, s)
			if !gpu && ctl[CtlOverlap] != 1 {
				t.Fatalf("%s, launch %d: the consumer did not start early", c.name, rep)
			}
		}
	}
	// With eight producer blocks the consumer starts after all of them
	// triggered: on host the count it reads at its start says so. On a GPU
	// that count may lag (the producers' counts need not be visible before
	// GridDependencySynchronize), so only the count read after it, which
	// must be all eight on both backends, is checked there.
	p := NewPDLGraph(t, d, progEdge, 8, 8, WaitLastBlock, true)
	e := Must[*gg.Exec](t)(p.G.Instantiate(0))
	ctl := p.Run(t, d, e, s)
	if !gpu && ctl[CtlEarly] != 0 {
		t.Fatalf("%d consumer blocks started before every producer block triggered", ctl[CtlEarly])
	}
	if ctl[CtlLate] != 0 {
		t.Fatalf("%d consumer blocks saw fewer than 8 producer triggers after GridDependencySynchronize", ctl[CtlLate])
	}
	PDLChain(t, d, 3)
}

// Control words of the programmatic launch kernels, in device memory: the
// indexes of the slice PDLGraph.Run returns.
const (
	ctlStarted   = iota // the consumer has started
	CtlOverlap          // the producer saw the consumer start before it finished
	CtlTriggered        // producer blocks that reached their trigger
	CtlEarly            // consumer blocks that started before every producer block triggered
	CtlLate             // consumer blocks that, after GridDependencySynchronize, saw fewer than every producer block's count
	ctlWords
)

// Producer wait modes, for NewPDLGraph.
const (
	WaitNone      = 0
	WaitConsumer  = 1 // after its trigger, each block waits for the consumer to start
	WaitLastBlock = 2 // the last block waits a moment before its trigger
)

// pdlProducer writes data[i] = 3i+1 after its trigger. In mode
// WaitConsumer each block first waits (bounded) for the consumer to start,
// which only an early start allows, and records whether it saw that. In
// mode WaitLastBlock the last block pauses before it counts itself and
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
		if a.Int32(3) == WaitLastBlock && b.Idx.X == b.GridDim.X-1 {
			started(50 * time.Millisecond)
		}
		atomic.AddUint32(&ctl[CtlTriggered], 1)
		if a.Int32(4) != 0 {
			b.TriggerProgrammaticLaunchCompletion()
		}
		if a.Int32(3) == WaitConsumer && started(10*time.Second) {
			atomic.StoreUint32(&ctl[CtlOverlap], 1)
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
		if atomic.LoadUint32(&ctl[CtlTriggered]) < a.Uint32(4) {
			atomic.AddUint32(&ctl[CtlEarly], 1)
		}
		b.GridDependencySynchronize()
		if atomic.LoadUint32(&ctl[CtlTriggered]) < a.Uint32(4) {
			atomic.AddUint32(&ctl[CtlLate], 1)
		}
		if atomic.LoadUint32(&ctl[CtlTriggered]) < a.Uint32(4) {
			atomic.AddUint32(&ctl[CtlLate], 1)
		}
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
	if (threadIdx.x == 0 && atomicAdd(&ctl[2], 0u) < (unsigned)want) atomicAdd(&ctl[4], 1u);
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = data[i];
}`,
}

// PDLGraph is memset(ctl) -> producer -data-> consumer, grids of blocks
// blocks of 32 threads over n = 32*blocks words.
type PDLGraph struct {
	G                 *gg.Graph // instantiate it to run it
	prod, cons        *gg.Node
	data, ctl, out    gg.DevicePtr
	n, producerBlocks int
}

// NewPDLGraph builds a PDLGraph whose consumer depends on its producer with
// edge data; the producer waits as wait says, and triggers if trigger.
func NewPDLGraph(t *testing.T, d *gg.Device, data gg.EdgeData, prodBlocks, consBlocks int, wait int32, trigger bool) *PDLGraph {
	t.Helper()
	p := &PDLGraph{G: NewGraph(t, d), n: 32 * max(prodBlocks, consBlocks), producerBlocks: prodBlocks}
	p.data = Must[gg.DevicePtr](t)(d.Malloc(4 * p.n))
	p.out = Must[gg.DevicePtr](t)(d.Malloc(4 * p.n))
	p.ctl = Must[gg.DevicePtr](t)(d.Malloc(4 * ctlWords))
	b := func(v bool) int32 {
		if v {
			return 1
		}
		return 0
	}
	clear := Must[*gg.Node](t)(p.G.AddMemsetNode(gg.Memset32(p.ctl, 0, ctlWords)))
	clearOut := Must[*gg.Node](t)(p.G.AddMemsetNode(gg.Memset32(p.out, 0, p.n)))
	p.prod = Must[*gg.Node](t)(p.G.AddKernelNode(gg.KernelParams{Kernel: pdlProducer, Grid: gg.Dim1(prodBlocks), Block: gg.Dim1(32),
		Args: []any{p.data, int32(p.n), p.ctl, wait, b(trigger)}}, clear, clearOut))
	p.cons = Must[*gg.Node](t)(p.G.AddNodeWithEdgeData(gg.KernelParams{Kernel: pdlConsumer, Grid: gg.Dim1(consBlocks), Block: gg.Dim1(32),
		Args: []any{p.data, int32(p.n), p.ctl, p.out, int32(prodBlocks)}}, []*gg.Node{p.prod}, []gg.EdgeData{data}))
	return p
}

// Run launches the graph and checks that the consumer read every word the
// producer wrote; it returns the control words.
func (p *PDLGraph) Run(t *testing.T, d *gg.Device, e *gg.Exec, s *gg.Stream) []uint32 {
	t.Helper()
	OK(t, p.G.Device().Memset(gg.Memset32(p.data, 0, p.n)))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	out := make([]uint32, p.n)
	OK(t, d.Memcpy(gg.DtoH(gg.Bytes(out), p.out)))
	for i, v := range out {
		if v != uint32(3*i+1) {
			t.Fatalf("out[%d] = %d, want %d: the consumer read data the producer had not written yet", i, v, 3*i+1)
		}
	}
	ctl := make([]uint32, ctlWords)
	OK(t, d.Memcpy(gg.DtoH(gg.Bytes(ctl), p.ctl)))
	return ctl
}

// PDLStage adds 1 to every word of its input into its output: it triggers
// at once, then waits for its producer before reading.
var PDLStage = &gg.Kernel{
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

// PDLChain builds a chain of PDLStage kernels joined by programmatic edges,
// with ordinary work around it, alone and as a child graph, and launches
// each launches times, checking the output.
func PDLChain(t *testing.T, d *gg.Device, launches int) {
	t.Helper()
	const stages, blocks, n = 6, 16, 16 * 32
	bufs := make([]gg.DevicePtr, stages+1)
	for i := range bufs {
		bufs[i] = Must[gg.DevicePtr](t)(d.Malloc(4 * n))
	}
	build := func(g *gg.Graph, first []*gg.Node) *gg.Node {
		prev := first
		data := []gg.EdgeData(nil)
		var last *gg.Node
		for i := 0; i < stages; i++ {
			last = Must[*gg.Node](t)(g.AddNodeWithEdgeData(gg.KernelParams{Kernel: PDLStage, Grid: gg.Dim1(blocks), Block: gg.Dim1(32),
				Args: []any{bufs[i], bufs[i+1], int32(n)}}, prev, data))
			prev, data = []*gg.Node{last}, []gg.EdgeData{progEdge}
		}
		return last
	}
	g := NewGraph(t, d)
	init := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(bufs[0], 7, n)))
	last := build(g, []*gg.Node{init})
	var hosts atomic.Int32
	side := Must[*gg.Node](t)(g.AddHostNode(func() { hosts.Add(1) }, init))
	Must[*gg.Node](t)(g.AddEmptyNode(last, side))
	// The same chain as a child graph of another graph.
	outer := NewGraph(t, d)
	Must[*gg.Node](t)(outer.AddChildGraphNode(g))
	s := NewStream(t, d)
	for _, gr := range []*gg.Graph{g, outer} {
		e := Must[*gg.Exec](t)(gr.Instantiate(0))
		for rep := 0; rep < launches; rep++ {
			OK(t, d.Memset(gg.Memset32(bufs[stages], 0, n)))
			OK(t, e.Launch(s))
			OK(t, s.Synchronize())
			out := make([]uint32, n)
			OK(t, d.Memcpy(gg.DtoH(gg.Bytes(out), bufs[stages])))
			for i, v := range out {
				if v != 7+stages {
					t.Fatalf("launch %d: out[%d] = %d, want %d", rep, i, v, 7+stages)
				}
			}
		}
	}
}
