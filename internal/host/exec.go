package host

import (
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/dag"
	"github.com/gpugraph/gpugraph/internal/sched"
)

// Instantiation flags, as cudaGraphInstantiateFlags.
const (
	flagAutoFree     = 1
	flagUpload       = 2
	flagDeviceLaunch = 4
)

// Exec is an executable graph: the graph flattened (child graphs inlined)
// into a table of ops scheduled by a sched.Runner. Launches of one Exec
// never overlap: each starts after the previous one finished, whatever
// streams they were launched into.
type Exec struct {
	dev   *Device
	tag   any          // the gpugraph package's executable graph
	ops   []op         // one per flattened node; child graphs are inlined
	nodes []*Node      // the graph node each op came from
	bops  []backend.Op // its op as lowered; Params nil for child graph entry and exit
	devs  []*Device    // the device each op runs on, where one is not e's (nil if none)
	dag   sched.DAG
	run   *sched.Runner
	// Event nodes take per-launch sequence numbers: indexes of those ops.
	records, waits []int32
	copies         []int32 // memcpy ops, each with a staging slot in every launch (op.stage)
	// restage[i], for a memcpy op i with a host destination, lists the
	// staging slots of the memcpy ops after it (launch.restage).
	restage map[int32][]int32
	extSems []int32 // external semaphore ops, whose semaphores launches hold

	imu       sync.Mutex // serialises issuing launches and uploads: sequence numbers follow graph memory plans
	mu        sync.Mutex
	cond      sync.Cond
	issued    atomic.Uint64 // launches (and uploads) issued; written under mu
	finished  atomic.Uint64 // launches finished; written under mu
	destroyed bool
	after     []afterLaunches // functions waiting for launches to finish

	cur    *launch // the launch running now; launches never overlap
	failed atomic.Pointer[backend.Error]

	// Graph memory, for graphs with memory nodes.
	mem       bool          // the graph has alloc or free nodes
	graph     *Graph        // the graph instantiated or last updated from, counted in its memExecs while e lives
	autoFree  bool          // flagAutoFree
	persist   []*GraphAlloc // allocations the graph does not free
	frees     []*GraphAlloc // allocations of other graphs that free nodes free
	freeNodes []any         // those free nodes' tags, parallel to frees
	bind      *Binding      // what e maps of its graph's address space

	// Update: the instantiated topology, each node's op, and whether a
	// launch holds the current ops table (see ownOpsLocked).
	topo      *topo
	childTopo map[*Node]*topo
	opOf      map[*Node]int32
	opsShared bool
	issuing   int        // launches between taking the op table and being issued
	umu       sync.Mutex // serialises updates; taken before mu
	spare     []op       // the op table before the last Update, reused by the next
	spareBops []backend.Op
	scratch   *updateScratch
	runOps    []op // the op table of the execution running now (host or device launch)
	// Launch records no launch uses any more, for the next launches: a
	// launch allocates nothing. Under mu.
	freeLaunches []*launch
	// The holders of the memory of memset and memcpy ops at
	// instantiation, by op, when more than one device was open then
	// (multi); with one, every device address was e.dev's (holders.go).
	multi   bool
	holders map[int32]backend.Holders

	conds *condExec // condition values and bodies, for graphs with conditional nodes
	pdl   *pdlPlan  // early (programmatic) edges, if any (pdl.go)
	dl    devState  // device graph launch
}

var _ backend.Exec = (*Exec)(nil)

// afterLaunches is a function waiting for launch seq to finish.
type afterLaunches struct {
	seq uint64
	fn  func()
}

// launch is one Launch of an Exec, queued in a stream.
type launch struct {
	e      *Exec
	seq    uint64
	rec    []uint64 // record sequence numbers, parallel to e.records
	wait   []uint64 // wait targets, parallel to e.waits
	stream *Stream
	upload bool          // an Upload: map memory, run nothing
	plan   *Plan         // the graph memory it maps, decided at its call (nil if none)
	freed  []*GraphAlloc // allocations AutoFreeOnLaunch frees at its start
	ops    []op          // e's op table as of this launch: later updates do not change it
	staged [][]byte      // the sources of its copies from pageable memory, read at the call, parallel to e.copies
	// stageMu orders the copies that read staged with those that stage
	// again (restage), which the graph need not order.
	stageMu sync.Mutex
	bodies  [][]op // the op tables of e's conditional bodies (e.conds.subs) as of this launch

	xsems []*Semaphore // held from issue to end (extsem.go)
}

// nodeErr is a failure about node n, named by its tag.
func (e *Exec) nodeErr(n *Node, code *backend.Code, format string, args ...any) *backend.Error {
	err := backend.Errorf(code, format, args...)
	err.Node = n.tag
	return err
}

// Instantiate flattens the graph into an executable graph. The gpugraph
// package has checked the flags and the graph's rules (one executable
// graph at a time for graphs with memory or conditional nodes, handles
// that serve nodes, device graph requirements). It fails, naming the node,
// on a cycle, on memory freed since a node was added, on a destroyed event
// or semaphore, and on nodes a conditional body cannot hold.
func (g *Graph) Instantiate(flags uint, upload backend.Stream, tag any) (backend.Exec, error) {
	e := &Exec{dev: g.d, tag: tag, autoFree: flags&flagAutoFree != 0}
	e.dl.launch = flags&flagDeviceLaunch != 0
	e.cond.L = &e.mu
	// Sized once: growing the op tables node by node cost more than half
	// of a 1000-node instantiation (BenchmarkInstantiate).
	n := flatCount(g)
	preds := make([][]int32, 0, n)
	e.ops, e.bops, e.nodes = make([]op, 0, n), make([]backend.Op, 0, n), make([]*Node, 0, n)
	e.multi = g.d.OpenDevices() > 1
	if _, err := e.flatten(g, nil, &preds); err != nil {
		return nil, err
	}
	e.topo.index(e)
	if err := e.condInstantiate(g); err != nil {
		return nil, err
	}
	if e.mem {
		g.mu.Lock()
		if g.memExecs > 0 {
			g.mu.Unlock()
			e.condRelease()
			return nil, backend.Errorf(backend.ErrNotSupported, "a graph with memory nodes can have one executable graph at a time")
		}
		g.memExecs++
		va := g.va
		g.mu.Unlock()
		e.graph = g
		e.bind = g.d.GraphMemIfAny().NewBinding(va, e.persist)
	}
	d := &e.dag
	*d = *e.newDAG(preds)
	for i := range e.ops {
		switch e.ops[i].kind {
		case opKernel:
			e.ops[i].kern.setCtx(&kernelCtx{e: e, node: int32(i)})
		case opRecord:
			e.ops[i].seq = uint64(len(e.records))
			e.records = append(e.records, int32(i))
		case opWait:
			e.ops[i].seq = uint64(len(e.waits))
			e.waits = append(e.waits, int32(i))
		case opMemcpy:
			e.copies = append(e.copies, int32(i))
			e.ops[i].stage = int32(len(e.copies))
		}
	}
	e.restage = restageSlots(&e.dag, e.ops, e.bops)
	e.run = e.newRunner(d, g.d.Pool, e.execFunc())
	e.instantiateExtSems()
	if flags&flagUpload != 0 {
		if err := e.Upload(upload); err != nil {
			e.Destroy()
			return nil, err
		}
	}
	return e, nil
}

// prepare lowers a node's op to the op that runs, resolving its device
// memory, event and semaphores now.
func (d *Device) prepare(o *backend.Op) (op, *backend.Error) {
	fail := func(err error) (op, *backend.Error) {
		be, ok := err.(*backend.Error)
		if !ok {
			be = backend.Errorf(backend.ErrInvalidValue, "%v", err)
		}
		return op{}, be
	}
	switch o.Type {
	case backend.NodeKernel:
		return op{kind: opKernel, kern: kernelOf(&o.Launch, o.Launch.Args)}, nil
	case backend.NodeMemcpy:
		x, err := d.copyOp(&o.Memcpy)
		if err != nil {
			return fail(err)
		}
		x.staged = o.Memcpy.Staged() // the gpugraph package's rule: a pageable source is read at launch
		x.restages = o.Memcpy.DstHost != nil && !o.Memcpy.DstPinned
		return x, nil
	case backend.NodeMemset:
		x, err := d.memsetOp(&o.Memset)
		if err != nil {
			return fail(err)
		}
		return x, nil
	case backend.NodeHost:
		return op{kind: opHost, host: o.Host}, nil
	case backend.NodeEventRecord, backend.NodeEventWait:
		ev := o.Event.(*Event)
		if ev.destroyed.Load() {
			return op{}, backend.Errorf(backend.ErrInvalidResourceHandle, "event is destroyed")
		}
		if o.Type == backend.NodeEventRecord {
			return op{kind: opRecord, ev: ev}, nil
		}
		return op{kind: opWait, ev: ev}, nil
	case backend.NodeExtSemSignal, backend.NodeExtSemWait:
		sems := make([]*Semaphore, len(o.Sems))
		for i, s := range o.Sems {
			sems[i] = s.(*Semaphore)
			if sems[i].Destroyed() {
				return op{}, backend.Errorf(backend.ErrInvalidValue, "semaphore %d: external semaphore is destroyed", i)
			}
		}
		kind := opExtSemWait
		if o.Type == backend.NodeExtSemSignal {
			kind = opExtSemSignal
		}
		// Node ops are never changed in place (copyOp), so the op may share
		// their arrays.
		return op{kind: kind, xs: &extSemOp{sems: sems, values: o.Values}}, nil
	}
	return op{kind: opEmpty}, nil
}

// flatten appends g's nodes to e in dependency order, each root depending on
// entry, and returns the indexes of g's sinks. Child graphs are inlined
// between an entry and an exit op, so their nodes schedule like any other.
// flatCount is the number of ops flatten makes of g: one per node, and an
// entry and an exit around each child graph's own.
func flatCount(g *Graph) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, nd := range g.nodes {
		if nd.typ == backend.NodeChildGraph && nd.child != nil {
			n += 2 + flatCount(nd.child)
		} else {
			n++
		}
	}
	return n
}

func (e *Exec) flatten(g *Graph, entry []int32, preds *[][]int32) ([]int32, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	order, bad := topoOrder(g.nodes)
	if bad != nil {
		return nil, e.nodeErr(bad, backend.ErrInvalidValue, "graph has a cycle")
	}
	if e.topo == nil { // the top graph: keep its shape for Update
		e.topo = buildTopo(g)
		e.opOf = make(map[*Node]int32, len(g.nodes))
		e.childTopo = map[*Node]*topo{}
	}
	exit := make(map[*Node]int32, len(order))
	add := func(o op, n *Node, bop backend.Op, ps []int32) int32 {
		e.bops = append(e.bops, bop)
		e.ops = append(e.ops, o)
		e.nodes = append(e.nodes, n)
		if _, seen := e.opOf[n]; !seen { // a child graph node is named by its entry
			e.opOf[n] = int32(len(e.ops) - 1)
		}
		*preds = append(*preds, ps)
		return int32(len(e.ops) - 1)
	}
	var sinks []int32
	for _, n := range order {
		ps := entry
		if len(n.deps) > 0 {
			ps = make([]int32, 0, len(n.deps))
			for _, d := range n.deps {
				if !e.earlyEdge(g, d, n, exit[d]) {
					ps = append(ps, exit[d])
				}
			}
		}
		switch n.typ {
		case backend.NodeMemAlloc, backend.NodeMemFree:
			e.mem = true
			o := op{kind: opAlloc, galloc: n.alloc}
			if n.typ == backend.NodeMemFree {
				o.kind = opFree
				if n.alloc.va != g.va {
					o.seq = seqForeignFree
					e.frees = append(e.frees, n.alloc)
					e.freeNodes = append(e.freeNodes, n.tag)
				}
			} else if n.alloc.freedBy == nil {
				e.persist = append(e.persist, n.alloc)
			}
			exit[n] = add(o, n, backend.Op{Type: n.typ}, ps)
		case backend.NodeChildGraph:
			in := add(op{kind: opEmpty}, n, backend.Op{Type: backend.NodeEmpty}, ps)
			inner, err := e.flatten(n.child, []int32{in}, preds)
			if err != nil {
				return nil, err
			}
			if len(inner) == 0 {
				inner = []int32{in}
			}
			exit[n] = add(op{kind: opEmpty}, n, backend.Op{Type: backend.NodeEmpty}, inner)
		case backend.NodeConditional:
			o, err := e.condOp(n)
			if err != nil {
				return nil, err
			}
			exit[n] = add(o, n, backend.Op{Type: n.typ}, ps)
		default:
			dev := opDevice(e.dev, &n.op)
			o, err := dev.prepare(&n.op)
			if err != nil {
				return nil, at(err, n.tag)
			}
			exit[n] = add(o, n, n.op, ps)
			e.recordHolders(exit[n])
			if dev != e.dev {
				for len(e.devs) < len(e.ops) {
					e.devs = append(e.devs, nil)
				}
				e.devs[len(e.ops)-1] = dev
			}
		}
		if len(n.outs) == 0 {
			sinks = append(sinks, exit[n])
		}
	}
	return sinks, nil
}

// Launch queues one execution of the graph in s. It starts after the
// previous launch of e finished.
func (e *Exec) Launch(bs backend.Stream) error {
	s := bs.(*Stream)
	o := op{kind: opGraph}
	return s.enqueue(&o, func() (uint64, error) {
		// A graph holding nothing from issue to end (no memory nodes, no
		// external semaphores) takes its op table and sequence number in
		// one critical section; the launch record is a recycled one (a
		// launch allocates nothing).
		holds := e.mem || len(e.extSems) > 0
		if holds {
			e.imu.Lock()
			defer e.imu.Unlock()
		}
		e.mu.Lock()
		l := e.newLaunchLocked(s)
		l.ops, e.opsShared = e.ops, true
		l.takeBodiesLocked()
		l.stageCopies()
		if holds {
			e.issuing++ // l reads l.ops from now: updates must copy the table
			e.mu.Unlock()
			err := l.issue()
			e.mu.Lock()
			e.issuing--
			if err != nil {
				e.recycleLocked(l)
				e.mu.Unlock()
				return 0, err
			}
		}
		l.seq = e.issued.Add(1)
		e.mu.Unlock()
		l.issueEvents()
		o.launch = l
		return 0, nil
	})
}

// newLaunchLocked returns a launch record of e into s, recycled if one is
// free. e.mu is held.
func (e *Exec) newLaunchLocked(s *Stream) *launch {
	var l *launch
	if k := len(e.freeLaunches); k > 0 {
		l = e.freeLaunches[k-1]
		e.freeLaunches[k-1] = nil
		e.freeLaunches = e.freeLaunches[:k-1]
	} else {
		l = &launch{e: e}
		if len(e.records) > 0 {
			l.rec = make([]uint64, len(e.records))
		}
		if len(e.waits) > 0 {
			l.wait = make([]uint64, len(e.waits))
		}
		if len(e.copies) > 0 {
			l.staged = make([][]byte, len(e.copies))
		}
	}
	l.stream = s
	return l
}

// recycleLocked keeps l for a later launch; nothing refers to it any more.
// e.mu is held.
func (e *Exec) recycleLocked(l *launch) {
	// Only what a launch sets; e, rec and wait stay. Clearing the whole
	// record cost a launch of a 10-node graph 5 %.
	l.seq, l.stream, l.upload, l.ops = 0, nil, false, nil
	l.plan, l.freed, l.bodies, l.xsems = nil, nil, nil, nil
	e.freeLaunches = append(e.freeLaunches, l)
}

// takeBodiesLocked snapshots the op tables of e's conditional bodies. e.mu
// is held.
func (l *launch) takeBodiesLocked() {
	e := l.e
	if e.conds != nil && len(e.conds.subs) > 0 {
		l.bodies = make([][]op, len(e.conds.subs))
		for i, sub := range e.conds.subs {
			l.bodies[i] = sub.ops
		}
	}
}

// stageCopies reads, at the launch call, the sources of the launch's
// copies from pageable host memory, as the driver stages them: a host
// node of the same launch that writes such a source comes too late. The
// buffers of a recycled launch record are reused.
func (l *launch) stageCopies() {
	for k, x := range l.e.copies {
		if o := &l.ops[x]; o.staged && !o.off {
			l.staged[k] = append(l.staged[k][:0], o.src...)
		}
	}
}

// restageSlots finds, for each memcpy op with a host destination (where
// a launch stages pageable sources again when that destination is
// pageable), the staging slots of the memcpy ops after it in d (nil if
// none).
func restageSlots(d *sched.DAG, ops []op, bops []backend.Op) map[int32][]int32 {
	var m map[int32][]int32
	succ := func(x int32) []int32 { return d.Succ[d.SuccOff[x]:d.SuccOff[x+1]] }
	for i := range ops {
		if ops[i].kind != opMemcpy || bops[i].Memcpy.DstHost == nil {
			continue
		}
		var slots []int32
		for x := range dag.Ancestors(int32(i), succ) { // its descendants
			if ops[x].kind == opMemcpy && bops[x].Memcpy.SrcHost != nil {
				slots = append(slots, ops[x].stage-1)
			}
		}
		if len(slots) > 0 {
			if m == nil {
				m = map[int32][]int32{}
			}
			m[int32(i)] = slots
		}
	}
	return m
}

// restage reads again, when copy op i of the launch has written pageable
// host memory, the pageable sources of the copies after it. The driver
// stages a graph's pageable sources at the launch call and again where a
// copy into pageable memory completes, so such a later copy delivers its
// source as it was at the last of those points: the copied bytes, and a
// host node's writes before that point, arrive; a host node's writes
// after it come too late (H100, driver 580: tools/probe/pageable.cu,
// docs/driver-pageable.txt, two-GPU differential inputs). What a copy
// reads of pageable memory that a host node of the same launch wrote
// otherwise is not settled: the GPU answered both ways (docs/memory.md).
func (l *launch) restage(i int32) {
	slots := l.e.restage[i]
	if len(slots) == 0 {
		return
	}
	l.stageMu.Lock()
	defer l.stageMu.Unlock()
	for _, k := range slots {
		if o := &l.ops[l.e.copies[k]]; o.staged && !o.off {
			l.staged[k] = append(l.staged[k][:0], o.src...)
		}
	}
}

// issueEvents takes the launch's event sequence numbers, in stream order
// (the stream's lock is held).
func (l *launch) issueEvents() {
	for i, x := range l.e.records {
		l.rec[i] = l.ops[x].ev.Issue()
	}
	for i, x := range l.e.waits {
		l.wait[i] = l.ops[x].ev.Target()
	}
}

// issue takes what launch l holds from its issue to its end: the
// semaphores of its external semaphore nodes and its graph memory, whose
// state the call decides (GraphMem.Issue).
func (l *launch) issue() error {
	if err := l.acquireExtSems(); err != nil {
		return err
	}
	if l.e.mem {
		e := l.e
		p, freed, err := e.dev.GraphMemIfAny().Issue(e.bind, l.stream, e.frees, e.freeNodes, e.autoFree, false)
		if err != nil {
			l.releaseExtSems()
			return err
		}
		l.plan, l.freed = p, freed
	}
	return nil
}

// Destroy releases the executable graph. Launches already queued still
// run; the memory the graph has mapped is released when they have
// finished. Allocations still live are not freed.
func (e *Exec) Destroy() error {
	e.mu.Lock()
	e.destroyed = true
	idle := e.issued.Load() == e.finished.Load()
	g, bind := e.graph, e.bind // an update changes them under mu
	e.mu.Unlock()
	e.dropDeviceHandle()
	e.condRelease()
	if e.mem {
		g.mu.Lock()
		g.memExecs-- // the graph may be instantiated again now, as with the driver
		g.mu.Unlock()
		e.dev.GraphMemIfAny().Forget(bind) // an upload of it holds no memory any more
		if idle {
			e.dev.GraphMemIfAny().Release(bind)
		}
	}
	return nil
}

// Upload binds the graph's memory to s ahead of its first launch, at the
// call (seed 001 §5.1: the upload does all the mappings and associates the
// graph with the stream): the footprint counts it now, and it holds
// against trims until the graph is launched. The mapping itself runs in
// stream order. A later launch into s needs no remapping, one into another
// stream does.
func (e *Exec) Upload(bs backend.Stream) error {
	s := bs.(*Stream)
	o := op{kind: opGraph}
	return s.enqueue(&o, func() (uint64, error) {
		e.imu.Lock()
		defer e.imu.Unlock()
		var plan *Plan
		if e.mem {
			p, _, err := e.dev.GraphMemIfAny().Issue(e.bind, s, nil, nil, false, true)
			if err != nil {
				return 0, err
			}
			plan = p
		}
		e.mu.Lock()
		l := e.newLaunchLocked(s)
		l.upload, l.plan = true, plan
		l.seq = e.issued.Add(1)
		l.ops, e.opsShared = e.ops, true // what device launches will run
		e.mu.Unlock()
		o.launch = l
		return 0, nil
	})
}

// AfterLaunches runs fn once the launches issued so far have finished.
func (e *Exec) AfterLaunches(fn func()) {
	e.mu.Lock()
	seq := e.issued.Load()
	if e.finished.Load() >= seq {
		e.mu.Unlock()
		fn()
		return
	}
	e.after = append(e.after, afterLaunches{seq, fn})
	e.mu.Unlock()
}

// begin waits for the previous launch of the graph to finish, then runs
// the frees of AutoFreeOnLaunch and maps the graph's memory as planned at
// the call.
func (l *launch) begin() *backend.Error {
	e := l.e
	e.mu.Lock()
	for e.finished.Load() != l.seq-1 || e.dl.running { // nor while a device launch runs it
		e.cond.Wait()
	}
	e.cur = l // under mu: device launches check it
	e.runOps = l.ops
	for i, ops := range l.bodies { // launches of e never overlap: its bodies run these
		e.conds.subs[i].runOps = ops
	}
	if !e.mem {
		e.uploadedLocked(l) // a launch uploads the graph too
	}
	e.mu.Unlock()
	e.failed.Store(nil)
	if e.conds != nil {
		e.conds.begin()
	}
	if !e.mem {
		return nil
	}
	gm := e.dev.GraphMemIfAny()
	for _, a := range l.freed {
		gm.Freed(a, false)
	}
	if err := gm.Map(l.plan); err != nil {
		be := backend.Errorf(backend.ErrMemoryAllocation, "mapping graph memory: %v", err)
		be.Op = "Exec.Launch"
		return be
	}
	e.mu.Lock()
	e.uploadedLocked(l)
	e.mu.Unlock()
	return nil
}

func (l *launch) end() {
	e := l.e
	l.releaseExtSems()
	if l.plan != nil && !l.upload { // an upload holds its memory until the next launch's call
		e.dev.GraphMemIfAny().Ended(l.plan)
	}
	e.mu.Lock()
	e.cur = nil
	e.finished.Store(l.seq)
	e.cond.Broadcast()
	release := e.destroyed && e.finished.Load() == e.issued.Load()
	var ready []func()
	for len(e.after) > 0 && e.after[0].seq <= l.seq {
		ready = append(ready, e.after[0].fn)
		e.after = e.after[1:]
	}
	e.recycleLocked(l) // l is not used after this
	e.mu.Unlock()
	for _, fn := range ready {
		fn()
	}
	if release && e.mem {
		e.dev.GraphMemIfAny().Release(e.bind)
	}
}

// run executes the launch on the calling goroutine and the worker pool.
func (l *launch) run() *backend.Error {
	if err := l.begin(); err != nil {
		l.end()
		return err
	}
	var env *devEnv
	if !l.upload {
		l.e.run.Run()
		env = l.e.settleDeviceLaunches() // fire-and-forget work its kernels launched
	}
	err := l.e.failed.Load()
	l.end()
	if env != nil {
		err = env.finish(err) // its tail and sibling launches, before the stream moves on
	}
	return err
}

// skip retires a launch without running it (the device has failed), still
// completing its event records so that nobody waits forever.
func (l *launch) skip() {
	e := l.e
	e.mu.Lock()
	for e.finished.Load() != l.seq-1 {
		e.cond.Wait()
	}
	e.mu.Unlock()
	for i, x := range e.records {
		if !l.upload {
			l.ops[x].ev.Complete(l.rec[i])
		}
	}
	l.end()
}

// execNode runs flattened node i of the current launch. After a node fails,
// the rest of the launch only keeps ordering (and event records) intact.
func (e *Exec) execNode(i int32) {
	o := &e.runOps[i]
	// The common node first: one call, no recover (the runner's, once per
	// worker, catches a panic: nodePanic).
	if o.kind == opKernel && o.kern.plain && !o.off && e.pdl == nil {
		if e.failed.Load() == nil {
			o.kern.body(o.kern.blk, Args{o.kern.args})
		}
		return
	}
	if o.off {
		return
	}
	switch o.kind {
	case opEmpty:
		return
	case opRecord:
		o.ev.Complete(e.cur.rec[o.seq])
		return
	case opWait:
		if e.failed.Load() == nil {
			o.ev.Wait(e.cur.wait[o.seq])
		}
		return
	case opExtSemWait:
		e.execExtSemWait(i, o)
		return
	}
	if e.failed.Load() != nil {
		return
	}
	if o.kind == opMemcpy && o.staged && o.stage > 0 {
		l := e.cur
		if len(e.restage) == 0 { // nothing stages again: the staged bytes are fixed for the launch
			copy(o.dst, l.staged[o.stage-1]) // the source as it was staged
		} else {
			l.stageMu.Lock()
			copy(o.dst, l.staged[o.stage-1])
			l.stageMu.Unlock()
		}
		if o.restages {
			l.restage(i)
		}
		return
	}
	if err := o.exec(e.deviceOf(i)); err != nil {
		e.failed.CompareAndSwap(nil, at(err, e.nodes[i].tag))
	} else if o.kind == opMemcpy && o.restages && o.stage > 0 {
		e.cur.restage(i)
	}
}

// nodePanic records a panic of node i (a kernel body, a host function, a
// fault on device memory) as the launch's error, as op.run would have.
func (e *Exec) nodePanic(i int32, p any) {
	o := &e.runOps[i]
	e.failed.CompareAndSwap(nil, at(e.deviceOf(i).panicError(o.what(), p), e.nodes[i].tag))
}

// deviceOf is the device op i runs on: e's, or another device's for a node
// of that device (its workers, its memory's faults).
func (e *Exec) deviceOf(i int32) *Device {
	if int(i) < len(e.devs) && e.devs[i] != nil {
		return e.devs[i]
	}
	return e.dev
}

// newRunner is the runner of e's DAG, recovering node panics into e's error.
func (e *Exec) newRunner(d *sched.DAG, pool *sched.Pool, exec func(int32)) *sched.Runner {
	r := sched.NewRunner(d, pool, exec)
	r.OnPanic(e.nodePanic)
	return r
}

// LayoutAlloc is one allocation of an executable graph (Layout).
type LayoutAlloc struct {
	Alloc, Free any // node tags; Free nil when the graph does not free it
	Start, End  int // indexes in the node order; End = len(order) if not freed
	Size        int
	Ptr, Offset uint64
	Phys        []int
}

// Layout is where e's allocations live: the node tags in an execution
// order (child graphs inlined) and each allocation.
func (e *Exec) Layout() (order []any, allocs []LayoutAlloc) {
	step := make([]int, len(e.ops)) // op -> index in order
	seen := map[*Node]bool{}
	for i, n := range e.nodes {
		if seen[n] { // the exit op of a child graph node
			step[i] = step[e.opOf[n]]
			continue
		}
		seen[n] = true
		step[i] = len(order)
		order = append(order, n.tag)
	}
	var as []*GraphAlloc
	byAlloc := map[*GraphAlloc]int{}
	for i := range e.ops {
		o := &e.ops[i]
		switch o.kind {
		case opAlloc:
			byAlloc[o.galloc] = len(allocs)
			as = append(as, o.galloc)
			allocs = append(allocs, LayoutAlloc{Alloc: e.nodes[i].tag, Size: o.galloc.Size, Start: step[i], End: len(order)})
		case opFree:
			if k, ok := byAlloc[o.galloc]; ok {
				allocs[k].Free, allocs[k].End = e.nodes[i].tag, step[i]
			}
		}
	}
	if len(allocs) == 0 {
		return order, nil
	}
	ptrs, offs, phys := e.dev.GraphMemIfAny().Layout(e.bind, as)
	for k := range as {
		allocs[k].Ptr, allocs[k].Offset, allocs[k].Phys = ptrs[k], offs[k], phys[k]
	}
	return order, allocs
}
