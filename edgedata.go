package gpugraph

import (
	"fmt"
)

// DependencyType is the type of an edge (cudaGraphDependencyType).
type DependencyType uint8

const (
	// DependencyTypeDefault is an ordinary dependency.
	DependencyTypeDefault DependencyType = 0
	// DependencyTypeProgrammatic lets the downstream kernel start before the
	// upstream kernel completes and wait for it with
	// Block.GridDependencySynchronize. It joins two kernel nodes and goes
	// out of port KernelNodePortProgrammatic or
	// KernelNodePortLaunchCompletion.
	DependencyTypeProgrammatic DependencyType = 1
)

// The outgoing ports of a kernel node (cudaGraphKernelNodePort*), for
// EdgeData.FromPort. Other node types have only port 0.
const (
	// KernelNodePortDefault triggers when the kernel has completed.
	KernelNodePortDefault = 0
	// KernelNodePortProgrammatic triggers when every block of the kernel
	// has called TriggerProgrammaticLaunchCompletion or exited. Its edges
	// are of type DependencyTypeProgrammatic.
	KernelNodePortProgrammatic = 1
	// KernelNodePortLaunchCompletion triggers when every block of the
	// kernel has started.
	KernelNodePortLaunchCompletion = 2
)

// EdgeData qualifies a dependency (cudaGraphEdgeData, CUDA 12.3 and
// later): an outgoing port of the upstream node says when the edge is
// triggered, an incoming port of the downstream node says what part of it
// waits (no node type defines one yet: ToPort is always 0), and a type says
// how the two relate. The zero EdgeData is an ordinary dependency: the
// downstream node starts after the upstream node has completed, with its
// memory visible.
//
// The one use of other data is programmatic dependent launch between two
// kernel nodes. An edge of type DependencyTypeProgrammatic lets the
// downstream kernel start early:
//
//   - from KernelNodePortProgrammatic, once every block of the upstream
//     kernel has called Block.TriggerProgrammaticLaunchCompletion or exited;
//   - from KernelNodePortLaunchCompletion, once every block of the upstream
//     kernel has started.
//
// The downstream kernel calls Block.GridDependencySynchronize before it
// reads what the upstream kernel writes: it waits until the upstream kernel
// has completed and its memory is visible. The overlap is a chance, not a
// promise, as on a GPU: a kernel must not wait for its dependent to start.
// An edge of the default type out of KernelNodePortLaunchCompletion starts
// any downstream node once every upstream block has started, with nothing
// to wait on. On the host backend a node started early reports completion
// to its own dependents only after the upstream kernel has completed.
//
// Queries that return nodes without their edge data (Node.Dependencies,
// Node.Dependents) fail with ErrLossyQuery when the data they would drop is
// not all zero; Node.DependencyEdges, Node.DependentEdges and Graph.Edges
// return it.
type EdgeData struct {
	FromPort uint8 // outgoing port of the upstream node
	ToPort   uint8 // incoming port of the downstream node: always 0
	Type     DependencyType
}

func (d EdgeData) String() string {
	var s string
	switch d.FromPort {
	case KernelNodePortDefault:
		s = "default"
	case KernelNodePortProgrammatic:
		s = "programmatic port"
	case KernelNodePortLaunchCompletion:
		s = "launch completion port"
	default:
		s = fmt.Sprintf("port %d", d.FromPort)
	}
	switch d.Type {
	case DependencyTypeDefault:
	case DependencyTypeProgrammatic:
		s += ", programmatic"
	default:
		s += fmt.Sprintf(", type %d", d.Type)
	}
	if d.ToPort != 0 {
		s += fmt.Sprintf(", to port %d", d.ToPort)
	}
	return s
}

// checkEdgeDataFrom checks the upstream half of an edge: the data is known
// and the upstream node has the port. Both backends apply it before the
// driver is called.
func checkEdgeDataFrom(opName string, from *Node, d EdgeData) error {
	switch {
	case d.ToPort != 0:
		return nodeErr(opName, from, ErrInvalidValue, "edge data %v: no node type has incoming port %d", d, d.ToPort)
	case d.Type > DependencyTypeProgrammatic:
		return nodeErr(opName, from, ErrInvalidValue, "edge data %v: unknown dependency type %d", d, d.Type)
	case d.FromPort > KernelNodePortLaunchCompletion:
		return nodeErr(opName, from, ErrInvalidValue, "edge data %v: unknown port %d", d, d.FromPort)
	case d != EdgeData{} && from.typ != NodeKernel:
		return nodeErr(opName, from, ErrInvalidValue, "edge data %v: only kernel nodes have outgoing ports other than the default, and programmatic edges join kernel nodes", d)
	case d.Type == DependencyTypeProgrammatic && d.FromPort == KernelNodePortDefault:
		return nodeErr(opName, from, ErrInvalidValue, "edge data %v: a programmatic edge leaves the programmatic or the launch completion port", d)
	case d.FromPort == KernelNodePortProgrammatic && d.Type != DependencyTypeProgrammatic:
		return nodeErr(opName, from, ErrInvalidValue, "edge data %v: the programmatic port takes programmatic edges only", d)
	}
	return nil
}

// checkEdgeData checks an edge's data against both of its nodes.
func checkEdgeData(opName string, from *Node, to NodeType, d EdgeData) error {
	if err := checkEdgeDataFrom(opName, from, d); err != nil {
		return err
	}
	if d.Type == DependencyTypeProgrammatic && to != NodeKernel {
		return nodeErr(opName, from, ErrInvalidValue, "edge data %v: a programmatic edge joins two kernel nodes, not a kernel and a %v node", d, to)
	}
	return nil
}

// checkNewEdges checks the data of the edges into a new node of type to.
func checkNewEdges(opName string, deps []*Node, to NodeType, data []EdgeData) error {
	if data == nil {
		return nil
	}
	if len(data) != len(deps) {
		return newErr(opName, ErrInvalidValue, "%d dependencies but edge data for %d", len(deps), len(data))
	}
	for i, d := range deps {
		if err := checkEdgeData(opName, d, to, data[i]); err != nil {
			return err
		}
	}
	return nil
}

// defaultData reports whether data is all zero (or nil).
func defaultData(data []EdgeData) bool {
	for _, d := range data {
		if d != (EdgeData{}) {
			return false
		}
	}
	return true
}

// AddNodeWithEdgeData adds a node with parameters p depending on deps, the
// edge from deps[i] carrying data[i] (cudaGraphAddNode with dependency
// data). data is nil (every edge ordinary) or as long as deps.
func (g *Graph) AddNodeWithEdgeData(p NodeParams, deps []*Node, data []EdgeData) (*Node, error) {
	return g.addNodeEdges("Graph.AddNodeWithEdgeData", p, deps, data)
}

// DependencyEdges returns the edges into n, with their data, in the order
// the dependencies were added (cudaGraphNodeGetDependencies with edge data).
func (n *Node) DependencyEdges() ([]Edge, error) { return n.dataEdges("Node.DependencyEdges", false) }

// DependentEdges returns the edges out of n, with their data
// (cudaGraphNodeGetDependentNodes with edge data).
func (n *Node) DependentEdges() ([]Edge, error) { return n.dataEdges("Node.DependentEdges", true) }

func (n *Node) dataEdges(opName string, out bool) ([]Edge, error) {
	if n == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil node")
	}
	g := n.g
	if err := g.lock(opName); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	if err := g.checkNodeLocked(opName, n); err != nil {
		return nil, err
	}
	if out {
		es := make([]Edge, len(n.outs))
		for i, o := range n.outs {
			es[i] = Edge{From: n, To: o, Data: g.edgeDataLocked(n, o)}
		}
		return es, nil
	}
	es := make([]Edge, len(n.deps))
	for i, d := range n.deps {
		es[i] = Edge{From: d, To: n, Data: g.edgeDataLocked(d, n)}
	}
	return es, nil
}

// edgeKey names an edge in Graph.edata.
type edgeKey struct{ from, to *Node }

func (g *Graph) edgeDataLocked(from, to *Node) EdgeData { return g.edata[edgeKey{from, to}] }

// setEdgeDataLocked records the data of the edge from -> to; only
// non-default data is stored.
func (g *Graph) setEdgeDataLocked(from, to *Node, d EdgeData) {
	if d == (EdgeData{}) {
		delete(g.edata, edgeKey{from, to})
		return
	}
	if g.edata == nil {
		g.edata = map[edgeKey]EdgeData{}
	}
	g.edata[edgeKey{from, to}] = d
}

// dropEdgeDataLocked forgets the data of n's edges (n is being destroyed).
func (g *Graph) dropEdgeDataLocked(n *Node) {
	if len(g.edata) == 0 {
		return
	}
	for _, d := range n.deps {
		delete(g.edata, edgeKey{d, n})
	}
	for _, o := range n.outs {
		delete(g.edata, edgeKey{n, o})
	}
}

// cloneEdgeDataLocked returns g's edge data for the clone whose nodes are
// clones[original].
func (g *Graph) cloneEdgeDataLocked(clones map[*Node]*Node) map[edgeKey]EdgeData {
	if len(g.edata) == 0 {
		return nil
	}
	m := make(map[edgeKey]EdgeData, len(g.edata))
	for k, d := range g.edata {
		m[edgeKey{clones[k.from], clones[k.to]}] = d
	}
	return m
}

// lossyLocked fails a query of n's dependencies (or dependents, with out)
// that would drop non-default edge data (cudaErrorLossyQuery).
func (g *Graph) lossyLocked(opName string, n *Node, out bool) error {
	if len(g.edata) == 0 {
		return nil
	}
	ns := n.deps
	if out {
		ns = n.outs
	}
	for _, x := range ns {
		k := edgeKey{x, n}
		if out {
			k = edgeKey{n, x}
		}
		if d, ok := g.edata[k]; ok {
			return nodeErr(opName, n, ErrLossyQuery, "the edge %v -> %v has data (%v); use the edge query", k.from, k.to, d)
		}
	}
	return nil
}

// dotEdgeAttrs returns the DOT attributes of the edge from -> to, labelling
// edges with non-default data.
func (g *Graph) dotEdgeAttrs(from, to *Node) string {
	d := g.edgeDataLocked(from, to)
	if d == (EdgeData{}) {
		return ""
	}
	return fmt.Sprintf(" [style=\"dashed\" label=%q]", d.String())
}
