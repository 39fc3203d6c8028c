package backendtest

import (
	"fmt"
	"sync/atomic"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Scenarios of the default streams: the legacy default stream's implicit
// synchronization with blocking streams (and not with non-blocking ones),
// the per-thread default stream, and what stream capture refuses.
//
// The order checks hold one stream with a host function and look at what
// waits for it. Three rules of the driver shape them (steps.go):
//   - every kernel and kind of call the held part makes is made once before
//     anything is held (warmUp): the first launch of a kernel on a device
//     loads it, and with CUDA's lazy loading that may wait for all work on
//     the device, the held work included, inside the call that would be
//     followed by the release;
//   - one stream is held at a time: the driver may run host functions of
//     independent streams one after another, so a second held function,
//     or any host function meant to show that a stream runs, might never
//     start while the first is held; whether work runs is seen through
//     events (Event.Query) instead;
//   - every step is bounded and logged.

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

// named is a stream and its name in the steps' log.
type named struct {
	name string
	s    *gg.Stream
}

// warmUp makes, in each stream, every kind of call the scenario makes
// while a stream is held: set_u32 at p[15], a device-to-device copy of it
// to p[14], a host function, an event record and query; then waits for
// all of it. After it no call of the scenario loads a kernel or starts a
// driver thread.
func warmUp(st *steps, d *gg.Device, p gg.DevicePtr, streams ...named) {
	st.t.Helper()
	e := Must[*gg.Event](st.t)(d.NewEvent(0))
	for _, x := range streams {
		s := x.s
		st.do("warm up "+x.name+": set_u32, copy, host function, record", func() error {
			if err := s.Launch(setU32, one, one, p, 15, uint32(0)); err != nil {
				return err
			}
			if err := s.Memcpy(gg.DtoD(p+4*14, p+4*15, 4)); err != nil {
				return err
			}
			if err := s.LaunchHostFunc(func() {}); err != nil {
				return err
			}
			return s.Record(e)
		})
		st.do("warm up "+x.name+": Synchronize", s.Synchronize)
		st.do("warm up: event query", e.Query)
	}
	st.do("warm up: Device.Synchronize", d.Synchronize)
}

// defaultStreamOrder: work in the legacy stream waits for the work issued
// before it to blocking streams (StreamDefault and the per-thread stream),
// and their later work waits for the legacy stream's; a non-blocking
// stream does neither. Each check holds one side's stream with a host
// function, so the result does not depend on timing: a copy that did not
// wait would read the value from before the held write.
func defaultStreamOrder(t *testing.T, d *gg.Device) {
	st := newSteps(t)
	legacy, blocking, perThread, nonBlocking := defaultStreams(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	at := func(i int) gg.DevicePtr { return p + gg.DevicePtr(4*i) }
	st.do("zero the buffer (Device.Memset)", func() error { return d.Memset(gg.Memset32(p, 0, 16)) })
	lg := named{"the legacy stream", legacy}
	nb := named{"the non-blocking stream", nonBlocking}
	bs := []named{{"the blocking stream", blocking}, {"the per-thread stream", perThread}}
	warmUp(st, d, p, lg, bs[0], bs[1], nb)

	for i, b := range bs {
		base, v1, v2 := 4*i, uint32(10+i), uint32(20+i)
		// Blocking stream, then legacy: the legacy copy sees the write.
		release := st.hold(b.name, b.s)
		st.do(fmt.Sprintf("%s: set p[%d] = %d", b.name, base, v1), func() error { return b.s.Launch(setU32, one, one, p, base, v1) })
		st.do(fmt.Sprintf("the legacy stream: copy p[%d] to p[%d]", base, base+1), func() error { return legacy.Memcpy(gg.DtoD(at(base+1), at(base), 4)) })
		st.code("the legacy stream: Query while "+b.name+" is held", gg.ErrNotReady, legacy.Query)
		release()
		st.do("the legacy stream: Synchronize", legacy.Synchronize)
		if v := st.read(d, p, 16)[base+1]; v != v1 {
			t.Errorf("%s, then legacy: the legacy stream's copy read %d, want %d (it did not wait for %s)", b.name, v, v1, b.name)
		}
		// Legacy, then the blocking stream: its copy sees the legacy write.
		release = st.hold(lg.name, legacy)
		st.do(fmt.Sprintf("the legacy stream: set p[%d] = %d", base+2, v2), func() error { return legacy.Launch(setU32, one, one, p, base+2, v2) })
		st.do(fmt.Sprintf("%s: copy p[%d] to p[%d]", b.name, base+2, base+3), func() error { return b.s.Memcpy(gg.DtoD(at(base+3), at(base+2), 4)) })
		st.code(b.name+": Query while the legacy stream is held", gg.ErrNotReady, b.s.Query)
		release()
		st.do(b.name+": Synchronize", b.s.Synchronize)
		if v := st.read(d, p, 16)[base+3]; v != v2 {
			t.Errorf("legacy, then %s: its copy read %d, want %d (it did not wait for the legacy stream)", b.name, v, v2)
		}
	}

	// A non-blocking stream, held: the legacy stream's copy runs without
	// waiting for it, and reads what was there before.
	release := st.hold(nb.name, nonBlocking)
	st.do("the non-blocking stream: set p[8] = 30", func() error { return nonBlocking.Launch(setU32, one, one, p, 8, uint32(30)) })
	st.do("the legacy stream: copy p[8] to p[9]", func() error { return legacy.Memcpy(gg.DtoD(at(9), at(8), 4)) })
	st.do("the legacy stream: Synchronize while the non-blocking stream is held (must not wait for it)", legacy.Synchronize)
	release()
	st.do("the non-blocking stream: Synchronize", nonBlocking.Synchronize)
	if got := st.read(d, p, 16); got[8] != 30 || got[9] != 0 {
		t.Errorf("non-blocking write %d and the legacy copy of it %d, want 30 and 0", got[8], got[9])
	}

	// The legacy stream, held: a non-blocking stream's work still runs
	// (seen by an event, not a host function: see above).
	e := Must[*gg.Event](t)(d.NewEvent(0))
	release = st.hold(lg.name, legacy)
	st.do("the non-blocking stream: set p[10] = 40", func() error { return nonBlocking.Launch(setU32, one, one, p, 10, uint32(40)) })
	st.do("the non-blocking stream: record an event", func() error { return nonBlocking.Record(e) })
	st.poll("the non-blocking stream's event while the legacy stream is held", "the non-blocking stream waited for the legacy stream", e.Query)
	release()
	st.do("the legacy stream: Synchronize", legacy.Synchronize)
	if got := st.read(d, p, 16); got[10] != 40 {
		t.Errorf("the non-blocking stream's write: %d, want 40", got[10])
	}
}

// legacySynchronizeCoversBlocking: synchronizing or querying the legacy
// stream covers the work issued before to blocking streams, even with
// nothing in the legacy stream itself; a non-blocking stream's work it
// does not wait for.
func legacySynchronizeCoversBlocking(t *testing.T, d *gg.Device) {
	st := newSteps(t)
	legacy, blocking, _, nonBlocking := defaultStreams(t, d)
	p := Must[gg.DevicePtr](t)(d.Malloc(64))
	warmUp(st, d, p, named{"the legacy stream", legacy}, named{"the blocking stream", blocking}, named{"the non-blocking stream", nonBlocking})

	release := st.hold("the blocking stream", blocking)
	var done atomic.Bool
	st.do("the blocking stream: a host function that notes it ran", func() error { return blocking.LaunchHostFunc(func() { done.Store(true) }) })
	st.code("the legacy stream: Query while the blocking stream is held", gg.ErrNotReady, legacy.Query)
	c := st.waits("the legacy stream: Synchronize while the blocking stream is held",
		"the legacy stream's Synchronize does not cover the blocking stream's work", legacy.Synchronize)
	release()
	st.finish(c)
	if c != nil && !done.Load() {
		t.Error("the legacy stream's Synchronize returned before the blocking stream's work ran")
	}
	st.do("the blocking stream: Synchronize", blocking.Synchronize)

	release = st.hold("the non-blocking stream", nonBlocking)
	st.do("the legacy stream: Synchronize while the non-blocking stream is held (must not wait for it)", legacy.Synchronize)
	st.do("the legacy stream: Query while the non-blocking stream is held (must not cover it)", legacy.Query)
	release()
	st.do("the non-blocking stream: Synchronize", nonBlocking.Synchronize)
}

// defaultStreamCapture: the legacy stream cannot be captured; the
// per-thread stream can; while a blocking stream (in any capture mode) is
// capturing, using the legacy stream fails with ErrStreamCaptureImplicit
// and invalidates that capture, and asking its capture status fails
// without invalidating it; a non-blocking stream's capture does not
// concern the legacy stream. The default streams cannot be destroyed, and
// unknown flags are refused. Nothing is held; each call is still a bounded
// step.
func defaultStreamCapture(t *testing.T, d *gg.Device) {
	st := newSteps(t)
	legacy, blocking, perThread, nonBlocking := defaultStreams(t, d)
	status := func(name string, s *gg.Stream, want gg.CaptureStatus) {
		t.Helper()
		var got gg.CaptureStatus
		st.do(name+": IsCapturing", func() error { var err error; got, err = s.IsCapturing(); return err })
		if got != want {
			t.Fatalf("%s: capture status %v, want %v", name, got, want)
		}
	}
	st.code("the legacy stream: BeginCapture", gg.ErrStreamCaptureUnsupported, func() error { return legacy.BeginCapture(gg.CaptureModeGlobal) })
	status("the legacy stream after a refused capture", legacy, gg.CaptureStatusNone)
	st.do("the legacy stream: launch A", func() error { return legacy.Launch(KA, one, one) })
	st.do("the legacy stream: Synchronize", legacy.Synchronize)
	// The kernels of the captures below, loaded outside any capture.
	st.do("the per-thread stream: launch B, C", func() error {
		if err := perThread.Launch(KB, one, one); err != nil {
			return err
		}
		return perThread.Launch(KC, one, one)
	})
	st.do("the per-thread stream: Synchronize", perThread.Synchronize)

	st.do("the per-thread stream: BeginCapture", func() error { return perThread.BeginCapture(gg.CaptureModeGlobal) })
	st.do("the per-thread stream: capture A, B", func() error {
		if err := perThread.Launch(KA, one, one); err != nil {
			return err
		}
		return perThread.Launch(KB, one, one)
	})
	var g *gg.Graph
	st.do("the per-thread stream: EndCapture", func() error { var err error; g, err = perThread.EndCapture(); return err })
	if n := len(Must[[]*gg.Node](t)(g.Nodes())); n != 2 {
		t.Fatalf("the per-thread stream's capture has %d nodes, want 2", n)
	}

	for _, mode := range []gg.CaptureMode{gg.CaptureModeGlobal, gg.CaptureModeThreadLocal, gg.CaptureModeRelaxed} {
		m := fmt.Sprintf("%v capture", mode)
		st.do(m+": the blocking stream: BeginCapture", func() error { return blocking.BeginCapture(mode) })
		st.do(m+": the blocking stream: capture A", func() error { return blocking.Launch(KA, one, one) })
		st.code(m+": the legacy stream: IsCapturing", gg.ErrStreamCaptureImplicit, func() error { _, err := legacy.IsCapturing(); return err })
		status(m+": the blocking stream after asking the legacy stream's status", blocking, gg.CaptureStatusActive)
		st.code(m+": the legacy stream: launch A", gg.ErrStreamCaptureImplicit, func() error { return legacy.Launch(KA, one, one) })
		status(m+": the blocking stream after a launch into the legacy stream", blocking, gg.CaptureStatusInvalidated)
		st.code(m+": the blocking stream: EndCapture", gg.ErrStreamCaptureInvalidated, func() error { _, err := blocking.EndCapture(); return err })
		st.do(m+" ended: the legacy stream: launch A", func() error { return legacy.Launch(KA, one, one) })
		st.do(m+" ended: the legacy stream: Synchronize", legacy.Synchronize)
	}

	st.do("the non-blocking stream: BeginCapture", func() error { return nonBlocking.BeginCapture(gg.CaptureModeGlobal) })
	st.do("the non-blocking stream: capture A", func() error { return nonBlocking.Launch(KA, one, one) })
	status("the legacy stream during a non-blocking stream's capture", legacy, gg.CaptureStatusNone)
	st.do("the legacy stream: launch B during a non-blocking stream's capture", func() error { return legacy.Launch(KB, one, one) })
	st.do("the non-blocking stream: capture C", func() error { return nonBlocking.Launch(KC, one, one) })
	st.do("the non-blocking stream: EndCapture", func() error { var err error; g, err = nonBlocking.EndCapture(); return err })
	if n := len(Must[[]*gg.Node](t)(g.Nodes())); n != 2 {
		t.Fatalf("the non-blocking stream's capture has %d nodes, want 2", n)
	}
	// Synchronizing the legacy stream is potentially unsafe during a global
	// capture, though the captured stream is non-blocking: the driver
	// refuses it (H100, driver 580) and, as for an instantiation, the
	// capture is invalidated.
	st.do("the non-blocking stream: BeginCapture again", func() error { return nonBlocking.BeginCapture(gg.CaptureModeGlobal) })
	st.do("the non-blocking stream: capture A again", func() error { return nonBlocking.Launch(KA, one, one) })
	st.code("the legacy stream: Synchronize during a non-blocking stream's global capture", gg.ErrStreamCaptureUnsupported, legacy.Synchronize)
	st.code("the non-blocking stream: EndCapture after it", gg.ErrStreamCaptureInvalidated, func() error { _, err := nonBlocking.EndCapture(); return err })

	IsCode(t, legacy.Destroy(), gg.ErrInvalidResourceHandle)
	IsCode(t, perThread.Destroy(), gg.ErrInvalidResourceHandle)
	st.do("the default streams still work: launch A in each, Synchronize", func() error {
		if err := legacy.Launch(KA, one, one); err != nil {
			return err
		}
		if err := perThread.Launch(KA, one, one); err != nil {
			return err
		}
		return legacy.Synchronize()
	})
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
