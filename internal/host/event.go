package host

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Event is the host backend's event: records are numbered in the order
// they are issued to streams, and complete in that order as the streams
// reach them. A wait issued now waits for the latest record issued so far
// (CUDA's rule: a wait sees the most recent record at the time of the
// wait). The zero value is ready to use; its methods are safe for
// concurrent use.
type Event struct {
	mu        sync.Mutex
	cond      sync.Cond
	recorded  uint64    // sequence number of the latest record issued
	completed uint64    // highest record sequence number completed
	at        time.Time // when that record completed
	destroyed atomic.Bool
	d         *Device // whose pools a synchronize trims; nil for a bare Event
}

// Issue starts a new record and returns its sequence number.
func (e *Event) Issue() uint64 {
	e.mu.Lock()
	e.recorded++
	seq := e.recorded
	e.mu.Unlock()
	return seq
}

// Target is the record a wait issued now must wait for: 0 if none was ever
// issued.
func (e *Event) Target() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recorded
}

// Complete marks record seq (and every earlier one) complete, now.
func (e *Event) Complete(seq uint64) {
	now := time.Now()
	e.mu.Lock()
	if seq > e.completed {
		e.completed = seq
		e.at = now
	}
	e.cond.Broadcast() // uses no lock: fine before the first Wait set one
	e.mu.Unlock()
}

// Wait blocks until record seq has completed.
func (e *Event) Wait(seq uint64) {
	e.mu.Lock()
	if e.cond.L == nil {
		e.cond.L = &e.mu
	}
	for e.completed < seq {
		e.cond.Wait()
	}
	e.mu.Unlock()
}

// Latest describes the latest record issued: its number (0: never
// recorded), whether it has completed, and when it did.
func (e *Event) Latest() (seq uint64, done bool, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recorded, e.completed >= e.recorded, e.at
}

var _ backend.Event = (*Event)(nil)

// Synchronize waits for the latest record issued so far and applies the
// pools' release thresholds, as the driver does at a synchronization.
func (e *Event) Synchronize() error {
	e.Wait(e.Target())
	if e.d != nil {
		e.d.poolsAfterSync()
	}
	return nil
}

// Query reports ErrNotReady while the latest record is pending.
func (e *Event) Query() error {
	if _, done, _ := e.Latest(); !done {
		return backend.Errorf(backend.ErrNotReady, "record pending")
	}
	return nil
}

// Destroy marks the event destroyed (instantiation refuses its nodes);
// records queued still complete.
func (e *Event) Destroy() error { e.destroyed.Store(true); return nil }

// ElapsedTime is the time from start's latest record's completion to e's.
func (e *Event) ElapsedTime(start backend.Event) (time.Duration, error) {
	var at [2]time.Time
	for i, x := range []*Event{start.(*Event), e} {
		rec, done, t := x.Latest()
		switch {
		case rec == 0:
			return 0, backend.Errorf(backend.ErrInvalidResourceHandle, "event was never recorded")
		case !done:
			return 0, backend.Errorf(backend.ErrNotReady, "event record pending")
		}
		at[i] = t
	}
	return at[1].Sub(at[0]), nil
}
