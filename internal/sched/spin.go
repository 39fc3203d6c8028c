package sched

import (
	"runtime"
	_ "unsafe" // go:linkname
)

// procyield executes the CPU's spin-wait hint (PAUSE on amd64, YIELD on
// arm64) cycles times: the core slows down for a moment without leaving the
// goroutine. The runtime's mutexes spin with it.
//
//go:linkname procyield runtime.procyield
func procyield(cycles uint32)

// spinPauseCycles is how many spin-wait hints one pause takes: about a
// microsecond on current x86 cores (PAUSE takes tens to 140 cycles).
const spinPauseCycles = 20

// spinPause waits a moment while a worker polls for work; i counts the
// polls. Most pauses stay on the core: runtime.Gosched goes through the
// scheduler's global run queue, whose lock sixteen polling workers contend
// for, and a worker yielding there polls a few times less often each
// microsecond (measured on a 16-CPU Xeon: 1 µs nodes of a tree ran 0.96 ×
// Taskflow's time with every pause a Gosched, 0.67 × with this). Every
// eighth pause still yields, so that a goroutine readied onto this
// processor (a helper woken from its channel lands in its waker's run
// queue) runs within microseconds rather than at the next preemption.
func spinPause(i int) {
	if i&7 == 7 {
		runtime.Gosched()
		return
	}
	procyield(spinPauseCycles)
}

// searchNs bounds how long a worker out of work keeps polling for it before
// it leaves the run (a helper) or sleeps (the owner): for short nodes the
// next ready node usually appears within microseconds, and waking a worker
// again costs microseconds.
const searchNs = 50_000

// search bounds a poll for work to limit nanoseconds: a worker's search
// (searchNs) or a pool helper's linger (lingerNs).
type search struct {
	limit int64
	polls int
	t0    int64
}

// again pauses and reports whether to look again.
func (s *search) again() bool {
	if s.polls == 0 {
		s.t0 = nanotime()
	}
	s.polls++
	if s.polls&7 == 0 && nanotime()-s.t0 > s.limit {
		return false
	}
	spinPause(s.polls)
	return true
}

// briefly lets the search go on for a few more polls.
func (s *search) briefly() {
	s.t0 = nanotime() - s.limit
	s.polls = 1
}
