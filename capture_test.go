package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// kp is an empty kernel launch: captures below compare structure.
func kp(k *gg.Kernel, args ...any) gg.KernelParams {
	return gg.KernelParams{Kernel: k, Grid: one, Block: one, Args: args}
}

func status(t *testing.T, s *gg.Stream) gg.CaptureStatus {
	t.Helper()
	return must[gg.CaptureStatus](t)(s.IsCapturing())
}

func TestCaptureRecordsWorkInsteadOfRunning(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const n = 1024
	x := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	in, out := make([]float32, n), make([]float32, n)
	ran := false
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	if status(t, s) != gg.CaptureStatusActive {
		t.Fatal("stream not capturing")
	}
	ok(t, s.Memcpy(gg.HtoD(x, gg.Bytes(in))))
	ok(t, s.Launch(axpy, gg.Dim1(n/256), gg.Dim1(256), x, x, float32(1), n)) // x += x
	ok(t, s.Memset(gg.Memset8(x, 0, 0)))
	ok(t, s.LaunchHostFunc(func() { ran = true }))
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(out), x)))
	g := endOK(t, s)
	if ran || status(t, s) != gg.CaptureStatusNone {
		t.Fatal("captured work ran, or the stream is still capturing")
	}
	// The same work with the explicit API.
	h := graph(t, d)
	n0 := must[*gg.Node](t)(h.AddMemcpyNode(gg.HtoD(x, gg.Bytes(in))))
	n1 := must[*gg.Node](t)(h.AddKernelNode(gg.KernelParams{Kernel: axpy, Grid: gg.Dim1(n / 256), Block: gg.Dim1(256), Args: []any{x, x, float32(1), n}}, n0))
	n2 := must[*gg.Node](t)(h.AddMemsetNode(gg.Memset8(x, 0, 0), n1))
	n3 := must[*gg.Node](t)(h.AddHostNode(func() {}, n2))
	must[*gg.Node](t)(h.AddMemcpyNode(gg.DtoH(gg.Bytes(out), x), n3))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("captured graph differs from the explicit one")
	}
	e := must[*gg.Exec](t)(g.Instantiate(0))
	for i := range in {
		in[i] = float32(i)
	}
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	if !ran || out[3] != 6 {
		t.Fatalf("replay: host func ran %v, out[3] = %v", ran, out[3])
	}
}

func TestCaptureForkJoin(t *testing.T) {
	d := open(t)
	s1, s2 := stream(t, d), stream(t, d)
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	forkJoin(t, d, s1, s2)
	if status(t, s2) != gg.CaptureStatusActive {
		t.Fatal("stream 2 did not join the capture")
	}
	g := endOK(t, s1)
	if status(t, s2) != gg.CaptureStatusNone {
		t.Fatal("stream 2 still capturing after EndCapture")
	}
	h := graph(t, d)
	a := must[*gg.Node](t)(h.AddKernelNode(kp(kA)))
	b := must[*gg.Node](t)(h.AddKernelNode(kp(kB), a))
	c := must[*gg.Node](t)(h.AddKernelNode(kp(kC), a))
	must[*gg.Node](t)(h.AddKernelNode(kp(kD), b, c))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("fork/join capture differs from A -> B, C -> D")
	}
	// Capturing the same code again gives the same structure: what whole
	// graph update pairs nodes by.
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	forkJoin(t, d, s1, s2)
	if !gg.StructurallyEqual(g, endOK(t, s1)) {
		t.Fatal("two captures of the same code differ")
	}
	// After capture, the streams run work again.
	ran := false
	ok(t, s2.LaunchHostFunc(func() { ran = true }))
	ok(t, s2.Synchronize())
	if !ran {
		t.Fatal("stream 2 does not run work after the capture")
	}
}

func TestCaptureJoinRules(t *testing.T) {
	d := open(t)
	s1, s2 := stream(t, d), stream(t, d)
	e := must[*gg.Event](t)(d.NewEvent(0))

	// A forked stream with work of its own that is not joined back.
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s1.LaunchKernel(kp(kA)))
	ok(t, s1.Record(e))
	ok(t, s2.Wait(e))
	ok(t, s2.LaunchKernel(kp(kB)))
	g, err := s1.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureUnjoined)
	if g != nil || status(t, s1) != gg.CaptureStatusNone || status(t, s2) != gg.CaptureStatusNone {
		t.Fatal("failed EndCapture left a graph or a capturing stream")
	}

	// Joined but idle: no work after the wait.
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s1.LaunchKernel(kp(kA)))
	ok(t, s1.Record(e))
	ok(t, s2.Wait(e))
	endOK(t, s1)

	// Ending in a stream that is not the origin invalidates the capture.
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s1.Record(e))
	ok(t, s2.Wait(e))
	_, err = s2.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureUnmatched)
	if status(t, s1) != gg.CaptureStatusInvalidated {
		t.Fatal("unmatched EndCapture did not invalidate")
	}
	_, err = s1.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)

	// Begin twice, end without a capture.
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	isCode(t, s1.BeginCapture(gg.CaptureModeGlobal), gg.ErrIllegalState)
	endOK(t, s1)
	_, err = s1.EndCapture()
	isCode(t, err, gg.ErrIllegalState)
	isCode(t, s1.BeginCapture(7), gg.ErrInvalidValue)
}

func TestCaptureProhibitedOperationsInvalidate(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	other := stream(t, d)
	outside := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, other.Record(outside))
	ok(t, other.Synchronize())
	ev := must[*gg.Event](t)(d.NewEvent(0))
	cases := []struct {
		name string
		do   func() error
		want *gg.Code
	}{
		{"synchronize the capturing stream", s.Synchronize, gg.ErrStreamCaptureUnsupported},
		{"query the capturing stream", s.Query, gg.ErrStreamCaptureUnsupported},
		{"query a captured event", func() error { ok(t, s.Record(ev)); return ev.Query() }, gg.ErrCapturedEvent},
		{"synchronize a captured event", func() error { ok(t, s.Record(ev)); return ev.Synchronize() }, gg.ErrCapturedEvent},
		{"wait on an event recorded outside", func() error { return s.Wait(outside) }, gg.ErrStreamCaptureIsolation},
		{"synchronize the device", d.Synchronize, gg.ErrStreamCaptureUnsupported},
		{"synchronous Malloc", func() error { _, err := d.Malloc(16); return err }, gg.ErrStreamCaptureUnsupported},
		{"synchronous Free", func() error { return d.Free(1) }, gg.ErrStreamCaptureUnsupported},
		{"synchronous Memcpy", func() error { return d.Memcpy(gg.HtoH(make([]byte, 1), make([]byte, 1))) }, gg.ErrStreamCaptureImplicit},
		{"invalid launch", func() error { return s.LaunchKernel(gg.KernelParams{Kernel: kA, Grid: gg.Dim3{}, Block: one}) }, gg.ErrInvalidConfiguration},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok(t, s.BeginCapture(gg.CaptureModeGlobal))
			ok(t, s.LaunchKernel(kp(kA)))
			isCode(t, tc.do(), tc.want)
			if status(t, s) != gg.CaptureStatusInvalidated {
				t.Fatal("the capture was not invalidated")
			}
			isCode(t, s.LaunchKernel(kp(kB)), gg.ErrStreamCaptureInvalidated)
			g, err := s.EndCapture()
			isCode(t, err, gg.ErrStreamCaptureInvalidated)
			if g != nil || status(t, s) != gg.CaptureStatusNone {
				t.Fatal("EndCapture of an invalidated capture returned a graph or left the stream capturing")
			}
		})
	}
	// Captured events: elapsed time fails without invalidating; after the
	// capture, the event's state is a captured record, not work.
	t0 := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s.Record(t0))
	ok(t, s.Record(ev))
	_, err := gg.ElapsedTime(t0, ev)
	isCode(t, err, gg.ErrCapturedEvent)
	endOK(t, s)
	isCode(t, ev.Query(), gg.ErrInvalidValue)
	ok(t, s.Record(ev))
	ok(t, ev.Synchronize())
	ok(t, s.Synchronize())
}

func TestCaptureMerge(t *testing.T) {
	d := open(t)
	s1, s2 := stream(t, d), stream(t, d)
	e := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s1.Record(e))
	ok(t, s2.BeginCapture(gg.CaptureModeGlobal))
	isCode(t, s2.Wait(e), gg.ErrStreamCaptureMerge)
	if status(t, s1) != gg.CaptureStatusInvalidated || status(t, s2) != gg.CaptureStatusInvalidated {
		t.Fatal("merge did not invalidate both captures")
	}
	_, err := s2.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)
	_, err = s1.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)
}

// TestCaptureModes: which unsafe calls conflict with which captures, with
// scopes standing for CUDA's host threads (docs/driver-capture.txt).
func TestCaptureModes(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	other := d.NewScope()
	modes := []gg.CaptureMode{gg.CaptureModeGlobal, gg.CaptureModeThreadLocal, gg.CaptureModeRelaxed}
	// Malloc from the capturing scope, then from another scope.
	wantOwn := []bool{true, true, false}
	wantOther := []bool{true, false, false}
	for i, m := range modes {
		for _, fromOther := range []bool{false, true} {
			ok(t, s.BeginCapture(m))
			var err error
			var p gg.DevicePtr
			if fromOther {
				p, err = other.Malloc(16)
			} else {
				p, err = d.Malloc(16)
			}
			want := wantOwn[i]
			if fromOther {
				want = wantOther[i]
			}
			if want {
				isCode(t, err, gg.ErrStreamCaptureUnsupported)
				_, err = s.EndCapture()
				isCode(t, err, gg.ErrStreamCaptureInvalidated)
			} else {
				ok(t, err)
				endOK(t, s)
				ok(t, d.Free(p))
			}
		}
	}
	// A scope in relaxed interaction mode may make unsafe calls even during
	// a global capture; Device.Synchronize is refused by every capture.
	if prev := other.ExchangeCaptureMode(gg.CaptureModeRelaxed); prev != gg.CaptureModeGlobal {
		t.Fatalf("initial mode %v", prev)
	}
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	p := must[gg.DevicePtr](t)(other.Malloc(16))
	endOK(t, s)
	ok(t, d.Free(p))
	ok(t, s.BeginCapture(gg.CaptureModeRelaxed))
	isCode(t, d.Synchronize(), gg.ErrStreamCaptureUnsupported)
	_, err := s.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)

	// Ending a global capture from another scope fails and ends it.
	ok(t, other.BeginCapture(s, gg.CaptureModeGlobal))
	_, err = s.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureWrongThread)
	if status(t, s) != gg.CaptureStatusNone {
		t.Fatal("wrong-thread EndCapture left the stream capturing")
	}
	ok(t, other.BeginCapture(s, gg.CaptureModeRelaxed))
	endOK(t, s) // relaxed captures may end anywhere
}

func TestCaptureExternalEventsAndInfo(t *testing.T) {
	d := open(t)
	s, other := stream(t, d), stream(t, d)
	outside := must[*gg.Event](t)(d.NewEvent(0))
	done := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, other.Record(outside))
	info := must[gg.CaptureInfo](t)(s.CaptureInfo())
	if info.Status != gg.CaptureStatusNone || info.ID != 0 {
		t.Fatalf("info of an idle stream %+v", info)
	}
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	ok(t, s.WaitExternal(outside))
	k := s.LaunchKernel(kp(kA))
	ok(t, k)
	ok(t, s.RecordExternal(done))
	info = must[gg.CaptureInfo](t)(s.CaptureInfo())
	if info.Status != gg.CaptureStatusActive || info.ID == 0 || info.Graph == nil || len(info.Dependencies) != 1 ||
		info.Dependencies[0].Type() != gg.NodeEventRecord {
		t.Fatalf("capture info %+v", info)
	}
	g := endOK(t, s)
	ns := must[[]*gg.Node](t)(g.Nodes())
	if len(ns) != 3 || ns[0].Type() != gg.NodeEventWait || ns[1].Type() != gg.NodeKernel || ns[2].Type() != gg.NodeEventRecord {
		t.Fatalf("nodes %v", ns)
	}
	// Unique ids.
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	if again := must[gg.CaptureInfo](t)(s.CaptureInfo()); again.ID == info.ID {
		t.Fatal("two captures share an id")
	}
	endOK(t, s)
}

func TestCaptureToGraphAndUpdateDependencies(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	b := must[*gg.Node](t)(g.AddKernelNode(kp(kB)))
	ok(t, s.BeginCaptureToGraph(g, []*gg.Node{a}, gg.CaptureModeGlobal))
	ok(t, s.LaunchKernel(kp(kC))) // after a
	ok(t, s.UpdateCaptureDependencies([]*gg.Node{b}, gg.AddCaptureDependencies))
	ok(t, s.LaunchKernel(kp(kD))) // after c and b
	foreign := must[*gg.Node](t)(graph(t, d).AddEmptyNode())
	isCode(t, s.UpdateCaptureDependencies([]*gg.Node{foreign}, gg.SetCaptureDependencies), gg.ErrInvalidValue)
	ok(t, s.UpdateCaptureDependencies([]*gg.Node{a}, gg.SetCaptureDependencies))
	ok(t, s.LaunchKernel(kp(kA))) // after a only
	isCode(t, s.UpdateCaptureDependencies(nil, 5), gg.ErrInvalidValue)
	if got := endOK(t, s); got != g {
		t.Fatal("EndCapture did not return the graph captured into")
	}
	h := graph(t, d)
	ha := must[*gg.Node](t)(h.AddKernelNode(kp(kA)))
	hb := must[*gg.Node](t)(h.AddKernelNode(kp(kB)))
	hc := must[*gg.Node](t)(h.AddKernelNode(kp(kC), ha))
	must[*gg.Node](t)(h.AddKernelNode(kp(kD), hc, hb))
	must[*gg.Node](t)(h.AddKernelNode(kp(kA), ha))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("capture into a graph differs from the explicit one")
	}
	isCode(t, s.UpdateCaptureDependencies(nil, gg.AddCaptureDependencies), gg.ErrIllegalState)
}

// TestCaptureMemoryAndGraphLaunch: the seed 001 §3.2 capture (MallocAsync,
// fork, kernels, join, FreeAsync) makes the same graph as the explicit
// API, and runs; a graph launched into a capture is refused.
func TestCaptureMemoryAndGraphLaunch(t *testing.T) {
	d := open(t)
	s1, s2 := stream(t, d), stream(t, d)
	e1 := must[*gg.Event](t)(d.NewEvent(0))
	e2 := must[*gg.Event](t)(d.NewEvent(0))
	const n = 256
	out := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	p := must[gg.DevicePtr](t)(s1.MallocAsync(4 * n))
	ok(t, s1.Launch(fill32, one, gg.Dim1(n), p, float32(2), n)) // A
	ok(t, s1.Record(e1))
	ok(t, s2.Wait(e1))
	ok(t, s1.Launch(axpy, one, gg.Dim1(n), p, out, float32(1), n)) // B: out += p
	ok(t, s2.Launch(axpy, one, gg.Dim1(n), p, out, float32(0), n)) // C
	ok(t, s2.Record(e2))
	ok(t, s1.Wait(e2))
	ok(t, s1.FreeAsync(p))
	g := endOK(t, s1)
	ns := must[[]*gg.Node](t)(g.Nodes())
	want := []gg.NodeType{gg.NodeMemAlloc, gg.NodeKernel, gg.NodeKernel, gg.NodeKernel, gg.NodeMemFree}
	for i, n := range ns {
		if i >= len(want) || n.Type() != want[i] {
			t.Fatalf("node %d is %v, want %v", i, n.Type(), want)
		}
	}
	h := graph(t, d)
	an, hp := addAlloc(t, h, 4*n)
	if hp == p {
		t.Log("note: the explicit graph got the captured graph's address") // distinct graphs: distinct addresses
	}
	ka := must[*gg.Node](t)(h.AddKernelNode(gg.KernelParams{Kernel: fill32, Grid: one, Block: gg.Dim1(n), Args: []any{hp, float32(2), n}}, an))
	kb := must[*gg.Node](t)(h.AddKernelNode(gg.KernelParams{Kernel: axpy, Grid: one, Block: gg.Dim1(n), Args: []any{hp, out, float32(1), n}}, ka))
	kc := must[*gg.Node](t)(h.AddKernelNode(gg.KernelParams{Kernel: axpy, Grid: one, Block: gg.Dim1(n), Args: []any{hp, out, float32(0), n}}, ka))
	must[*gg.Node](t)(h.AddMemFreeNode(hp, kb, kc))
	if !gg.StructurallyEqual(g, h) {
		t.Fatal("captured memory graph differs from the explicit one")
	}
	ok(t, d.Memset(gg.Memset32(out, 0, n)))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(s1))
	ok(t, e.Launch(s1))
	ok(t, s1.Synchronize())
	if v := readF32(t, d, out, n); v[0] != 4 || v[n-1] != 4 {
		t.Fatalf("out = %v after two launches, want 4", v[0])
	}

	// A graph with memory nodes cannot be launched into a capture.
	ok(t, s2.BeginCapture(gg.CaptureModeGlobal))
	isCode(t, e.Launch(s2), gg.ErrStreamCaptureUnsupported)
	_, err := s2.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)

	// So is any other: the driver refuses cuGraphLaunch in a capturing
	// stream whatever the graph (measured on the H100, driver 580).
	inner := graph(t, d)
	must[*gg.Node](t)(inner.AddHostNode(func() {}))
	ie := must[*gg.Exec](t)(inner.Instantiate(0))
	ok(t, s2.BeginCapture(gg.CaptureModeRelaxed))
	isCode(t, ie.Launch(s2), gg.ErrStreamCaptureUnsupported)
	_, err = s2.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)
}
