package sched

// Early edges carry programmatic dependent launch: the successor of an early
// edge may start while its source is still running, as soon as the source
// calls Runner.Trigger with the edge's port (or, at the latest, when the
// source finishes). The source still counts as a node the run waits for:
// a node whose only successors are early ones is a sink.

// EarlyEdge is a dependency that From releases early, through Port (1-31).
type EarlyEdge struct {
	From, To int32
	Port     uint8
}

// NewDAGEarly compiles preds as NewDAG does, plus early edges, which count
// in their successor's in-degree but are not in Succ.
func NewDAGEarly(preds [][]int32, early []EarlyEdge) *DAG {
	d := NewDAG(preds)
	if len(early) == 0 {
		return d
	}
	n := len(preds)
	d.EarlyOff = make([]int32, n+1)
	for _, e := range early {
		d.InDegree[e.To]++
		d.EarlyOff[e.From+1]++
	}
	for i := 0; i < n; i++ {
		d.EarlyOff[i+1] += d.EarlyOff[i]
	}
	d.Early = make([]int32, len(early))
	d.EarlyPort = make([]uint8, len(early))
	fill := append([]int32(nil), d.EarlyOff[:n]...)
	for _, e := range early {
		d.Early[fill[e.From]], d.EarlyPort[fill[e.From]] = e.To, e.Port
		fill[e.From]++
	}
	d.links() // in-degrees changed
	d.Roots = d.Roots[:0]
	for i, deg := range d.InDegree {
		if deg == 0 {
			d.Roots = append(d.Roots, int32(i))
		}
	}
	return d
}

// Trigger releases node's early successors through port, once per run;
// later calls do nothing. It may be called from any goroutine while node
// runs (a kernel block). Successors made ready go on the shared stack, never
// onto the calling goroutine, which is busy with node.
func (r *Runner) Trigger(node int32, port uint8) {
	d := r.dag
	if d.EarlyOff == nil || port == 0 || port > 31 {
		return
	}
	bit := uint32(1) << port
	if r.fired[node].Or(bit)&bit != 0 {
		return
	}
	pushed := false
	for k := d.EarlyOff[node]; k < d.EarlyOff[node+1]; k++ {
		if d.EarlyPort[k] != port {
			continue
		}
		s := d.Early[k]
		if d.InDegree[s] != 1 && r.pending[s].Add(-1) != 0 {
			continue
		}
		if !pushed {
			r.mu.Lock()
			pushed = true
		}
		r.stack = append(r.stack, s)
	}
	if !pushed {
		return
	}
	r.queued.Store(int32(len(r.stack)))
	waiting := r.waiting.Load()
	if waiting {
		r.cond.Broadcast()
	}
	r.mu.Unlock()
	if waiting {
		return
	}
	// The node that triggered keeps its worker busy, and every other worker
	// may be busy too, or parked waiting for that node (a kernel block in
	// GridDependencySynchronize holds its goroutine without using a core).
	// A successor released early should start early, so if no idle helper
	// takes it, a goroutine beyond the pool does, counted as a helper.
	r.searching.Add(1) // a helper starts out searching
	if int(r.helpers.Add(1)) <= r.pool.size && r.pool.TryGo(r.helpFn) {
		return
	}
	go r.helpFn()
}

// fireAll releases the early successors node has not released yet: it
// finished without triggering them (or failed).
func (r *Runner) fireAll(node int32) {
	d := r.dag
	for k := d.EarlyOff[node]; k < d.EarlyOff[node+1]; k++ {
		r.Trigger(node, d.EarlyPort[k])
	}
}
