package gpugraph

import (
	"errors"
	"slices"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Loops run alone on a backend that needs it (backend.LoopsAlone: the
// CUDA driver loses the context when a WHILE loop repeats its body while
// other nodes of its graph run; tools/probe/lostctx.cu). There, for as
// long as the driver reads a graph (an instantiation, a whole-graph update,
// an executable graph's new child graph), every node that holds a loop (a
// WHILE node, or a child graph or conditional node with one nested in it)
// is ordered, in the backend's graph, after every node of its graph that
// comes before it and before every node that comes after it: nothing of
// its graph runs beside it. The order is the graph's topological order,
// ties broken by creation order, so two graphs of one topology get the
// same edges and an executable graph still updates to a graph it could
// before. Graph edges, as the user made them, do not change: the edges
// are added to the backend's graphs and removed after the driver has read
// them.

// loopEdges are the edges added to one graph (g or one nested in it).
type loopEdges struct {
	g     *Graph
	edges []Edge
}

// loopsAlone reports whether g's backend needs loops alone and g may hold
// one: a WHILE node was added on g's device.
func (g *Graph) loopsAlone() bool {
	if !g.dev.loops.Load() {
		return false
	}
	_, ok := g.dev.be.(backend.LoopsAlone)
	return ok
}

// loopEdgesLocked appends the edges that make g's loops run alone, for g
// and every graph nested in it, to out, and reports whether g holds a
// loop. g is locked; nested graphs are locked while they are read.
func (g *Graph) loopEdgesLocked(out *[]loopEdges) bool {
	loopy := make(map[*Node]bool)
	for _, n := range g.nodes {
		if p, ok := n.params.(ConditionalParams); ok && p.Type == ConditionalWhile {
			loopy[n] = true
		}
		if n.child != nil && n.child.loopEdgesNested(out) {
			loopy[n] = true
		}
		if n.conds != nil {
			for _, b := range n.conds.bodies {
				if b.loopEdgesNested(out) {
					loopy[n] = true
				}
			}
		}
	}
	if len(loopy) == 0 {
		return false
	}
	if es := aloneEdges(g.nodes, func(n *Node) bool { return loopy[n] }); len(es) > 0 {
		*out = append(*out, loopEdges{g, es})
	}
	return true
}

func (g *Graph) loopEdgesNested(out *[]loopEdges) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.loopEdgesLocked(out)
}

// aloneEdges returns the fewest edges, in a topological order of nodes,
// that order every node alone(n) after all the nodes before it and before
// all the nodes after it. Added edges only go forward in that order, so the
// graph stays acyclic and every schedule of it is one of the original's.
func aloneEdges(nodes []*Node, alone func(*Node) bool) []Edge {
	order, bad := topoOrder(nodes)
	if bad != nil {
		return nil // the driver refuses the cycle
	}
	idx := make(map[*Node]int, len(order))
	for i, n := range order {
		idx[n] = i
	}
	words := (len(order) + 63) / 64
	anc := make([][]uint64, len(order)) // anc[i]: i's ancestors, by index
	has := func(i, j int) bool { return anc[i][j/64]&(1<<(j%64)) != 0 }
	join := func(i, j int) { // i gets j and j's ancestors
		for w := range anc[i] {
			anc[i][w] |= anc[j][w]
		}
		anc[i][j/64] |= 1 << (j % 64)
	}
	var es []Edge
	barrier := -1 // the last node alone so far
	for i, n := range order {
		anc[i] = make([]uint64, words)
		for _, d := range n.deps {
			if j, ok := idx[d]; ok {
				join(i, j)
			}
		}
		if barrier >= 0 && !has(i, barrier) {
			es = append(es, Edge{From: order[barrier], To: n})
			join(i, barrier)
		}
		if !alone(n) {
			continue
		}
		// From the nearest earlier node down: each edge brings the
		// node's ancestors along, so only the latest get one.
		for j := i - 1; j >= 0; j-- {
			if !has(i, j) {
				es = append(es, Edge{From: order[j], To: n})
				join(i, j)
			}
		}
		barrier = i
	}
	return es
}

// withLoopsAlone runs read, a driver call that reads g, with the edges
// that make g's loops run alone in g's backend graphs (none where the
// backend does not need them), and removes them after. The driver refuses
// to change a graph with memory nodes while an executable graph of it
// lives: such edges stay (Graph.loopHeld) and held names their graphs, for
// the executable graph's Destroy to remove them. A failure to add or
// remove them is an error of opName; read's error comes first.
func (g *Graph) withLoopsAlone(opName string, read func() error) (held []*Graph, err error) {
	if !g.loopsAlone() {
		return nil, read()
	}
	var levels []loopEdges
	g.mu.Lock()
	g.loopEdgesLocked(&levels)
	g.mu.Unlock()
	var added []loopEdges
	undo := func() {
		for _, l := range added {
			l.g.mu.Lock()
			if backendEdges(opName, l.g, l.edges, false) == nil {
				l.g.loopHeld = nil
			}
			l.g.mu.Unlock()
		}
	}
	for _, l := range levels {
		if !backendNodes(l.edges) {
			// A nested node the backend does not know (bindClone): the
			// level runs as the user made it.
			continue
		}
		l.g.mu.Lock()
		err := func() error {
			if slices.EqualFunc(l.g.loopHeld, l.edges, func(a, b Edge) bool { return a.From == b.From && a.To == b.To }) {
				return nil // still there from the last time
			}
			if len(l.g.loopHeld) > 0 {
				if err := backendEdges(opName, l.g, l.g.loopHeld, false); err != nil {
					return err
				}
				l.g.loopHeld = nil
			}
			if err := backendEdges(opName, l.g, l.edges, true); err != nil {
				return err
			}
			l.g.loopHeld = l.edges
			return nil
		}()
		l.g.mu.Unlock()
		if err != nil {
			undo()
			return nil, err
		}
		added = append(added, l)
	}
	err = read()
	for _, l := range added {
		l.g.mu.Lock()
		switch e := backendEdges(opName, l.g, l.edges, false); {
		case e == nil:
			l.g.loopHeld = nil
		case errors.Is(e, ErrNotSupported):
			held = append(held, l.g)
		case err == nil:
			err = e
		}
		l.g.mu.Unlock()
	}
	return held, err
}

// releaseLoopEdges removes the edges withLoopsAlone left in the backend
// graphs of gs, where the driver now lets it.
func releaseLoopEdges(opName string, gs []*Graph) {
	for _, g := range gs {
		g.mu.Lock()
		if g.destroyed { // the edges went with it
			g.loopHeld = nil
		} else if len(g.loopHeld) > 0 && backendEdges(opName, g, g.loopHeld, false) == nil {
			g.loopHeld = nil
		}
		g.mu.Unlock()
	}
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
