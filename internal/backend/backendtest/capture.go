package backendtest

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Scenarios of stream capture.

func captureForkJoin(t *testing.T, d *gg.Device) {
	s1, s2 := NewStream(t, d), NewStream(t, d)
	OK(t, s1.BeginCapture(gg.CaptureModeGlobal))
	ForkJoin(t, d, s1, s2)
	g := EndOK(t, s1)
	h := NewGraph(t, d)
	a := Must[*gg.Node](t)(h.AddKernelNode(kp(KA)))
	b := Must[*gg.Node](t)(h.AddKernelNode(kp(KB), a))
	c := Must[*gg.Node](t)(h.AddKernelNode(kp(KC), a))
	Must[*gg.Node](t)(h.AddKernelNode(kp(KD), b, c))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("fork/join capture differs from A -> B, C -> D")
	}
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, e.Launch(s1))
	OK(t, s1.Synchronize())
}

func captureErrors(t *testing.T, d *gg.Device) {
	s1, s2 := NewStream(t, d), NewStream(t, d)
	ev := Must[*gg.Event](t)(d.NewEvent(0))
	// Synchronizing a capturing stream invalidates the capture.
	OK(t, s1.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s1.LaunchKernel(kp(KA)))
	IsCode(t, s1.Synchronize(), gg.ErrStreamCaptureUnsupported)
	IsCode(t, s1.LaunchKernel(kp(KB)), gg.ErrStreamCaptureInvalidated)
	_, err := s1.EndCapture()
	IsCode(t, err, gg.ErrStreamCaptureInvalidated)
	if st := status(t, s1); st != gg.CaptureStatusNone {
		t.Fatalf("status after EndCapture %v", st)
	}
	// Begin twice.
	OK(t, s1.BeginCapture(gg.CaptureModeGlobal))
	IsCode(t, s1.BeginCapture(gg.CaptureModeGlobal), gg.ErrIllegalState)
	EndOK(t, s1)
	// A fork not joined back.
	OK(t, s1.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s1.LaunchKernel(kp(KA)))
	OK(t, s1.Record(ev))
	OK(t, s2.Wait(ev))
	OK(t, s2.LaunchKernel(kp(KB)))
	_, err = s1.EndCapture()
	IsCode(t, err, gg.ErrStreamCaptureUnjoined)
	if st := status(t, s2); st != gg.CaptureStatusNone {
		t.Fatalf("forked stream status after the failed EndCapture: %v", st)
	}
}

// captureInstantiateProhibited: instantiating a graph is a potentially
// unsafe call: refused while a global-mode capture is open (measured on two
// H200s, driver 580, when collectives captured on one GPU were
// instantiated while the other GPU's capture was still open), and the
// refusal invalidates that capture as other unsafe calls do; a relaxed
// capture allows it.
func captureInstantiateProhibited(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	other := NewGraph(t, d)
	Must[*gg.Node](t)(other.AddKernelNode(kp(KA)))
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KB)))
	_, err := other.Instantiate(0)
	IsCode(t, err, gg.ErrStreamCaptureUnsupported)
	_, err = s.EndCapture()
	IsCode(t, err, gg.ErrStreamCaptureInvalidated)

	OK(t, s.BeginCapture(gg.CaptureModeRelaxed))
	OK(t, s.LaunchKernel(kp(KB)))
	e := Must[*gg.Exec](t)(other.Instantiate(0))
	EndOK(t, s)
	OK(t, e.Destroy())
}

// captureToGraphAndClone: capture into an existing graph with
// dependencies updated mid-capture, capture info, and cloning.
// captureExternalEvents: RecordExternal and WaitExternal in a capture
// become event record and wait nodes (cudaEventRecordExternal,
// cudaEventWaitExternal), not dependencies, and the events a launch of the
// graph records time its work: cudaEventElapsedTime between two record
// nodes of one graph works (measured: driver-capture.txt).
func captureExternalEvents(t *testing.T, d *gg.Device) {
	s, other := NewStream(t, d), NewStream(t, d)
	outside := Must[*gg.Event](t)(d.NewEvent(0))
	start := Must[*gg.Event](t)(d.NewEvent(0))
	end := Must[*gg.Event](t)(d.NewEvent(0))
	OK(t, other.Record(outside))
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s.WaitExternal(outside))
	OK(t, s.RecordExternal(start))
	OK(t, s.LaunchKernel(kp(KA)))
	OK(t, s.RecordExternal(end))
	g := EndOK(t, s)
	ns := Must[[]*gg.Node](t)(g.Nodes())
	want := []gg.NodeType{gg.NodeEventWait, gg.NodeEventRecord, gg.NodeKernel, gg.NodeEventRecord}
	if len(ns) != len(want) {
		t.Fatalf("captured %d nodes, want %v", len(ns), want)
	}
	for i, n := range ns {
		if n.Type() != want[i] {
			t.Fatalf("node %d is a %v node, want %v", i, n.Type(), want[i])
		}
	}
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	for range 2 {
		OK(t, e.Launch(s))
		OK(t, s.Synchronize())
		if dt, err := gg.ElapsedTime(start, end); err != nil || dt < 0 {
			t.Fatalf("ElapsedTime between the graph's record nodes: %v, %v", dt, err)
		}
	}
}

func captureToGraphAndClone(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	g := NewGraph(t, d)
	a := Must[*gg.Node](t)(g.AddKernelNode(kp(KA)))
	b := Must[*gg.Node](t)(g.AddKernelNode(kp(KB)))
	OK(t, s.BeginCaptureToGraph(g, []*gg.Node{a}, gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KC))) // after a
	info := Must[gg.CaptureInfo](t)(s.CaptureInfo())
	if info.Status != gg.CaptureStatusActive || info.ID == 0 || len(info.Dependencies) != 1 || info.Dependencies[0].Type() != gg.NodeKernel {
		t.Fatalf("capture info %+v", info)
	}
	OK(t, s.UpdateCaptureDependencies([]*gg.Node{b}, gg.AddCaptureDependencies))
	OK(t, s.LaunchKernel(kp(KD))) // after c and b
	if got := EndOK(t, s); got != g {
		t.Fatal("EndCapture did not return the graph captured into")
	}
	h := NewGraph(t, d)
	ha := Must[*gg.Node](t)(h.AddKernelNode(kp(KA)))
	hb := Must[*gg.Node](t)(h.AddKernelNode(kp(KB)))
	hc := Must[*gg.Node](t)(h.AddKernelNode(kp(KC), ha))
	Must[*gg.Node](t)(h.AddKernelNode(kp(KD), hc, hb))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("capture into a graph differs from the explicit one")
	}
	c := Must[*gg.Graph](t)(h.Clone())
	if !gg.StructurallyEqual(c, h) {
		t.Fatal("clone differs")
	}
	if m := Must[*gg.Node](t)(c.ClonedNode(hc)); m.ID() != hc.ID() || m.Type() != gg.NodeKernel {
		t.Fatalf("ClonedNode %v", m)
	}
	e := Must[*gg.Exec](t)(c.Instantiate(0))
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
}

func status(t *testing.T, s *gg.Stream) gg.CaptureStatus {
	t.Helper()
	return Must[gg.CaptureStatus](t)(s.IsCapturing())
}

// EndOK ends the capture of s and returns its graph, or fails the test.
func EndOK(t *testing.T, s *gg.Stream) *gg.Graph {
	t.Helper()
	g, err := s.EndCapture()
	if err != nil || g == nil {
		t.Fatalf("EndCapture: %v, graph %v", err, g)
	}
	return g
}

// ForkJoin issues the seed's fork/join example into s1 and s2.
func ForkJoin(t *testing.T, d *gg.Device, s1, s2 *gg.Stream) {
	e1 := Must[*gg.Event](t)(d.NewEvent(0))
	e2 := Must[*gg.Event](t)(d.NewEvent(0))
	OK(t, s1.LaunchKernel(kp(KA)))
	OK(t, s1.Record(e1)) // fork into stream 2
	OK(t, s2.Wait(e1))
	OK(t, s1.LaunchKernel(kp(KB)))
	OK(t, s2.LaunchKernel(kp(KC)))
	OK(t, s2.Record(e2)) // join stream 2 back
	OK(t, s1.Wait(e2))
	OK(t, s1.LaunchKernel(kp(KD)))
}

// captureLaunchAndInvalidation: what the driver does (measured on the H100,
// driver 580) with a graph launched into a capture and with a capture into
// a graph that ends invalidated; and that a node from CaptureInfo is a node
// of the captured graph.
func captureLaunchAndInvalidation(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	inner := NewGraph(t, d)
	Must[*gg.Node](t)(inner.AddKernelNode(kp(KA)))
	ie := Must[*gg.Exec](t)(inner.Instantiate(0))

	// A node from CaptureInfo is the captured graph's, whichever call.
	OK(t, s.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KA)))
	i1 := Must[gg.CaptureInfo](t)(s.CaptureInfo())
	OK(t, s.LaunchKernel(kp(KB)))
	i2 := Must[gg.CaptureInfo](t)(s.CaptureInfo())
	g := EndOK(t, s)
	if i1.Graph != i2.Graph || i2.Graph != g {
		t.Fatal("CaptureInfo and EndCapture gave different graphs for one capture")
	}
	deps := Must[[]*gg.Node](t)(i2.Dependencies[0].Dependencies())
	if len(deps) != 1 || deps[0] != i1.Dependencies[0] {
		t.Fatalf("the second node depends on %v, want the first node from CaptureInfo %v", deps, i1.Dependencies[0])
	}

	// No graph can be launched into a capture, in any mode or into a graph.
	for _, mode := range []gg.CaptureMode{gg.CaptureModeGlobal, gg.CaptureModeThreadLocal, gg.CaptureModeRelaxed} {
		OK(t, s.BeginCapture(mode))
		IsCode(t, ie.Launch(s), gg.ErrStreamCaptureUnsupported)
		_, err := s.EndCapture()
		IsCode(t, err, gg.ErrStreamCaptureInvalidated)
	}

	// A capture into a graph that ends invalidated destroys the graph.
	g = NewGraph(t, d)
	Must[*gg.Node](t)(g.AddKernelNode(kp(KA)))
	OK(t, s.BeginCaptureToGraph(g, nil, gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KB)))
	IsCode(t, ie.Launch(s), gg.ErrStreamCaptureUnsupported)
	_, err := s.EndCapture()
	IsCode(t, err, gg.ErrStreamCaptureInvalidated)
	_, err = g.Nodes()
	IsCode(t, err, gg.ErrInvalidValue)
	IsCode(t, g.Destroy(), gg.ErrInvalidValue)

	// Into a conditional body: the body is destroyed, and the graph holding
	// it can no longer be instantiated or cloned; destroying it works.
	g = NewGraph(t, d)
	h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(0, 0))
	n := Must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
	body := Must[[]*gg.Graph](t)(n.ConditionalBodies())[0]
	OK(t, s.BeginCaptureToGraph(body, nil, gg.CaptureModeGlobal))
	OK(t, s.LaunchKernel(kp(KB)))
	IsCode(t, ie.Launch(s), gg.ErrStreamCaptureUnsupported)
	_, err = s.EndCapture()
	IsCode(t, err, gg.ErrStreamCaptureInvalidated)
	_, err = body.Nodes()
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = g.Instantiate(0)
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = g.Clone()
	IsCode(t, err, gg.ErrInvalidValue)
	OK(t, g.Destroy())
	// The device goes on working.
	OK(t, s.LaunchKernel(kp(KA)))
	OK(t, s.Synchronize())
}
