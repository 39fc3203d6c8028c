package gpugraph

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/dag"
)

// Graph is a set of nodes (operations) and edges (dependencies), defined
// once and instantiated into an Exec to run. Methods are safe for concurrent
// use, though, as in CUDA, building one graph from several goroutines gives
// an order that is up to the scheduler.
type Graph struct {
	dev    *Device
	id     int64 // process-wide, for DOT output
	parent *Node // the child graph node embedding this graph, if any

	mu        sync.Mutex
	nodes     []*Node // live nodes in creation order
	nextID    int
	destroyed bool
	clonedBy  map[*Node]*Node // original node -> its clone, for graphs made by Clone
	memNodes  int             // alloc and free nodes: the driver restricts such graphs
	be        backend.Graph   // the backend's graph (cuda); nil on host
	sinkSeq   uint64          // stamps Node.sink
	// hasRecords is set once g or a graph embedded in it gets an event
	// record node, and never cleared: Exec.Update looks for the events
	// of g's record nodes only then, so an update stays O(1) in the root
	// package otherwise (TestUpdateRootConstant).
	hasRecords atomic.Bool

	uobjs map[*UserObject]int64 // user object references the graph owns
	conds *graphConds           // conditional handles; guarded by condMu

	edata map[edgeKey]EdgeData // edges with non-default data (edgedata.go)

	// topoVer counts the changes of g's topology and of the graphs
	// nested in it (reenable.go: an update pairs against the graph as
	// instantiated).
	topoVer atomic.Uint64

	// loopMu serializes the driver reads of g that loops.go orders loops
	// for (instantiation, update).
	loopMu sync.Mutex
	// loopHeld are edges loops.go added to be that the backend did not
	// remove (the driver never removes one from a graph with memory
	// nodes).
	loopHeld []Edge

	// capDevs are nodes that a native capture into g made in a stream of
	// another device, with that device, until mirror gives them their Go
	// nodes (mirror.go, nativeWork).
	capDevs map[backend.Node]*Device

	// broken says why g cannot be instantiated, cloned or used by an
	// update: the driver destroyed the body of one of its conditional
	// nodes (destroyedByCapture), so g holds a graph that no longer exists.
	broken string
}

// Node is one operation in a graph. A node belongs to one graph for its life.
type Node struct {
	g      *Graph
	id     int
	typ    NodeType
	params NodeParams
	child  *Graph       // embedded graph of a child graph node
	be     backend.Node // the backend's node
	dev    *Device      // the device its work runs on: its graph's, unless added with AddNodeOn
	conds  *condNode    // handle and bodies of a conditional node
	deps   []*Node      // dependencies, in the order they were added
	outs   []*Node      // dependents, in the order they were added
	sink   uint64       // when n last became a sink: orders sinks for update pairing
	dead   bool
	// captured: stream capture made n (checkCapturedPeerMemset).
	captured bool
}

// Edge is a dependency: To runs after From, as Data says (the zero
// EdgeData: after From has completed, with its memory visible).
type Edge struct {
	From, To *Node
	Data     EdgeData
}

var graphIDs atomic.Int64

// NewGraph creates an empty graph (cudaGraphCreate).
func (d *Device) NewGraph() (*Graph, error) {
	if err := d.check("Device.NewGraph"); err != nil {
		return nil, err
	}
	gr, ok := d.be.(backend.Grapher)
	if !ok {
		return nil, newErr("Device.NewGraph", ErrNotSupported, "the backend has no graphs")
	}
	be, err := gr.NewGraph()
	if err != nil {
		return nil, backendErr("Device.NewGraph", err)
	}
	return &Graph{dev: d, id: graphIDs.Add(1), be: be}, nil
}

// Device is the device the graph's work runs on.
func (g *Graph) Device() *Device { return g.dev }

// lock locks the graph for op, failing if it is unusable.
func (g *Graph) lock(opName string) error {
	if g == nil {
		return newErr(opName, ErrInvalidValue, "nil graph")
	}
	if err := g.dev.check(opName); err != nil {
		return err
	}
	g.mu.Lock()
	if g.destroyed {
		g.mu.Unlock()
		return newErr(opName, ErrInvalidValue, "graph is destroyed")
	}
	return nil
}

// String names the node in errors and output: its type, graph-local id and,
// for kernels, the kernel's name.
func (n *Node) String() string {
	if n == nil {
		return "<nil node>"
	}
	s := fmt.Sprintf("%s node %d", n.typ, n.id)
	if k, ok := n.params.(KernelParams); ok && k.Kernel != nil {
		s += fmt.Sprintf(" (%s)", k.Kernel.Name)
	}
	return s
}

// ID is the node's number within its graph, in creation order. A clone's
// nodes keep the ids of their originals.
func (n *Node) ID() int { return n.id }

// Type is the node's type.
func (n *Node) Type() NodeType { return n.typ }

// Graph is the graph the node belongs to.
func (n *Node) Graph() *Graph { return n.g }

// checkNodeLocked validates a node handle while g is locked.
func (g *Graph) checkNodeLocked(opName string, n *Node) error {
	switch {
	case n == nil:
		return newErr(opName, ErrInvalidValue, "nil node")
	case n.g != g:
		return nodeErr(opName, n, ErrInvalidValue, "node belongs to another graph")
	case n.dead:
		return nodeErr(opName, n, ErrInvalidValue, "node is destroyed")
	}
	return nil
}

// AddNode adds a node with parameters p, depending on deps, in that order
// (cudaGraphAddNode). Parameters are checked now; on error nothing changes.
func (g *Graph) AddNode(p NodeParams, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddNode", p, deps)
}

// AddKernelNode adds a kernel launch.
func (g *Graph) AddKernelNode(p KernelParams, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddKernelNode", p, deps)
}

// AddMemcpyNode adds a copy.
func (g *Graph) AddMemcpyNode(p MemcpyParams, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddMemcpyNode", p, deps)
}

// AddMemsetNode adds a memset.
func (g *Graph) AddMemsetNode(p MemsetParams, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddMemsetNode", p, deps)
}

// AddHostNode adds a host function call.
func (g *Graph) AddHostNode(fn func(), deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddHostNode", HostParams{Fn: fn}, deps)
}

// AddEmptyNode adds a node that does nothing, to join or fan out edges.
func (g *Graph) AddEmptyNode(deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddEmptyNode", EmptyParams{}, deps)
}

// AddEventRecordNode adds a node that records e.
func (g *Graph) AddEventRecordNode(e *Event, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddEventRecordNode", EventRecordParams{e}, deps)
}

// AddEventWaitNode adds a node that waits for e.
func (g *Graph) AddEventWaitNode(e *Event, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddEventWaitNode", EventWaitParams{e}, deps)
}

// AddMemAllocNode adds an allocation node (cudaGraphAddMemAllocNode) and
// returns it with the allocation's address, fixed for the node's life. Work
// that uses the memory must depend on the node, and be ordered before the
// free. The allocation is made anew at every launch; it outlives the launch
// if the graph does not free it.
func (g *Graph) AddMemAllocNode(p MemAllocParams, deps ...*Node) (*Node, DevicePtr, error) {
	n, err := g.addNode("Graph.AddMemAllocNode", p, deps)
	if err != nil {
		return nil, 0, err
	}
	return n, n.params.(MemAllocParams).Ptr, nil
}

// AddMemFreeNode adds a node that frees the graph allocation at p
// (cudaGraphAddMemFreeNode): one made by an alloc node of this graph, freed
// once, or one of another graph that its own graph does not free.
func (g *Graph) AddMemFreeNode(p DevicePtr, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddMemFreeNode", MemFreeParams{p}, deps)
}

// AddChildGraphNode adds a node that runs a clone of child
// (cudaGraphAddChildGraphNode). Later changes to child do not affect it.
func (g *Graph) AddChildGraphNode(child *Graph, deps ...*Node) (*Node, error) {
	return g.addNode("Graph.AddChildGraphNode", ChildGraphParams{child}, deps)
}

func (g *Graph) addNode(opName string, p NodeParams, deps []*Node) (*Node, error) {
	return g.addNodeEdges(opName, p, deps, nil)
}

// AddNodeOn adds a node whose work runs on device on, a device of the same
// backend as g's: a graph of several devices, launched into a stream of
// g's device, its dependencies across devices honoured. It is what CUDA
// does with the context of a kernel or copy node (CUDA_KERNEL_NODE_PARAMS'
// ctx, the current device when the node is added). Kernel, memcpy,
// memset, host, empty and event nodes can run on another device; memory,
// conditional and child graph nodes are their graph's device's.
func (g *Graph) AddNodeOn(on *Device, p NodeParams, deps ...*Node) (*Node, error) {
	const opName = "Graph.AddNodeOn"
	if g == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil graph")
	}
	if on == nil {
		return nil, newErr(opName, ErrInvalidDevice, "nil device")
	}
	if err := on.check(opName); err != nil {
		return nil, err
	}
	if on.props.Backend != g.dev.props.Backend {
		return nil, newErr(opName, ErrInvalidDevice, "a %s device's node in a %s device's graph", on.props.Backend, g.dev.props.Backend)
	}
	if p != nil && on != g.dev {
		switch p.NodeType() {
		case NodeMemAlloc, NodeMemFree, NodeConditional, NodeChildGraph:
			return nil, newErr(opName, ErrNotSupported, "%v nodes run on their graph's device", p.NodeType())
		}
	}
	if err := g.checkForeignCopy(opName, on, p); err != nil {
		return nil, err
	}
	return g.addNodeOn(opName, on, p, deps, nil)
}

// Device is the device the node's work runs on: its graph's, or the one
// AddNodeOn named.
func (n *Node) Device() *Device { return n.dev }

// device is the device n's work runs on: n.dev, else its graph's.
func (n *Node) device() *Device {
	if n.dev != nil {
		return n.dev
	}
	return n.g.dev
}

// walkNested calls fn for each node of g and, right after a child graph or
// conditional node, for each node of the graphs embedded in it, at any
// depth; each embedded graph is locked while its nodes are visited, g too
// unless the caller holds its lock (locked). It stops at the first node for
// which fn returns false, and then returns false.
func (g *Graph) walkNested(locked bool, fn func(n *Node) bool) bool {
	if !locked {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	for _, n := range g.nodes {
		if !fn(n) {
			return false
		}
		if n.child != nil && !n.child.walkNested(false, fn) {
			return false
		}
		if n.conds != nil {
			for _, b := range n.conds.bodies {
				if !b.walkNested(false, fn) {
					return false
				}
			}
		}
	}
	return true
}

// addNodeEdges adds a node; data, if not nil, holds the data of the edge
// from each dependency (see EdgeData).
func (g *Graph) addNodeEdges(opName string, p NodeParams, deps []*Node, data []EdgeData) (*Node, error) {
	if g == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil graph")
	}
	if err := g.checkForeignCopy(opName, g.dev, p); err != nil {
		return nil, err
	}
	return g.addNodeOn(opName, g.dev, p, deps, data)
}

// addNodeOn adds a node whose work runs on device on.
func (g *Graph) addNodeOn(opName string, on *Device, p NodeParams, deps []*Node, data []EdgeData) (*Node, error) {
	if p == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil params")
	}
	var child *Graph
	memNode := false
	switch p := p.(type) {
	case ChildGraphParams:
		if err := g.checkChild(opName, p.Graph); err != nil {
			return nil, err
		}
		c, _, err := p.Graph.clone(opName)
		if err != nil {
			return nil, err
		}
		// The backend clones its graph; addBackendNode then points the Go
		// clone at the embedded one.
		c.be = p.Graph.be
		child = c
		defer releaseIfOrphan(c) // the clone took copies of the child's user object references
	case MemAllocParams, MemFreeParams:
		if err := g.dev.checkMemParams(opName, p); err != nil {
			return nil, err
		}
		memNode = true // the backend places and checks it (addBackendNode)
	case ConditionalParams:
		if err := checkCondParams(opName, p); err != nil {
			return nil, err
		}
	}
	if err := g.lock(opName); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	if memNode && g.parent != nil {
		return nil, newErr(opName, ErrNotSupported, "memory nodes cannot be added to a graph embedded in %v", g.parent)
	}
	for i, d := range deps {
		if err := g.checkNodeLocked(opName, d); err != nil {
			return nil, err
		}
		for _, e := range deps[:i] {
			if e == d {
				return nil, nodeErr(opName, d, ErrInvalidValue, "listed twice as a dependency")
			}
		}
	}
	if err := checkNewEdges(opName, deps, p.NodeType(), data); err != nil {
		return nil, err
	}
	n := &Node{g: g, id: g.nextID, typ: p.NodeType(), params: copyParams(p), child: child, dev: on,
		deps: append([]*Node(nil), deps...)}
	if child != nil {
		n.params = ChildGraphParams{child}
		child.parent = n
	}
	if err := g.dev.addBackendNode(g, n, data); err != nil {
		return nil, withOp(opName, err)
	}
	if n.typ == NodeConditional {
		if err := g.condAddLocked(opName, n); err != nil {
			return nil, err
		}
	}
	if memNode {
		g.memNodes++
	}
	if n.typ == NodeEventRecord || (child != nil && child.hasRecords.Load()) {
		g.markRecords()
	}
	g.sinkSeq++
	n.sink = g.sinkSeq
	g.nextID++
	g.topoChanged()
	for i, d := range deps {
		d.outs = append(d.outs, n)
		if data != nil {
			g.setEdgeDataLocked(d, n, data[i])
		}
	}
	g.nodes = append(g.nodes, n)
	return n, nil
}

// checkChild validates a graph about to be embedded in g.
func (g *Graph) checkChild(opName string, c *Graph) error {
	switch {
	case g == nil:
		return newErr(opName, ErrInvalidValue, "nil graph")
	case c == nil:
		return newErr(opName, ErrInvalidValue, "nil child graph")
	case c.dev != g.dev:
		return newErr(opName, ErrInvalidValue, "child graph belongs to another device")
	}
	// The child is cloned before the node is added, so a graph embedding a
	// snapshot of itself is finite; embedding itself directly is refused as
	// CUDA does.
	if c == g {
		return newErr(opName, ErrInvalidValue, "a graph cannot be its own child")
	}
	c.mu.Lock()
	mem := c.memNodes
	c.mu.Unlock()
	if mem > 0 {
		return newErr(opName, ErrNotSupported, "a graph with memory nodes cannot be a child graph")
	}
	return condChildRule(opName, c)
}

// Params returns a copy of the node's parameters (one of the *Params types).
func (n *Node) Params() (NodeParams, error) {
	const op = "Node.Params"
	if n == nil {
		return nil, newErr(op, ErrInvalidValue, "nil node")
	}
	if err := n.g.lock(op); err != nil {
		return nil, err
	}
	defer n.g.mu.Unlock()
	if err := n.g.checkNodeLocked(op, n); err != nil {
		return nil, err
	}
	return copyParams(n.params), nil
}

// SetParams replaces the node's parameters in the graph. p must be of the
// node's type; a child graph node's graph is replaced by a clone of the new
// one. Executable graphs already instantiated are not affected.
func (n *Node) SetParams(p NodeParams) error {
	const op = "Node.SetParams"
	if n == nil {
		return newErr(op, ErrInvalidValue, "nil node")
	}
	if p == nil || p.NodeType() != n.typ {
		return nodeErr(op, n, ErrInvalidValue, "params of another node type (%T)", p)
	}
	if n.typ == NodeMemAlloc || n.typ == NodeMemFree {
		return nodeErr(op, n, ErrNotSupported, "memory node parameters cannot be changed")
	}
	if n.typ == NodeConditional {
		return nodeErr(op, n, ErrNotSupported, "conditional node parameters cannot be changed")
	}

	var child *Graph
	if cp, ok := p.(ChildGraphParams); ok {
		if err := n.g.checkChild(op, cp.Graph); err != nil {
			return err
		}
		if cp.Graph == n.child {
			return nil
		}
		c, _, err := cp.Graph.clone(op)
		if err != nil {
			return err
		}
		child = c
		defer releaseIfOrphan(c)
	}
	if err := n.g.lock(op); err != nil {
		return err
	}
	defer n.g.mu.Unlock()
	if err := n.g.checkNodeLocked(op, n); err != nil {
		return err
	}
	if err := n.g.checkForeignCopy(op, n.dev, p); err != nil {
		return err.(*Error).at(op, n)
	}
	if child != nil {
		// The backend clones the new graph into the node; the Go clone is
		// bound to the backend's (setBackendParams).
		child.be = p.(ChildGraphParams).Graph.be
	}
	if err := n.g.dev.setBackendParams(n, childOr(p, child)); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e.at(op, n)
		}
		return err
	}
	if child != nil {
		old := n.child
		if child.hasRecords.Load() {
			n.g.markRecords()
		}
		child.parent = n
		n.child = child
		n.params = ChildGraphParams{child}
		old.destroyEmbedded()
		n.g.topoChanged()
		return nil
	}
	n.params = copyParams(p)
	return nil
}

// childOr returns ChildGraphParams holding child if there is one, else p.
func childOr(p NodeParams, child *Graph) NodeParams {
	if child != nil {
		return ChildGraphParams{child}
	}
	return p
}

// Dependencies returns the nodes n depends on, in the order they were added.
// It fails with ErrLossyQuery if an edge into n has data (DependencyEdges
// returns it).
func (n *Node) Dependencies() ([]*Node, error) { return n.edges("Node.Dependencies", false) }

// Dependents returns the nodes that depend on n. It fails with
// ErrLossyQuery if an edge out of n has data (DependentEdges returns it).
func (n *Node) Dependents() ([]*Node, error) { return n.edges("Node.Dependents", true) }

func (n *Node) edges(opName string, out bool) ([]*Node, error) {
	if n == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil node")
	}
	if err := n.g.lock(opName); err != nil {
		return nil, err
	}
	defer n.g.mu.Unlock()
	if err := n.g.checkNodeLocked(opName, n); err != nil {
		return nil, err
	}
	if err := n.g.lossyLocked(opName, n, out); err != nil {
		return nil, err
	}
	if out {
		return append([]*Node(nil), n.outs...), nil
	}
	return append([]*Node(nil), n.deps...), nil
}

// ChildGraph returns the graph embedded in a child graph node. Changes to it
// change the node (cudaGraphChildGraphNodeGetGraph).
func (n *Node) ChildGraph() (*Graph, error) {
	p, err := n.Params()
	if err != nil {
		return nil, withOp("Node.ChildGraph", err)
	}
	cp, ok := p.(ChildGraphParams)
	if !ok {
		return nil, nodeErr("Node.ChildGraph", n, ErrInvalidValue, "not a child graph node")
	}
	return cp.Graph, nil
}

// Nodes returns the graph's nodes in creation order.
func (g *Graph) Nodes() ([]*Node, error) {
	if err := g.lock("Graph.Nodes"); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	return append([]*Node(nil), g.nodes...), nil
}

// RootNodes returns the nodes with no dependencies, in creation order.
func (g *Graph) RootNodes() ([]*Node, error) {
	if err := g.lock("Graph.RootNodes"); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	var roots []*Node
	for _, n := range g.nodes {
		if len(n.deps) == 0 {
			roots = append(roots, n)
		}
	}
	return roots, nil
}

// Edges returns every edge, grouped by destination node in creation order
// and, per node, in the order its dependencies were added.
func (g *Graph) Edges() ([]Edge, error) {
	if err := g.lock("Graph.Edges"); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	var es []Edge
	for _, n := range g.nodes {
		for _, d := range n.deps {
			es = append(es, Edge{From: d, To: n, Data: g.edgeDataLocked(d, n)})
		}
	}
	return es, nil
}

// AddDependencies adds edges (cudaGraphAddDependencies). It refuses, changing
// nothing, a nil or destroyed node, a node of another graph, a self edge, an
// edge that exists (whatever its data) or is listed twice, edge data its
// nodes do not take (see EdgeData), and a set of edges that would make a
// cycle.
func (g *Graph) AddDependencies(edges ...Edge) error {
	const op = "Graph.AddDependencies"
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
	for i, e := range edges {
		if err := g.checkEdgeLocked(op, e); err != nil {
			return err
		}
		if err := checkEdgeData(op, e.From, e.To.typ, e.Data); err != nil {
			return err
		}
		if contains(e.To.deps, e.From) {
			return nodeErr(op, e.To, ErrInvalidValue, "already depends on %v", e.From)
		}
		for _, f := range edges[:i] {
			if f.From == e.From && f.To == e.To {
				return nodeErr(op, e.To, ErrInvalidValue, "edge from %v listed twice", e.From)
			}
		}
	}
	for _, e := range edges {
		e.To.deps = append(e.To.deps, e.From)
		e.From.outs = append(e.From.outs, e.To)
		g.setEdgeDataLocked(e.From, e.To, e.Data)
	}
	undo := func() {
		for i := len(edges) - 1; i >= 0; i-- {
			e := edges[i]
			e.To.deps = e.To.deps[:len(e.To.deps)-1]
			e.From.outs = e.From.outs[:len(e.From.outs)-1]
			g.setEdgeDataLocked(e.From, e.To, EdgeData{})
		}
	}
	if _, bad := topoOrder(g.nodes); bad != nil {
		undo()
		return nodeErr(op, bad, ErrInvalidValue, "the edges would make a cycle")
	}
	if len(g.loopHeld) > 0 {
		if order, _ := orderWith(g.nodes, g.loopHeld); order == nil {
			undo()
			return nodeErr(op, edges[0].To, ErrInvalidValue,
				"the edges would make a cycle with the edges that order the graph's WHILE loops in the driver's graph, which cannot be removed from a graph with memory nodes")
		}
	}
	// An edge that loops.go left in the backend graph is there already:
	// from now on it is the user's.
	fresh, held := g.takeLoopEdgesLocked(edges)
	if err := backendEdges(op, g, fresh, true); err != nil {
		g.loopHeld = append(g.loopHeld, held...)
		undo()
		return err
	}
	g.topoChanged()
	return nil
}

// AddDependency adds one edge: to runs after from.
func (g *Graph) AddDependency(from, to *Node) error {
	return withOp("Graph.AddDependency", g.AddDependencies(Edge{From: from, To: to}))
}

// RemoveDependencies removes edges (cudaGraphRemoveDependencies); every edge
// must exist with the data given, or nothing changes.
func (g *Graph) RemoveDependencies(edges ...Edge) error {
	const op = "Graph.RemoveDependencies"
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if g.memNodes > 0 {
		return newErr(op, ErrNotSupported, "edges cannot be removed from a graph with memory nodes")
	}
	for i, e := range edges {
		if err := g.checkEdgeLocked(op, e); err != nil {
			return err
		}
		if !contains(e.To.deps, e.From) {
			return nodeErr(op, e.To, ErrInvalidValue, "does not depend on %v", e.From)
		}
		if d := g.edgeDataLocked(e.From, e.To); d != e.Data {
			return nodeErr(op, e.To, ErrInvalidValue, "the edge from %v has data %v, not %v", e.From, d, e.Data)
		}
		for _, f := range edges[:i] {
			if f.From == e.From && f.To == e.To {
				return nodeErr(op, e.To, ErrInvalidValue, "edge from %v listed twice", e.From)
			}
		}
	}
	if err := backendEdges(op, g, edges, false); err != nil {
		return err
	}
	for _, e := range edges {
		e.To.deps = dag.Remove(e.To.deps, e.From)
		e.From.outs = dag.Remove(e.From.outs, e.To)
		g.stampSink(e.From)
		g.setEdgeDataLocked(e.From, e.To, EdgeData{})
	}
	g.topoChanged()
	return nil
}

// topoChanged counts a change of g's topology in g and the graphs that
// hold it.
func (g *Graph) topoChanged() {
	for x := g; x != nil; x = x.parent.g {
		x.topoVer.Add(1)
		if x.parent == nil {
			return
		}
	}
}

// stampSink records that n may just have become a sink: CUDA orders sinks by
// the API calls that made them sinks, and whole-graph update pairs by it.
func (g *Graph) stampSink(n *Node) {
	if len(n.outs) == 0 {
		g.sinkSeq++
		n.sink = g.sinkSeq
	}
}

func (g *Graph) checkEdgeLocked(opName string, e Edge) error {
	if err := g.checkNodeLocked(opName, e.From); err != nil {
		return err
	}
	if err := g.checkNodeLocked(opName, e.To); err != nil {
		return err
	}
	if e.From == e.To {
		return nodeErr(opName, e.To, ErrInvalidValue, "self edge")
	}
	return nil
}

// DestroyNode removes n and its edges from the graph (cudaGraphDestroyNode).
func (g *Graph) DestroyNode(n *Node) error {
	const op = "Graph.DestroyNode"
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if err := g.checkNodeLocked(op, n); err != nil {
		return err
	}
	if g.memNodes > 0 {
		return nodeErr(op, n, ErrNotSupported, "nodes cannot be destroyed in a graph with memory nodes")
	}
	if err := g.be.DestroyNode(n.be); err != nil {
		return backendErr(op, err)
	}
	n.condDestroy()
	for _, d := range n.deps {
		d.outs = dag.Remove(d.outs, n)
		g.stampSink(d)
	}
	for _, o := range n.outs {
		o.deps = dag.Remove(o.deps, n)
	}
	g.dropEdgeDataLocked(n)
	n.deps, n.outs, n.dead = nil, nil, true
	g.nodes = dag.Remove(g.nodes, n)
	n.child.destroyEmbedded() // with its user object references
	g.topoChanged()
	return nil
}

// Destroy destroys the graph; its nodes become invalid. Executable graphs
// instantiated from it are not affected. A graph embedded in a child graph
// node belongs to the node and cannot be destroyed on its own.
func (g *Graph) Destroy() error {
	const op = "Graph.Destroy"
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if g.parent != nil {
		return newErr(op, ErrInvalidValue, "graph is owned by %v", g.parent)
	}
	g.destroyLocked()
	g.dev.allocs.dropGraph(g)
	if a, ok := g.be.(backend.Abandoner); ok && g.broken != "" {
		a.Abandon() // destroying it would free the destroyed body again, in the driver
		return nil
	}
	// Live allocations stay: destroying a graph frees nothing.
	return backendErr(op, g.be.Destroy())
}

// usableLocked refuses a broken graph (see Graph.broken).
func (g *Graph) usableLocked(opName string) error {
	if g.broken != "" {
		return newErr(opName, ErrInvalidValue, "%s", g.broken)
	}
	return nil
}

// destroyedByCapture does what the driver does when a capture into g ends
// invalidated (cuStreamEndCapture after cuStreamBeginCaptureToGraph): it
// destroys g. Measured on the H100 (driver 580): cuGraphDestroy of g then
// answers invalid argument and, when g is a conditional body, destroying
// the graph that holds the conditional node crashes inside the driver. So
// g is destroyed here too, and the top graph holding a destroyed body is
// broken: refused by Instantiate, Clone, AddChildGraphNode and Update, and
// its driver graph left behind when it is destroyed, not freed twice.
func (g *Graph) destroyedByCapture(cause error) {
	g.mu.Lock()
	g.destroyLocked()
	parent := g.parent
	g.mu.Unlock()
	if a, ok := g.be.(backend.Abandoner); ok {
		a.Abandon()
	} else if parent == nil {
		g.be.Destroy()
	}
	if parent == nil {
		return
	}
	root := parent.g
	for root.parent != nil {
		root = root.parent.g
	}
	root.mu.Lock()
	if root.broken == "" {
		root.broken = fmt.Sprintf("a body of %v was destroyed when a capture into it ended invalidated (%v)", parent, cause)
	}
	root.mu.Unlock()
}

// destroyLocked marks g, its nodes and the graphs embedded in them dead.
func (g *Graph) destroyLocked() {
	g.destroyed = true
	g.releaseUserObjectsLocked()
	for _, n := range g.nodes {
		n.dead = true
		n.condDestroy()
		if n.child != nil {
			n.child.mu.Lock()
			n.child.destroyLocked()
			n.child.mu.Unlock()
		}
	}
}

// Clone returns a deep copy of the graph (cudaGraphClone). Find the copy of a
// node with ClonedNode.
func (g *Graph) Clone() (*Graph, error) {
	c, _, err := g.clone("Graph.Clone")
	return c, err
}

func (g *Graph) clone(opName string) (*Graph, map[*Node]*Node, error) {
	if err := g.lock(opName); err != nil {
		return nil, nil, err
	}
	defer g.mu.Unlock()
	if err := g.usableLocked(opName); err != nil {
		return nil, nil, err
	}
	if g.memNodes > 0 {
		return nil, nil, newErr(opName, ErrNotSupported, "a graph with memory nodes cannot be cloned")
	}
	if err := g.condCloneRule(opName); err != nil {
		return nil, nil, err
	}
	_, native := g.be.(backend.Inspector)
	if native && opName == "Graph.Clone" { // a child graph's clone is the driver's, made in addBackendNode
		c, err := g.nativeClone(opName)
		if err != nil {
			return nil, nil, err
		}
		c.copyUserObjectsNative(g) // the driver's clone copied them
		return c, c.clonedBy, nil
	}
	c := &Graph{dev: g.dev, id: graphIDs.Add(1), nextID: g.nextID, sinkSeq: g.sinkSeq, clonedBy: map[*Node]*Node{}}
	c.hasRecords.Store(g.hasRecords.Load())
	for _, n := range g.nodes {
		m := &Node{g: c, id: n.id, typ: n.typ, params: copyParams(n.params), sink: n.sink, dev: n.dev, captured: n.captured}
		if n.child != nil {
			cc, inner, err := n.child.clone(opName)
			if err != nil {
				c.releaseUserObjects() // those the children cloned so far took
				return nil, nil, err
			}
			cc.parent, m.child, m.params = m, cc, ChildGraphParams{cc}
			for k, v := range inner {
				c.clonedBy[k] = v
			}
		}
		c.clonedBy[n] = m
		c.nodes = append(c.nodes, m)
	}
	dag.CopyEdges(g.nodes, c.clonedBy, func(n *Node) (*[]*Node, *[]*Node) { return &n.deps, &n.outs })
	c.uobjs = g.takeUserObjectsLocked()
	c.edata = g.cloneEdgeDataLocked(c.clonedBy)
	if opName == "Graph.Clone" { // a child graph's clone is the backend's, made in addBackendNode
		var err error
		if c.be, err = g.be.Clone(); err == nil {
			err = bindClone(c)
		}
		if err != nil {
			c.releaseUserObjects()
			return nil, nil, backendErr(opName, err)
		}
	}
	return c, c.clonedBy, nil
}

// ClonedNode returns the node of g (made by Clone) that is the copy of orig
// (cudaGraphNodeFindInClone).
func (g *Graph) ClonedNode(orig *Node) (*Node, error) {
	const op = "Graph.ClonedNode"
	if err := g.lock(op); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	m, ok := g.clonedBy[orig]
	if !ok || m.dead {
		return nil, nodeErr(op, orig, ErrInvalidValue, "no clone of this node in the graph")
	}
	return m, nil
}

func contains(ns []*Node, n *Node) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

// StructurallyEqual reports whether a and b have the same structure: the
// same number of nodes, the same node types in creation order, the same
// dependencies (by position, in order), the same kernels with the same
// launch shapes, the same edge data, and structurally equal child graphs. Argument values,
// addresses and host functions are not compared. It is the check that a
// captured graph and a hand-built one describe the same work.
func StructurallyEqual(a, b *Graph) bool {
	if a == nil || b == nil {
		return a == b
	}
	an, err := a.Nodes()
	if err != nil {
		return false
	}
	bn, err := b.Nodes()
	if err != nil || len(an) != len(bn) {
		return false
	}
	pos := func(ns []*Node) map[*Node]int {
		m := make(map[*Node]int, len(ns))
		for i, n := range ns {
			m[n] = i
		}
		return m
	}
	ap, bp := pos(an), pos(bn)
	for i := range an {
		x, y := an[i], bn[i]
		xp, err1 := x.Params()
		yp, err2 := y.Params()
		xd, err3 := x.DependencyEdges()
		yd, err4 := y.DependencyEdges()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || x.typ != y.typ || len(xd) != len(yd) {
			return false
		}
		for j := range xd {
			if ap[xd[j].From] != bp[yd[j].From] || xd[j].Data != yd[j].Data {
				return false
			}
		}
		switch xp := xp.(type) {
		case KernelParams:
			// Nodes the driver made (NativeNodeParams) compare by type only.
			if yk, ok := yp.(KernelParams); ok && (xp.Kernel != yk.Kernel || xp.Grid != yk.Grid || xp.Block != yk.Block || xp.SharedMem != yk.SharedMem) {
				return false
			}
		case ChildGraphParams:
			if yc, ok := yp.(ChildGraphParams); ok && !StructurallyEqual(xp.Graph, yc.Graph) {
				return false
			}
		case ConditionalParams:
			if !condStructurallyEqual(x, y, xp, yp) {
				return false
			}
		}
	}
	return true
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
