package gpugraph_test

import (
	"sync"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// The conformance suite: scenarios written once against the public API and
// run on every backend, host always, cuda where there is a GPU (skipped with
// a message elsewhere). Where the two disagree, the driver is right and the
// host backend is fixed. Run on the GPU machine with
//
//	gpugraph.test -test.run Conformance -test.v

func eachBackend(t *testing.T, f func(t *testing.T, d *gg.Device)) {
	t.Run("host", func(t *testing.T) { f(t, open(t)) })
	t.Run("cuda", func(t *testing.T) { f(t, openCUDA(t)) })
}

func TestConformanceGraphOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		g := graph(t, d)
		var mu sync.Mutex
		var order []int
		note := func(i int) func() { return func() { mu.Lock(); order = append(order, i); mu.Unlock() } }
		n0 := must[*gg.Node](t)(g.AddHostNode(note(0)))
		n1 := must[*gg.Node](t)(g.AddKernelNode(kp(kA), n0))
		n2 := must[*gg.Node](t)(g.AddHostNode(note(2), n1))
		child := graph(t, d)
		must[*gg.Node](t)(child.AddHostNode(note(3)))
		n3 := must[*gg.Node](t)(g.AddChildGraphNode(child, n2))
		must[*gg.Node](t)(g.AddHostNode(note(4), n3))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(s))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		want := []int{0, 2, 3, 4, 0, 2, 3, 4}
		if len(order) != len(want) {
			t.Fatalf("order %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("order %v, want %v", order, want)
			}
		}
	})
}

func TestConformanceEventsAcrossStreams(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		a, b := stream(t, d), stream(t, d)
		e := must[*gg.Event](t)(d.NewEvent(0))
		release := make(chan struct{})
		var mu sync.Mutex
		var order []string
		note := func(x string) func() { return func() { mu.Lock(); order = append(order, x); mu.Unlock() } }
		ok(t, a.LaunchHostFunc(func() { <-release }))
		ok(t, a.LaunchHostFunc(note("a")))
		ok(t, a.Record(e))
		ok(t, b.Wait(e))
		ok(t, b.LaunchHostFunc(note("b")))
		isCode(t, e.Query(), gg.ErrNotReady)
		isCode(t, b.Query(), gg.ErrNotReady)
		close(release)
		ok(t, b.Synchronize())
		ok(t, e.Query())
		if len(order) != 2 || order[0] != "a" || order[1] != "b" {
			t.Fatalf("order %v", order)
		}
	})
}

func TestConformanceInvalidCalls(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(256))
		isCode(t, s.Memcpy(gg.HtoD(p, make([]byte, 257))), gg.ErrInvalidValue)
		isCode(t, s.LaunchKernel(gg.KernelParams{Kernel: kA, Grid: gg.Dim3{}, Block: one}), gg.ErrInvalidConfiguration)
		isCode(t, d.Free(p+1), gg.ErrInvalidValue)
		g := graph(t, d)
		a := must[*gg.Node](t)(g.AddEmptyNode())
		b := must[*gg.Node](t)(g.AddEmptyNode(a))
		isCode(t, g.AddDependency(b, a), gg.ErrInvalidValue)
		isCode(t, g.AddDependency(a, b), gg.ErrInvalidValue)
		ok(t, d.Free(p))
		ok(t, s.Synchronize())
	})
}

func TestConformanceCaptureForkJoin(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s1, s2 := stream(t, d), stream(t, d)
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		forkJoin(t, d, s1, s2)
		g := endOK(t, s1)
		h := graph(t, d)
		a := must[*gg.Node](t)(h.AddKernelNode(kp(kA)))
		b := must[*gg.Node](t)(h.AddKernelNode(kp(kB), a))
		c := must[*gg.Node](t)(h.AddKernelNode(kp(kC), a))
		must[*gg.Node](t)(h.AddKernelNode(kp(kD), b, c))
		if !gg.StructurallyEqual(g, h) {
			t.Fatal("fork/join capture differs from A -> B, C -> D")
		}
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(s1))
		ok(t, s1.Synchronize())
	})
}

func TestConformanceCaptureErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s1, s2 := stream(t, d), stream(t, d)
		ev := must[*gg.Event](t)(d.NewEvent(0))
		// Synchronizing a capturing stream invalidates the capture.
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		ok(t, s1.LaunchKernel(kp(kA)))
		isCode(t, s1.Synchronize(), gg.ErrStreamCaptureUnsupported)
		isCode(t, s1.LaunchKernel(kp(kB)), gg.ErrStreamCaptureInvalidated)
		_, err := s1.EndCapture()
		isCode(t, err, gg.ErrStreamCaptureInvalidated)
		if st := status(t, s1); st != gg.CaptureStatusNone {
			t.Fatalf("status after EndCapture %v", st)
		}
		// Begin twice.
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		isCode(t, s1.BeginCapture(gg.CaptureModeGlobal), gg.ErrIllegalState)
		endOK(t, s1)
		// A fork not joined back.
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		ok(t, s1.LaunchKernel(kp(kA)))
		ok(t, s1.Record(ev))
		ok(t, s2.Wait(ev))
		ok(t, s2.LaunchKernel(kp(kB)))
		_, err = s1.EndCapture()
		isCode(t, err, gg.ErrStreamCaptureUnjoined)
		if st := status(t, s2); st != gg.CaptureStatusNone {
			t.Fatalf("forked stream status after the failed EndCapture: %v", st)
		}
	})
}
