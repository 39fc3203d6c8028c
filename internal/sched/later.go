package sched

import "sync/atomic"

// Nodes that finish later. A node that waits for something outside the
// graph (an external semaphore signalled by Go code) must not hold a
// worker while it waits: the worker pool is shared, and the node that
// would lead to the signal may be queued behind it. Such a node calls
// Later while it runs, the worker moves on at once, and Done, called from
// whatever goroutine sees the wait satisfied, releases its successors.

// EnableLater lets exec defer nodes with Later. Call it once, before the
// first Run; a Runner without it pays nothing for the feature.
func (r *Runner) EnableLater() {
	if r.later == nil {
		r.later = make([]atomic.Bool, len(r.dag.InDegree))
	}
}

// Later, called by exec while it runs node, says that node finishes later:
// when exec returns, the worker goes on with other nodes, and node's
// successors become ready only once Done(node) is called. Done may be
// called before exec returns.
func (r *Runner) Later(node int32) { r.later[node].Store(true) }

// deferred reports, once, whether the node that exec just ran called Later.
func (r *Runner) deferred(node int32) bool {
	return r.later != nil && r.later[node].Load() && r.later[node].Swap(false)
}

// Done finishes a node deferred with Later. It runs no node itself (the
// caller may be any goroutine, such as one signalling a semaphore): ready
// successors go on the stack, for the owner or a recruited helper.
func (r *Runner) Done(node int32) {
	d := r.dag
	succ := d.Succ[d.SuccOff[node]:d.SuccOff[node+1]]
	if len(succ) == 0 {
		if r.remaining.Add(-1) == 0 {
			r.wakeOwner()
		}
		return
	}
	pushed := false
	r.mu.Lock()
	for _, s := range succ {
		if d.InDegree[s] != 1 && r.pending[s].Add(-1) != 0 {
			continue
		}
		r.stack = append(r.stack, s)
		pushed = true
	}
	if !pushed {
		r.mu.Unlock()
		return
	}
	r.publish()
}
