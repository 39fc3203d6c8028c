package host

import (
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/sched"
)

// pdlPlan is an executable graph's early edges and their per-launch state:
// programmatic dependent launch. An edge out of a kernel's programmatic or
// launch completion port becomes an early edge of the executor's DAG
// (sched.EarlyEdge): the kernel's blocks trigger it, through
// Runner.Trigger, while the kernel runs. The downstream node then runs on a
// worker of its own, so a downstream kernel whose blocks wait in
// GridDependencySynchronize parks goroutines, never the upstream kernel,
// which keeps the goroutine that runs it and finishes on its own. A node
// released early completes, for its own successors, only after its early
// sources have completed (sources).
type pdlPlan struct {
	edges []sched.EarlyEdge
	data  []backend.EdgeData // of each edge, for snapshots

	// Per flattened op, filled by newDAG.
	upstream [][]int32    // kernels its GridDependencySynchronize waits for
	sources  [][]int32    // ops that release it early: it completes after them
	kern     []*pdlKernel // trigger state of kernels with early dependents

	mu   sync.Mutex
	cond sync.Cond
	done []uint64 // per early source, the launch in which it last completed
}

// pdlKernel counts a kernel's blocks toward its triggers, per launch.
type pdlKernel struct {
	e       *Exec
	node    int32
	n       int64 // blocks in the grid
	started atomic.Int64
	arrived atomic.Int64 // blocks that triggered or exited
}

// pdlBlock is one block's trigger state.
type pdlBlock struct {
	k         *pdlKernel
	triggered atomic.Bool
}

// earlyEdge records the edge from -> to of g, whose upstream op is src, as
// an early edge of e if its data says so; to's op is the next one added.
// g is locked.
func (e *Exec) earlyEdge(g *Graph, from, to *Node, src int32) bool {
	d := g.edgeDataLocked(from, to)
	if !d.Early() {
		return false
	}
	if e.pdl == nil {
		e.pdl = &pdlPlan{}
	}
	e.pdl.edges = append(e.pdl.edges, sched.EarlyEdge{From: src, To: int32(len(e.ops)), Port: d.FromPort})
	e.pdl.data = append(e.pdl.data, d)
	return true
}

// newDAG compiles the flattened graph: preds are the ordinary dependencies
// of each op, e.pdl the early edges.
func (e *Exec) newDAG(preds [][]int32) *sched.DAG {
	p := e.pdl
	if p == nil {
		return sched.NewDAG(preds)
	}
	n := len(preds)
	p.cond.L = &p.mu
	p.upstream, p.sources = make([][]int32, n), make([][]int32, n)
	p.kern, p.done = make([]*pdlKernel, n), make([]uint64, n)
	for i, ed := range p.edges {
		p.sources[ed.To] = append(p.sources[ed.To], ed.From)
		if p.data[i].Type == backend.DependencyProgrammatic {
			p.upstream[ed.To] = append(p.upstream[ed.To], ed.From)
		}
		if p.kern[ed.From] == nil {
			p.kern[ed.From] = &pdlKernel{e: e, node: ed.From}
		}
	}
	return sched.NewDAGEarly(preds, p.edges)
}

// execFunc is what the runner calls for each op.
func (e *Exec) execFunc() func(int32) {
	if e.pdl == nil {
		return e.execNode
	}
	return e.execEarly
}

// execEarly runs op i of a graph with early edges: it completes after the
// ops that released it early, and records its completion for those that
// wait on it.
func (e *Exec) execEarly(i int32) {
	e.execNode(i)
	p := e.pdl
	srcs, mark := p.sources[i], p.kern[i] != nil
	if len(srcs) == 0 && !mark {
		return
	}
	seq := e.cur.seq
	p.mu.Lock()
	for _, u := range srcs {
		for p.done[u] != seq {
			p.cond.Wait()
		}
	}
	if mark {
		p.done[i] = seq
		p.cond.Broadcast()
	}
	p.mu.Unlock()
}

// pdlWait blocks until the kernels op i depends on through programmatic
// edges have completed in this launch.
func (e *Exec) pdlWait(i int32) {
	p := e.pdl
	if p == nil || len(p.upstream[i]) == 0 {
		return
	}
	seq := e.cur.seq
	p.mu.Lock()
	for _, u := range p.upstream[i] {
		for p.done[u] != seq {
			p.cond.Wait()
		}
	}
	p.mu.Unlock()
}

// pdlKernel returns the trigger state of the kernel node running with c, if
// it has early dependents.
func (c *kernelCtx) pdlKernel() *pdlKernel {
	if c == nil || c.e.pdl == nil {
		return nil
	}
	return c.e.pdl.kern[c.node]
}

func (k *pdlKernel) start() {
	if k.started.Add(1) == k.n {
		k.e.run.Trigger(k.node, backend.PortLaunchCompletion)
	}
}

func (k *pdlKernel) arrive() {
	if k.arrived.Add(1) == k.n {
		k.e.run.Trigger(k.node, backend.PortProgrammatic)
	}
}

// runEarly runs a kernel with early dependents, counting its blocks as they
// start, trigger and exit.
func (o *kernelOp) runEarly(d *Device, pk *pdlKernel) *backend.Error {
	n := count(o.blk.Grid)
	pk.n = int64(n)
	pk.started.Store(0)
	pk.arrived.Store(0)
	k := *o
	if perr := d.Pool.For(n, func(lo, hi int) { k.blocksEarly(pk, lo, hi) }); perr != nil {
		return d.panicError("kernel "+o.name, perr)
	}
	return nil
}

func (o *kernelOp) blocksEarly(pk *pdlKernel, lo, hi int) {
	gx, gxy := o.blk.Grid.X, o.blk.Grid.X*o.blk.Grid.Y
	b := o.blk
	b.Shared = sharedBuf(o.shared)
	for i := lo; i < hi; i++ {
		clear(b.Shared)
		pb := &pdlBlock{k: pk}
		pk.start()
		b.Idx = Dim3{i % gx, i % gxy / gx, i / gxy}
		b.RT.pdl = pb
		o.body(b, Args{o.args})
		if !pb.triggered.Swap(true) {
			pk.arrive() // an exit counts as a trigger
		}
	}
}

// TriggerProgrammaticLaunchCompletion tells the kernels that depend on
// this one through its programmatic port that this block is ready for them
// to start.
func (rt Runtime) TriggerProgrammaticLaunchCompletion() {
	if rt.pdl != nil && !rt.pdl.triggered.Swap(true) {
		rt.pdl.k.arrive()
	}
}

// GridDependencySynchronize waits until every kernel this one depends on
// through programmatic edges has completed.
func (rt Runtime) GridDependencySynchronize() {
	if rt.ctx != nil {
		rt.ctx.e.pdlWait(rt.ctx.node)
	}
}
