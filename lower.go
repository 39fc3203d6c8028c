package gpugraph

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda"
	"github.com/gpugraph/gpugraph/internal/host"
)

// Lowering: public parameters, checked once here for every backend, become
// the backend's operation (backend.Op) and calls on the backend's graphs;
// a backend's errors become the public *Error.

// backendErr reports err, a backend's (or driver's) error or an *Error, as
// the public operation opName's.
func backendErr(opName string, err error) error { return fromBackend(opName, cuda.Err(err)) }

// lowerKernel is k as a backend sees it: the key under which a backend
// keeps what it builds (the cuda backend's module; the host backend calls
// runBlock with it).
func lowerKernel(k *Kernel) backend.Kernel {
	var ptrs uint64
	for i, t := range k.Params {
		if t == Pointer && i < 64 {
			ptrs |= 1 << i
		}
	}
	return backend.Kernel{Key: k, Go: goBody(k), Name: k.Name, Source: k.CUDA, DeviceRuntime: k.DeviceRuntime, Pointers: ptrs}
}

func dims(d Dim3) [3]uint32 { return [3]uint32{uint32(d.X), uint32(d.Y), uint32(d.Z)} }

// goBody is k's Go body as the host backend calls it. host.Block,
// host.Args and host.Dim3 have the memory layouts of Block, Args and Dim3
// (TestBodyLayout), so the function value is the body itself: a block runs
// with one Block built and one call, as before the backend split.
func goBody(k *Kernel) host.Body {
	if k.Go == nil {
		return nil
	}
	return *(*host.Body)(unsafe.Pointer(&k.Go))
}

// lowerLaunch checks and marshals a launch; words, if not nil, is the
// buffer the argument words go to.
func (d *Device) lowerLaunch(p *KernelParams, words *[]uint64) (backend.Launch, *Code, string) {
	var l backend.Launch
	code, msg := d.lowerLaunchInto(&l, p, words)
	return l, code, msg
}

// lowerCopy checks a copy (device sides inside live allocations of d) and
// lowers it.
func (d *Device) lowerCopy(p *MemcpyParams) (backend.Memcpy, *Code, string) {
	check := d.be.CheckRange
	if c, ok := d.be.(copyRanger); ok {
		check = c.CheckCopyRange // a copy may read or write another device's memory
	}
	checkOnly := func(dev DevicePtr, n int) ([]byte, error) { return nil, check(uint64(dev), n) }
	if _, _, msg := memcpySides(p, checkOnly); msg != "" {
		return backend.Memcpy{}, ErrInvalidValue, msg
	}
	m := backend.Memcpy{Dst: uint64(p.Dst), Src: uint64(p.Src), DstHost: p.DstHost, SrcHost: p.SrcHost, Size: p.Size}
	// Which host memory is pinned is decided here, for every backend: a
	// stream copy of pageable memory waits (Stream.Memcpy), a graph's copy
	// reads a pageable source at launch (backend.Memcpy.Staged).
	m.DstPinned = p.DstHost != nil && d.pinned(p.DstHost[:p.Size])
	m.SrcPinned = p.SrcHost != nil && d.pinned(p.SrcHost[:p.Size])
	return m, nil, ""
}

// copyRanger is implemented by devices that check the sides of a copy
// apart from what work on the device may use (host: any device's memory).
type copyRanger interface {
	CheckCopyRange(p uint64, n int) error
}

// lowerMemset checks a memset and lowers it. A memset node (node set:
// added to a graph, or captured) may set any open device's memory, as a
// copy may: the driver adds, launches and runs a memset node of device 1 on
// device 0's memory without peer access (docs/driver-peer.txt, "memset node
// of device 1"). A stream's memset needs the memory to be the device's own
// or a peer's it has access to: without access the driver refuses it at
// issue (cudaErrorInvalidValue), with access it runs.
func (d *Device) lowerMemset(p *MemsetParams, node bool) (backend.Memset, *Code, string) {
	o, code, msg := d.memsetShape(p)
	if code != nil {
		return backend.Memset{}, code, msg
	}
	if o.total > 0 {
		check := d.be.CheckRange
		if c, ok := d.be.(copyRanger); ok && node {
			check = c.CheckCopyRange
		}
		if err := check(uint64(p.Dst), o.total); err != nil {
			return backend.Memset{}, ErrInvalidValue, err.Error()
		}
	}
	return backend.Memset{Dst: uint64(p.Dst), Value: p.Value, ElementSize: p.ElementSize,
		Width: p.Width, Height: p.Height, Pitch: o.pitch, Total: o.total}, nil, ""
}

// lowerOp checks params and lowers them to the backend's Op, for the node
// types a backend's graph takes as ops.
func (d *Device) lowerOp(params NodeParams) (backend.Op, *Code, string) {
	switch p := params.(type) {
	case KernelParams:
		l, code, msg := d.lowerLaunch(&p, nil)
		if code != nil {
			return backend.Op{}, code, msg
		}
		return backend.Op{Type: backend.NodeKernel, Launch: l}, nil, ""
	case EmptyParams:
		return backend.Op{Type: backend.NodeEmpty}, nil, ""
	case EventRecordParams:
		if code, msg := codeOf(p.Event.check("", d)); code != nil {
			return backend.Op{}, code, msg
		}
		return backend.Op{Type: backend.NodeEventRecord, Event: p.Event.be}, nil, ""
	case EventWaitParams:
		if code, msg := codeOf(p.Event.check("", d)); code != nil {
			return backend.Op{}, code, msg
		}
		return backend.Op{Type: backend.NodeEventWait, Event: p.Event.be}, nil, ""
	case MemsetParams:
		m, code, msg := d.lowerMemset(&p, true)
		if code != nil {
			return backend.Op{}, code, msg
		}
		return backend.Op{Type: backend.NodeMemset, Memset: m}, nil, ""
	case MemcpyParams:
		m, code, msg := d.lowerCopy(&p)
		if code != nil {
			return backend.Op{}, code, msg
		}
		return backend.Op{Type: backend.NodeMemcpy, Memcpy: m}, nil, ""
	case HostParams:
		if p.Fn == nil {
			return backend.Op{}, ErrInvalidValue, "nil host function"
		}
		return backend.Op{Type: backend.NodeHost, Host: p.Fn}, nil, ""
	case ExtSemaphoreSignalParams, ExtSemaphoreWaitParams:
		sems, values, signal, _ := extSemArgs(p)
		if code, msg := d.checkExtSems(sems, values, ErrInvalidValue); code != nil {
			return backend.Op{}, code, msg
		}
		t := backend.NodeExtSemWait
		if signal {
			t = backend.NodeExtSemSignal
		}
		return backend.Op{Type: t, Sems: backendSems(sems), Values: values}, nil, ""
	}
	return backend.Op{}, ErrNotSupported, fmt.Sprintf("%v nodes cannot be set this way", params.NodeType())
}

// isBackendErr reports whether err is a backend's report of a Code.
func isBackendErr(err error) bool {
	var be *backend.Error
	return errors.As(err, &be)
}

// lowerOp lowers params for node n: checked against the device n runs
// on, which the op names when it is not its graph's.
func (n *Node) lowerOp(params NodeParams) (backend.Op, *Code, string) {
	d := n.device()
	op, code, msg := d.lowerOp(params)
	if d != n.g.dev {
		op.Device = d.be
	}
	return op, code, msg
}

// codeOf is the code and detail of an *Error; nil for nil.
func codeOf(err error) (*Code, string) {
	var e *Error
	if !errors.As(err, &e) {
		return nil, ""
	}
	return e.Code, e.Detail
}

// addBackendNode adds n's backend node to g's backend graph, after n's
// dependencies with data (nil: all default). The backend places alloc
// nodes (n's params get the address) and creates conditional bodies.
func (d *Device) addBackendNode(g *Graph, n *Node, data []EdgeData) error {
	deps := make([]backend.Node, len(n.deps))
	for i, x := range n.deps {
		deps[i] = x.be
	}
	var ed []backend.EdgeData
	if !defaultData(data) {
		ed = backendEdgeData(data)
	}
	var h backend.Node
	var err error
	switch p := n.params.(type) {
	case ChildGraphParams:
		var emb backend.Graph
		if h, emb, err = g.be.AddChildGraphNode(p.Graph.be, deps, ed, n); err == nil {
			p.Graph.be = emb
			err = bindClone(p.Graph)
		}
	case MemAllocParams:
		access := make([]int, len(p.Access))
		for i, a := range p.Access {
			access[i] = a.Device
		}
		var ptr uint64
		if h, ptr, err = g.be.AddMemAllocNode(p.Size, access, deps, ed, n); err == nil {
			p.Ptr = DevicePtr(ptr)
			p.Access = append([]MemAccessDesc(nil), p.Access...)
			n.params = p
			d.allocs.add(n, p.Ptr, p.Size)
		}
	case MemFreeParams:
		if h, err = g.be.AddMemFreeNode(uint64(p.Ptr), deps, ed, n); err == nil {
			d.allocs.markFreed(g.top(), uint64(p.Ptr))
		}
	case ConditionalParams:
		var bodies []backend.Graph
		if h, bodies, err = g.be.AddConditionalNode(backend.Cond{Handle: uint64(p.Handle), Type: int(p.Type), Bodies: p.Size}, deps, ed, n); err == nil {
			gs := make([]*Graph, len(bodies))
			for i, b := range bodies {
				gs[i] = &Graph{dev: d, id: graphIDs.Add(1), parent: n, be: b}
			}
			n.conds = &condNode{bodies: gs}
			if p.Type == ConditionalWhile {
				d.loops.Store(true) // see loops.go
			}
		}
	default:
		op, code, msg := n.lowerOp(n.params)
		if code != nil {
			return newErr("", code, "%s", msg)
		}
		h, err = g.be.AddNode(&op, deps, ed, n)
	}
	if err != nil {
		return backendErr("", err)
	}
	n.be = h
	return nil
}

// setBackendParams sets the parameters of n's backend node to p.
func (d *Device) setBackendParams(n *Node, params NodeParams) error {
	if p, ok := params.(ChildGraphParams); ok {
		emb, err := n.g.be.SetChildGraph(n.be, p.Graph.be)
		if err != nil {
			return backendErr("", err)
		}
		p.Graph.be = emb
		return backendErr("", bindClone(p.Graph))
	}
	op, code, msg := n.lowerOp(params)
	if code != nil {
		return newErr("", code, "%s", msg)
	}
	return backendErr("", n.g.be.SetParams(n.be, &op))
}

// bindClone gives the nodes of a Go clone g the nodes of the backend's
// clone of the same graph (g.be), so the embedded graph of a child graph
// node can be edited like any other; those of graphs embedded deeper too.
// A node is looked up in the backend graph that holds it (the clone's
// embedded graph at its depth): the driver's cuGraphNodeFindInClone given
// the top clone and a node of a nested graph answers with another node of
// the top graph, or none, which made Exec.SetEnabled on a nested node
// disable another. A node the backend cannot find keeps no backend node:
// per-node calls on it are refused, never sent to another node.
func bindClone(g *Graph) error { return bindCloneIn(g, 0) }

func bindCloneIn(g *Graph, depth int) error {
	orig := make(map[*Node]*Node, len(g.clonedBy))
	for o, m := range g.clonedBy {
		orig[m] = o
	}
	for _, m := range g.nodes {
		o := orig[m]
		if o == nil || o.be == nil {
			continue
		}
		h, err := g.be.ClonedNode(o.be)
		if err != nil {
			if depth > 0 {
				continue
			}
			return err
		}
		m.be = h
		if t, ok := g.be.(tagger); ok {
			t.SetTag(h, m)
		}
		if m.child != nil {
			if m.child.be, err = g.be.ChildGraph(h); err != nil {
				return err
			}
			if m.child.clonedBy == nil {
				m.child.clonedBy = g.clonedBy
			}
			if err := bindCloneIn(m.child, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// tagger is implemented by backend graphs that name nodes by tags (host):
// a clone's nodes take the tags of this package's clone.
type tagger interface {
	SetTag(n backend.Node, tag any)
}

// findNative finds the node of g (or of a graph embedded in it) whose
// backend node is h, or which h names (the host backend reports nodes by
// their tags). g must be locked.
func findNative(g *Graph, h any) *Node {
	if h == nil {
		return nil
	}
	if n, ok := h.(*Node); ok {
		return n
	}
	for _, n := range g.nodes {
		if n.be == h {
			return n
		}
		if n.child != nil {
			if m := findNative(n.child, h); m != nil {
				return m
			}
		}
	}
	return nil
}

// backendEdges adds (or removes) edges in g's backend graph.
func backendEdges(opName string, g *Graph, edges []Edge, add bool) error {
	if len(edges) == 0 {
		return nil
	}
	from, to := make([]backend.Node, len(edges)), make([]backend.Node, len(edges))
	for i, e := range edges {
		from[i], to[i] = e.From.be, e.To.be
	}
	ed := backendEdgeData(edgesData(edges))
	if add {
		return backendErr(opName, g.be.AddEdges(from, to, ed))
	}
	return backendErr(opName, g.be.RemoveEdges(from, to, ed))
}

// backendSems is the backend's semaphores of sems.
func backendSems(sems []*ExternalSemaphore) []backend.ExternalSemaphore {
	bs := make([]backend.ExternalSemaphore, len(sems))
	for i, s := range sems {
		bs[i] = s.be
	}
	return bs
}

// backendEdgeData is data as the backend takes it. Edge data on the cuda
// backend is the driver's (CUgraphEdgeData): passed to
// cuGraphAddDependencies_v2, cuGraphRemoveDependencies_v2,
// cuStreamBeginCaptureToGraph and cuStreamUpdateCaptureDependencies_v2,
// read back with cuGraphNodeGetDependencies_v2 and
// cuStreamGetCaptureInfo_v3. A programmatic edge needs no launch attribute
// on the kernel node: in a graph the edge is the mechanism.
func backendEdgeData(data []EdgeData) []backend.EdgeData {
	ed := make([]backend.EdgeData, len(data))
	for i, d := range data {
		ed[i] = backend.EdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: uint8(d.Type)}
	}
	return ed
}

func fromBackendEdgeData(d backend.EdgeData) EdgeData {
	return EdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: DependencyType(d.Type)}
}

func fromBackendEdgeDataAll(ed []backend.EdgeData) []EdgeData {
	data := make([]EdgeData, len(ed))
	for i, d := range ed {
		data[i] = fromBackendEdgeData(d)
	}
	return data
}

func edgesData(edges []Edge) []EdgeData {
	data := make([]EdgeData, len(edges))
	for i, e := range edges {
		data[i] = e.Data
	}
	return data
}
