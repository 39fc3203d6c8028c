package gpugraph_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// TestLegacyStreamExcludesBlockingStreams issues host functions from
// several goroutines at once to blocking streams (made, used and destroyed
// meanwhile) and to the legacy stream, which must never run at the same
// time as any of them: every issue to the legacy stream is ordered after
// the blocking streams' earlier work and before their later work, even when
// the issues race.
func TestLegacyStreamExcludesBlockingStreams(t *testing.T) {
	d := open(t)
	legacy := must[*gg.Stream](t)(d.StreamLegacy())
	var inBlocking, inLegacy, overlaps atomic.Int64
	blockingFn := func() {
		inBlocking.Add(1)
		if inLegacy.Load() != 0 {
			overlaps.Add(1)
		}
		runtime.Gosched()
		if inLegacy.Load() != 0 {
			overlaps.Add(1)
		}
		inBlocking.Add(-1)
	}
	legacyFn := func() {
		inLegacy.Add(1)
		if inBlocking.Load() != 0 {
			overlaps.Add(1)
		}
		runtime.Gosched()
		if inBlocking.Load() != 0 {
			overlaps.Add(1)
		}
		inLegacy.Add(-1)
	}
	const workers, rounds = 4, 150
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				var s *gg.Stream
				var err error
				if w == 0 {
					s, err = d.StreamPerThread()
				} else {
					s, err = d.NewStreamWithFlags(gg.StreamDefault)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.LaunchHostFunc(blockingFn); err != nil {
					t.Error(err)
				}
				if err := legacy.LaunchHostFunc(legacyFn); err != nil {
					t.Error(err)
				}
				if w != 0 {
					if err := s.Destroy(); err != nil { // its work still runs
						t.Error(err)
					}
				}
			}
		}()
	}
	bounded(t, "the workers' issues", func() error { wg.Wait(); return nil })
	bounded(t, "the legacy stream's Synchronize", legacy.Synchronize)
	bounded(t, "Device.Synchronize", d.Synchronize)
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("the legacy stream's work ran at the same time as a blocking stream's %d times", n)
	}
}

// TestLegacyStreamCaptureConflicts: the synchronous copies and fills are
// work in the legacy stream, so a capture in a blocking stream refuses
// them (ErrStreamCaptureImplicit, in any capture mode) and is invalidated;
// waiting on a captured event from the legacy stream is refused the same
// way; after a refused capture of the legacy stream nothing is left
// capturing.
func TestLegacyStreamCaptureConflicts(t *testing.T) {
	d := open(t)
	legacy := must[*gg.Stream](t)(d.StreamLegacy())
	b := must[*gg.Stream](t)(d.NewStreamWithFlags(gg.StreamDefault))
	p := must[gg.DevicePtr](t)(d.Malloc(16))
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Device.Memcpy", func() error { return d.Memcpy(gg.DtoH(make([]byte, 4), p)) }},
		{"Device.Memset", func() error { return d.Memset(gg.Memset32(p, 1, 4)) }},
		{"Stream.Wait on a captured event", func() error {
			e := must[*gg.Event](t)(d.NewEvent(0))
			ok(t, b.Record(e))
			return legacy.Wait(e)
		}},
		{"Stream.Query", legacy.Query},
		{"Stream.Synchronize", legacy.Synchronize},
	} {
		ok(t, b.BeginCapture(gg.CaptureModeRelaxed))
		ok(t, b.Launch(kA, gg.Dim1(1), gg.Dim1(1)))
		err := c.call()
		isCode(t, err, gg.ErrStreamCaptureImplicit)
		_, err = b.EndCapture()
		if !errors.Is(err, gg.ErrStreamCaptureInvalidated) {
			t.Errorf("%s: the capture ended with %v, want it invalidated", c.name, err)
		}
	}
	// A non-blocking stream's capture leaves the legacy stream alone.
	nb := must[*gg.Stream](t)(d.NewStream())
	ok(t, nb.BeginCapture(gg.CaptureModeRelaxed))
	ok(t, d.Memset(gg.Memset32(p, 1, 4)))
	ok(t, legacy.Memset(gg.Memset32(p, 2, 4)))
	bounded(t, "the legacy stream's Synchronize during a non-blocking stream's capture", legacy.Synchronize)
	must[*gg.Graph](t)(nb.EndCapture())
	isCode(t, legacy.BeginCaptureToGraph(graph(t, d), nil, gg.CaptureModeGlobal), gg.ErrStreamCaptureUnsupported)
	ok(t, legacy.Launch(kA, gg.Dim1(1), gg.Dim1(1)))
	bounded(t, "the legacy stream's Synchronize", legacy.Synchronize)
	if _, err := d.NewStreamWithFlags(5); !errors.Is(err, gg.ErrInvalidValue) {
		t.Errorf("unknown flags: %v", err)
	}
	if s := gg.StreamNonBlocking.String(); s != "StreamNonBlocking" {
		t.Errorf("String: %q", s)
	}
}

// bounded fails the test, naming the step, unless f returns nil within a
// minute: a wait that would hang fails instead. f runs on a goroutine of
// its own and must not call t.
func bounded(t *testing.T, step string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s: did not return within a minute", step)
	}
}

// TestLegacyPageableCopyHoldsNoStream: a copy with pageable memory in the
// legacy stream waits for the work before it, but not while holding the
// ordering of the blocking streams: issuing to a blocking stream goes on
// meanwhile (here, the issue the held work waits for).
func TestLegacyPageableCopyHoldsNoStream(t *testing.T) {
	d := open(t)
	legacy := must[*gg.Stream](t)(d.StreamLegacy())
	b := must[*gg.Stream](t)(d.NewStreamWithFlags(gg.StreamDefault))
	p := must[gg.DevicePtr](t)(d.Malloc(16))
	ok(t, d.Memset(gg.Memset32(p, 7, 4)))
	issued := make(chan struct{})
	released := make(chan struct{})
	defer func() {
		select {
		case <-released:
		default:
			close(released)
		}
	}()
	ok(t, legacy.LaunchHostFunc(func() {
		select {
		case <-issued:
		case <-released:
		}
	}))
	out := make([]byte, 16)
	copied := make(chan error, 1)
	go func() { copied <- legacy.Memcpy(gg.DtoH(out, p)) }()
	time.Sleep(20 * time.Millisecond) // the copy waits for the held host function
	bounded(t, "an issue to a blocking stream while the legacy stream's pageable copy waits", func() error {
		return b.LaunchHostFunc(func() {})
	})
	close(issued)
	bounded(t, "the legacy stream's pageable copy", func() error { return <-copied })
	if out[0] != 7 || out[15] != 0 {
		t.Fatalf("copied % x", out)
	}
	bounded(t, "Device.Synchronize", d.Synchronize)
}
