package sched

import (
	"sync"
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// DAG is a compiled dependency graph: node i may run once all of its
// predecessors have finished. Successor lists are stored flat (CSR).
type DAG struct {
	InDegree []int32
	SuccOff  []int32 // successors of i are Succ[SuccOff[i]:SuccOff[i+1]]
	Succ     []int32
	Roots    []int32
	// Next[i] is i's only successor when that successor has no other
	// predecessor (a link of a chain), else -1: finishing i makes it ready
	// with one load, no counter.
	Next []int32
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
	d.links()
	return d
}

// links computes Next from the successor lists and in-degrees.
func (d *DAG) links() {
	d.Next = make([]int32, len(d.InDegree))
	for i := range d.Next {
		d.Next[i] = -1
		if lo := d.SuccOff[i]; d.SuccOff[i+1]-lo == 1 && d.InDegree[d.Succ[lo]] == 1 {
			d.Next[i] = d.Succ[lo]
		}
	}
}

// Runner executes a DAG repeatedly. All per-run state is allocated once, so a
// run allocates nothing. Runs of one Runner must not overlap.
//
// Scheduling: a worker that finishes a node keeps the first successor it made
// ready and runs it next (a chain never leaves the worker). Further ready
// successors go onto the shared stack in one critical section, from which
// the owner and helpers pull in batches; an idle pool helper is recruited
// when the stack has work and fewer helpers are active than the pool has.
// With no helpers (a pool of size 0: one thread), ready nodes go onto the
// worker's own stack instead, which costs no lock: nobody else could take
// them. With helpers they must not stay private: a worker may run a long
// or blocking node while holding them, and an idle worker could not reach
// them (TestRunnerHandsOverWork).
//
// Helpers are recruited when the work waiting is worth one, judged from the
// time a node takes (its grain, sampled while nodes run) and the ready set:
//
//   - A node that takes longer than waking a helper costs the waker
//     (wakeUpNs) pays for a helper by itself: whenever a ready node waits
//     on the shared stack, no helper is already on its way or looking for
//     work (searching), and one sleeps, one is woken. A helper that finds
//     work while more waits wakes the next, so helpers join one after
//     another as long as nodes wait: a wavefront or a tree, whose few ready
//     nodes at a time never add up to much waiting work, gets every core
//     its ready set can use, while at most one helper at a time spins for
//     work. (Taskflow's notifier keeps one thief awake while work exists,
//     the same rule.)
//   - Shorter nodes recruit when the ready nodes on the shared stack times
//     the grain cover what a wake-up costs (wakeNs), per helper already
//     active: a graph of nodes that take nanoseconds stays on one worker,
//     or a few, because handing such a node to another core costs more
//     than running it. (Taskflow wakes a worker whenever it pushes a task
//     and none is looking; with sixteen workers on a 1000-node tree of
//     empty tasks, that made every node cost 200 ns, most of it workers
//     contending for tasks.)
type Runner struct {
	dag     *DAG
	pool    *Pool
	exec    func(node int32)
	onPanic func(node int32, p any)
	share   bool // the pool has helpers: work may be handed over

	pending   []atomic.Int32
	remaining atomic.Int32 // sinks not yet run: all nodes are done when none are left
	sinks     int32
	queued    atomic.Int32 // len(stack), readable without the lock

	mu      sync.Mutex
	cond    sync.Cond
	stack   []int32
	helpers atomic.Int32 // active helpers; decremented under mu
	// searching counts helpers recruited that have not yet found a node,
	// and helpers looking for one: while one is, a push wakes nobody.
	searching atomic.Int32
	waiting   bool // the owner sleeps on cond
	helpFn    func()

	fired []atomic.Uint32 // per node, the early ports triggered this run
	later []atomic.Bool   // nodes that called Later while running (later.go)

	grain   atomic.Int64 // sampled time of one node's exec, ns (a moving average)
	sampled atomic.Bool  // grain is a sample, not the first launch's assumption
	ownerAt uint32       // the owner's node count across runs, for sampling
	runs    uint32       // runs started; every timeRunsEvery-th one is timed whole

	recruited atomic.Int64 // helpers recruited, for tests
}

// Recruiting: a helper is worth waking when the work waiting on the shared
// stack, per worker already active, is at least wakeNs. schedNs is what a
// node costs the scheduler beyond its exec. A node's exec is timed once
// every sampleEvery nodes a worker runs (two clock reads).
const (
	wakeNs = 5000
	// wakeUpNs is what waking a helper costs the worker that wakes it
	// (handing it the run and waking an idle core, measured at 0.3 to
	// 1 µs): a node that takes longer is worth a helper of its own.
	wakeUpNs    = 1000
	schedNs     = 20
	sampleEvery = 256
	// A run is timed whole once in timeRunsEvery runs, the first included:
	// a node that blocks or runs long between samples shows in the run's
	// time per node, which then becomes the grain (checkRun).
	timeRunsEvery = 32
)

// checkRun compares a whole run's time per node with the grain: a run much
// slower than its sampled nodes say had nodes the samples missed (a
// blocking host node, a long kernel), and work may have waited behind them
// for want of a helper. The grain becomes the run's time per node, so the
// next runs recruit.
func (r *Runner) checkRun(ns int64, nodes int) {
	perNode := ns / int64(nodes)
	if g := r.grain.Load(); perNode > 2*(g+schedNs)+500 {
		r.grain.Store(perNode)
	}
}

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// long reports whether a node takes longer than a wake-up costs.
func (r *Runner) long() bool { return r.grain.Load()+schedNs >= wakeUpNs }

// worthHelper reports whether the nodes waiting on the shared stack are
// worth one more helper.
func (r *Runner) worthHelper() bool {
	q := int64(r.queued.Load())
	if q == 0 {
		return false
	}
	if r.long() {
		return r.searching.Load() == 0
	}
	return q*(r.grain.Load()+schedNs) >= wakeNs*int64(r.helpers.Load()+1)
}

// sample times node's exec and folds it into the grain.
func (r *Runner) sample(node int32) {
	t := nanotime()
	r.exec(node)
	ns := nanotime() - t
	if !r.sampled.Load() { // the first sample replaces the assumption
		r.grain.Store(ns)
		r.sampled.Store(true)
		return
	}
	g := r.grain.Load()
	r.grain.Store(g + (ns-g)/4)
}

// NewRunner prepares to run d on pool, calling exec for every node.
func NewRunner(d *DAG, pool *Pool, exec func(node int32)) *Runner {
	r := &Runner{
		dag:     d,
		pool:    pool,
		exec:    exec,
		share:   pool.size > 0,
		pending: make([]atomic.Int32, len(d.InDegree)),
		stack:   make([]int32, 0, len(d.InDegree)),
	}
	r.cond.L = &r.mu
	r.helpFn = r.help
	// Until nodes have been timed, any waiting node is worth a helper: the
	// first launch of a graph of heavy nodes must not run them one by one.
	r.grain.Store(wakeNs)
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

// OnPanic lets exec panic: the panic is recovered by the worker, fn is
// called with the node and the value, and the node counts as finished (its
// successors still run). One recovery point per worker replaces a deferred
// recover per node. Call it before the first Run.
func (r *Runner) OnPanic(fn func(node int32, p any)) { r.onPanic = fn }

// Run executes every node once, respecting dependencies, and returns when all
// have finished. exec must not panic unless OnPanic was set.
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
	var t0 int64
	timed := r.runs%timeRunsEvery == 0
	r.runs++
	if timed {
		t0 = nanotime()
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
	if timed {
		r.checkRun(nanotime()-t0, n)
	}
	// All nodes are done; wait for helpers to leave before the state is
	// reused. A helper counts itself until it has left, and only a counted
	// worker recruits, so none is on its way in when the count is zero.
	if r.helpers.Load() == 0 {
		return
	}
	r.mu.Lock()
	for r.helpers.Load() > 0 {
		r.waiting = true
		r.cond.Wait()
	}
	r.waiting = false
	r.mu.Unlock()
}

// localCap bounds a worker's own stack of ready nodes; more go to the
// shared stack.
const localCap = 64

// worker is one goroutine's part of a run: the ready nodes it keeps.
type worker struct {
	n         int
	count     uint32 // nodes run, for sampling their time
	searching bool   // a helper counted in Runner.searching
	local     [localCap]int32
}

// done is what step returns when the worker has finished with the run.
const done = -2

func (r *Runner) work(node int32, owner bool) {
	var w worker
	if owner {
		w.count = r.ownerAt
	} else {
		w.count = 1        // a helper times its 256th node, not its first: the owner times the first ones
		w.searching = true // counted by recruit
	}
	for node != done {
		node = r.steps(&w, node, owner)
	}
	if owner {
		r.ownerAt = w.count
	}
}

// steps runs nodes, starting with node (or one taken from a stack when node
// is negative), until the worker has no more (it returns done) or exec
// panics: then the panicking node is finished as if it had returned, and
// steps returns the node to go on with.
func (r *Runner) steps(w *worker, node int32, owner bool) (next int32) {
	cur := int32(-1)
	defer func() {
		if cur >= 0 && r.onPanic != nil {
			if p := recover(); p != nil {
				r.onPanic(cur, p)
				next = r.finish(w, cur, owner)
			}
		}
	}()
	for {
		if node < 0 {
			if node = r.take(w, owner); node < 0 {
				return done
			}
		}
		// Work is waiting while this worker is busy: try again to get help
		// (a helper busy at push time may be idle now).
		if r.share && r.queued.Load() > 0 && int(r.helpers.Load()) < r.pool.size {
			r.recruit()
		}
		cur = node
		if w.count++; w.count%sampleEvery == 1 || w.count <= 4 && owner {
			r.sample(node)
		} else {
			r.exec(node)
		}
		cur = -1
		if node = r.finish(w, node, owner); node == done {
			return done
		}
	}
}

// finish accounts for node having run: it releases its successors and
// returns the one to run next (-1 if none), or done when the owner has run
// the run's last node.
func (r *Runner) finish(w *worker, node int32, owner bool) int32 {
	d := r.dag
	if r.deferred(node) { // Done releases its successors (later.go)
		return -1
	}
	if d.EarlyOff != nil && d.EarlyOff[node] != d.EarlyOff[node+1] {
		r.fireAll(node) // early successors not yet released are released now
	}
	if s := d.Next[node]; s >= 0 {
		return s
	}
	lo, hi := d.SuccOff[node], d.SuccOff[node+1]
	switch hi - lo {
	case 0:
		// Every node is an ancestor of a sink, and a sink runs only after
		// its ancestors have finished, so the run is over when the last
		// sink is. Only the owner waits on cond for that, so the owner
		// finishing it tells nobody.
		if r.remaining.Add(-1) == 0 {
			if owner {
				return done
			}
			r.mu.Lock()
			if r.waiting {
				r.cond.Broadcast()
			}
			r.mu.Unlock()
		}
		return -1
	case 1: // its successor has other predecessors: Next covers the rest
		if s := d.Succ[lo]; r.pending[s].Add(-1) == 0 {
			return s
		}
		return -1
	}
	return r.release(w, d.Succ[lo:hi])
}

// release marks one dependency of each successor done and returns the first
// one that became ready; the others that became ready go on the shared
// stack in one critical section (a fan-out of thousands takes the lock
// once), or, with no helpers, on the worker's own while it has room.
func (r *Runner) release(w *worker, succ []int32) int32 {
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
		if !r.share && w.n < localCap {
			w.local[w.n] = s
			w.n++
			continue
		}
		if !pushed {
			r.mu.Lock()
			pushed = true
		}
		r.stack = append(r.stack, s)
	}
	if pushed {
		r.publish()
	}
	return next
}

// take returns the next ready node for the worker: its own newest, else a
// batch from the shared stack (the owner waits for one while the run is
// not over), else -1.
func (r *Runner) take(w *worker, owner bool) int32 {
	if w.n == 0 {
		if w.n = r.pop(owner, w); w.n == 0 {
			return -1
		}
	}
	w.n--
	return w.local[w.n]
}

// recruit offers the run to one idle pool helper, if fewer are helping than
// the pool has.
func (r *Runner) recruit() {
	if r.pool.idle.Load() == 0 || !r.worthHelper() {
		return
	}
	r.searching.Add(1)
	if int(r.helpers.Add(1)) <= r.pool.size && r.pool.TryGo(r.helpFn) {
		r.recruited.Add(1)
		return
	}
	r.searching.Add(-1)
	r.mu.Lock()
	r.helpers.Add(-1)
	if r.waiting {
		r.cond.Broadcast()
	}
	r.mu.Unlock()
}

// popBatch bounds how many ready nodes a worker takes from the stack at once.
const popBatch = 8

// pop takes ready nodes into w's stack and returns how many: a fair share
// of the stack, up to popBatch, so that a wide fan-out costs one lock per
// batch, or one node at a time when nodes are long (a batch kept private
// could wait behind a long node while another worker idles). The owner
// sleeps until a node is ready or the run is over; a helper returns 0 as
// soon as there is nothing to take.
func (r *Runner) pop(owner bool, w *worker) int {
	buf := &w.local
	if !owner && !w.searching {
		w.searching = true
		r.searching.Add(1)
	}
	if !owner && r.queued.Load() == 0 && r.remaining.Load() > 0 {
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
			if r.long() {
				take = 1
			}
			copy(buf[:take], r.stack[k-take:])
			r.stack = r.stack[:k-take]
			r.queued.Store(int32(k - take))
			if w.searching {
				w.searching = false
				r.searching.Add(-1)
			}
			return take
		}
		if r.remaining.Load() == 0 || !owner {
			if !owner {
				if w.searching {
					w.searching = false
					r.searching.Add(-1)
				}
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
