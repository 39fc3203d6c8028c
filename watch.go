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
// (internal/watch). While one is attached, every wait on the device is
// registered with the device's watchdog, a goroutine that, while any wait
// is in progress, polls the communicators' asynchronous errors and the age
// of the oldest wait. An error reported there, or a wait longer than the
// communicators' timeout, aborts the communicators (their kernels return,
// so the blocked call returns), fails the device (a sticky error, as the
// driver leaves a device whose kernels were cut short), and the wait
// returns that error. The blocking call itself runs on the caller's
// goroutine: a wait on a healthy device costs two map operations, not a
// goroutine hand-off (which cost a data-parallel training step 4 % on the
// H200, where every step copies its batch from pageable memory). A device
// with nothing attached waits as before, at the cost of one atomic load.

func init() {
	watch.Attach = func(dev any, w watch.Watch) func() { return dev.(*Device).attachWatch(w) }
}

// watches are a device's attached watches and its watchdog.
type watches struct {
	list atomic.Pointer[[]watch.Watch] // copied on write; nil when none

	mu      sync.Mutex
	waiting map[*waitRec]struct{} // waits in progress
	kick    chan struct{}         // wakes the parked watchdog when a wait begins
	parked  atomic.Bool           // the watchdog sleeps until kicked
	stop    chan struct{}         // ends the watchdog (the last watch detached)
	cause   atomic.Pointer[Error] // what the watchdog aborted the watches for
}

// waitRec is one wait in progress.
type waitRec struct {
	opName string
	start  time.Time
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
	if ws.stop == nil {
		ws.stop, ws.kick, ws.waiting = make(chan struct{}), make(chan struct{}, 1), map[*waitRec]struct{}{}
		go d.watchdog(ws.stop, ws.kick)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			p := ws.list.Load()
			if p == nil { // the device closed
				return
			}
			var kept []watch.Watch
			for _, x := range *p {
				if x != w {
					kept = append(kept, x)
				}
			}
			if len(kept) > 0 {
				ws.list.Store(&kept)
				return
			}
			ws.stopLocked()
		})
	}
}

// stopLocked detaches every watch and ends the watchdog.
func (ws *watches) stopLocked() {
	if ws.stop == nil {
		return
	}
	ws.list.Store(nil)
	close(ws.stop)
	ws.stop, ws.waiting = nil, nil
}

// closeWatches ends the watchdog of a device that closes.
func (d *Device) closeWatches() {
	d.watches.mu.Lock()
	d.watches.stopLocked()
	d.watches.mu.Unlock()
}

// wait runs f, a call that blocks until work queued on d has run, bounded
// by d's watches (see above). Without watches it is f().
func (d *Device) wait(opName string, f func() error) error {
	ws := &d.watches
	if ws.list.Load() == nil {
		return f()
	}
	rec := &waitRec{opName: opName, start: time.Now()}
	ws.mu.Lock()
	if ws.waiting == nil { // detached meanwhile
		ws.mu.Unlock()
		return f()
	}
	ws.waiting[rec] = struct{}{}
	kick := ws.kick
	ws.mu.Unlock()
	// Wake the watchdog only if it sleeps: while waits come one after
	// another (a training loop), it is ticking and nobody pays a wake-up.
	if ws.parked.Load() && ws.parked.CompareAndSwap(true, false) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	err := f()
	ws.mu.Lock()
	delete(ws.waiting, rec)
	ws.mu.Unlock()
	if e := ws.cause.Load(); e != nil {
		return withOp(opName, e)
	}
	return err
}

// watchdog polls d's watches while waits are in progress, until stop.
func (d *Device) watchdog(stop, kick chan struct{}) {
	ws := &d.watches
	tick := time.NewTicker(watch.PollInterval)
	defer tick.Stop()
	for {
		ws.mu.Lock()
		var oldest *waitRec
		for r := range ws.waiting {
			if oldest == nil || r.start.Before(oldest.start) {
				oldest = r
			}
		}
		ws.mu.Unlock()
		if oldest == nil {
			// Park: no ticks while nothing waits, so an idle device burns
			// nothing. A wait that registered before parked was set is
			// seen by the second look; one after it kicks.
			ws.parked.Store(true)
			ws.mu.Lock()
			n := len(ws.waiting)
			ws.mu.Unlock()
			if n > 0 {
				if !ws.parked.CompareAndSwap(true, false) {
					<-kick // that wait's kick
				}
				continue
			}
			tick.Stop()
			select {
			case <-stop:
				return
			case <-kick:
			}
			tick.Reset(watch.PollInterval)
			continue
		}
		if p := ws.list.Load(); p != nil && ws.cause.Load() == nil {
			if cause := d.watchCause(oldest, *p); cause != nil && ws.cause.CompareAndSwap(nil, cause) {
				d.fail(cause)
				for _, w := range *p {
					w.Abort(cause)
				}
			}
		}
		select {
		case <-stop:
			return
		case <-kick:
		case <-tick.C:
		}
	}
}

// watchCause is why the watches must be aborted, nil if they need not:
// an asynchronous error, or the oldest wait past the shortest timeout.
func (d *Device) watchCause(oldest *waitRec, ws []watch.Watch) *Error {
	for _, w := range ws {
		if err := w.Check(); err != nil {
			return newErr(oldest.opName, ErrLaunchFailure, "%s failed: %v; aborted", w.Name(), err)
		}
	}
	limit := ws[0].Timeout()
	names := ws[0].Name()
	for _, w := range ws[1:] {
		limit = min(limit, w.Timeout())
		names += ", " + w.Name()
	}
	if time.Since(oldest.start) <= limit {
		return nil
	}
	return newErr(oldest.opName, ErrLaunchTimeout, "the work queued on device %d did not finish within %v, waiting on %s (a peer that died or stopped?): aborted",
		d.props.Ordinal, limit, names)
}
