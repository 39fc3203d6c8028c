package gpugraph

import (
	"fmt"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/sched"
)

// condExec is the conditional state of one executable graph, shared by it
// and all its body Execs. The condition values live here, one slot per
// handle, so they are per executable graph, and launches of one never
// overlap.
type condExec struct {
	root    *Exec
	graph   *Graph                      // counted in graph.conds.execs while root lives
	index   map[ConditionalHandle]int32 // handle -> slot
	slots   []condSlot
	vals    []atomic.Uint32 // the condition values, one per slot
	created []*condHandle   // handles created in the bodies compiled, for the unused-handle check
	subs    []*Exec         // the body Execs, nested ones included: a launch takes their op tables
}

// condSlot is one handle of an executable graph, with the default and flag
// taken at instantiation.
type condSlot struct {
	r *condHandle
	// the default value (low 32 bits) and ConditionalAssignDefault (bit
	// 32), atomic because a whole-graph update may change them
	dflt atomic.Uint64
}

func packDefault(def uint32, flags ConditionalFlags) uint64 {
	v := uint64(def)
	if flags&ConditionalAssignDefault != 0 {
		v |= 1 << 32
	}
	return v
}

// condOp is a conditional node ready to run: how the host backend runs
// conditional nodes. Instantiation flattens the graph into one DAG, as for
// any graph, except that each conditional node becomes one op (opCond) and
// each of its bodies is compiled into an executable graph of its own (ops,
// DAG and Runner), a body Exec. When the op runs, it reads the condition
// value and runs the chosen body's Runner to completion on the calling
// worker (WHILE: as long as the value stays non-zero). A Runner's owner
// always makes progress on its own and only ever offers work to idle pool
// helpers, so a body run from inside a pool worker, at any depth of
// nesting, cannot deadlock, even with a single core.
type condOp struct {
	x      *condExec
	slot   int32
	typ    ConditionalType
	bodies []*Exec
}

// condOp compiles the conditional node n (its graph locked by flatten) and
// its bodies into e.
func (e *Exec) condOp(opName string, n *Node) (op, error) {
	c := n.conds
	p, ok := n.params.(ConditionalParams)
	if c == nil || !ok || c.handle == nil {
		return op{}, nodeErr(opName, n, ErrInvalidValue, "conditional node without known bodies")
	}
	if e.conds == nil {
		e.conds = &condExec{root: e, index: map[ConditionalHandle]int32{}}
	}
	x := e.conds
	r := c.handle
	if _, dup := x.index[r.h]; dup {
		return op{}, nodeErr(opName, n, ErrInvalidValue, "conditional handle %#x serves two nodes", uint64(r.h))
	}
	slot := int32(len(x.slots))
	x.index[r.h] = slot
	x.slots = append(x.slots, condSlot{r: r})
	x.slots[len(x.slots)-1].dflt.Store(packDefault(r.def, r.flags))
	co := &condOp{x: x, slot: slot, typ: p.Type, bodies: make([]*Exec, len(c.bodies))}
	for i, b := range c.bodies {
		sub, err := e.compileBody(opName, b)
		if err != nil {
			return op{}, err
		}
		co.bodies[i] = sub
	}
	return op{kind: opCond, cond: co}, nil
}

// compileBody compiles a body graph into an Exec that shares e's condition
// values. It applies the body rules again: a graph embedded in the body may
// have been edited since it was checked.
func (e *Exec) compileBody(opName string, body *Graph) (*Exec, error) {
	sub := &Exec{dev: e.dev, conds: e.conds}
	var preds [][]int32
	if _, err := sub.flatten(opName, body, nil, &preds); err != nil {
		return nil, err
	}
	for i := range sub.ops {
		if code, msg := bodyNodeRule(sub.params[i]); code != nil {
			return nil, nodeErr(opName, sub.nodes[i], code, "%s in a conditional body", msg)
		}
		switch sub.ops[i].kind {
		case opKernel:
			sub.ops[i].kern.ctx = &kernelCtx{e: sub, node: int32(i)}
		case opHost, opRecord, opWait, opAlloc, opFree:
			return nil, nodeErr(opName, sub.nodes[i], ErrInvalidValue, "a %v node is not allowed in a conditional body", sub.nodes[i].typ)
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
	sub.run = sched.NewRunner(&sub.dag, e.dev.host.Pool, sub.execNode)
	sub.runOps = sub.ops // what execNode runs; each launch of the root sets it again
	sub.topo.index(sub)  // for whole-graph updates of the body's nodes
	e.conds.subs = append(e.conds.subs, sub)

	condMu.Lock()
	if body.conds != nil {
		e.conds.created = append(e.conds.created, body.conds.handles...)
	}
	condMu.Unlock()
	return sub, nil
}

// condInstantiate finishes the conditional state of e, just instantiated
// from g: every handle created in g or its bodies must serve a conditional
// node of the graph, and a graph with conditional nodes has one executable
// graph at a time. On success e counts against g until condRelease.
func (e *Exec) condInstantiate(opName string, g *Graph) error {
	condMu.Lock()
	defer condMu.Unlock()
	x := e.conds
	var created []*condHandle
	if g.conds != nil {
		created = g.conds.handles
	}
	if x != nil {
		created = append(append([]*condHandle(nil), created...), x.created...)
		x.created = nil
	}
	for _, r := range created {
		if x == nil {
			return newErr(opName, ErrInvalidValue, "conditional handle %#x serves no conditional node", uint64(r.h))
		}
		if i, ok := x.index[r.h]; !ok || x.slots[i].r != r {
			return newErr(opName, ErrInvalidValue, "conditional handle %#x serves no conditional node", uint64(r.h))
		}
	}
	if x == nil {
		return nil
	}
	if g.conds == nil {
		g.conds = &graphConds{}
	}
	if g.conds.execs > 0 {
		return newErr(opName, ErrNotSupported, "a graph with conditional nodes can have one executable graph at a time")
	}
	g.conds.execs++
	x.graph = g
	x.vals = make([]atomic.Uint32, len(x.slots))
	// Without ConditionalAssignDefault the default is never applied: the
	// value starts at 0, as on the H100 (docs/driver-conditional.txt).
	for i := range x.slots {
		if v := x.slots[i].dflt.Load(); v>>32 != 0 {
			x.vals[i].Store(uint32(v))
		}
	}
	return nil
}

// condRelease drops e's count against its graph (Exec.Destroy, or a failed
// instantiation).
func (e *Exec) condRelease() {
	x := e.conds
	if x == nil || x.root != e {
		return
	}
	condMu.Lock()
	if x.graph != nil {
		x.graph.conds.execs--
		x.graph = nil
	}
	condMu.Unlock()
}

// rootExec is the executable graph a launch runs: e itself, or, for the Exec
// of a conditional body (which a kernel's Block.ctx names), the one it is
// part of.
func (e *Exec) rootExec() *Exec {
	if e.conds != nil {
		return e.conds.root
	}
	return e
}

// begin applies the defaults of ConditionalAssignDefault handles at the
// start of a launch.
func (x *condExec) begin() {
	for i := range x.slots {
		if v := x.slots[i].dflt.Load(); v>>32 != 0 {
			x.vals[i].Store(uint32(v))
		}
	}
}

// run evaluates the condition and runs the chosen bodies.
func (c *condOp) run() *Error {
	v := &c.x.vals[c.slot]
	switch c.typ {
	case ConditionalIf:
		if v.Load() != 0 {
			return c.body(0)
		}
		if len(c.bodies) == 2 {
			return c.body(1)
		}
	case ConditionalWhile:
		for v.Load() != 0 {
			if err := c.body(0); err != nil {
				return err
			}
		}
	case ConditionalSwitch:
		if i := v.Load(); uint64(i) < uint64(len(c.bodies)) {
			return c.body(int(i))
		}
	}
	return nil
}

// body runs body i once, on the calling goroutine and idle pool helpers.
func (c *condOp) body(i int) *Error {
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

// condSetError is what a kernel that sets an unknown handle panics with; it
// becomes the kernel's ErrLaunchFailure.
type condSetError struct {
	h   ConditionalHandle
	why string
}

func (e condSetError) Error() string {
	return fmt.Sprintf("SetConditional(%#x): %s", uint64(e.h), e.why)
}

// SetConditional sets the value of the conditional handle h for the graph
// launch running the kernel (cudaGraphSetConditional). A kernel of any node
// of the executable graph, bodies included, may set any of its handles;
// blocks that set one handle concurrently leave one of their values. Setting
// a handle of no conditional node of the running graph, or from a kernel
// launched into a stream, is a device-side error: the kernel fails with
// ErrLaunchFailure.
func (b Block) SetConditional(h ConditionalHandle, v uint32) {
	c := b.ctx
	if c == nil {
		panic(condSetError{h, "the kernel is not a node of a graph launch"})
	}
	x := c.e.conds
	if x == nil {
		panic(condSetError{h, "the running graph has no conditional nodes"})
	}
	i, ok := x.index[h]
	if !ok {
		panic(condSetError{h, "not a handle of a conditional node of the running graph"})
	}
	x.vals[i].Store(v)
}
