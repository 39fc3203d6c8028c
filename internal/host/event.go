package host

import (
	"sync"
	"time"
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
