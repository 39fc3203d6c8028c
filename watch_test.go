package gpugraph_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/watch"
)

// fakeWatch stands for a communicator: Abort releases the work it holds
// up (as ncclCommAbort makes NCCL's kernels return).
type fakeWatch struct {
	timeout time.Duration
	err     atomic.Pointer[error]
	release chan struct{}
	aborted atomic.Int32
}

func (w *fakeWatch) Check() error {
	if e := w.err.Load(); e != nil {
		return *e
	}
	return nil
}
func (w *fakeWatch) Abort(error) {
	if w.aborted.Add(1) == 1 {
		close(w.release)
	}
}
func (w *fakeWatch) Timeout() time.Duration { return w.timeout }
func (w *fakeWatch) Name() string           { return "fake communicator" }

// TestWaitsBoundedByWatch: with a watch attached, a wait on work that never
// finishes by itself ends after the watch's timeout (ErrLaunchTimeout), or
// at once when the watch reports an asynchronous error (ErrLaunchFailure);
// the watch is aborted, the device failed; every kind of wait is bounded.
func TestWaitsBoundedByWatch(t *testing.T) {
	waits := []struct {
		name string
		wait func(d *gg.Device, s *gg.Stream) error
	}{
		{"Stream.Synchronize", func(_ *gg.Device, s *gg.Stream) error { return s.Synchronize() }},
		{"Device.Synchronize", func(d *gg.Device, _ *gg.Stream) error { return d.Synchronize() }},
		{"Event.Synchronize", func(d *gg.Device, s *gg.Stream) error {
			ev, err := d.NewEvent(0)
			if err != nil {
				return err
			}
			if err := s.Record(ev); err != nil {
				return err
			}
			return ev.Synchronize()
		}},
	}
	for _, w := range waits {
		for _, failing := range []bool{false, true} {
			name := w.name + "/timeout"
			if failing {
				name = w.name + "/async-error"
			}
			t.Run(name, func(t *testing.T) {
				d := open(t)
				s := must[*gg.Stream](t)(d.NewStream())
				fw := &fakeWatch{timeout: 150 * time.Millisecond, release: make(chan struct{})}
				if failing {
					fw.timeout = time.Hour
					e := errors.New("peer closed the connection")
					fw.err.Store(&e)
				}
				detach := watch.Attach(d, fw)
				defer detach()
				if err := s.LaunchHostFunc(func() { <-fw.release }); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				err := w.wait(d, s)
				el := time.Since(start)
				want := gg.ErrLaunchTimeout
				if failing {
					want = gg.ErrLaunchFailure
				}
				if !errors.Is(err, want) {
					t.Fatalf("got %v, want %v", err, want)
				}
				if el > 5*time.Second {
					t.Fatalf("the wait took %v", el)
				}
				if fw.aborted.Load() != 1 {
					t.Fatalf("aborted %d times, want once", fw.aborted.Load())
				}
				if err := s.Synchronize(); !errors.Is(err, want) {
					t.Fatalf("after the failure: %v, want the sticky %v", err, want)
				}
				t.Logf("%v (after %v)", err, el.Round(time.Millisecond))
			})
		}
	}
}

// TestWaitWithWatchFinishes: an attached watch does not change a wait on
// work that finishes, and once detached the device waits as before.
func TestWaitWithWatchFinishes(t *testing.T) {
	d := open(t)
	s := must[*gg.Stream](t)(d.NewStream())
	fw := &fakeWatch{timeout: time.Minute, release: make(chan struct{})}
	detach := watch.Attach(d, fw)
	var ran atomic.Bool
	if err := s.LaunchHostFunc(func() { time.Sleep(50 * time.Millisecond); ran.Store(true) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil || !ran.Load() {
		t.Fatalf("Synchronize: %v, ran %v", err, ran.Load())
	}
	detach()
	detach() // twice is harmless
	if err := d.Synchronize(); err != nil || fw.aborted.Load() != 0 {
		t.Fatalf("Synchronize: %v, aborted %d", err, fw.aborted.Load())
	}
}

// TestWatchOutlivesDevice: a device closed with a watch still attached
// ends its watchdog, and the watch's later detach is harmless.
func TestWatchOutlivesDevice(t *testing.T) {
	d := open(t)
	detach := watch.Attach(d, &fakeWatch{timeout: time.Minute, release: make(chan struct{})})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	detach()
}

// BenchmarkWaitWatched: the price of a wait (synchronizing an idle stream)
// without and with a watch attached; with one, the wait registers with the
// device's watchdog.
func BenchmarkWaitWatched(b *testing.B) {
	for _, watched := range []bool{false, true} {
		name := "unwatched"
		if watched {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			d := open(b)
			s := must[*gg.Stream](b)(d.NewStream())
			if watched {
				defer watch.Attach(d, &fakeWatch{timeout: time.Minute, release: make(chan struct{})})()
			}
			for b.Loop() {
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
