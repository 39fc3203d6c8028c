package gpugraph

import (
	"slices"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Loops run alone on a backend that asks for it (backend.LoopsAlone: the
// CUDA driver loses the context when a WHILE loop repeats its body while
// other nodes of its graph run, tools/probe/lostctx.cu; the host asks too,
// to run the same graphs). There, for as long as the backend reads a graph
// (an instantiation, a whole-graph update, an executable graph's new child
// graph), every node that holds a loop (a WHILE node, or a conditional
// node with one nested in a body) is ordered, in the backend's graph,
// after every node of its graph that comes before it and before every node
// that comes after it: nothing of its graph runs beside it. The order is
// the graph's topological order, ties broken by creation order, so two
// graphs of one topology built in one order get the same edges and an
// executable graph still updates to a graph it could before. Graph edges,
// as the user made them, do not change: the edges are added to the
// backend's graphs and removed after the backend has read them.

// loopsAlone reports whether g's backend needs loops alone and g may hold
// one: a WHILE node was added on g's device.
func (g *Graph) loopsAlone() bool {
	if !g.dev.loops.Load() {
		return false
	}
	_, ok := g.dev.be.(backend.LoopsAlone)
	return ok
}

// isWhile reports whether n is a WHILE node.
func (n *Node) isWhile() bool {
	p, ok := n.params.(ConditionalParams)
	return ok && p.Type == ConditionalWhile
}

// nestedGraphs returns the graphs nested in n itself: its embedded child
// graph or its conditional bodies.
func (n *Node) nestedGraphs() []*Graph {
	if n.child != nil {
		return []*Graph{n.child}
	}
	if n.conds != nil {
		return n.conds.bodies
	}
	return nil
}

// holdsLoop reports whether n is a WHILE node or has one in a graph nested
// in it: a node that runs alone.
func (n *Node) holdsLoop() bool {
	if n.isWhile() {
		return true
	}
	for _, b := range n.nestedGraphs() {
		if hasWhile(b) {
			return true
		}
	}
	return false
}

// hasWhile reports whether g or a graph nested in it has a WHILE node.
func hasWhile(g *Graph) bool {
	return !g.walkNested(false, func(n *Node) bool { return !n.isWhile() })
}

// addLoopEdgesLocked adds to the backend graphs of g and of every graph
// nested in it the edges that make their loops run alone, each level
// while it is locked (so that no edge the user adds meanwhile is added
// twice), appends the graphs that now hold such edges to added, and
// reports whether g holds a loop. g is locked; nested graphs are locked
// while they are read. A level with a node the backend does not know
// (bindClone) keeps the user's order.
func (g *Graph) addLoopEdgesLocked(opName string, added *[]*Graph) (bool, error) {
	loopy := make(map[*Node]bool)
	for _, n := range g.nodes {
		if n.isWhile() {
			loopy[n] = true
		}
		for _, b := range n.nestedGraphs() {
			b.mu.Lock()
			l, err := b.addLoopEdgesLocked(opName, added)
			b.mu.Unlock()
			if err != nil {
				return false, err
			}
			if l {
				loopy[n] = true
			}
		}
	}
	if len(loopy) == 0 {
		return false, nil
	}
	es := aloneEdges(g.nodes, g.loopHeld, func(n *Node) bool { return loopy[n] })
	if !backendNodes(es) {
		return true, nil
	}
	if err := backendEdges(opName, g, es, true); err != nil {
		return true, err
	}
	if g.loopHeld = append(g.loopHeld, es...); len(g.loopHeld) > 0 {
		*added = append(*added, g)
	}
	return true, nil
}

// aloneEdges returns the fewest edges, in a topological order of nodes
// (with the edges extra, already in the backend's graph, counted), that
// order every node alone(n) after all the nodes before it and before all
// the nodes after it. Added edges only go forward in that order, so the
// graph stays acyclic and every schedule of it is one of the original's.
func aloneEdges(nodes []*Node, extra []Edge, alone func(*Node) bool) []Edge {
	order, deps := orderWith(nodes, extra)
	if order == nil {
		return nil // a cycle: the driver refuses the graph
	}
	pos := make([]int, len(nodes)) // creation index -> position in order
	for p, i := range order {
		pos[i] = p
	}
	words := (len(order) + 63) / 64
	anc := make([][]uint64, len(order)) // anc[p]: the positions of p's ancestors
	has := func(p, q int) bool { return anc[p][q/64]&(1<<(q%64)) != 0 }
	join := func(p, q int) { // p gets q and q's ancestors
		for w := range anc[p] {
			anc[p][w] |= anc[q][w]
		}
		anc[p][q/64] |= 1 << (q % 64)
	}
	var es []Edge
	barrier := -1 // the position of the last node alone so far
	for p, i := range order {
		anc[p] = make([]uint64, words)
		for _, j := range deps[i] {
			join(p, pos[j])
		}
		n := nodes[i]
		if barrier >= 0 && !has(p, barrier) {
			es = append(es, Edge{From: nodes[order[barrier]], To: n})
			join(p, barrier)
		}
		if !alone(n) {
			continue
		}
		// From the nearest earlier node down: each edge brings the
		// node's ancestors along, so only the latest get one.
		for q := p - 1; q >= 0; q-- {
			if !has(p, q) {
				es = append(es, Edge{From: nodes[order[q]], To: n})
				join(p, q)
			}
		}
		barrier = p
	}
	return es
}

// orderWith returns a topological order of nodes with the edges extra
// counted, ties broken by creation order (graphs of one topology built in
// one order get the same order), as indexes into nodes, and each node's
// dependencies by index; order is nil when there is a cycle.
func orderWith(nodes []*Node, extra []Edge) (order []int, deps [][]int) {
	idx := make(map[*Node]int, len(nodes))
	for i, n := range nodes {
		idx[n] = i
	}
	deps = make([][]int, len(nodes))
	for i, n := range nodes {
		for _, d := range n.deps {
			if j, ok := idx[d]; ok {
				deps[i] = append(deps[i], j)
			}
		}
	}
	for _, e := range extra {
		i, ok1 := idx[e.To]
		j, ok2 := idx[e.From]
		if ok1 && ok2 {
			deps[i] = append(deps[i], j)
		}
	}
	outs := make([][]int, len(nodes))
	indeg := make([]int, len(nodes))
	for i, ds := range deps {
		indeg[i] = len(ds)
		for _, j := range ds {
			outs[j] = append(outs[j], i)
		}
	}
	for i := range nodes {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, o := range outs[order[k]] {
			if indeg[o]--; indeg[o] == 0 {
				order = append(order, o)
			}
		}
	}
	if len(order) != len(nodes) {
		return nil, deps
	}
	return order, deps
}

// withLoopsAlone runs read, a driver call that reads g, with the edges
// that make g's loops run alone in g's backend graphs (none where the
// backend does not need them), and removes them after. One such read of a
// graph runs at a time (Graph.loopMu): the edges are shared, and one read
// must not have them removed under it by another. Edges the backend does
// not remove (the driver never removes one from a graph with memory
// nodes: cudaErrorNotSupported) stay (Graph.loopHeld), count as edges of
// the graph when the next edges are chosen, and held names their graphs,
// for the executable graph's Destroy to try again; that never fails the
// read. A failure to add them is an error of opName, before read runs.
func (g *Graph) withLoopsAlone(opName string, read func() error) (held []*Graph, err error) {
	if !g.loopsAlone() {
		return nil, read()
	}
	g.loopMu.Lock()
	defer g.loopMu.Unlock()
	var added []*Graph
	g.mu.Lock()
	_, err = g.addLoopEdgesLocked(opName, &added)
	g.mu.Unlock()
	if err == nil {
		err = read()
	}
	return removeLoopEdges(opName, added), err
}

// removeLoopEdges removes the edges held in the backend graphs of gs where
// the backend lets it, and returns the graphs that still hold some.
func removeLoopEdges(opName string, gs []*Graph) (held []*Graph) {
	for _, g := range gs {
		g.mu.Lock()
		switch {
		case g.destroyed: // the edges went with it
			g.loopHeld = nil
		case len(g.loopHeld) > 0:
			if backendEdges(opName, g, g.loopHeld, false) == nil {
				g.loopHeld = nil
			} else {
				held = append(held, g)
			}
		}
		g.mu.Unlock()
	}
	return held
}

// takeLoopEdgesLocked splits edges a user adds to g into those the
// backend graph lacks and those loops.go left there, which become the
// user's. g is locked.
func (g *Graph) takeLoopEdgesLocked(edges []Edge) (fresh, held []Edge) {
	if len(g.loopHeld) == 0 {
		return edges, nil
	}
	for _, e := range edges {
		if i := slices.IndexFunc(g.loopHeld, func(h Edge) bool { return h.From == e.From && h.To == e.To && e.Data == (EdgeData{}) }); i >= 0 {
			held = append(held, g.loopHeld[i])
			g.loopHeld = slices.Delete(g.loopHeld, i, i+1)
			continue
		}
		fresh = append(fresh, e)
	}
	return fresh, held
}

// backendNodes reports whether every end of es has a backend node.
func backendNodes(es []Edge) bool {
	for _, e := range es {
		if e.From.be == nil || e.To.be == nil {
			return false
		}
	}
	return true
}

// heldEdge reports whether from -> to is an edge loops.go left in g's
// backend graph (mirror reads the driver's edges back: not the user's).
func heldEdge(g *Graph, from, to *Node) bool {
	for _, e := range g.loopHeld {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}
