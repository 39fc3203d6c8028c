package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/host"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/sched"
)

// InstantiateFlags modify instantiation (cudaGraphInstantiateFlags).
type InstantiateFlags uint

const (
	// InstantiateAutoFreeOnLaunch lets the graph be launched again while
	// allocations of its previous launch are live: the launch frees them
	// first, in stream order (cudaGraphInstantiateFlagAutoFreeOnLaunch).
	InstantiateAutoFreeOnLaunch InstantiateFlags = 1
	// InstantiateUpload uploads the graph as part of instantiation, into the
	// stream given to InstantiateWithParams (cudaGraphInstantiateFlagUpload).
	InstantiateUpload InstantiateFlags = 2
	// InstantiateDeviceLaunch makes a device graph, one that kernels can
	// launch (cudaGraphInstantiateFlagDeviceLaunch).
	InstantiateDeviceLaunch InstantiateFlags = 4
	// InstantiateUseNodePriority makes kernel nodes launch with their
	// priority attribute (cudaGraphInstantiateFlagUseNodePriority). The
	// host backend has no priorities and accepts the flag.
	InstantiateUseNodePriority InstantiateFlags = 8
)

// Exec is an executable graph: a snapshot of a Graph, validated and planned,
// that can be launched into streams any number of times. Later changes to
// the Graph do not affect it. Launches of one Exec never overlap: each starts
// after the previous one finished, whatever streams they were launched into.
type Exec struct {
	dev    *Device
	ops    []op         // one per flattened node; child graphs are inlined
	nodes  []*Node      // the graph node each op came from
	params []NodeParams // its parameters at instantiation; nil for child graph entry and exit
	dag    sched.DAG
	run    *sched.Runner
	// Event nodes take per-launch sequence numbers: indexes of those ops.
	records, waits []int32
	extSems        []int32 // external semaphore ops, whose semaphores launches hold

	mu        sync.Mutex
	cond      sync.Cond
	issued    atomic.Uint64 // launches (and uploads) issued; written under mu
	finished  atomic.Uint64 // launches finished; written under mu
	destroyed bool

	cur    *launch // the launch running now; launches never overlap
	failed atomic.Pointer[Error]

	// Graph memory, for graphs with memory nodes.
	graph     *Graph        // the graph instantiated, while it has memory nodes
	mem       bool          // the graph has alloc or free nodes
	autoFree  bool          // InstantiateAutoFreeOnLaunch
	persist   []*graphAlloc // allocations the graph does not free
	frees     []*graphAlloc // allocations of other graphs that free nodes free
	freeNodes []any         // those free nodes (*Node), parallel to frees
	bind      *host.Binding // what e maps of its graph's address space
	be        backend.Exec  // the backend's executable graph (cuda); nil on host

	// Update: the instantiated topology, each node's op, and whether a
	// launch holds the current ops table (see ownOpsLocked).
	topo        *topo
	childTopo   map[*Node]*topo
	opOf        map[*Node]int32
	opsShared   bool
	issuing     int        // launches between taking the op table and being issued
	umu         sync.Mutex // serialises updates; taken before mu
	spare       []op       // the op table before the last Update, reused by the next
	spareParams []NodeParams
	scratch     *updateScratch
	runOps      []op         // the op table of the execution running now (host or device launch)
	src         *Graph       // the graph instantiated, on the cuda backend (MemLayout)
	users       execUserRefs // user object references
	conds       *condExec    // condition values and bodies, for graphs with conditional nodes
	pdl         *pdlPlan     // early (programmatic) edges, if any (pdl.go)
	dl          devState     // device graph launch
}

// launch is one Launch of an Exec, queued in a stream.
type launch struct {
	e      *Exec
	seq    uint64
	rec    []uint64 // record sequence numbers, parallel to e.records
	wait   []uint64 // wait targets, parallel to e.waits
	stream *Stream
	upload bool   // an Upload: map memory, run nothing
	ops    []op   // e's op table as of this launch: later updates do not change it
	bodies [][]op // the op tables of e's conditional bodies (e.conds.subs) as of this launch

	xsems []*ExternalSemaphore // held from issue to end (extsem.go)
}

// Instantiate validates the graph and builds an executable graph from it
// (cudaGraphInstantiate). It fails, naming the node, on invalid parameters
// (for example memory freed since the node was added, or a destroyed event),
// on bad child graphs and on cycles. With InstantiateDeviceLaunch the graph
// must also meet the requirements of a device graph (see
// InstantiateWithParams).
func (g *Graph) Instantiate(flags InstantiateFlags) (*Exec, error) {
	return g.instantiate("Graph.Instantiate", &InstantiateParams{Flags: flags}, false)
}

// instantiate is Instantiate and InstantiateWithParams (withParams: p may
// ask for an upload).
func (g *Graph) instantiate(opName string, p *InstantiateParams, withParams bool) (*Exec, error) {
	if g == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil graph")
	}
	if err := g.checkInstantiate(opName, p, withParams); err != nil {
		return nil, err
	}
	flags := p.Flags
	e := &Exec{dev: g.dev, autoFree: flags&InstantiateAutoFreeOnLaunch != 0}
	e.dl.launch = flags&InstantiateDeviceLaunch != 0
	e.cond.L = &e.mu
	if g.dev.cuda != nil {
		if err := g.lock(opName); err != nil {
			return nil, err
		}
		g.mu.Unlock()
		e.src = g
		if err := g.dev.cudaInstantiate(opName, e, g, p); err != nil {
			return nil, err
		}
		e.takeUserRefs(g)
		return e, nil
	}
	var preds [][]int32
	if _, err := e.flatten(opName, g, nil, &preds); err != nil {
		return nil, err
	}
	e.topo.index(e)
	if err := e.condInstantiate(opName, g); err != nil {
		return nil, err
	}
	if err := e.instantiateMem(opName, g); err != nil {
		e.condRelease()
		return nil, err
	}
	d := &e.dag
	*d = *e.newDAG(preds)
	for i := range e.ops {
		switch e.ops[i].kind {
		case opKernel:
			e.ops[i].kern.ctx = &kernelCtx{e: e, node: int32(i)}
		case opRecord:
			e.ops[i].seq = uint64(len(e.records))
			e.records = append(e.records, int32(i))
		case opWait:
			e.ops[i].seq = uint64(len(e.waits))
			e.waits = append(e.waits, int32(i))
		}
	}
	e.run = sched.NewRunner(d, g.dev.host.Pool, e.execFunc())
	e.takeUserRefs(g)
	e.instantiateExtSems()
	if err := e.instantiateUpload(opName, p); err != nil {
		return nil, err
	}
	return e, nil
}

// flatten appends g's nodes to e in dependency order, each root depending on
// entry, and returns the indexes of g's sinks. Child graphs are inlined
// between an entry and an exit op, so their nodes schedule like any other.
func (e *Exec) flatten(opName string, g *Graph, entry []int32, preds *[][]int32) ([]int32, error) {
	if err := g.lock(opName); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	order, bad := topoOrder(g.nodes)
	if bad != nil {
		return nil, nodeErr(opName, bad, ErrInvalidValue, "graph has a cycle")
	}
	if e.topo == nil { // the top graph: keep its shape for Update
		e.topo = buildTopo(g)
		e.opOf = make(map[*Node]int32, len(g.nodes))
		e.childTopo = map[*Node]*topo{}
	}
	exit := make(map[*Node]int32, len(order))
	add := func(o op, n *Node, ps []int32) int32 {
		var p NodeParams // a snapshot, for launching e into a capture
		if o.kind != opEmpty || n.typ == NodeEmpty {
			p = copyParams(n.params)
		}
		e.params = append(e.params, p)
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
		if n.typ == NodeMemAlloc || n.typ == NodeMemFree {
			o := op{kind: opAlloc, galloc: n.alloc}
			if n.typ == NodeMemFree {
				o.kind = opFree
				if n.alloc.VA() != g.va {
					o.seq = seqForeignFree
					e.frees = append(e.frees, n.alloc)
					e.freeNodes = append(e.freeNodes, n)
				}
			} else if n.alloc.FreedBy == nil {
				e.persist = append(e.persist, n.alloc)
			}
			exit[n] = add(o, n, ps)
		} else if n.typ == NodeChildGraph {
			in := add(op{kind: opEmpty}, n, ps)
			inner, err := e.flatten(opName, n.child, []int32{in}, preds)
			if err != nil {
				return nil, err
			}
			if len(inner) == 0 {
				inner = []int32{in}
			}
			exit[n] = add(op{kind: opEmpty}, n, inner)
		} else if n.typ == NodeConditional {
			o, err := e.condOp(opName, n)
			if err != nil {
				return nil, err
			}
			exit[n] = add(o, n, ps)
		} else {
			o, code, msg := g.dev.prepare(n.params)
			if code != nil {
				return nil, nodeErr(opName, n, code, "%s", msg)
			}
			exit[n] = add(o, n, ps)
		}
		if len(n.outs) == 0 {
			sinks = append(sinks, exit[n])
		}
	}
	return sinks, nil
}

// Launch queues one execution of the graph in s (cudaGraphLaunch). Later
// work in s waits for it; it starts after the previous launch of e finished.
func (e *Exec) Launch(s *Stream) error {
	const opName = "Exec.Launch"
	if err := e.checkStream(opName, s); err != nil {
		return err
	}
	if s.capturing.Load() {
		if captured, err := e.captureLaunch(opName, s); captured {
			return err
		}
	}
	if e.be != nil {
		return e.cudaLaunch(opName, s)
	}
	l := &launch{e: e, stream: s}
	if len(e.records) > 0 {
		l.rec = make([]uint64, len(e.records))
	}
	if len(e.waits) > 0 {
		l.wait = make([]uint64, len(e.waits))
	}
	return s.enqueue(opName, op{kind: opGraph, launch: l}, func() (uint64, error) {
		e.mu.Lock()
		l.ops, e.opsShared = e.ops, true
		e.issuing++ // l reads l.ops from now: updates must copy the table
		if e.conds != nil && len(e.conds.subs) > 0 {
			l.bodies = make([][]op, len(e.conds.subs))
			for i, sub := range e.conds.subs {
				l.bodies[i] = sub.ops
			}
		}
		e.mu.Unlock()
		err := l.issue(opName)
		e.mu.Lock()
		if err == nil {
			l.seq = e.issued.Add(1)
		}
		e.issuing--
		e.mu.Unlock()
		if err != nil {
			return 0, err
		}
		for i, x := range e.records {
			l.rec[i] = l.ops[x].ev.issue()
		}
		for i, x := range e.waits {
			l.wait[i] = l.ops[x].ev.target()
		}
		return 0, nil
	})
}

// issue takes what launch l holds from its issue to its end: the
// semaphores of its external semaphore nodes and its graph memory.
func (l *launch) issue(opName string) error {
	if err := l.acquireExtSems(opName); err != nil {
		return err
	}
	if l.e.mem {
		if err := issueLaunch(l.e.dev.host.GraphMemIfAny(), opName, l.e); err != nil {
			l.releaseExtSems()
			return err
		}
	}
	return nil
}

// checkStream validates e and a stream to launch or upload it into.
func (e *Exec) checkStream(opName string, s *Stream) error {
	if err := e.check(opName); err != nil {
		return err
	}
	if err := s.check(opName); err != nil {
		return err
	}
	if s.dev != e.dev {
		return newErr(opName, ErrInvalidValue, "stream belongs to another device")
	}
	return nil
}

func (e *Exec) check(opName string) error {
	if e == nil {
		return newErr(opName, ErrInvalidResourceHandle, "nil executable graph")
	}
	if err := e.dev.check(opName); err != nil {
		return err
	}
	e.mu.Lock()
	dead := e.destroyed
	e.mu.Unlock()
	if dead {
		return newErr(opName, ErrInvalidResourceHandle, "executable graph is destroyed")
	}
	return nil
}

// Destroy releases the executable graph. Launches already queued still run;
// the memory the graph has mapped is released when they have finished.
// Allocations still live are not freed.
func (e *Exec) Destroy() error {
	const opName = "Exec.Destroy"
	if err := e.check(opName); err != nil {
		return err
	}
	e.mu.Lock()
	e.destroyed = true
	idle := e.issued.Load() == e.finished.Load()
	e.mu.Unlock()
	e.destroyUserRefs() // deferred past the launches queued (by the driver on cuda)
	e.dropDeviceHandle()
	if e.be != nil {
		return e.cudaDestroy(opName)
	}
	e.condRelease()
	if e.mem {
		g := e.graph
		g.mu.Lock()
		g.execs-- // the graph may be instantiated again now, as with the driver
		g.mu.Unlock()
		if idle {
			e.releaseMem()
		}
	}
	return nil
}

// Upload maps the graph's memory in stream order, ahead of its first launch,
// and binds it to s (cudaGraphUpload): a later launch into s needs no
// remapping, one into another stream does.
func (e *Exec) Upload(s *Stream) error {
	const opName = "Exec.Upload"
	if err := e.checkStream(opName, s); err != nil {
		return err
	}
	if s.capturing.Load() {
		if captured, err := s.captureProhibited(opName, ErrStreamCaptureUnsupported, "uploading a graph"); captured {
			return err
		}
	}
	if e.be != nil {
		return e.cudaUpload(opName, s)
	}
	l := &launch{e: e, stream: s, upload: true}
	return s.enqueue(opName, op{kind: opGraph, launch: l}, func() (uint64, error) {
		e.mu.Lock()
		l.seq = e.issued.Add(1)
		l.ops, e.opsShared = e.ops, true // what device launches will run
		e.mu.Unlock()
		return 0, nil
	})
}

// begin waits for the previous launch of the graph to finish, then frees
// what AutoFreeOnLaunch frees and maps the graph's memory for this stream.
func (l *launch) begin() *Error {
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
	e.mu.Unlock()
	e.failed.Store(nil)
	if e.conds != nil {
		e.conds.begin()
	}
	if !e.mem || e.bind.Empty() && !e.autoFree {
		return nil
	}
	gm := e.dev.host.GraphMemIfAny()
	if e.autoFree && !l.upload {
		for _, a := range e.persist {
			gm.Freed(a, false)
		}
	}
	if err := gm.Bind(e.bind, l.stream); err != nil {
		return newErr("Exec.Launch", ErrMemoryAllocation, "mapping graph memory: %v", err)
	}
	return nil
}

func (l *launch) end() {
	e := l.e
	l.releaseExtSems()
	e.mu.Lock()
	e.cur = nil
	e.finished.Store(l.seq)
	e.cond.Broadcast()
	release := e.destroyed && e.finished.Load() == e.issued.Load()
	e.mu.Unlock()
	e.launchEnded()
	if release && e.mem {
		e.releaseMem()
	}
}

// run executes the launch on the calling goroutine and the worker pool.
func (l *launch) run() *Error {
	if err := l.begin(); err != nil {
		l.end()
		return err
	}
	l.e.mu.Lock()
	l.e.uploadedLocked(l) // a launch uploads the graph too
	l.e.mu.Unlock()
	var env *devEnv
	if !l.upload {
		l.e.run.Run()
		env = l.e.settleDeviceLaunches() // fire-and-forget work its kernels launched
		if l.e.mem && l.e.failed.Load() == nil {
			l.e.dev.host.GraphMemIfAny().PinLive(l.e.bind)
		}
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
			l.ops[x].ev.complete(l.rec[i])
		}
	}
	l.end()
}

// instantiateMem applies the driver's rules for graphs with memory nodes
// (one instantiation at a time) and prepares the graph's memory mapping.
func (e *Exec) instantiateMem(opName string, g *Graph) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.memNodes == 0 {
		return nil
	}
	if g.execs > 0 {
		return newErr(opName, ErrNotSupported, "a graph with memory nodes can have one executable graph at a time")
	}
	g.execs++
	e.graph, e.mem = g, true
	e.bind = g.dev.host.GraphMemIfAny().NewBinding(g.va, e.persist, func() bool { return e.issued.Load() == e.finished.Load() })
	return nil
}

// releaseMem unmaps a destroyed executable graph's memory once its launches
// are done, and drops its reference on the graph's address space.
func (e *Exec) releaseMem() {
	e.dev.host.GraphMemIfAny().Release(e.bind)
}

// execNode runs flattened node i of the current launch. After a node fails,
// the rest of the launch only keeps ordering (and event records) intact.
func (e *Exec) execNode(i int32) {
	o := &e.runOps[i]
	if o.off {
		return
	}
	switch o.kind {
	case opEmpty:
		return
	case opRecord:
		o.ev.complete(e.cur.rec[o.seq])
		return
	case opWait:
		if e.failed.Load() == nil {
			o.ev.wait(e.cur.wait[o.seq])
		}
		return
	case opExtSemWait:
		e.execExtSemWait(i, o)
		return
	}
	if e.failed.Load() != nil {
		return
	}
	if err := o.run(e.dev); err != nil {
		e.failed.CompareAndSwap(nil, err.at(err.Op, e.nodes[i]))
	}
}

// captureLaunch captures a launch of e as a child graph node holding the
// graph e was instantiated from, flattened (child graphs inlined). Graphs
// with memory nodes cannot be launched into a capture, as with the driver.
// captured is false when the capture ended meanwhile.
func (e *Exec) captureLaunch(opName string, s *Stream) (captured bool, err error) {
	if e.mem {
		return s.captureProhibited(opName, ErrStreamCaptureUnsupported, "launching a graph with memory nodes")
	}
	if e.conds != nil {
		return s.captureProhibited(opName, ErrStreamCaptureUnsupported, "launching a graph with conditional nodes")
	}
	g, err := e.snapshot()
	if err != nil {
		return true, err
	}
	_, captured, err = s.captureNode(opName, ChildGraphParams{g})
	return captured, err
}

// snapshot rebuilds the graph e runs, from its flattened nodes.
func (e *Exec) snapshot() (*Graph, error) {
	g, err := e.dev.NewGraph()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	params := slices.Clone(e.params)
	e.mu.Unlock()
	preds := make([][]*Node, len(e.ops))
	nodes := make([]*Node, len(e.ops))
	d := &e.dag
	for i := range e.ops {
		p := params[i]
		if p == nil {
			p = EmptyParams{}
		}
		n, err := g.addNode("Exec.Launch", p, preds[i])
		if err != nil {
			return nil, err
		}
		nodes[i] = n
		for _, s := range d.Succ[d.SuccOff[i]:d.SuccOff[i+1]] {
			preds[s] = append(preds[s], n)
		}
	}
	if err := e.snapshotEarly(g, nodes); err != nil {
		return nil, err
	}
	return g, nil
}
