package sched

import "sync/atomic"

// deque is a worker's queue of ready nodes: a bounded Chase-Lev
// work-stealing deque. Its owner pushes and pops at the bottom (newest
// first, so a worker goes on with what it just made ready, whose inputs are
// in its cache); other workers steal at the top (oldest first, the nodes
// most likely to lead to more work). Push and pop cost the owner two or
// three atomic operations and no lock; a steal is one compare-and-swap.
// When full, push fails and the caller puts the node on the runner's
// shared stack instead.
type deque struct {
	top    atomic.Int64 // next index to steal; only grows
	_      [56]byte     // top is written by thieves, bottom by the owner: separate cache lines
	bottom atomic.Int64 // next index to push
	_      [56]byte
	buf    []atomic.Int32 // ring of len mask+1; slots are atomic: a thief may read a slot the owner reuses (its CAS then fails)
	mask   int64
}

// empty is what pop and steal return when there is nothing to take; steal
// returns lost when another worker took the node it read.
const (
	empty = -1
	lost  = -2
)

func newDeque(capacity int) deque {
	c := 8
	for c < capacity && c < maxDeque {
		c *= 2
	}
	return deque{buf: make([]atomic.Int32, c), mask: int64(c - 1)}
}

// maxDeque bounds a deque's ring: a fan-out wider than this spills onto the
// shared stack.
const maxDeque = 1024

// push adds x at the bottom; only the owner calls it. It reports false when
// the deque is full.
func (q *deque) push(x int32) bool {
	b := q.bottom.Load()
	if b-q.top.Load() > q.mask {
		return false
	}
	q.buf[b&q.mask].Store(x)
	q.bottom.Store(b + 1)
	return true
}

// pop takes the newest node; only the owner calls it.
func (q *deque) pop() int32 {
	b := q.bottom.Load() - 1
	q.bottom.Store(b) // before reading top: a thief that saw the old bottom is seen here
	t := q.top.Load()
	if t > b { // was empty
		q.bottom.Store(b + 1)
		return empty
	}
	x := q.buf[b&q.mask].Load()
	if t == b { // the last one: race the thieves for it
		if !q.top.CompareAndSwap(t, t+1) {
			x = empty
		}
		q.bottom.Store(b + 1)
	}
	return x
}

// stage writes x at index b, at or above the bottom, without making it
// visible: the owner stages a run of nodes and publishes them with one
// store of bottom (publish). It reports false when the deque is full.
func (q *deque) stage(b int64, x int32) bool {
	if b-q.top.Load() > q.mask {
		return false
	}
	q.buf[b&q.mask].Store(x)
	return true
}

// publish makes the nodes staged below b visible to thieves.
func (q *deque) publish(b int64) { q.bottom.Store(b) }

// popN takes up to len(dst) of the newest nodes into dst, the newest last,
// with one store of bottom; it returns how many. Only the owner calls it.
// It leaves the oldest node to the thieves, or takes it alone with pop.
func (q *deque) popN(dst []int32) int {
	b := q.bottom.Load()
	n := b - q.top.Load()
	if n > 1 {
		k := min(int64(len(dst)), n-1)
		nb := b - k
		q.bottom.Store(nb) // before reading top, as in pop
		if q.top.Load() < nb {
			for i := range k {
				dst[i] = q.buf[(nb+i)&q.mask].Load()
			}
			return int(k)
		}
		q.bottom.Store(b) // thieves reached the batch: one at a time
	}
	if x := q.pop(); x >= 0 {
		dst[0] = x
		return 1
	}
	return 0
}

// steal takes the oldest node; any worker may call it.
func (q *deque) steal() int32 {
	t := q.top.Load()
	if t >= q.bottom.Load() {
		return empty
	}
	x := q.buf[t&q.mask].Load()
	if !q.top.CompareAndSwap(t, t+1) {
		return lost
	}
	return x
}

// size is the number of nodes in q, possibly stale.
func (q *deque) size() int64 {
	n := q.bottom.Load() - q.top.Load()
	if n < 0 {
		return 0
	}
	return n
}
