package gpugraph

import (
	"cmp"
	"slices"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// After a whole-graph update, the CUDA driver (580.159.04) enables a node
// that was then disabled with the parameters it had before the update
// (device scenario ExecSetParamsReenabledAcrossDevices). A backend that
// needs it (backend.UpdateKeeper) is told, after every whole-graph update,
// the parameters each node of the executable graph took from the update's
// graph, to give again on enable. Which node took which is the driver's
// pairing: the nodes of both graphs in pairing order, matched one for one.
// The driver pairs with the edges that order WHILE loops alone (loops.go)
// in place; so does the pairing here. It needs the graph as instantiated:
// after an edit of its topology (Graph.topoVer), or with loop edges held
// from an earlier read, nothing is told, and the driver's answer stands.

// keepUpdatedParams tells e's backend the parameters its nodes took from
// g, which e was just updated to.
func (e *Exec) keepUpdatedParams(g *Graph) {
	k, ok := e.be.(backend.UpdateKeeper)
	if !ok || e.src.topoVer.Load() != e.srcTopo {
		return
	}
	keepPaired(k, e.src, g)
}

// loopExtraLocked returns the edges loops.go gives g's level while the
// backend reads it (none where loops do not run alone), which the driver
// pairs with; ok is false where they cannot be known: edges held from an
// earlier read sit among the user's in an order not recorded. g is locked.
func (g *Graph) loopExtraLocked() (extra []Edge, ok bool) {
	if !g.loopsAlone() {
		return nil, true
	}
	if len(g.loopHeld) > 0 {
		return nil, false
	}
	return aloneEdges(g.nodes, nil, (*Node).holdsLoop), true
}

// keepPaired pairs the nodes of old (as instantiated) and nu as an update
// does and gives k the parameters of nu's nodes, in the graphs nested in
// them too. A level whose nodes do not pair type for type gives nothing.
// A kernel node whose parameters gpugraph does not model (one a capture
// made on the cuda backend) is given a copy the driver makes; a memcpy or
// memset node of that kind none: the driver's answer stands for it.
func keepPaired(k backend.UpdateKeeper, old, nu *Graph) {
	old.mu.Lock()
	ox, ok := old.loopExtraLocked()
	xs := pairOrder(old.nodes, ox)
	old.mu.Unlock()
	if !ok {
		return
	}
	nu.mu.Lock()
	nx, ok := nu.loopExtraLocked()
	ys := pairOrder(nu.nodes, nx)
	if !ok || len(xs) != len(ys) {
		nu.mu.Unlock()
		return
	}
	type kept struct {
		n, from backend.Node // from: a node only the driver knows the parameters of
		op      backend.Op
	}
	type nested struct{ old, nu *Graph }
	var keep []kept
	var inner []nested
	for i, x := range xs {
		y := ys[i]
		if x.typ != y.typ {
			nu.mu.Unlock()
			return
		}
		xn, yn := x.nestedGraphs(), y.nestedGraphs()
		switch {
		case len(xn) > 0 && len(xn) == len(yn): // child graphs, or conditional bodies one for one
			for b := range xn {
				inner = append(inner, nested{xn[b], yn[b]})
			}
		case x.typ == NodeKernel && kernelName(x) != kernelName(y):
			// Not the driver's pairing after all (a kernel node pairs
			// only with one of the same function): give nothing.
			nu.mu.Unlock()
			return
		case x.be != nil && (x.typ == NodeKernel || x.typ == NodeMemcpy || x.typ == NodeMemset):
			if _, native := y.params.(NativeNodeParams); native {
				if x.typ == NodeKernel && y.be != nil {
					keep = append(keep, kept{n: x.be, from: y.be})
				}
			} else if op, code, _ := y.lowerOp(copyParams(y.params)); code == nil {
				keep = append(keep, kept{n: x.be, op: op})
			}
		}
	}
	// The update's graph may go right after the update: native copies are
	// made now, while it is locked.
	for i := range keep {
		if keep[i].from != nil {
			k.KeepNative(keep[i].n, keep[i].from) // on failure the driver's answer stands
		} else {
			k.KeepParams(keep[i].n, &keep[i].op)
		}
	}
	nu.mu.Unlock()
	for _, n := range inner {
		keepPaired(k, n.old, n.nu)
	}
}

// pairOrder lists nodes in whole-graph update pairing order, with the
// edges extra (loops.go's, added after the user's) counted: the sinks in
// the order they became sinks, then each node's dependencies in the order
// their edges were added, breadth first (the order the host backend pairs
// in, internal/host/update.go, and the driver's).
func pairOrder(nodes []*Node, extra []Edge) []*Node {
	var into map[*Node][]*Node // extra dependencies, in the order added
	var from map[*Node]bool    // nodes extra edges leave: not sinks
	if len(extra) > 0 {
		into, from = map[*Node][]*Node{}, map[*Node]bool{}
		for _, e := range extra {
			into[e.To] = append(into[e.To], e.From)
			from[e.From] = true
		}
	}
	var order []*Node
	for _, n := range nodes {
		if len(n.outs) == 0 && !from[n] {
			order = append(order, n)
		}
	}
	slices.SortFunc(order, func(a, b *Node) int { return cmp.Compare(a.sink, b.sink) })
	seen := make(map[*Node]bool, len(nodes))
	for _, n := range order {
		seen[n] = true
	}
	for i := 0; i < len(order); i++ {
		n := order[i]
		for _, ds := range [2][]*Node{n.deps, into[n]} {
			for _, d := range ds {
				if !seen[d] {
					seen[d] = true
					order = append(order, d)
				}
			}
		}
	}
	return order
}

// kernelName is kernel node n's function name, whoever made the node.
func kernelName(n *Node) string {
	switch p := n.params.(type) {
	case KernelParams:
		if p.Kernel != nil {
			return p.Kernel.Name
		}
	case NativeNodeParams:
		return p.Name
	}
	return ""
}
