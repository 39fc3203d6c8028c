package host

import (
	"fmt"
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/dag"
)

// Graph is the host backend's graph: a mirror of the gpugraph package's
// view, made by the same calls, holding what execution needs (lowered ops,
// edges and their data, embedded graphs, graph allocations, conditional
// handles and bodies). The gpugraph package checks every call first, so a
// Graph checks only what it alone knows (device memory, free targets).
type Graph struct {
	d      *Device
	parent *Node // the child graph or conditional node embedding it

	mu        sync.Mutex
	nodes     []*Node // live nodes in creation order
	nextID    int
	sinkSeq   uint64
	edata     map[edgeKey]backend.EdgeData
	va        *GraphVA        // address space of its allocations
	handles   []*condHandle   // conditional handles created in it, in order (under condMu)
	clonedBy  map[*Node]*Node // original node -> its clone, for graphs made by Clone
	destroyed bool
	memExecs  int // live executable graphs of a graph with memory nodes
	condExecs int // live executable graphs of a graph with conditional nodes
}

type edgeKey struct{ from, to *Node }

// Node is a node of a host Graph.
type Node struct {
	g     *Graph
	tag   any     // the gpugraph package's node
	dev   *Device // the device its op runs on, when not its graph's
	id    int
	typ   backend.NodeType
	op    backend.Op  // kernel, memcpy, memset, host, empty, event and semaphore nodes
	child *Graph      // child graph nodes
	alloc *GraphAlloc // alloc and free nodes
	cond  *condNode   // conditional nodes
	deps  []*Node     // in the order added
	outs  []*Node
	sink  uint64 // when n last became a sink: orders sinks for update pairing
	dead  bool
	// captured: stream capture made n (MarkCaptured). A captured memset's
	// destination may move to another device's memory in a whole-graph
	// update (install).
	captured bool
}

// MarkCaptured records that stream capture made n (backend.CaptureMarker).
func (n *Node) MarkCaptured() { n.captured = true }

var _ backend.CaptureMarker = (*Node)(nil)

var _ backend.Graph = (*Graph)(nil)

// NewGraph creates an empty graph.
func (d *Device) NewGraph() (backend.Graph, error) { return &Graph{d: d}, nil }

func nodes(ns []backend.Node) []*Node {
	hs := make([]*Node, len(ns))
	for i, n := range ns {
		hs[i] = n.(*Node)
	}
	return hs
}

// addLocked adds n after deps with data (nil: all default).
func (g *Graph) addLocked(n *Node, deps []backend.Node, data []backend.EdgeData) {
	n.g, n.id = g, g.nextID
	g.nextID++
	n.deps = nodes(deps)
	g.sinkSeq++
	n.sink = g.sinkSeq
	for i, d := range n.deps {
		d.outs = append(d.outs, n)
		if data != nil {
			g.setEdgeDataLocked(d, n, data[i])
		}
	}
	g.nodes = append(g.nodes, n)
}

func (g *Graph) setEdgeDataLocked(from, to *Node, d backend.EdgeData) {
	k := edgeKey{from, to}
	if d == (backend.EdgeData{}) {
		delete(g.edata, k)
		return
	}
	if g.edata == nil {
		g.edata = map[edgeKey]backend.EdgeData{}
	}
	g.edata[k] = d
}

func (g *Graph) edgeDataLocked(from, to *Node) backend.EdgeData { return g.edata[edgeKey{from, to}] }

// checkOp resolves op's device memory now, so that a node of memory not
// of this device is refused when it is added, as it would be at launch.
func (d *Device) checkOp(o *backend.Op) error {
	switch o.Type {
	case backend.NodeMemcpy:
		_, err := d.copyOp(&o.Memcpy)
		return err
	case backend.NodeMemset:
		_, err := d.memsetOp(&o.Memset)
		return err
	}
	return nil
}

// AddNode adds a node of a simple type.
func (g *Graph) AddNode(o *backend.Op, deps []backend.Node, data []backend.EdgeData, tag any) (backend.Node, error) {
	dev := opDevice(g.d, o)
	if err := dev.checkOp(o); err != nil {
		return nil, err
	}
	n := &Node{tag: tag, typ: o.Type, op: copyOp(o)}
	if dev != g.d {
		n.dev = dev
	}
	g.mu.Lock()
	g.addLocked(n, deps, data)
	g.mu.Unlock()
	return n, nil
}

// opDevice is the device op o runs on: the one it names, else d.
func opDevice(d *Device, o *backend.Op) *Device {
	if x, ok := o.Device.(*Device); ok && x != nil {
		return x
	}
	return d
}

// copyOp keeps o: the arrays it shares with the caller are copied.
func copyOp(o *backend.Op) backend.Op {
	c := *o
	c.Launch.Args = append([]uint64(nil), o.Launch.Args...)
	c.Sems = append([]backend.ExternalSemaphore(nil), o.Sems...)
	c.Values = append([]uint64(nil), o.Values...)
	return c
}

// AddChildGraphNode embeds a clone of child.
func (g *Graph) AddChildGraphNode(child backend.Graph, deps []backend.Node, data []backend.EdgeData, tag any) (backend.Node, backend.Graph, error) {
	c := child.(*Graph).clone()
	n := &Node{tag: tag, typ: backend.NodeChildGraph, child: c}
	c.parent = n
	g.mu.Lock()
	g.addLocked(n, deps, data)
	g.mu.Unlock()
	return n, c, nil
}

// AddMemAllocNode places the allocation: the lowest-waste gap of the
// graph's address space that overlaps no allocation still possibly live
// when the node runs, that is, no allocation of the graph other than those
// whose free node is an ancestor of it (DESIGN.md §3).
func (g *Graph) AddMemAllocNode(size int, access []int, deps []backend.Node, data []backend.EdgeData, tag any) (backend.Node, uint64, error) {
	gm, err := g.d.GraphMem()
	if err != nil {
		return nil, 0, backend.Errorf(backend.ErrNotSupported, "graph memory: %v", err)
	}
	n := &Node{tag: tag, typ: backend.NodeMemAlloc, deps: nodes(deps)}
	anc := ancestors(n)
	reusable := func(a *GraphAlloc) bool {
		return a.freedBy != nil && anc[a.freedBy]
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	a, err := gm.Place(&g.va, size, reusable, tag, describeOwner(tag))
	if err != nil {
		return nil, 0, backend.Errorf(backend.ErrMemoryAllocation, "no address space for %d bytes: %v", size, err)
	}
	a.access = append([]int(nil), access...)
	n.alloc = a
	g.addLocked(n, deps, data)
	return n, gm.Ptr(a), nil
}

// describeOwner names an alloc node in fault reports.
func describeOwner(tag any) string {
	if s, ok := tag.(fmt.Stringer); ok {
		return s.String()
	}
	return "an alloc node"
}

// AddMemFreeNode adds a free of the graph allocation at ptr: one of this
// graph not yet freed in it, or one of another graph that its own graph
// does not free.
func (g *Graph) AddMemFreeNode(ptr uint64, deps []backend.Node, data []backend.EdgeData, tag any) (backend.Node, error) {
	gm := g.d.GraphMemIfAny()
	if gm == nil {
		return nil, backend.Errorf(backend.ErrInvalidValue, "%#x is not the address of a graph allocation", ptr)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	a, why := gm.FreeTarget(g.va, ptr)
	if a == nil {
		return nil, backend.Errorf(backend.ErrInvalidValue, "%s", why)
	}
	n := &Node{tag: tag, typ: backend.NodeMemFree, alloc: a}
	if a.va == g.va {
		a.freedBy = n
		a.FreedBy = tag
	}
	g.addLocked(n, deps, data)
	return n, nil
}

// AllocOf is the tag of the alloc node whose allocation free node n frees.
func AllocOf(n backend.Node) any {
	if x, ok := n.(*Node); ok && x.alloc != nil {
		return x.alloc.Node
	}
	return nil
}

// SetParams sets the op of a node of a simple type.
func (g *Graph) SetParams(bn backend.Node, o *backend.Op) error {
	if err := opDevice(g.d, o).checkOp(o); err != nil {
		return err
	}
	n := bn.(*Node)
	g.mu.Lock()
	n.op = copyOp(o)
	g.mu.Unlock()
	return nil
}

// SetChildGraph embeds a clone of c in child graph node n.
func (g *Graph) SetChildGraph(bn backend.Node, c backend.Graph) (backend.Graph, error) {
	n := bn.(*Node)
	cl := c.(*Graph).clone()
	cl.parent = n
	g.mu.Lock()
	old := n.child
	n.child = cl
	g.mu.Unlock()
	old.destroy()
	return cl, nil
}

// ChildGraph is the graph embedded in child graph node n.
func (g *Graph) ChildGraph(n backend.Node) (backend.Graph, error) { return n.(*Node).child, nil }

// AddEdges adds from[i] -> to[i] with data (nil: default).
func (g *Graph) AddEdges(from, to []backend.Node, data []backend.EdgeData) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range from {
		f, t := from[i].(*Node), to[i].(*Node)
		t.deps = append(t.deps, f)
		f.outs = append(f.outs, t)
		if data != nil {
			g.setEdgeDataLocked(f, t, data[i])
		}
	}
	return nil
}

// RemoveEdges removes from[i] -> to[i].
func (g *Graph) RemoveEdges(from, to []backend.Node, _ []backend.EdgeData) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range from {
		f, t := from[i].(*Node), to[i].(*Node)
		t.deps = dag.Remove(t.deps, f)
		f.outs = dag.Remove(f.outs, t)
		g.stampSinkLocked(f)
		g.setEdgeDataLocked(f, t, backend.EdgeData{})
	}
	return nil
}

// stampSinkLocked records that n may just have become a sink: CUDA orders
// sinks by the API calls that made them sinks, and whole-graph update pairs
// by it.
func (g *Graph) stampSinkLocked(n *Node) {
	if len(n.outs) == 0 {
		g.sinkSeq++
		n.sink = g.sinkSeq
	}
}

// DestroyNode removes n and its edges.
func (g *Graph) DestroyNode(bn backend.Node) error {
	n := bn.(*Node)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range n.deps {
		d.outs = dag.Remove(d.outs, n)
		g.stampSinkLocked(d)
	}
	for _, o := range n.outs {
		o.deps = dag.Remove(o.deps, n)
	}
	for k := range g.edata {
		if k.from == n || k.to == n {
			delete(g.edata, k)
		}
	}
	n.deps, n.outs, n.dead = nil, nil, true
	g.nodes = dag.Remove(g.nodes, n)
	n.destroyEmbedded()
	return nil
}

// destroyEmbedded destroys what a destroyed node owns: its child graph or
// bodies, and its hold on a conditional handle.
func (n *Node) destroyEmbedded() {
	n.child.destroy()
	if c := n.cond; c != nil {
		for _, b := range c.bodies {
			b.destroy()
		}
		condMu.Lock()
		if c.handle != nil && c.handle.node == n {
			c.handle.node = nil
		}
		condMu.Unlock()
	}
}

// Clone copies the graph, nodes of embedded graphs included, and records
// which node is whose copy (ClonedNode).
func (g *Graph) Clone() (backend.Graph, error) { return g.clone(), nil }

func (g *Graph) clone() *Graph {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &Graph{d: g.d, nextID: g.nextID, sinkSeq: g.sinkSeq, clonedBy: map[*Node]*Node{}}
	for _, n := range g.nodes {
		m := &Node{g: c, tag: n.tag, dev: n.dev, id: n.id, typ: n.typ, op: n.op, sink: n.sink, captured: n.captured}
		if n.child != nil {
			m.child = n.child.clone()
			m.child.parent = m
			for k, v := range m.child.clonedBy {
				c.clonedBy[k] = v
			}
		}
		c.clonedBy[n] = m
		c.nodes = append(c.nodes, m)
	}
	dag.CopyEdges(g.nodes, c.clonedBy, func(n *Node) (*[]*Node, *[]*Node) { return &n.deps, &n.outs })
	for k, v := range g.edata {
		c.setEdgeDataLocked(c.clonedBy[k.from], c.clonedBy[k.to], v)
	}
	return c
}

// SetTag names n by tag from now on (the gpugraph package's clone of
// the node).
func (g *Graph) SetTag(n backend.Node, tag any) { n.(*Node).tag = tag }

// ClonedNode is the copy of orig in a graph made by Clone (or embedded by
// AddChildGraphNode and SetChildGraph), at any depth.
func (g *Graph) ClonedNode(orig backend.Node) (backend.Node, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.clonedBy[orig.(*Node)]
	if !ok || m.dead {
		return nil, backend.Errorf(backend.ErrInvalidValue, "no clone of this node in the graph")
	}
	return m, nil
}

// Destroy destroys the graph: its allocations' address space is released
// once no executable graph or live allocation uses it.
func (g *Graph) Destroy() error {
	g.destroy()
	return nil
}

func (g *Graph) destroy() {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.destroyed {
		g.mu.Unlock()
		return
	}
	g.destroyed = true
	ns := g.nodes
	va := g.va
	g.mu.Unlock()
	for _, n := range ns {
		n.dead = true
		n.destroyEmbedded()
	}
	if va != nil {
		g.d.GraphMemIfAny().ReleaseVA(va)
	}
}

// topoOrder returns nodes in dependency order, or a node on or behind a
// cycle (dag.TopoOrder).
func topoOrder(nodes []*Node) ([]*Node, *Node) {
	order, bad, _ := dag.TopoOrder(nodes, func(n *Node) []*Node { return n.deps }, func(n *Node) []*Node { return n.outs })
	return order, bad
}

// ancestors returns the set of nodes n transitively depends on.
func ancestors(n *Node) map[*Node]bool {
	return dag.Ancestors(n, func(n *Node) []*Node { return n.deps })
}
