package host

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/sched"
)

// Conditional nodes. The gpugraph package checks handles and bodies when
// nodes are added; the host backend keeps the handles (numbers it makes,
// with their defaults) and runs the nodes.

// condMu guards every graph's handle list and the node each handle
// serves. It is a leaf lock.
var condMu sync.Mutex

// condIDs numbers handles; condTag marks them, so a stray integer is not
// taken for a handle.
var condIDs atomic.Uint64

const condTag = 0xC0D1 << 48

// Conditional node types, as cudaGraphConditionalNodeType.
const (
	condIf     = 0
	condWhile  = 1
	condSwitch = 2
)

// condHandle is one handle: where it was created, its default and flags
// (bit 0: assign the default at every launch), and the node it serves.
type condHandle struct {
	h     uint64
	g     *Graph
	seq   int // creation order within g
	def   uint32
	flags uint32
	node  *Node
}

// condNode is a conditional node's handle, type and bodies.
type condNode struct {
	handle *condHandle
	typ    int
	bodies []*Graph
}

// CondHandleCreate creates a handle of g.
func (g *Graph) CondHandleCreate(def, flags uint32) (uint64, error) {
	h := condTag | condIDs.Add(1)
	condMu.Lock()
	g.handles = append(g.handles, &condHandle{h: h, g: g, seq: len(g.handles), def: def, flags: flags})
	condMu.Unlock()
	return h, nil
}

// findHandleLocked returns the handle h visible from g: created in g or in
// a graph that g is a body of. condMu is held.
func (g *Graph) findHandleLocked(h uint64) *condHandle {
	for x := g; x != nil; {
		for _, r := range x.handles {
			if r.h == h {
				return r
			}
		}
		if x.parent == nil || x.parent.typ != backend.NodeConditional {
			return nil
		}
		x = x.parent.g
	}
	return nil
}

// AddConditionalNode adds a conditional node and creates its bodies.
func (g *Graph) AddConditionalNode(c backend.Cond, deps []backend.Node, data []backend.EdgeData, tag any) (backend.Node, []backend.Graph, error) {
	if g.parent != nil && g.parent.typ == backend.NodeChildGraph {
		return nil, nil, backend.Errorf(backend.ErrNotSupported, "a graph embedded in %v cannot contain conditional nodes", g.parent.tag)
	}
	n := &Node{tag: tag, typ: backend.NodeConditional}
	condMu.Lock()
	r := g.findHandleLocked(c.Handle)
	switch {
	case r == nil:
		condMu.Unlock()
		return nil, nil, backend.Errorf(backend.ErrInvalidValue, "conditional handle %#x was not created in this graph or a graph it is a body of", c.Handle)
	case r.node != nil:
		condMu.Unlock()
		return nil, nil, backend.Errorf(backend.ErrInvalidValue, "conditional handle %#x already serves %v", c.Handle, r.node.tag)
	}
	r.node = n
	condMu.Unlock()
	n.cond = &condNode{handle: r, typ: c.Type, bodies: make([]*Graph, c.Bodies)}
	bodies := make([]backend.Graph, c.Bodies)
	for i := range bodies {
		b := &Graph{d: g.d, parent: n}
		n.cond.bodies[i], bodies[i] = b, b
	}
	g.mu.Lock()
	g.addLocked(n, deps, data)
	g.mu.Unlock()
	return n, bodies, nil
}

// condExec is the conditional state of one executable graph, shared by it
// and all its body Execs. The condition values live here, one slot per
// handle, so they are per executable graph, and launches of one never
// overlap.
type condExec struct {
	root  *Exec
	index map[uint64]int32 // handle -> slot
	// alias names slots by the handles of the graphs e was updated from
	// (copied on write: kernels read it while an update adds to it).
	alias atomic.Pointer[map[uint64]int32]
	slots []condSlot
	vals  []atomic.Uint32 // the condition values, one per slot
	subs  []*Exec         // the body Execs, nested ones included: a launch takes their op tables

	graph   *Graph        // counted in graph.condExecs while root lives
	created []*condHandle // handles created in the bodies compiled, for the unused-handle check
}

// condSlot is one handle of an executable graph, with the default and flag
// taken at instantiation.
type condSlot struct {
	r *condHandle
	// the default value (low 32 bits) and whether to assign it (bit 32),
	// atomic because a whole-graph update may change them
	dflt atomic.Uint64
}

func packDefault(def, flags uint32) uint64 {
	v := uint64(def)
	if flags&1 != 0 {
		v |= 1 << 32
	}
	return v
}

// condOp is a conditional node ready to run. Instantiation flattens the
// graph into one DAG, as for any graph, except that each conditional node
// becomes one op (opCond) and each of its bodies is compiled into an
// executable graph of its own (ops, DAG and Runner), a body Exec. When the
// op runs, it reads the condition value and runs the chosen body's Runner
// to completion on the calling worker (WHILE: as long as the value stays
// non-zero). A Runner's owner always makes progress on its own and only
// ever offers work to idle pool helpers, so a body run from inside a pool
// worker, at any depth of nesting, cannot deadlock, even with a single
// core.
type condOp struct {
	x      *condExec
	slot   int32
	typ    int
	bodies []*Exec
}

// condOp compiles the conditional node n (its graph locked by flatten) and
// its bodies into e.
func (e *Exec) condOp(n *Node) (op, error) {
	c := n.cond
	if c == nil || c.handle == nil {
		return op{}, e.nodeErr(n, backend.ErrInvalidValue, "conditional node without known bodies")
	}
	if e.conds == nil {
		e.conds = &condExec{root: e, index: map[uint64]int32{}}
	}
	x := e.conds
	r := c.handle
	if _, dup := x.index[r.h]; dup {
		return op{}, e.nodeErr(n, backend.ErrInvalidValue, "conditional handle %#x serves two nodes", r.h)
	}
	slot := int32(len(x.slots))
	x.index[r.h] = slot
	x.slots = append(x.slots, condSlot{r: r})
	x.slots[len(x.slots)-1].dflt.Store(packDefault(r.def, r.flags))
	co := &condOp{x: x, slot: slot, typ: c.typ, bodies: make([]*Exec, len(c.bodies))}
	for i, b := range c.bodies {
		sub, err := e.compileBody(b)
		if err != nil {
			return op{}, err
		}
		co.bodies[i] = sub
	}
	return op{kind: opCond, cond: co}, nil
}

// bodyNodeRule says why a node with op o cannot be in a conditional body,
// or "": the body may hold kernel, empty, memset, memcpy (device memory),
// child graph and conditional nodes, recursively. Like the CUDA 13.0
// driver (docs/driver-conditional.txt, the conformance suite), the host
// backend accepts any node when it is added to a body and refuses the
// graph at instantiation, with ErrInvalidValue.
func bodyNodeRule(typ backend.NodeType, o *backend.Op) string {
	switch typ {
	case backend.NodeKernel, backend.NodeMemset, backend.NodeEmpty, backend.NodeConditional, backend.NodeChildGraph:
		return ""
	case backend.NodeMemcpy:
		if o.Memcpy.Pageable() {
			return "a copy to or from pageable host memory is not allowed"
		}
		return ""
	}
	return fmt.Sprintf("a %s node is not allowed", nodeTypeName(typ))
}

// compileBody compiles a body graph into an Exec that shares e's condition
// values.
func (e *Exec) compileBody(body *Graph) (*Exec, error) {
	sub := &Exec{dev: e.dev, tag: e.tag, conds: e.conds, multi: e.multi}
	var preds [][]int32
	if _, err := sub.flatten(body, nil, &preds); err != nil {
		return nil, err
	}
	for i := range sub.ops {
		if why := bodyNodeRule(sub.nodes[i].typ, &sub.bops[i]); why != "" && sub.ops[i].kind != opEmpty {
			return nil, e.nodeErr(sub.nodes[i], backend.ErrInvalidValue, "%s in a conditional body", why)
		}
		if sub.ops[i].kind == opKernel {
			sub.ops[i].kern.setCtx(&kernelCtx{e: sub, node: int32(i)})
		}
	}
	if sub.pdl != nil {
		// Programmatic edges in a body order like full ones here: the
		// body's runner has no launch sequence to release early against.
		for _, ed := range sub.pdl.edges {
			preds[ed.To] = append(preds[ed.To], ed.From)
		}
		sub.pdl = nil
	}
	sub.dag = *sched.NewDAG(preds)
	sub.run = sub.newRunner(&sub.dag, e.dev.Pool, sub.execNode)
	sub.runOps = sub.ops // what execNode runs; each launch of the root sets it again
	sub.topo.index(sub)  // for whole-graph updates of the body's nodes
	e.conds.subs = append(e.conds.subs, sub)
	condMu.Lock()
	e.conds.created = append(e.conds.created, body.handles...)
	condMu.Unlock()
	return sub, nil
}

// condInstantiate finishes the conditional state of e, just instantiated
// from g: every handle created in g or its bodies must serve a
// conditional node of the graph, and a graph with conditional nodes has
// one executable graph at a time, as the driver requires. On success e
// counts against g until condRelease. The condition values start with the
// defaults applied where the handle says so.
func (e *Exec) condInstantiate(g *Graph) error {
	condMu.Lock()
	defer condMu.Unlock()
	x := e.conds
	created := g.handles
	if x != nil {
		created = append(append([]*condHandle(nil), created...), x.created...)
		x.created = nil
	}
	for _, r := range created {
		if x == nil {
			return backend.Errorf(backend.ErrInvalidValue, "conditional handle %#x serves no conditional node", r.h)
		}
		if i, ok := x.index[r.h]; !ok || x.slots[i].r != r {
			return backend.Errorf(backend.ErrInvalidValue, "conditional handle %#x serves no conditional node", r.h)
		}
	}
	if x == nil {
		return nil
	}
	if g.condExecs > 0 {
		return backend.Errorf(backend.ErrNotSupported, "a graph with conditional nodes can have one executable graph at a time")
	}
	g.condExecs++
	x.graph = g
	x.vals = make([]atomic.Uint32, len(x.slots))
	// Without the assign-default flag the default is never applied: the
	// value starts at 0, as on the H100 (docs/driver-conditional.txt).
	for i := range x.slots {
		if v := x.slots[i].dflt.Load(); v>>32 != 0 {
			x.vals[i].Store(uint32(v))
		}
	}
	return nil
}

// condRelease drops e's count against its graph (Destroy, or a failed
// instantiation).
func (e *Exec) condRelease() {
	x := e.conds
	if x == nil || x.root != e {
		return
	}
	condMu.Lock()
	if x.graph != nil {
		x.graph.condExecs--
		x.graph = nil
	}
	condMu.Unlock()
}

// begin applies the defaults of assign-default handles at the start of a
// launch.
func (x *condExec) begin() {
	for i := range x.slots {
		if v := x.slots[i].dflt.Load(); v>>32 != 0 {
			x.vals[i].Store(uint32(v))
		}
	}
}

// run evaluates the condition and runs the chosen bodies.
func (c *condOp) run() *backend.Error {
	v := &c.x.vals[c.slot]
	switch c.typ {
	case condIf:
		if v.Load() != 0 {
			return c.body(0)
		}
		if len(c.bodies) == 2 {
			return c.body(1)
		}
	case condWhile:
		for v.Load() != 0 {
			if err := c.body(0); err != nil {
				return err
			}
		}
	case condSwitch:
		if i := v.Load(); uint64(i) < uint64(len(c.bodies)) {
			return c.body(int(i))
		}
	}
	return nil
}

// body runs body i once, on the calling goroutine and idle pool helpers.
func (c *condOp) body(i int) *backend.Error {
	b := c.bodies[i]
	b.failed.Store(nil)
	b.run.Run()
	err := b.failed.Load()
	if err == nil {
		return nil
	}
	w := *err
	w.Detail = fmt.Sprintf("in body %d, %v: %s", i, err.Node, err.Detail)
	return &w
}

// CondSetError is what a kernel that sets an unknown handle panics with;
// it becomes the kernel's ErrLaunchFailure.
type CondSetError struct {
	H   uint64
	Why string
}

func (e CondSetError) Error() string {
	return fmt.Sprintf("SetConditional(%#x): %s", e.H, e.Why)
}

// SetConditional sets the value of handle h for the graph launch running
// the block; a handle of no conditional node of it, or a kernel launched
// into a stream, panics with CondSetError.
func (rt Runtime) SetConditional(h uint64, v uint32) {
	c := rt.ctx
	if c == nil {
		panic(CondSetError{h, "the kernel is not a node of a graph launch"})
	}
	x := c.e.conds
	if x == nil {
		panic(CondSetError{h, "the running graph has no conditional nodes"})
	}
	i, ok := x.index[h]
	if !ok {
		if m := x.alias.Load(); m != nil {
			i, ok = (*m)[h]
		}
	}
	if !ok {
		panic(CondSetError{h, "not a handle of a conditional node of the running graph"})
	}
	x.vals[i].Store(v)
}

// updateCondDefaults gives e's handles the defaults and flags of the
// handles of the new graph's paired nodes (whole-graph update), and lets
// kernels name them by those handles: the kernel nodes updated from the
// new graph pass its handles. The driver numbers handles per graph in
// creation order (docs/driver-conditional.txt), and paired handles were
// created in the same order, so there the values are equal already.
func (e *Exec) updateCondDefaults(pairs [][2]*Node) {
	if len(pairs) == 0 || e.conds == nil {
		return
	}
	condMu.Lock()
	defer condMu.Unlock()
	x := e.conds
	alias := map[uint64]int32{}
	if m := x.alias.Load(); m != nil {
		maps.Copy(alias, *m)
	}
	for _, p := range pairs {
		oh, nh := p[0].cond.handle, p[1].cond.handle
		if i, ok := x.index[oh.h]; ok {
			x.slots[i].dflt.Store(packDefault(nh.def, nh.flags))
			if nh.h != oh.h {
				alias[nh.h] = i
			}
		}
	}
	x.alias.Store(&alias)
}

// condUpdatable reports whether the conditional node old can take the
// parameters of new in a whole-graph update: the same type and number of
// bodies, and handles created in the same order (the same position in the
// same relative graph). The handles' defaults and flags may differ: an
// update takes the new ones. Bodies are paired like any other graphs.
func condUpdatable(old, nu *Node) bool {
	oc, nc := old.cond, nu.cond
	if oc == nil || nc == nil || oc.typ != nc.typ || len(oc.bodies) != len(nc.bodies) || oc.handle == nil || nc.handle == nil {
		return false
	}
	condMu.Lock()
	defer condMu.Unlock()
	oh, nh := oc.handle, nc.handle
	return oh.seq == nh.seq && bodyDepth(old.g, oh.g) == bodyDepth(nu.g, nh.g)
}

// bodyDepth is how many conditional bodies up from g the handle's graph h
// is, or -1.
func bodyDepth(g, h *Graph) int {
	for d, x := 0, g; x != nil; d++ {
		if x == h {
			return d
		}
		if x.parent == nil || x.parent.typ != backend.NodeConditional {
			return -1
		}
		x = x.parent.g
	}
	return -1
}

func nodeTypeName(t backend.NodeType) string {
	switch t {
	case backend.NodeKernel:
		return "kernel"
	case backend.NodeMemcpy:
		return "memcpy"
	case backend.NodeMemset:
		return "memset"
	case backend.NodeHost:
		return "host"
	case backend.NodeChildGraph:
		return "child graph"
	case backend.NodeEmpty:
		return "empty"
	case backend.NodeEventWait:
		return "event wait"
	case backend.NodeEventRecord:
		return "event record"
	case backend.NodeExtSemSignal:
		return "external semaphore signal"
	case backend.NodeExtSemWait:
		return "external semaphore wait"
	case backend.NodeMemAlloc:
		return "mem alloc"
	case backend.NodeMemFree:
		return "mem free"
	case backend.NodeConditional:
		return "conditional"
	}
	return fmt.Sprintf("NodeType(%d)", int(t))
}
