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
// Scheduling is work stealing. The goroutine that calls Run (the owner) and
// the pool helpers it recruits each have a slot with a deque of ready
// nodes. A worker that finishes a node keeps the first successor it made
// ready and runs it next (a chain never leaves the worker); further ready
// successors go onto its own deque, which it pops newest first when its
// chain ends. A worker with an empty deque steals the oldest node from
// another's. Nodes made ready outside the workers (Later's Done, early
// triggers, a fan-out wider than a deque) go onto a shared stack under a
// mutex. With no helpers (a pool of size 0: one thread), ready nodes go onto
// the worker's own plain stack, which costs no atomics: nobody else could
// take them. With helpers they must be stealable: a worker may run a long
// or blocking node while holding them, and an idle worker could not reach
// them otherwise (TestRunnerHandsOverWork).
//
// A worker out of work spins a little, watching the other deques, then
// leaves the run (a helper goes back to the pool, where it lingers briefly
// and then sleeps on a channel: Pool) or sleeps until a push wakes it (the
// owner). Helpers are
// recruited when the work waiting is worth one, judged from the time a node
// takes (its grain, sampled while nodes run) and the ready set:
//
//   - A node that takes longer than waking a helper costs the waker
//     (wakeUpNs) pays for a helper by itself: whenever a worker has ready
//     nodes on its deque, fewer workers are looking for work (searching)
//     than those nodes, and a helper sleeps, one is woken. A thief that
//     finds work while more waits on its victim wakes the next, so helpers
//     join as long as nodes wait: a wavefront or a tree, whose few ready
//     nodes at a time never add up to much waiting work, gets every core
//     its ready set can use, while few workers at a time spin for work.
//     (Taskflow's notifier wakes a worker on every push unless one is
//     stealing; the rule here is the same for a push of one node, and
//     wakes several at once for a wide fan-out.)
//   - Shorter nodes recruit when the ready nodes on the worker's deque and
//     the shared stack times the grain cover what a wake-up costs (wakeNs),
//     per helper already active: a graph of nodes that take nanoseconds
//     stays on one worker, or a few, because handing such a node to another
//     core costs more than running it. (Taskflow wakes a worker whenever it
//     pushes a task and none is looking; with sixteen workers on a
//     1000-node tree of empty tasks, that made every node cost 200 ns, most
//     of it workers contending for tasks.)
type Runner struct {
	dag     *DAG
	pool    *Pool
	exec    func(node int32)
	onPanic func(node int32, p any)
	share   bool // the pool has helpers: work may be handed over

	pending   []atomic.Int32
	remaining atomic.Int32 // sinks not yet run: all nodes are done when none are left
	sinks     int32

	// slots[0] is the owner's, the others are claimed by helpers while
	// they work on the run. nil without helpers.
	slots []slot

	mu      sync.Mutex
	cond    sync.Cond
	stack   []int32      // the shared stack, under mu
	queued  atomic.Int32 // len(stack), readable without the lock
	helpers atomic.Int32 // active helpers, recruited and not yet left
	waiting atomic.Bool  // the owner sleeps on cond; set under mu
	helpFn  func()
	_       [64]byte // workers read the fields above before every node; searching changes often
	// searching counts workers looking for a node (helpers from when they
	// arrive): while as many search as nodes wait, a push of long nodes
	// wakes nobody.
	searching atomic.Int32
	_         [60]byte

	fired []atomic.Uint32 // per node, the early ports triggered this run
	later []atomic.Bool   // nodes that called Later while running (later.go)

	grain   atomic.Int64 // sampled time of one node's exec, ns (a moving average)
	sampled atomic.Bool  // grain is a sample, not the first launch's assumption
	ownerAt uint32       // the owner's node count across runs, for sampling
	runs    uint32       // runs started; every timeRunsEvery-th one is timed whole

	recruited atomic.Int64 // helpers recruited, for tests
	// left counts helpers that left a run before its end for want of
	// work, and sleeps the owner's waits on cond: with recruited, how
	// much the workers came and went (BenchmarkRunnerWork).
	left, sleeps atomic.Int64
}

// Churn returns how many helpers the runner has recruited, how many left a
// run before its end for want of work, and how often the owner slept,
// since it was made.
func (r *Runner) Churn() (recruited, left, sleeps int64) {
	return r.recruited.Load(), r.left.Load(), r.sleeps.Load()
}

// slot is one worker's place in a run: its deque, and whether a helper
// holds it.
type slot struct {
	q       deque
	claimed atomic.Bool
	_       [60]byte
}

// Recruiting: a helper is worth waking when the work waiting on the shared
// stack, per worker already active, is at least wakeNs. schedNs is what a
// node costs the scheduler beyond its exec. A node's exec is timed once
// every sampleEvery nodes a worker runs (two clock reads).
const (
	wakeNs = 5000
	// wakeUpNs is what waking a helper costs the worker that wakes it
	// (handing it the run and waking an idle core, measured at 0.3 to
	// 1 µs): a node that takes longer is worth a helper of its own. The
	// middle of that range: a 1 µs node, timed at a little less on a
	// busy core, must still count as long.
	wakeUpNs    = 500
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

// worthHelper reports whether q nodes waiting are worth one more helper.
func (r *Runner) worthHelper(q int64) bool {
	if q <= 0 {
		return false
	}
	if r.long() {
		return int64(r.searching.Load()) < q
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
	n := len(d.InDegree)
	r := &Runner{
		dag:     d,
		pool:    pool,
		exec:    exec,
		share:   pool.size > 0,
		pending: make([]atomic.Int32, n),
	}
	if r.share {
		r.slots = make([]slot, pool.size+1)
		for i := range r.slots {
			r.slots[i].q = newDeque(n)
		}
	} else {
		r.stack = make([]int32, 0, n)
	}
	r.cond.L = &r.mu
	r.helpFn = r.help
	// Until nodes have been timed, any waiting node is worth a helper: the
	// first launch of a graph of heavy nodes must not run them one by one.
	r.grain.Store(wakeNs)
	if d.EarlyOff != nil {
		r.fired = make([]atomic.Uint32, n)
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
	if roots := r.dag.Roots[1:]; len(roots) > 0 {
		if r.share { // the owner's deque, as if the owner had made them ready
			q := &r.slots[0].q
			for len(roots) > 0 && q.push(roots[0]) {
				roots = roots[1:]
			}
		}
		if len(roots) > 0 {
			r.mu.Lock()
			r.stack = append(r.stack, roots...)
			r.publish()
		} else {
			r.recruit(r.slots[0].q.size())
		}
	}
	r.work(r.dag.Roots[0], true)
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
	r.waiting.Store(true)
	for r.helpers.Load() > 0 {
		r.cond.Wait()
	}
	r.waiting.Store(false)
	r.mu.Unlock()
}

// localCap bounds a worker's own stack of ready nodes when it has no deque;
// more go to the shared stack.
const localCap = 64

// worker is one goroutine's part of a run.
type worker struct {
	n         int    // ready nodes in local (no deque)
	count     uint32 // nodes run, for sampling their time
	searching bool   // counted in Runner.searching
	self      int    // slot index; -1: none (no helpers, or a helper beyond the pool)
	victim    int    // the slot to steal from first
	q         *deque // slots[self].q, or nil
	local     [localCap]int32
}

// done is what step returns when the worker has finished with the run.
const done = -2

func (r *Runner) work(node int32, owner bool) {
	var w worker
	w.self = -1
	if owner {
		w.count = r.ownerAt
		if r.share {
			w.self = 0
		}
	} else {
		w.count = 1 // a helper times its 256th node, not its first: the owner times the first ones
		// Counted from here, not from recruit: a helper woken from sleep
		// takes tens of microseconds to arrive (measured on a 16-CPU VM),
		// and while one was counted on its way, every push saw a worker
		// searching and woke nobody, so helpers joined one at a time.
		w.searching = true
		r.searching.Add(1)
		w.self = r.claim()
	}
	if w.self >= 0 {
		w.q = &r.slots[w.self].q
		w.victim = w.self + 1
	}
	for node != done {
		node = r.steps(&w, node, owner)
	}
	if owner {
		r.ownerAt = w.count
	}
}

// claim takes a free helper slot, or returns -1 when none is free (a
// helper started beyond the pool by an early trigger).
func (r *Runner) claim() int {
	for i := 1; i < len(r.slots); i++ {
		if !r.slots[i].claimed.Load() && r.slots[i].claimed.CompareAndSwap(false, true) {
			return i
		}
	}
	return -1
}

// steps runs nodes, starting with node (or one taken from a queue when node
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
		// (a helper busy at push time may be idle now). Short nodes look
		// every eighth node: a chain of them pays for no look at all.
		if r.share && (w.count&7 == 0 || r.long()) && int(r.helpers.Load()) < r.pool.size {
			if q := r.waitingFor(w); q > 0 {
				r.recruit(q)
			}
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

// waitingFor is the number of ready nodes waiting that w could hand over:
// its own deque's and the shared stack's.
func (r *Runner) waitingFor(w *worker) int64 {
	q := int64(r.queued.Load())
	if w.q != nil {
		q += w.q.size()
	}
	return q
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
			r.wakeOwner()
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

// wakeOwner wakes the owner if it sleeps on cond. The caller has just
// changed what the owner waits for (a node pushed, the run over, a helper
// gone) with an atomic write; the owner sets waiting before it looks at
// those under mu, so one of the two sees the other's write.
func (r *Runner) wakeOwner() {
	if r.waiting.Load() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// release marks one dependency of each successor done and returns the first
// one that became ready; the others that became ready go on the worker's
// deque (or, with no helpers, on its plain stack), and what does not fit
// on the shared stack in one critical section.
func (r *Runner) release(w *worker, succ []int32) int32 {
	d := r.dag
	next := int32(-1)
	pushed, locked := false, false
	long := r.long()
	b := int64(-1) // w.q's bottom, with the nodes staged so far
	for _, s := range succ {
		if d.InDegree[s] != 1 && r.pending[s].Add(-1) != 0 {
			continue
		}
		if next < 0 {
			next = s
			continue
		}
		if !r.share {
			if w.n < localCap {
				w.local[w.n] = s
				w.n++
				continue
			}
		} else if w.q != nil {
			if b < 0 {
				b = w.q.bottom.Load()
			}
			if w.q.stage(b, s) {
				b++
				// Long nodes are published one by one, and a helper can
				// start on the first while the rest are pushed; short
				// ones all at once.
				if long {
					w.q.publish(b)
					if !pushed {
						r.recruit(1)
					}
				}
				pushed = true
				continue
			}
		}
		if !locked {
			r.mu.Lock()
			locked = true
		}
		r.stack = append(r.stack, s)
	}
	if pushed && !long {
		w.q.publish(b)
	}
	if locked {
		r.publish()
	} else if pushed {
		if r.waiting.Load() {
			r.wakeOwner()
		} else {
			r.recruit(w.q.size())
		}
	}
	return next
}

// take returns the next ready node for the worker, or -1 when it has
// finished with the run: a helper then has left it; the owner returns -1
// only once the run is over.
func (r *Runner) take(w *worker, owner bool) int32 {
	sp := search{limit: searchNs}
	for {
		if x := r.find(w); x >= 0 {
			if w.searching {
				w.searching = false
				r.searching.Add(-1)
				// A thief that finds work while more waits wakes the next.
				q := int64(r.queued.Load())
				if w.victim < len(r.slots) {
					q += r.slots[w.victim].q.size()
				}
				r.recruit(q)
			}
			return x
		}
		if r.remaining.Load() == 0 {
			break
		}
		if !w.searching {
			w.searching = true
			r.searching.Add(1)
		}
		if sp.again() {
			continue
		}
		// Nothing for a while. Stop searching, so that a push recruits,
		// then look once more: a push that saw this worker searching and
		// woke nobody is seen here.
		w.searching = false
		r.searching.Add(-1)
		if owner {
			if !r.sleep() {
				break
			}
			sp = search{limit: searchNs}
			continue
		}
		if !r.anyWork() {
			break
		}
		sp.briefly() // work appeared: look again, briefly
	}
	if w.searching {
		w.searching = false
		r.searching.Add(-1)
	}
	if !owner {
		if r.remaining.Load() != 0 {
			r.left.Add(1)
		}
		r.leave(w)
	}
	return -1
}

// find takes a ready node for w without waiting: its own newest, else from
// the shared stack, else stolen from another worker; -1 if none.
func (r *Runner) find(w *worker) int32 {
	if w.n > 0 {
		w.n--
		return w.local[w.n]
	}
	if w.q != nil {
		if !r.long() {
			// Short nodes a batch at a time, kept private: one store of
			// bottom for several nodes, and none of them holds the
			// worker long.
			if k := w.q.popN(w.local[:popBatch]); k > 0 {
				w.n = k - 1
				return w.local[k-1]
			}
		} else if x := w.q.pop(); x >= 0 {
			return x
		}
	}
	if r.queued.Load() > 0 {
		if x := r.popShared(w); x >= 0 {
			return x
		}
	}
	if r.share {
		return r.steal(w)
	}
	return empty
}

// popBatch bounds how many ready nodes a worker takes from the shared stack
// at once.
const popBatch = 8

// popShared takes a node from the shared stack, and with it a fair share of
// the rest, up to popBatch, onto w's deque or plain stack, so that a wide
// fan-out costs one lock per batch. A helper without a deque takes one
// node: nobody could steal a private batch from it.
func (r *Runner) popShared(w *worker) int32 {
	r.mu.Lock()
	k := len(r.stack)
	if k == 0 {
		r.mu.Unlock()
		return empty
	}
	k--
	x := r.stack[k]
	more := min(popBatch-1, k/(int(r.helpers.Load())+1))
	for ; more > 0; more-- {
		s := r.stack[k-1]
		if w.q != nil {
			if !w.q.push(s) {
				break
			}
		} else if !r.share && w.n < localCap {
			w.local[w.n] = s
			w.n++
		} else {
			break
		}
		k--
	}
	r.stack = r.stack[:k]
	r.queued.Store(int32(k))
	r.mu.Unlock()
	return x
}

// steal takes the oldest node of another worker's deque, starting with the
// one it last stole from; -1 if every deque was empty.
func (r *Runner) steal(w *worker) int32 {
	n := len(r.slots)
	for tries := 0; tries < 4; tries++ {
		contended := false
		v := w.victim
		for i := 0; i < n; i++ {
			if v >= n {
				v = 0
			}
			if v != w.self {
				switch x := r.slots[v].q.steal(); x {
				case empty:
				case lost:
					contended = true
				default:
					w.victim = v
					if w.q != nil && !r.long() {
						r.stealMore(w, &r.slots[v].q)
					}
					return x
				}
			}
			v++
		}
		if !contended {
			break
		}
	}
	return empty
}

// stealMore takes up to half of what is left on v, popBatch at most, onto
// w's own deque, one node at a time: nodes shorter than a wake-up cost
// about what a steal costs, and thieves that each took one would all
// contend for the top of one deque. Thieves spread out instead, stealing
// from each other.
func (r *Runner) stealMore(w *worker, v *deque) {
	for k := min(popBatch-1, v.size()/2); k > 0; k-- {
		x := v.steal()
		if x < 0 {
			return
		}
		if !w.q.push(x) { // w's deque was empty: not expected
			r.mu.Lock()
			r.stack = append(r.stack, x)
			r.publish()
			return
		}
	}
}

// anyWork reports whether a ready node waits anywhere.
func (r *Runner) anyWork() bool {
	if r.queued.Load() > 0 {
		return true
	}
	for i := range r.slots {
		if r.slots[i].q.size() > 0 {
			return true
		}
	}
	return false
}

// sleep makes the owner wait until a node may be ready or the run is over;
// it reports whether the run goes on.
func (r *Runner) sleep() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.waiting.Store(false)
	for {
		r.waiting.Store(true)
		if r.remaining.Load() == 0 {
			return false
		}
		if r.anyWork() {
			return true
		}
		r.sleeps.Add(1)
		r.cond.Wait()
	}
}

// leave ends a helper's part in the run.
func (r *Runner) leave(w *worker) {
	if w.self >= 0 {
		r.slots[w.self].claimed.Store(false)
	}
	r.helpers.Add(-1)
	r.wakeOwner()
}

// recruit offers the run to one idle pool helper, if the q nodes waiting
// are worth one and fewer are helping than the pool has. (Waking two at a
// time, so that helpers join in doubling waves, measured no better on a
// 16-CPU VM: 1 µs fan-outs slower, 5 µs ones level.)
func (r *Runner) recruit(q int64) {
	if r.pool.idle.Load() == 0 || !r.worthHelper(q) {
		return
	}
	if int(r.helpers.Add(1)) <= r.pool.size && r.pool.TryGo(r.helpFn) {
		r.recruited.Add(1)
		return
	}
	r.helpers.Add(-1)
	r.wakeOwner()
}

func (r *Runner) help() { r.work(-1, false) }

// publish makes the nodes just pushed on the shared stack visible: it wakes
// the waiting owner, or recruits helpers. r.mu is held on entry and
// released.
func (r *Runner) publish() {
	q := len(r.stack)
	r.queued.Store(int32(q))
	waiting := r.waiting.Load()
	if waiting {
		r.cond.Broadcast()
	}
	r.mu.Unlock()
	if !waiting {
		r.recruit(int64(q))
	}
}
