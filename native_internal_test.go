package gpugraph

import (
	"errors"
	"testing"

	"github.com/gpugraph/gpugraph/internal/host"
)

// The native capture path (mirror.go) on two devices, with the fake
// native backend of native_fake_internal_test.go: what the cuda backend
// does on two GPUs, without them.

var kFake = &Kernel{Name: "fake", Params: []ParamType{Pointer}, Go: func(Block, Args) {}}

func nOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func nMust[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		nOK(t, err)
		return v
	}
}

// ordinals are the devices of nodes, by position.
func ordinals(ns []*Node) []int {
	o := make([]int, len(ns))
	for i, n := range ns {
		o[i] = n.Device().Properties().Ordinal
	}
	return o
}

func wantDevices(t *testing.T, what string, ns []*Node, want ...int) {
	t.Helper()
	got := ordinals(ns)
	if len(got) != len(want) {
		t.Fatalf("%s: %d nodes %v, want %d", what, len(got), ns, len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: nodes %v run on devices %v, want %v", what, ns, got, want)
		}
	}
}

// TestNativeCaptureAcrossDevices: a native capture begun in a stream of
// device 0 that forks onto a stream of device 1. Every stream of the
// capture reports the one view of its graph, a graph of device 0 even when
// device 1's stream asks first, so nodes from device 1's CaptureInfo are
// dependencies a conditional or child graph node of that graph may take
// (the differential test's two-device programs were refused with "node
// belongs to another graph" on two GPUs); the nodes captured in device 1's
// stream are device 1's, and stay so through every mirror of the graph.
func TestNativeCaptureAcrossDevices(t *testing.T) {
	d0, d1 := openFakeNative(t, 0), openFakeNative(t, 1)
	a := nMust[DevicePtr](t)(d0.Malloc(256))
	b := nMust[DevicePtr](t)(d1.Malloc(256))
	s0, sb := nMust[*Stream](t)(d0.NewStream()), nMust[*Stream](t)(d0.NewStream())
	s1 := nMust[*Stream](t)(d1.NewStream())
	fork, join := nMust[*Event](t)(d0.NewEvent(0)), nMust[*Event](t)(d1.NewEvent(0))

	nOK(t, s0.BeginCapture(CaptureModeThreadLocal))
	nOK(t, s0.Memset(Memset8(a, 1, 256)))
	nOK(t, s0.Record(fork))
	nOK(t, s1.Wait(fork))
	ci1 := nMust[CaptureInfo](t)(s1.CaptureInfo()) // device 1's stream asks first
	top := ci1.Graph
	if top.Device() != d0 {
		t.Fatalf("the capture's graph is device %d's, want the origin stream's, 0", top.Device().Properties().Ordinal)
	}
	if ci0 := nMust[CaptureInfo](t)(s0.CaptureInfo()); ci0.Graph != top {
		t.Fatal("the streams of one capture report two graphs")
	}
	memset := ci1.Dependencies[0]
	nOK(t, s1.Memcpy(DtoD(b, a, 256)))
	cp := nMust[CaptureInfo](t)(s1.CaptureInfo()).Dependencies[0]
	nOK(t, s1.Launch(kFake, Dim1(1), Dim1(1), b))
	k := nMust[CaptureInfo](t)(s1.CaptureInfo()).Dependencies[0]
	if cp.Graph() != top || k.Graph() != top {
		t.Fatal("nodes from device 1's CaptureInfo are not nodes of the capture's graph")
	}
	wantDevices(t, "memset, copy and kernel", []*Node{memset, cp, k}, 0, 1, 1)

	// A conditional node and a child graph node after device 1's nodes, in
	// the graph device 0's stream reports; the body captured in device 0's
	// other stream.
	h := nMust[ConditionalHandle](t)(top.ConditionalHandleCreate(1, ConditionalAssignDefault))
	cond := nMust[*Node](t)(top.AddNode(ConditionalParams{Handle: h, Type: ConditionalIf, Size: 1}, cp))
	body := nMust[[]*Graph](t)(cond.ConditionalBodies())[0]
	nOK(t, sb.BeginCaptureToGraph(body, nil, CaptureModeThreadLocal))
	nOK(t, sb.Launch(kFake, Dim1(1), Dim1(1), a))
	if g := nMust[*Graph](t)(sb.EndCapture()); g != body {
		t.Fatal("the capture into the body returned another graph")
	}
	child := nMust[*Graph](t)(d0.NewGraph())
	nMust[*Node](t)(child.AddKernelNode(KernelParams{Kernel: kFake, Grid: Dim1(1), Block: Dim1(1), Args: []any{a}}))
	ch := nMust[*Node](t)(top.AddChildGraphNode(child, k))
	nOK(t, s0.UpdateCaptureDependencies([]*Node{cond, ch}, SetCaptureDependencies))
	nOK(t, s1.Record(join))
	nOK(t, s0.Wait(join))
	g := nMust[*Graph](t)(s0.EndCapture())
	if g != top {
		t.Fatal("EndCapture returned another graph than CaptureInfo")
	}
	ns := nMust[[]*Node](t)(g.Nodes())
	wantDevices(t, "the captured graph", ns, 0, 1, 1, 0, 0)
	wantDevices(t, "the body", nMust[[]*Node](t)(body.Nodes()), 0)
	if ns[0] != memset || ns[1] != cp || ns[2] != k || ns[3] != cond || ns[4] != ch {
		t.Fatalf("the captured graph's nodes %v are not those CaptureInfo returned", ns)
	}
	// Mirrored again, the nodes keep their devices.
	g.mu.Lock()
	nOK(t, mirror(g))
	g.mu.Unlock()
	wantDevices(t, "mirrored again", nMust[[]*Node](t)(g.Nodes()), 0, 1, 1, 0, 0)
}

// TestNativeCaptureAcrossDevicesChild: a graph captured across devices,
// embedded in a child graph node and cloned (natively: the clone's child
// graph is mirrored), keeps its nodes' devices.
func TestNativeCaptureAcrossDevicesChild(t *testing.T) {
	d0, d1 := openFakeNative(t, 0), openFakeNative(t, 1)
	a := nMust[DevicePtr](t)(d0.Malloc(256))
	b := nMust[DevicePtr](t)(d1.Malloc(256))
	s0, s1 := nMust[*Stream](t)(d0.NewStream()), nMust[*Stream](t)(d1.NewStream())
	fork, join := nMust[*Event](t)(d0.NewEvent(0)), nMust[*Event](t)(d1.NewEvent(0))
	nOK(t, s0.BeginCapture(CaptureModeGlobal))
	nOK(t, s0.Memset(Memset8(a, 1, 256)))
	nOK(t, s0.Record(fork))
	nOK(t, s1.Wait(fork))
	nOK(t, s1.Memcpy(DtoD(b, a, 256)))
	nMust[CaptureInfo](t)(s0.CaptureInfo()) // a mirror between the two: the kernel is still unknown
	nOK(t, s1.Launch(kFake, Dim1(1), Dim1(1), b))
	nOK(t, s1.Record(join))
	nOK(t, s0.Wait(join))
	captured := nMust[*Graph](t)(s0.EndCapture())
	wantDevices(t, "the captured graph", nMust[[]*Node](t)(captured.Nodes()), 0, 1, 1)

	parent := nMust[*Graph](t)(d0.NewGraph())
	ch := nMust[*Node](t)(parent.AddChildGraphNode(captured))
	wantDevices(t, "the embedded graph", nMust[[]*Node](t)(nMust[*Graph](t)(ch.ChildGraph()).Nodes()), 0, 1, 1)
	cl := nMust[*Graph](t)(parent.Clone())
	clch := nMust[*Node](t)(cl.ClonedNode(ch))
	wantDevices(t, "the clone's embedded graph", nMust[[]*Node](t)(nMust[*Graph](t)(clch.ChildGraph()).Nodes()), 0, 1, 1)
}

// TestNativeCaptureIntoBodyAcrossDevices: a capture into a conditional
// body that forks onto device 1's stream makes a body node of device 1,
// which instantiation refuses (condDeviceRuleLocked) before the backend
// sees the graph.
func TestNativeCaptureIntoBodyAcrossDevices(t *testing.T) {
	d0, d1 := openFakeNative(t, 0), openFakeNative(t, 1)
	b := nMust[DevicePtr](t)(d1.Malloc(256))
	s0, s1 := nMust[*Stream](t)(d0.NewStream()), nMust[*Stream](t)(d1.NewStream())
	fork, join := nMust[*Event](t)(d0.NewEvent(0)), nMust[*Event](t)(d1.NewEvent(0))
	g := nMust[*Graph](t)(d0.NewGraph())
	h := nMust[ConditionalHandle](t)(g.ConditionalHandleCreate(1, ConditionalAssignDefault))
	cond := nMust[*Node](t)(g.AddNode(ConditionalParams{Handle: h, Type: ConditionalIf, Size: 1}))
	body := nMust[[]*Graph](t)(cond.ConditionalBodies())[0]
	nOK(t, s0.BeginCaptureToGraph(body, nil, CaptureModeGlobal))
	nOK(t, s0.Record(fork))
	nOK(t, s1.Wait(fork))
	nOK(t, s1.Launch(kFake, Dim1(1), Dim1(1), b))
	nOK(t, s1.Record(join))
	nOK(t, s0.Wait(join))
	nMust[*Graph](t)(s0.EndCapture())
	ns := nMust[[]*Node](t)(body.Nodes())
	wantDevices(t, "the body", ns, 1)
	_, err := g.Instantiate(0)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalidValue || e.Node != ns[0] {
		t.Fatalf("Instantiate: %v, want ErrInvalidValue naming %v", err, ns[0])
	}
}

// TestNativeCaptureViewsEnd: a capture's view lives from BeginCapture to
// EndCapture, or to its device's Close: while none is under way, stream
// work asks the driver nothing more.
func TestNativeCaptureViewsEnd(t *testing.T) {
	d0 := openFakeNative(t, 0)
	d1, err := Open(BackendHost, WithOrdinal(1))
	nOK(t, err)
	d1.be = &fakeDev{Device: d1.be.(*host.Device)}
	d1.caps, d1.native = &capState{}, &fakeCaps
	s0 := nMust[*Stream](t)(d0.NewStream())
	s1 := nMust[*Stream](t)(d1.NewStream())
	if n := fakeCaps.n.Load(); n != 0 {
		t.Fatalf("%d views before any capture", n)
	}
	nOK(t, s0.BeginCapture(CaptureModeGlobal))
	nOK(t, s1.BeginCapture(CaptureModeGlobal))
	if n := fakeCaps.n.Load(); n != 2 {
		t.Fatalf("%d views of two captures", n)
	}
	nMust[*Graph](t)(s0.EndCapture())
	nOK(t, d1.Close()) // with its capture under way
	if n := fakeCaps.n.Load(); n != 0 {
		t.Fatalf("%d views after EndCapture and Close", n)
	}
}
