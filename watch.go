package gpugraph

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpugraph/gpugraph/internal/watch"
)

// Bounded waits. A device that runs collectives can wait forever: an NCCL
// kernel whose peer died spins, and every synchronize behind it with it.
// The coll package attaches each communicator to its devices
// (internal/watch); while one is attached, every wait on the device runs
// its blocking call on another goroutine and, meanwhile, polls the
// communicator's asynchronous error. A failure reported there, or a wait
// longer than the communicator's timeout, aborts the communicator (its
// kernels return), fails the device (a sticky error, as the driver leaves
// a device whose kernels were cut short) and returns that error. A device
// with nothing attached waits as before, at no cost.

func init() {
	watch.Attach = func(dev any, w watch.Watch) func() { return dev.(*Device).attachWatch(w) }
}

// watches are a device's attached watches, copied on write: a wait reads
// them with one atomic load.
type watches struct {
	mu   sync.Mutex
	list atomic.Pointer[[]watch.Watch]
}

func (d *Device) attachWatch(w watch.Watch) (detach func()) {
	ws := &d.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var cur []watch.Watch
	if p := ws.list.Load(); p != nil {
		cur = *p
	}
	next := append(append([]watch.Watch(nil), cur...), w)
	ws.list.Store(&next)
	var once sync.Once
	return func() {
		once.Do(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			var kept []watch.Watch
			for _, x := range *ws.list.Load() {
				if x != w {
					kept = append(kept, x)
				}
			}
			if len(kept) == 0 {
				ws.list.Store(nil)
				return
			}
			ws.list.Store(&kept)
		})
	}
}

// abortGrace is how long a wait lets the work finish after aborting its
// watches before it returns anyway (the blocked call's goroutine is then
// left behind; the device is failed).
const abortGrace = 10 * time.Second

// wait runs f, a call that blocks until work queued on d has run, bounded
// by d's watches (see above). Without watches it is f().
func (d *Device) wait(opName string, f func() error) error {
	p := d.watches.list.Load()
	if p == nil {
		return f()
	}
	ws := *p
	done := make(chan error, 1)
	go func() { done <- f() }()
	limit := ws[0].Timeout()
	for _, w := range ws[1:] {
		limit = min(limit, w.Timeout())
	}
	start := time.Now()
	tick := time.NewTicker(watch.PollInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
		var cause *Error
		for _, w := range ws {
			if err := w.Check(); err != nil {
				cause = newErr(opName, ErrLaunchFailure, "%s failed: %v; aborted", w.Name(), err)
				break
			}
		}
		if cause == nil && time.Since(start) > limit {
			names := ws[0].Name()
			for _, w := range ws[1:] {
				names += ", " + w.Name()
			}
			cause = newErr(opName, ErrLaunchTimeout, "the work queued on device %d did not finish within %v, waiting on %s (a peer that died or stopped?): aborted",
				d.props.Ordinal, limit, names)
		}
		if cause == nil {
			continue
		}
		for _, w := range ws {
			w.Abort(cause)
		}
		d.fail(cause)
		select {
		case <-done:
		case <-time.After(abortGrace):
		}
		return cause
	}
}
