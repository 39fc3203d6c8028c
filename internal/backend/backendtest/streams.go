package backendtest

import (
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// Scenarios of the default streams: the legacy default stream's implicit
// synchronization with blocking streams (and not with non-blocking ones),
// the per-thread default stream, and what stream capture refuses.

// defaultStreams returns d's legacy stream, a blocking stream, the
// per-thread default stream and a non-blocking stream.
func defaultStreams(t *testing.T, d *gg.Device) (legacy, blocking, perThread, nonBlocking *gg.Stream) {
	t.Helper()
	legacy = Must[*gg.Stream](t)(d.StreamLegacy())
	blocking = Must[*gg.Stream](t)(d.NewStreamWithFlags(gg.StreamDefault))
	perThread = Must[*gg.Stream](t)(d.StreamPerThread())
	nonBlocking = Must[*gg.Stream](t)(d.NewStreamWithFlags(gg.StreamNonBlocking))
	return
}

// gate holds a stream's later work until it is opened: a host function
// that waits on a channel. Opened at the latest when the test ends, so a
// failed test leaves no stream blocked.
func gate(t *testing.T, s *gg.Stream) (open func()) {
	t.Helper()
	ch := make(chan struct{})
	var once atomic.Bool
	open = func() {
		if once.CompareAndSwap(false, true) {
			close(ch)
		}
	}
	t.Cleanup(open)
	OK(t, s.LaunchHostFunc(func() { <-ch }))
	return open
}

// within runs f on a goroutine and reports whether it returned within d.
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// defaultStreamOrder: work in the legacy stream waits for the work issued
// before it to blocking streams (StreamDefault and the per-thread stream),
// and their later work waits for the legacy stream's; a non-blocking
// stream does neither. Each check holds one side's stream on a gate, so the
// result does not depend on timing: a copy that did not wait would read
// the value from before the gated write.
func defaultStreamOrder(t *testing.T, d *gg.Device) {
	legacy, blocking, perThread, nonBlocking := defaultStreams(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	OK(t, d.Memset(gg.Memset32(p, 0, 16)))
	at := func(i int) gg.DevicePtr { return p + gg.DevicePtr(4*i) }
	for i, b := range []struct {
		name string
		s    *gg.Stream
	}{{"blocking", blocking}, {"per-thread", perThread}} {
		base := 4 * i
		// Blocking stream, then legacy: the legacy copy sees the write.
		open := gate(t, b.s)
		OK(t, b.s.Launch(setU32, one, one, p, base, uint32(10+i)))
		OK(t, legacy.Memcpy(gg.DtoD(at(base+1), at(base), 4)))
		IsCode(t, legacy.Query(), gg.ErrNotReady)
		open()
		OK(t, legacy.Synchronize())
		if v := ReadU32(t, d, p, 16)[base+1]; v != uint32(10+i) {
			t.Fatalf("%s stream, then legacy: the legacy stream's copy read %d, want %d (it did not wait for the %s stream)", b.name, v, 10+i, b.name)
		}
		// Legacy, then the blocking stream: its copy sees the legacy write.
		open = gate(t, legacy)
		OK(t, legacy.Launch(setU32, one, one, p, base+2, uint32(20+i)))
		OK(t, b.s.Memcpy(gg.DtoD(at(base+3), at(base+2), 4)))
		IsCode(t, b.s.Query(), gg.ErrNotReady)
		open()
		OK(t, b.s.Synchronize())
		if v := ReadU32(t, d, p, 16)[base+3]; v != uint32(20+i) {
			t.Fatalf("legacy, then %s stream: its copy read %d, want %d (it did not wait for the legacy stream)", b.name, v, 20+i)
		}
	}
	// A non-blocking stream, gated: the legacy stream's copy runs without
	// waiting for it, and reads what was there before.
	open := gate(t, nonBlocking)
	OK(t, nonBlocking.Launch(setU32, one, one, p, 8, uint32(30)))
	OK(t, legacy.Memcpy(gg.DtoD(at(9), at(8), 4)))
	if !within(20*time.Second, func() {
		if err := legacy.Synchronize(); err != nil {
			t.Error(err)
		}
	}) {
		open()
		t.Fatal("the legacy stream waited for a non-blocking stream")
	}
	open()
	OK(t, nonBlocking.Synchronize())
	if got := ReadU32(t, d, p, 16); got[8] != 30 || got[9] != 0 {
		t.Fatalf("non-blocking write %d and the legacy copy of it %d, want 30 and 0", got[8], got[9])
	}
	// The legacy stream, gated: a non-blocking stream's work still runs.
	open = gate(t, legacy)
	ran := make(chan struct{})
	OK(t, nonBlocking.LaunchHostFunc(func() { close(ran) }))
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		open()
		t.Fatal("a non-blocking stream waited for the legacy stream")
	}
	open()
	OK(t, legacy.Synchronize())
}

// legacySynchronizeCoversBlocking: synchronizing the legacy stream waits
// for work issued before to blocking streams, even with nothing in the
// legacy stream itself; a non-blocking stream's work it does not wait for.
func legacySynchronizeCoversBlocking(t *testing.T, d *gg.Device) {
	legacy, blocking, _, nonBlocking := defaultStreams(t, d)
	openNB := gate(t, nonBlocking)
	open := gate(t, blocking)
	var done atomic.Bool
	OK(t, blocking.LaunchHostFunc(func() { done.Store(true) }))
	returned := make(chan struct{})
	go func() {
		if err := legacy.Synchronize(); err != nil {
			t.Error(err)
		}
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("the legacy stream's Synchronize returned before the blocking stream's work ran")
	case <-time.After(50 * time.Millisecond):
	}
	open()
	select {
	case <-returned:
	case <-time.After(20 * time.Second):
		t.Fatal("the legacy stream's Synchronize did not return after the blocking stream's work ran (it waited for the non-blocking stream?)")
	}
	if !done.Load() {
		t.Fatal("the legacy stream's Synchronize returned before the blocking stream's work ran")
	}
	openNB()
	OK(t, nonBlocking.Synchronize())
}

// defaultStreamCapture: the legacy stream cannot be captured; the
// per-thread stream can; while a blocking stream (in any capture mode) is
// capturing, using the legacy stream fails with ErrStreamCaptureImplicit
// and invalidates that capture, and asking its capture status fails
// without invalidating it; a non-blocking stream's capture does not
// concern the legacy stream. The default streams cannot be destroyed, and
// unknown flags are refused.
func defaultStreamCapture(t *testing.T, d *gg.Device) {
	legacy, blocking, perThread, nonBlocking := defaultStreams(t, d)
	IsCode(t, legacy.BeginCapture(gg.CaptureModeGlobal), gg.ErrStreamCaptureUnsupported)
	if st := Must[gg.CaptureStatus](t)(legacy.IsCapturing()); st != gg.CaptureStatusNone {
		t.Fatalf("legacy stream after a refused capture: %v", st)
	}
	OK(t, legacy.Launch(KA, one, one))
	OK(t, legacy.Synchronize())

	OK(t, perThread.BeginCapture(gg.CaptureModeGlobal))
	OK(t, perThread.Launch(KA, one, one))
	OK(t, perThread.Launch(KB, one, one))
	g := Must[*gg.Graph](t)(perThread.EndCapture())
	if n := len(Must[[]*gg.Node](t)(g.Nodes())); n != 2 {
		t.Fatalf("the per-thread stream's capture has %d nodes, want 2", n)
	}

	for _, mode := range []gg.CaptureMode{gg.CaptureModeGlobal, gg.CaptureModeThreadLocal, gg.CaptureModeRelaxed} {
		OK(t, blocking.BeginCapture(mode))
		OK(t, blocking.Launch(KA, one, one))
		_, err := legacy.IsCapturing()
		IsCode(t, err, gg.ErrStreamCaptureImplicit)
		if st := Must[gg.CaptureStatus](t)(blocking.IsCapturing()); st != gg.CaptureStatusActive {
			t.Fatalf("%v capture after asking the legacy stream's status: %v, want active", mode, st)
		}
		IsCode(t, legacy.Launch(KA, one, one), gg.ErrStreamCaptureImplicit)
		if st := Must[gg.CaptureStatus](t)(blocking.IsCapturing()); st != gg.CaptureStatusInvalidated {
			t.Fatalf("%v capture after a launch into the legacy stream: %v, want invalidated", mode, st)
		}
		_, err = blocking.EndCapture()
		IsCode(t, err, gg.ErrStreamCaptureInvalidated)
		OK(t, legacy.Launch(KA, one, one)) // usable again once the capture ended
		OK(t, legacy.Synchronize())
	}

	OK(t, nonBlocking.BeginCapture(gg.CaptureModeGlobal))
	OK(t, nonBlocking.Launch(KA, one, one))
	if st := Must[gg.CaptureStatus](t)(legacy.IsCapturing()); st != gg.CaptureStatusNone {
		t.Fatalf("legacy stream during a non-blocking stream's capture: %v", st)
	}
	OK(t, legacy.Launch(KB, one, one))
	OK(t, legacy.Synchronize())
	OK(t, nonBlocking.Launch(KC, one, one))
	g = Must[*gg.Graph](t)(nonBlocking.EndCapture())
	if n := len(Must[[]*gg.Node](t)(g.Nodes())); n != 2 {
		t.Fatalf("the non-blocking stream's capture has %d nodes, want 2", n)
	}

	IsCode(t, legacy.Destroy(), gg.ErrInvalidResourceHandle)
	IsCode(t, perThread.Destroy(), gg.ErrInvalidResourceHandle)
	OK(t, legacy.Launch(KA, one, one))
	OK(t, perThread.Launch(KA, one, one))
	OK(t, legacy.Synchronize())
	_, err := d.NewStreamWithFlags(2)
	IsCode(t, err, gg.ErrInvalidValue)
	for _, c := range []struct {
		s    *gg.Stream
		want gg.StreamFlags
	}{{legacy, gg.StreamDefault}, {blocking, gg.StreamDefault}, {perThread, gg.StreamDefault}, {nonBlocking, gg.StreamNonBlocking}} {
		if f := Must[gg.StreamFlags](t)(c.s.Flags()); f != c.want {
			t.Errorf("flags %v, want %v", f, c.want)
		}
	}
	if s1, s2 := Must[*gg.Stream](t)(d.StreamLegacy()), Must[*gg.Stream](t)(d.StreamLegacy()); s1 != s2 || s1 != legacy {
		t.Error("StreamLegacy returned different streams")
	}
	if Must[*gg.Stream](t)(d.StreamPerThread()) != perThread {
		t.Error("StreamPerThread returned different streams")
	}
}
