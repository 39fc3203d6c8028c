package cuda

import (
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Graph is a native graph (CUgraph) as a backend.Graph.
type Graph struct {
	d *Device
	h uintptr
}

// Node is a native graph node (CUgraphNode), a backend.Node.
type Node uintptr

// Exec is a native executable graph (CUgraphExec) as a backend.Exec.
type Exec struct {
	d *Device
	h uintptr

	// set holds the parameters last given to a node with SetParams, to
	// give them again when the node is enabled: through this backend the
	// driver (580.159.04) enables a kernel node that was updated and then
	// disabled with the parameters it had before the update (device
	// scenario ExecSetParamsReenabledAcrossDevices), though the same calls
	// from C come back right (tools/probe/peerreenable.cu): the cause is
	// not found. A whole-graph update replaces them with the new graph's
	// (KeepParams), and a new child graph forgets those of its nodes.
	mu  sync.Mutex
	set map[uintptr]backend.Op
	// native holds the parameters a whole-graph update gave kernel nodes
	// from nodes the driver made (a capture's), as copies: kernel nodes of
	// scratch, a graph of the Exec's own, by node.
	native  map[uintptr]uintptr
	scratch uintptr
}

var (
	_ backend.UpdateKeeper = (*Exec)(nil)
	_ backend.Grapher      = (*Device)(nil)
	_ backend.Graph        = (*Graph)(nil)
	_ backend.Inspector    = (*Graph)(nil)
	_ backend.Exec         = (*Exec)(nil)
	_ backend.Capturer     = (*Stream)(nil)
	_ backend.Native       = (*Graph)(nil)
	_ backend.Native       = (*Exec)(nil)
)

// NewGraph is cuGraphCreate.
func (d *Device) NewGraph() (backend.Graph, error) {
	h, err := d.newGraph()
	if err != nil {
		return nil, err
	}
	return &Graph{d, h}, nil
}

// graphOf wraps a graph handle the driver made (a body, a clone, a capture).
func (d *Device) graphOf(h uintptr) *Graph { return &Graph{d, h} }

// Native is the CUgraph.
func (g *Graph) Native() uintptr { return g.h }

// Native is the CUgraphExec.
func (e *Exec) Native() uintptr { return e.h }

func handles(ns []backend.Node) []uintptr {
	hs := make([]uintptr, len(ns))
	for i, n := range ns {
		hs[i] = uintptr(n.(Node))
	}
	return hs
}

func handle(n backend.Node) uintptr { return uintptr(n.(Node)) }

// withEdges adds a node with add and, when data is not all default, adds
// it without dependencies and then its edges with their data in one
// cuGraphAddDependencies_v2 call, destroying the node if the driver refuses
// them, so that nothing is half done.
func (g *Graph) withEdges(deps []backend.Node, data []backend.EdgeData, add func(deps []uintptr) (uintptr, error)) (uintptr, error) {
	hs := handles(deps)
	if edgeData(data) == nil {
		return add(hs)
	}
	n, err := add(nil)
	if err != nil {
		return 0, err
	}
	to := make([]uintptr, len(hs))
	for i := range to {
		to[i] = n
	}
	if err := g.d.AddEdges(g.h, hs, to, data); err != nil {
		g.d.DestroyNode(n)
		return 0, err
	}
	return n, nil
}

// AddNode adds a node for op.
func (g *Graph) AddNode(op *backend.Op, deps []backend.Node, data []backend.EdgeData, _ any) (backend.Node, error) {
	dev := opDevice(g.d, op) // a node of another device: its module, its context
	n, err := g.withEdges(deps, data, func(deps []uintptr) (uintptr, error) { return dev.AddNode(g.h, deps, op) })
	if err != nil {
		return nil, err
	}
	return Node(n), nil
}

// AddChildGraphNode embeds the driver's clone of child.
func (g *Graph) AddChildGraphNode(child backend.Graph, deps []backend.Node, data []backend.EdgeData, _ any) (backend.Node, backend.Graph, error) {
	var emb uintptr
	n, err := g.withEdges(deps, data, func(deps []uintptr) (uintptr, error) {
		n, e, err := g.d.AddChildGraphNode(g.h, deps, child.(*Graph).h)
		emb = e
		return n, err
	})
	if err != nil {
		return nil, nil, err
	}
	return Node(n), g.d.graphOf(emb), nil
}

// AddMemAllocNode adds an allocation node; the driver places it.
func (g *Graph) AddMemAllocNode(size int, access []int, deps []backend.Node, data []backend.EdgeData, _ any) (backend.Node, uint64, error) {
	var ptr uint64
	n, err := g.withEdges(deps, data, func(deps []uintptr) (uintptr, error) {
		n, p, err := g.d.AddMemAllocNode(g.h, deps, size, access)
		ptr = p
		return n, err
	})
	if err != nil {
		return nil, 0, err
	}
	return Node(n), ptr, nil
}

// AddMemFreeNode adds a free node.
func (g *Graph) AddMemFreeNode(ptr uint64, deps []backend.Node, data []backend.EdgeData, _ any) (backend.Node, error) {
	n, err := g.withEdges(deps, data, func(deps []uintptr) (uintptr, error) { return g.d.AddMemFreeNode(g.h, deps, ptr) })
	if err != nil {
		return nil, err
	}
	return Node(n), nil
}

// CondHandleCreate is cuGraphConditionalHandleCreate.
func (g *Graph) CondHandleCreate(def, flags uint32) (uint64, error) {
	return g.d.CondHandleCreate(g.h, def, flags)
}

// AddConditionalNode adds a conditional node with the bodies the driver
// creates.
func (g *Graph) AddConditionalNode(c backend.Cond, deps []backend.Node, data []backend.EdgeData, _ any) (backend.Node, []backend.Graph, error) {
	var hs []uintptr
	n, err := g.withEdges(deps, data, func(deps []uintptr) (uintptr, error) {
		n, bodies, err := g.d.AddConditionalNode(g.h, deps, c.Handle, c.Type, c.Bodies)
		hs = bodies
		return n, err
	})
	if err != nil {
		return nil, nil, err
	}
	bodies := make([]backend.Graph, len(hs))
	for i, h := range hs {
		bodies[i] = g.d.graphOf(h)
	}
	return Node(n), bodies, nil
}

// SetParams is cuGraph*NodeSetParams.
func (g *Graph) SetParams(n backend.Node, op *backend.Op) error {
	return opDevice(g.d, op).SetNodeParams(0, handle(n), op)
}

// opDevice is the device op runs on: the one it names, else d.
func opDevice(d *Device, op *backend.Op) *Device {
	if x, ok := op.Device.(*Device); ok && x != nil {
		return x
	}
	return d
}

// SetChildGraph replaces the embedded graph with the driver's clone of c.
func (g *Graph) SetChildGraph(n backend.Node, c backend.Graph) (backend.Graph, error) {
	emb, err := g.d.SetChildGraph(0, handle(n), c.(*Graph).h)
	if err != nil {
		return nil, err
	}
	return g.d.graphOf(emb), nil
}

// AddEdges is cuGraphAddDependencies_v2.
func (g *Graph) AddEdges(from, to []backend.Node, data []backend.EdgeData) error {
	return g.d.AddEdges(g.h, handles(from), handles(to), data)
}

// RemoveEdges is cuGraphRemoveDependencies_v2.
func (g *Graph) RemoveEdges(from, to []backend.Node, data []backend.EdgeData) error {
	return g.d.RemoveEdges(g.h, handles(from), handles(to), data)
}

// DestroyNode is cuGraphDestroyNode.
func (g *Graph) DestroyNode(n backend.Node) error { return g.d.DestroyNode(handle(n)) }

// Clone is cuGraphClone.
func (g *Graph) Clone() (backend.Graph, error) {
	h, err := g.d.CloneGraph(g.h)
	if err != nil {
		return nil, err
	}
	return g.d.graphOf(h), nil
}

// ClonedNode is cuGraphNodeFindInClone.
func (g *Graph) ClonedNode(orig backend.Node) (backend.Node, error) {
	h, err := g.d.FindInClone(handle(orig), g.h)
	if err != nil {
		return nil, err
	}
	return Node(h), nil
}

// Instantiate is cuGraphInstantiateWithParams. A failure names the node
// the driver reports in an *InstantiateError.
func (g *Graph) Instantiate(flags uint, upload backend.Stream, _ any) (backend.Exec, error) {
	h, result, errNode, err := g.d.Instantiate(g.h, uint64(flags), upload)
	if err != nil {
		return nil, &InstantiateError{Err: err, Result: result, Node: Node(errNode)}
	}
	return &Exec{d: g.d, h: h}, nil
}

// InstantiateError is a failed instantiation: the driver's error, its
// result (cudaGraphInstantiateResult) and the node it names (0 if none).
type InstantiateError struct {
	Err    error
	Result int
	Node   Node
}

func (e *InstantiateError) Error() string { return e.Err.Error() }
func (e *InstantiateError) Unwrap() error { return e.Err }

// Destroy is cuGraphDestroy.
func (g *Graph) Destroy() error { return g.d.DestroyGraph(g.h) }

// Abandon forgets the graph without cuGraphDestroy: Close will not destroy
// it either (see backend.Abandoner).
func (g *Graph) Abandon() { g.d.disown(kindGraph, g.h) }

// Nodes is cuGraphGetNodes.
func (g *Graph) Nodes() ([]backend.Node, error) {
	hs, err := g.d.GraphNodes(g.h)
	if err != nil {
		return nil, err
	}
	ns := make([]backend.Node, len(hs))
	for i, h := range hs {
		ns[i] = Node(h)
	}
	return ns, nil
}

// Node describes n as the driver reports it.
func (g *Graph) Node(n backend.Node, withParams bool) (backend.NodeInfo, error) {
	info, err := g.d.Node(handle(n), withParams)
	if err != nil {
		return backend.NodeInfo{}, err
	}
	deps := make([]backend.Node, len(info.Deps))
	for i, h := range info.Deps {
		deps[i] = Node(h)
	}
	return backend.NodeInfo{Type: info.Type, Deps: deps, Data: info.Data, Name: info.Name, Pointers: info.Pointers, Ptr: info.Ptr,
		Size: info.Size, Location: info.Location, Access: info.Access, Handle: handle(n)}, nil
}

// ChildGraph is cuGraphChildGraphNodeGetGraph.
func (g *Graph) ChildGraph(n backend.Node) (backend.Graph, error) {
	h, err := g.d.ChildGraph(handle(n))
	if err != nil {
		return nil, err
	}
	return g.d.graphOf(h), nil
}

// SameNode compares handles.
func (g *Graph) SameNode(a, b backend.Node) bool {
	x, ok1 := a.(Node)
	y, ok2 := b.(Node)
	return ok1 && ok2 && x == y
}

// RetainUserObject is cuGraphRetainUserObject.
func (g *Graph) RetainUserObject(o backend.UserObject, n int, flags uint) error {
	return g.d.RetainUserObject(g.h, o, n, flags)
}

// ReleaseUserObject is cuGraphReleaseUserObject.
func (g *Graph) ReleaseUserObject(o backend.UserObject, n int) error {
	return g.d.ReleaseUserObject(g.h, o, n)
}

// Launch is cuGraphLaunch.
func (e *Exec) Launch(s backend.Stream) error { return e.d.Launch(e.h, s) }

// Upload is cuGraphUpload.
func (e *Exec) Upload(s backend.Stream) error { return e.d.Upload(e.h, s) }

// Update is cuGraphExecUpdate; the nodes at fault are g's, as handles.
func (e *Exec) Update(g backend.Graph) (backend.UpdateInfo, error) {
	info, err := e.d.Update(e.h, g.(*Graph).h)
	r := backend.UpdateInfo{Result: info.Result}
	if info.ErrNode != 0 {
		r.ErrorNode = Node(info.ErrNode)
	}
	if info.ErrFrom != 0 {
		r.ErrFrom = Node(info.ErrFrom)
	}
	if err == nil {
		e.mu.Lock()
		e.dropKept()
		e.mu.Unlock()
	}
	return r, err
}

// SetParams is cuGraphExec*NodeSetParams.
func (e *Exec) SetParams(n backend.Node, op *backend.Op) error {
	if err := opDevice(e.d, op).SetNodeParams(e.h, handle(n), op); err != nil {
		return err
	}
	e.KeepParams(n, op)
	return nil
}

// KeepParams records op as node n's parameters, given by SetParams or
// taken by the driver from a whole-graph update, for SetEnabled to give
// again (see Exec.set); a copy kept from a captured node goes.
func (e *Exec) KeepParams(n backend.Node, op *backend.Op) {
	if op.Type != backend.NodeKernel && op.Type != backend.NodeMemcpy && op.Type != backend.NodeMemset {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.set == nil {
		e.set = map[uintptr]backend.Op{}
	}
	// The node's last argument words are overwritten in place: an update
	// loop on one node allocates nothing here.
	kept := *op
	kept.Launch.Args = append(e.set[handle(n)].Launch.Args[:0], op.Launch.Args...)
	e.set[handle(n)] = kept
	delete(e.native, handle(n))
}

// KeepNative keeps a copy of kernel node from's parameters for node n, to
// give again on enable.
func (e *Exec) KeepNative(n, from backend.Node) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.d.Do(func() error {
		if e.scratch == 0 {
			g, err := e.d.drv.GraphCreate()
			if err != nil {
				return err
			}
			e.scratch = g
		}
		c, err := e.d.drv.GraphKernelNodeCopy(e.scratch, handle(from))
		if err != nil {
			return err
		}
		if e.native == nil {
			e.native = map[uintptr]uintptr{}
		}
		e.native[handle(n)] = c
		delete(e.set, handle(n))
		return nil
	})
}

// dropKept forgets every kept parameter. e.mu is held.
func (e *Exec) dropKept() {
	e.set, e.native = nil, nil
	if e.scratch != 0 {
		e.d.Do(func() error { return e.d.drv.GraphDestroy(e.scratch) })
		e.scratch = 0
	}
}

// SetChildGraph is cuGraphExecChildGraphNodeSetParams. The nodes of the
// child graph take the new graph's parameters: what SetParams gave them
// before is forgotten.
func (e *Exec) SetChildGraph(n backend.Node, g backend.Graph) error {
	if _, err := e.d.SetChildGraph(e.h, handle(n), g.(*Graph).h); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.set) == 0 && len(e.native) == 0 {
		return nil
	}
	return e.d.Do(func() error { return e.forgetIn(handle(n)) })
}

// forgetIn drops the parameters kept for the nodes of child graph node n's
// graph, at every depth of child graphs. e.mu is held, on the device's
// thread.
func (e *Exec) forgetIn(n uintptr) error {
	g, err := e.d.drv.GraphChildGraphNodeGetGraph(n)
	if err != nil {
		return err
	}
	ns, err := e.d.drv.GraphGetNodes(g)
	if err != nil {
		return err
	}
	for _, m := range ns {
		delete(e.set, m)
		delete(e.native, m)
		if t, err := e.d.drv.GraphNodeGetType(m); err == nil && backend.NodeType(t) == backend.NodeChildGraph {
			if err := e.forgetIn(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetEnabled is cuGraphNodeSetEnabled; a node enabled again is given the
// parameters SetParams last gave it (see Exec.set).
func (e *Exec) SetEnabled(n backend.Node, on bool) error {
	if err := e.d.SetEnabled(e.h, handle(n), on); err != nil || !on {
		return err
	}
	e.mu.Lock() // held: SetParams overwrites the kept words in place
	defer e.mu.Unlock()
	if c, ok := e.native[handle(n)]; ok {
		return e.d.Do(func() error { return e.d.drv.GraphExecKernelNodeSetFrom(e.h, handle(n), c) })
	}
	op, ok := e.set[handle(n)]
	if !ok {
		return nil
	}
	return opDevice(e.d, &op).SetNodeParams(e.h, handle(n), &op)
}

// Enabled is cuGraphNodeGetEnabled.
func (e *Exec) Enabled(n backend.Node) (bool, error) { return e.d.Enabled(e.h, handle(n)) }

// DeviceHandle is the CUgraphExec, which device code launches.
func (e *Exec) DeviceHandle() uint64 { return uint64(e.h) }

// AfterLaunches runs fn now: the driver defers the destructors of what it
// releases past the launches queued.
func (e *Exec) AfterLaunches(fn func()) { fn() }

// Destroy is cuGraphExecDestroy.
func (e *Exec) Destroy() error {
	e.mu.Lock()
	e.dropKept()
	e.mu.Unlock()
	return e.d.DestroyExec(e.h)
}
