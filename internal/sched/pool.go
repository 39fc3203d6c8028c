// Package sched is the host backend's executor: a pool of worker goroutines
// sized to GOMAXPROCS, a parallel loop over kernel blocks, and a DAG runner
// that executes an instantiated graph with no allocation per launch.
package sched

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Pool is a set of helper goroutines. Work is only ever offered to an idle
// helper (TryGo never blocks), so a caller always makes progress on its own
// and nested use cannot deadlock.
//
// A helper that finishes its work stays on its core for a moment
// (lingerNs), looking for an offer, before it sleeps on a channel: work
// offered then starts at once. A goroutine woken from a channel by a busy
// one waits in the waker's run queue until an idle processor wakes up and
// steals it, which measured 100 µs and more on a 2-core VM, longer than
// many graphs run; a lingering helper takes an offer in well under a
// microsecond. An idle pool lingers once after its last work and then
// costs nothing.
type Pool struct {
	work    chan func()
	size    int
	idle    atomic.Int32 // helpers waiting for work: TryGo fails at once when none is
	linger  atomic.Int32 // helpers lingering (counted in idle too)
	helpers []helperState
}

// helperState is one helper's mailbox while it lingers.
type helperState struct {
	state atomic.Int32 // busy, lingering, claimed or offered
	fn    func()       // the work offered; written by the claimer, read after state is offered
	_     [40]byte
}

const (
	busy      = iota // running work, or asleep on the channel
	lingering        // on its core, polling state
	claimed          // a TryGo is writing fn
	offered          // fn is set: run it
)

// lingerNs is how long a helper that finished its work looks for more
// before it sleeps.
const lingerNs = 50_000

var (
	defaultPool     *Pool
	defaultPoolOnce sync.Once
)

// Default is the process-wide pool: GOMAXPROCS-1 helpers, since the calling
// goroutine always works too.
func Default() *Pool {
	defaultPoolOnce.Do(func() { defaultPool = NewPool(runtime.GOMAXPROCS(0) - 1) })
	return defaultPool
}

// NewPool starts n helper goroutines. They live for the life of the process.
func NewPool(n int) *Pool {
	p := &Pool{work: make(chan func()), size: n, helpers: make([]helperState, n)}
	for i := 0; i < n; i++ {
		go p.helper(&p.helpers[i])
	}
	return p
}

// Size is the number of helpers.
func (p *Pool) Size() int { return p.size }

func (p *Pool) helper(h *helperState) {
	// Kernels touch device memory through raw pointers; a fault there must
	// become a recoverable panic (reported as an illegal address), not a crash.
	debug.SetPanicOnFault(true)
	p.idle.Add(1)
	f := <-p.work
	p.idle.Add(-1)
	for {
		f()
		if f = p.lingerFor(h); f == nil {
			p.idle.Add(1)
			f = <-p.work
			p.idle.Add(-1)
		}
	}
}

// lingerFor polls h's mailbox for lingerNs and returns the work offered,
// or nil.
func (p *Pool) lingerFor(h *helperState) func() {
	h.state.Store(lingering)
	p.idle.Add(1)
	p.linger.Add(1)
	sp := search{limit: lingerNs}
	for h.state.Load() == lingering {
		if !sp.again() {
			if h.state.CompareAndSwap(lingering, busy) {
				p.linger.Add(-1)
				p.idle.Add(-1)
				return nil
			}
			break // claimed meanwhile: the offer comes
		}
	}
	for i := 0; h.state.Load() != offered; i++ {
		spinPause(i)
	}
	f := h.fn
	h.fn = nil
	h.state.Store(busy)
	return f
}

// TryGo runs f on an idle helper and reports whether one took it.
func (p *Pool) TryGo(f func()) bool {
	if p.idle.Load() == 0 {
		return false
	}
	if p.linger.Load() > 0 {
		for i := range p.helpers {
			h := &p.helpers[i]
			if h.state.Load() == lingering && h.state.CompareAndSwap(lingering, claimed) {
				p.linger.Add(-1)
				p.idle.Add(-1)
				h.fn = f
				h.state.Store(offered)
				return true
			}
		}
	}
	select {
	case p.work <- f:
		return true
	default:
		return false
	}
}

// For runs body over [0, n) split into chunks, on the caller and on any idle
// helpers, and returns when all chunks are done. It returns the first panic
// raised by body, recovered as a *Panicked (the value and where it was
// raised), or nil.
func (p *Pool) For(n int, body func(lo, hi int)) (perr any) {
	if n <= 0 {
		return nil
	}
	if n == 1 || p.size == 0 {
		return protect(func() { body(0, n) })
	}
	chunks := (p.size + 1) * 4
	if chunks > n {
		chunks = n
	}
	step := (n + chunks - 1) / chunks
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
	)
	// run takes chunks until none is left; before each, the caller (beforeChunk
	// set) recruits an idle helper, so a helper that was busy when the loop
	// started still joins once it is free.
	var run func(beforeChunk func())
	recruited := 0
	recruit := func() {
		if recruited < p.size && recruited+1 < chunks {
			wg.Add(1)
			if p.TryGo(func() { defer wg.Done(); run(nil) }) {
				recruited++
			} else {
				wg.Done()
			}
		}
	}
	run = func(beforeChunk func()) {
		for {
			if beforeChunk != nil && next.Load() < int64(n) {
				beforeChunk()
			}
			lo := int(next.Add(int64(step))) - step
			if lo >= n {
				return
			}
			hi := min(lo+step, n)
			if e := protect(func() { body(lo, hi) }); e != nil {
				errOnce.Do(func() { perr = e })
				next.Store(int64(n)) // stop handing out chunks
			}
		}
	}
	run(recruit)
	wg.Wait()
	return perr
}

// protect runs f and returns what it panicked with, if anything, as a
// *Panicked: the site is read here, while the panicking frames are on the
// stack.
func protect(f func()) (perr any) {
	defer func() {
		if p := recover(); p != nil {
			perr = Recovered(p)
		}
	}()
	f()
	return nil
}
