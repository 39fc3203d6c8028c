package backend

// Graphs. The gpugraph package keeps the rules' view of every graph
// (nodes, edges, parameters) and makes each change in the backend's graph
// too, through these calls, after its own checks; a backend checks only
// what it alone knows (that device memory is its own, what its driver
// refuses). A node's tag is the gpugraph package's node: a backend reports
// a node at fault (Error.Node) by its tag.

// Node is a backend's node of a graph, opaque to the gpugraph package.
type Node any

// NewGraph is implemented by devices (cudaGraphCreate).
type Grapher interface {
	NewGraph() (Graph, error)
}

// Graph is a backend's graph.
type Graph interface {
	// AddNode adds a node of a simple type (op.Type is kernel, memcpy,
	// memset, host, empty, event record or wait, or external semaphore
	// signal or wait) depending on deps, with data the edges' data (nil:
	// all default).
	AddNode(op *Op, deps []Node, data []EdgeData, tag any) (Node, error)
	// AddChildGraphNode embeds a clone of child; it returns the node and
	// the embedded graph.
	AddChildGraphNode(child Graph, deps []Node, data []EdgeData, tag any) (Node, Graph, error)
	// AddMemAllocNode adds an allocation of size bytes accessible by the
	// devices in access and returns its fixed address.
	AddMemAllocNode(size int, access []int, deps []Node, data []EdgeData, tag any) (Node, uint64, error)
	// AddMemFreeNode adds a free of the graph allocation at ptr.
	AddMemFreeNode(ptr uint64, deps []Node, data []EdgeData, tag any) (Node, error)
	// CondHandleCreate creates a conditional handle with a default value
	// and flags (cudaGraphConditionalHandleCreate's).
	CondHandleCreate(def, flags uint32) (uint64, error)
	// AddConditionalNode adds a conditional node of type typ (CUDA's
	// cudaGraphConditionalNodeType) with size bodies, which it returns.
	AddConditionalNode(c Cond, deps []Node, data []EdgeData, tag any) (Node, []Graph, error)
	// SetParams sets the op of a node of a simple type.
	SetParams(n Node, op *Op) error
	// SetChildGraph replaces the graph embedded in child graph node n with
	// a clone of g and returns the clone.
	SetChildGraph(n Node, g Graph) (Graph, error)
	// ChildGraph is the graph embedded in child graph node n.
	ChildGraph(n Node) (Graph, error)
	AddEdges(from, to []Node, data []EdgeData) error
	RemoveEdges(from, to []Node, data []EdgeData) error
	DestroyNode(n Node) error
	// Clone copies the graph (cudaGraphClone); find the copy of a node
	// with ClonedNode of the copy.
	Clone() (Graph, error)
	ClonedNode(orig Node) (Node, error)
	// Instantiate makes an executable graph. flags are
	// cudaGraphInstantiateFlags; upload is the stream InstantiateUpload
	// uploads into. tag is the gpugraph package's executable graph.
	Instantiate(flags uint, upload Stream, tag any) (Exec, error)
	Destroy() error
}

// Cond describes a conditional node: its handle, its type (0 if, 1 while,
// 2 switch, as cudaGraphConditionalNodeType) and its number of bodies.
type Cond struct {
	Handle uint64
	Type   int
	Bodies int
}

// Exec is an executable graph.
type Exec interface {
	Launch(s Stream) error
	Upload(s Stream) error
	// Update applies the parameters of g, of the same topology, for the
	// next launch (cudaGraphExecUpdate). On failure the result says why
	// and names the nodes at fault by their tags.
	Update(g Graph) (UpdateInfo, error)
	SetParams(n Node, op *Op) error
	// SetChildGraph updates the nodes embedded in child graph node n from
	// g, of the same topology (cudaGraphExecChildGraphNodeSetParams).
	SetChildGraph(n Node, g Graph) error
	SetEnabled(n Node, on bool) error
	Enabled(n Node) (bool, error)
	// DeviceHandle is the handle kernels launch the graph with.
	DeviceHandle() uint64
	// AfterLaunches runs fn once every launch issued so far has finished
	// (at once if none is pending, or where the driver itself defers what
	// fn releases).
	AfterLaunches(fn func())
	Destroy() error
}

// UpdateInfo is cudaGraphExecUpdateResultInfo with the tags of the nodes
// at fault.
type UpdateInfo struct {
	Result             int
	ErrorNode, ErrFrom any
	// Children maps each child graph node of the new graph (by tag) to the
	// node of the instantiated graph it updated, where the backend says.
	Children map[any]any
}

// Capturer is implemented by streams whose driver captures work itself
// (cudaStreamBeginCapture on cuda). The gpugraph package captures on
// backends without it.
type Capturer interface {
	BeginCapture(mode int) error
	BeginCaptureToGraph(g Graph, deps []Node, data []EdgeData, mode int) error
	// EndCapture returns the captured graph; read its nodes with an
	// Inspector.
	EndCapture() (Graph, error)
	CaptureInfo() (CaptureInfo, error)
	UpdateCaptureDependencies(deps []Node, data []EdgeData, flags uint32) error
}

// CaptureInfo is cudaStreamGetCaptureInfo's report.
type CaptureInfo struct {
	Status int
	ID     uint64
	Graph  Graph
	Deps   []Node
	Data   []EdgeData // parallel to Deps
}

// Inspector is implemented by graphs whose nodes the driver may make
// (capture, clone): it reads them back, for the gpugraph package's view.
type Inspector interface {
	// Nodes lists the graph's nodes in the driver's order.
	Nodes() ([]Node, error)
	// Node describes n: withParams asks for its parameters where the
	// gpugraph package models them.
	Node(n Node, withParams bool) (NodeInfo, error)
	// SameNode reports whether a and b are the same node.
	SameNode(a, b Node) bool
}

// NodeInfo describes a node the driver made.
type NodeInfo struct {
	Type     NodeType
	Deps     []Node
	Data     []EdgeData // parallel to Deps
	Name     string     // a kernel's function name
	Pointers []uint64   // a kernel's Pointer arguments (where the backend knows its parameters), a memcpy's device sides, a memset's destination
	Ptr      uint64     // a memory node's address
	Size     int        // an alloc node's size
	Location int        // an alloc node's device
	Access   []int      // an alloc node's peers with read-write access (the resident device implicit)
	Handle   uintptr    // the driver's handle, for NativeNodeParams
}

// UpdateKeeper is implemented by executable graphs whose driver enables a
// node that was disabled after a whole-graph update with the parameters it
// had before the update: after an update the gpugraph package gives each
// node the parameters it took from the update's graph, to give again when
// the node is enabled.
type UpdateKeeper interface {
	KeepParams(n Node, op *Op)
	// KeepNative keeps for n the parameters of from, a kernel node of the
	// update's graph whose parameters only the driver knows (a capture's).
	KeepNative(n, from Node) error
}
