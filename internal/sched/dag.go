package sched

import (
	"sync"
	"sync/atomic"
)

// DAG is a compiled dependency graph: node i may run once all of its
// predecessors have finished. Successor lists are stored flat (CSR).
type DAG struct {
	InDegree []int32
	SuccOff  []int32 // successors of i are Succ[SuccOff[i]:SuccOff[i+1]]
	Succ     []int32
	Roots    []int32
	// Early successors (NewDAGEarly): Early[EarlyOff[i]:EarlyOff[i+1]] are
	// released by Runner.Trigger(i, port) with the matching EarlyPort, or
	// when i finishes. nil when the DAG has none.
	EarlyOff  []int32
	Early     []int32
	EarlyPort []uint8
}

// NewDAG compiles predecessor lists (preds[i] are the nodes i depends on)
// into a DAG.
func NewDAG(preds [][]int32) *DAG {
	n := len(preds)
	d := &DAG{InDegree: make([]int32, n), SuccOff: make([]int32, n+1)}
	for i, ps := range preds {
		d.InDegree[i] = int32(len(ps))
		if len(ps) == 0 {
			d.Roots = append(d.Roots, int32(i))
		}
		for _, p := range ps {
			d.SuccOff[p+1]++
		}
	}
	for i := 0; i < n; i++ {
		d.SuccOff[i+1] += d.SuccOff[i]
	}
	d.Succ = make([]int32, d.SuccOff[n])
	fill := append([]int32(nil), d.SuccOff[:n]...)
	for i, ps := range preds {
		for _, p := range ps {
			d.Succ[fill[p]] = int32(i)
			fill[p]++
		}
	}
	return d
}

// Runner executes a DAG repeatedly. All per-run state is allocated once, so a
// run allocates nothing. Runs of one Runner must not overlap.
//
// Scheduling: a worker that finishes a node keeps the first successor it made
// ready and runs it next (a chain never leaves the worker), and pushes further
// ready successors onto a shared stack, from which the owner and helpers pull.
// An idle pool helper is recruited when the stack has work and fewer helpers
// are active than the pool has.
type Runner struct {
	dag  *DAG
	pool *Pool
	exec func(node int32)

	pending   []atomic.Int32
	remaining atomic.Int32 // sinks not yet run: all nodes are done when none are left
	sinks     int32
	queued    atomic.Int32 // len(stack), readable without the lock

	mu      sync.Mutex
	cond    sync.Cond
	stack   []int32
	helpers atomic.Int32 // active helpers; decremented under mu
	waiting bool         // the owner sleeps on cond
	helpFn  func()

	fired []atomic.Uint32 // per node, the early ports triggered this run
	later []atomic.Bool   // nodes that called Later while running (later.go)
}

// NewRunner prepares to run d on pool, calling exec for every node.
func NewRunner(d *DAG, pool *Pool, exec func(node int32)) *Runner {
	r := &Runner{
		dag:     d,
		pool:    pool,
		exec:    exec,
		pending: make([]atomic.Int32, len(d.InDegree)),
		stack:   make([]int32, 0, len(d.InDegree)),
	}
	r.cond.L = &r.mu
	r.helpFn = r.help
	if d.EarlyOff != nil {
		r.fired = make([]atomic.Uint32, len(d.InDegree))
	}
	for i := range d.InDegree {
		if d.SuccOff[i] == d.SuccOff[i+1] {
			r.sinks++
		}
	}
	return r
}

// Run executes every node once, respecting dependencies, and returns when all
// have finished. exec must not panic (callers recover inside it).
func (r *Runner) Run() {
	n := len(r.dag.InDegree)
	if n == 0 {
		return
	}
	for i, deg := range r.dag.InDegree {
		if deg > 1 { // a node with one dependency is ready when that one is done
			r.pending[i].Store(deg)
		}
	}
	r.remaining.Store(r.sinks)
	for i := range r.fired {
		r.fired[i].Store(0)
	}
	roots := r.dag.Roots
	if len(roots) > 1 {
		r.mu.Lock()
		r.stack = append(r.stack, roots[1:]...)
		r.queued.Store(int32(len(r.stack)))
		r.mu.Unlock()
		r.recruit()
	}
	r.work(roots[0], true)
	// All nodes are done; wait for helpers to leave before the state is reused.
	r.mu.Lock()
	for r.helpers.Load() > 0 {
		r.waiting = true
		r.cond.Wait()
	}
	r.waiting = false
	r.mu.Unlock()
}

func (r *Runner) work(node int32, owner bool) {
	d := r.dag
	var local [popBatch]int32 // nodes taken from the stack, run by this worker
	nlocal := 0
	for {
		if node < 0 {
			if nlocal == 0 {
				if nlocal = r.pop(owner, &local); nlocal == 0 {
					return
				}
			}
			nlocal--
			node = local[nlocal]
		}
		// Work is waiting while this worker is busy: try again to get help
		// (a helper busy at push time may be idle now).
		if r.queued.Load() > 0 && int(r.helpers.Load()) < r.pool.size {
			r.recruit()
		}
		r.exec(node)
		if r.deferred(node) { // Done releases its successors (later.go)
			node = -1
			continue
		}
		if d.EarlyOff != nil && d.EarlyOff[node] != d.EarlyOff[node+1] {
			r.fireAll(node) // early successors not yet released are released now
		}
		next := int32(-1)
		succ := d.Succ[d.SuccOff[node]:d.SuccOff[node+1]]
		if len(succ) == 1 {
			if s := succ[0]; d.InDegree[s] == 1 || r.pending[s].Add(-1) == 0 {
				next = s
			}
		} else if len(succ) > 1 {
			next = r.release(succ)
		}
		// Every node is an ancestor of a sink, and a sink runs only after its
		// ancestors have finished, so the run is over when the last sink is.
		if len(succ) == 0 && r.remaining.Add(-1) == 0 {
			r.mu.Lock()
			if r.waiting {
				r.cond.Broadcast()
			}
			r.mu.Unlock()
			if owner {
				return
			}
		}
		node = next
	}
}

// release marks one dependency of each successor done and returns the first
// one that became ready; the others that became ready go on the stack in one
// critical section (a fan-out of thousands takes the lock once).
func (r *Runner) release(succ []int32) int32 {
	d := r.dag
	next := int32(-1)
	pushed := false
	for _, s := range succ {
		if d.InDegree[s] != 1 && r.pending[s].Add(-1) != 0 {
			continue
		}
		if next < 0 {
			next = s
			continue
		}
		if !pushed {
			r.mu.Lock()
			pushed = true
		}
		r.stack = append(r.stack, s)
	}
	if !pushed {
		return next
	}
	r.publish()
	return next
}

// recruit offers the run to one idle pool helper, if fewer are helping than
// the pool has.
func (r *Runner) recruit() {
	if int(r.helpers.Add(1)) <= r.pool.size && r.pool.TryGo(r.helpFn) {
		return
	}
	r.mu.Lock()
	r.helpers.Add(-1)
	if r.waiting {
		r.cond.Broadcast()
	}
	r.mu.Unlock()
}

// popBatch bounds how many ready nodes a worker takes from the stack at once.
const popBatch = 8

// pop takes ready nodes into buf and returns how many: a fair share of the
// stack, up to popBatch, so that a wide fan-out costs one lock per batch.
// The owner sleeps until a node is ready or the run is over; a helper
// returns 0 as soon as there is nothing to take.
func (r *Runner) pop(owner bool, buf *[popBatch]int32) int {
	if !owner {
		// Spin briefly before giving up: for short nodes, the next ready node
		// usually appears within a few hundred nanoseconds, and waking a
		// helper again costs microseconds.
		for i := 0; i < 200 && r.queued.Load() == 0 && r.remaining.Load() > 0; i++ {
			spinPause()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if k := len(r.stack); k > 0 {
			take := min(popBatch, max(1, k/(int(r.helpers.Load())+1)))
			copy(buf[:take], r.stack[k-take:])
			r.stack = r.stack[:k-take]
			r.queued.Store(int32(k - take))
			return take
		}
		if r.remaining.Load() == 0 || !owner {
			if !owner {
				r.helpers.Add(-1)
				if r.waiting {
					r.cond.Broadcast()
				}
			}
			return 0
		}
		r.waiting = true
		r.cond.Wait()
		r.waiting = false
	}
}

func (r *Runner) help() { r.work(-1, false) }

// publish makes the nodes just pushed on the stack visible: it wakes the
// waiting owner, or recruits helpers. r.mu is held on entry and released.
func (r *Runner) publish() {
	r.queued.Store(int32(len(r.stack)))
	waiting := r.waiting
	if waiting {
		r.cond.Broadcast()
	}
	r.mu.Unlock()
	if !waiting {
		r.recruit()
	}
}
