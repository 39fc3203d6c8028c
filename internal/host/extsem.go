package host

import (
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

var _ backend.ExternalSemaphore = (*Semaphore)(nil)

// extSemOp is the work of a signal or wait: a stream operation's or a
// graph node's.
type extSemOp struct {
	sems   []*Semaphore
	values []uint64
	stream bool // a stream operation, which holds its semaphores until done
}

// runExtSem runs a signal, or a wait blocking the calling goroutine (a
// stream's own: graph launches wait without it, execExtSemWait).
func (o *op) runExtSem() {
	x := o.xs
	if o.kind == opExtSemSignal {
		for i, s := range x.sems {
			s.Raise(x.values[i])
		}
	} else {
		for i, s := range x.sems {
			ch := make(chan struct{})
			if s.OnReach(x.values[i], func() { close(ch) }) {
				<-ch
			}
		}
	}
	if x.stream {
		for _, s := range x.sems {
			s.Release()
		}
	}
}

// acquireAll marks sems in use by work being issued; a destroyed one fails
// it, and none stays acquired.
func acquireAll(sems []*Semaphore) error {
	for i, s := range sems {
		if !s.Acquire() {
			for _, t := range sems[:i] {
				t.Release()
			}
			return backend.Errorf(backend.ErrInvalidResourceHandle, "external semaphore is destroyed")
		}
	}
	return nil
}

// ExtSems queues a signal of, or a wait for, sems[i] at values[i] in s.
func (s *Stream) ExtSems(signal bool, sems []backend.ExternalSemaphore, values []uint64) error {
	kind := opExtSemWait
	if signal {
		kind = opExtSemSignal
	}
	hs := make([]*Semaphore, len(sems))
	for i, x := range sems {
		hs[i] = x.(*Semaphore)
	}
	x := &extSemOp{sems: hs, values: append([]uint64(nil), values...), stream: true}
	return s.enqueue(&op{kind: kind, xs: x}, func() (uint64, error) { return 0, acquireAll(x.sems) })
}

// instantiateExtSems lists e's signal and wait ops, whose semaphores its
// launches hold, and lets its wait nodes finish later.
func (e *Exec) instantiateExtSems() {
	for i := range e.ops {
		switch e.ops[i].kind {
		case opExtSemSignal, opExtSemWait:
			e.extSems = append(e.extSems, int32(i))
		}
	}
	if len(e.extSems) > 0 {
		e.run.EnableLater()
	}
}

// acquireExtSems marks the semaphores of e's nodes in use by launch l, at
// its issue; a destroyed one fails the launch.
func (l *launch) acquireExtSems() error {
	e := l.e
	if len(e.extSems) == 0 {
		return nil
	}
	var held []*Semaphore
	for _, x := range e.extSems {
		held = append(held, l.ops[x].xs.sems...)
	}
	if err := acquireAll(held); err != nil {
		return err
	}
	l.xsems = held
	return nil
}

// releaseExtSems ends the launch's use of its semaphores.
func (l *launch) releaseExtSems() {
	for _, s := range l.xsems {
		s.Release()
	}
	l.xsems = nil
}

// execExtSemWait runs wait node i of the current launch: done now if every
// value is reached, otherwise deferred until the last one is. A wait node
// must not hold a worker while it waits: the pool is shared by every graph
// and kernel of the process, and what leads to the signal (another branch
// of the graph, another stream's work) may be queued behind it. So the node
// finishes later (sched.Runner.Later) and the semaphore's signaller
// releases its successors.
func (e *Exec) execExtSemWait(i int32, o *op) {
	if e.failed.Load() != nil {
		return
	}
	x := o.xs
	reached := true
	for k, s := range x.sems {
		reached = reached && s.Value() >= x.values[k]
	}
	if reached { // values only grow, so it stays reached
		return
	}
	r := e.run
	r.Later(i)
	left := new(atomic.Int32)
	left.Store(int32(len(x.sems)) + 1) // one per semaphore, one for this loop
	done := func() {
		if left.Add(-1) == 0 {
			r.Done(i)
		}
	}
	for k, s := range x.sems {
		if !s.OnReach(x.values[k], done) {
			done()
		}
	}
	done()
}
