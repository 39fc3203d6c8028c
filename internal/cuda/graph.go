package cuda

import (
	"slices"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// The graph layer: native graphs, nodes, executable graphs and capture,
// named by their driver handles. The gpugraph package keeps its own view
// of each graph (nodes, edges, parameters) and calls these with the
// handles it holds; each makes the context current where the driver needs
// it and maps the driver's errors (Err).

// newGraph is cuGraphCreate.
func (d *Device) newGraph() (uintptr, error) {
	var g uintptr
	err := d.Do(func() error { var err error; g, err = d.drv.GraphCreate(); return err })
	d.own(kindGraph, g)
	return g, err
}

// DestroyGraph is cuGraphDestroy.
func (d *Device) DestroyGraph(g uintptr) error {
	d.disown(kindGraph, g)
	return d.Do(func() error { return d.drv.GraphDestroy(g) })
}

// nodeCalls are a node type's driver calls: add the node and, where the
// driver has them, set the parameters of a node of a graph or of an
// executable graph. The caller holds the arena's lock while they run.
type nodeCalls struct {
	add               func(g uintptr, deps []uintptr) (uintptr, error)
	setParams, setExe func(exec, n uintptr) error
}

// calls lowers op to its driver calls. The arena (d.cm) must be locked.
func (d *Device) calls(op *backend.Op) (nodeCalls, error) {
	drv, cm := d.drv, d.cm
	switch op.Type {
	case backend.NodeKernel:
		l := &op.Launch
		f, err := d.Function(&l.Kernel)
		if err != nil {
			return nodeCalls{}, err
		}
		kp := driver.KernelNodeParams{Func: f, GridX: l.Grid[0], GridY: l.Grid[1], GridZ: l.Grid[2],
			BlockX: l.Block[0], BlockY: l.Block[1], BlockZ: l.Block[2],
			SharedMemBytes: l.Shared, KernelParams: cm.Params(l.Args)}
		return nodeCalls{
			add:       func(g uintptr, deps []uintptr) (uintptr, error) { return drv.GraphAddKernelNode(cm, g, deps, kp) },
			setParams: func(_, n uintptr) error { return drv.GraphKernelNodeSetParams(cm, n, kp) },
			setExe:    func(e, n uintptr) error { return drv.GraphExecKernelNodeSetParams(cm, e, n, kp) },
		}, nil
	case backend.NodeEmpty:
		return nodeCalls{
			add:       func(g uintptr, deps []uintptr) (uintptr, error) { return drv.GraphAddEmptyNode(g, deps) },
			setParams: func(_, _ uintptr) error { return nil },
		}, nil
	case backend.NodeEventRecord, backend.NodeEventWait:
		ev := op.Event.(*Event).h
		if op.Type == backend.NodeEventRecord {
			return nodeCalls{
				add:       func(g uintptr, deps []uintptr) (uintptr, error) { return drv.GraphAddEventRecordNode(g, deps, ev) },
				setParams: func(_, n uintptr) error { return drv.GraphEventRecordNodeSetEvent(n, ev) },
				setExe:    func(e, n uintptr) error { return drv.GraphExecEventRecordNodeSetEvent(e, n, ev) },
			}, nil
		}
		return nodeCalls{
			add:       func(g uintptr, deps []uintptr) (uintptr, error) { return drv.GraphAddEventWaitNode(g, deps, ev) },
			setParams: func(_, n uintptr) error { return drv.GraphEventWaitNodeSetEvent(n, ev) },
			setExe:    func(e, n uintptr) error { return drv.GraphExecEventWaitNodeSetEvent(e, n, ev) },
		}, nil
	case backend.NodeMemset:
		p := &op.Memset
		mp := driver.MemsetNodeParams{Dst: p.Dst, Pitch: uint64(p.Pitch), Value: p.Value,
			ElementSize: uint32(p.ElementSize), Width: uint64(p.Width), Height: uint64(p.Height)}
		if mp.Height <= 1 && mp.Pitch == 0 {
			// One row: its pitch is its width (cuGraphExecMemsetNodeSetParams
			// refuses a zero pitch that cuGraphAddMemsetNode accepts).
			mp.Pitch = mp.Width * uint64(mp.ElementSize)
		}
		return nodeCalls{
			add: func(g uintptr, deps []uintptr) (uintptr, error) {
				return drv.GraphAddMemsetNode(cm, g, deps, mp, d.ctx)
			},
			setParams: func(_, n uintptr) error { return drv.GraphMemsetNodeSetParams(cm, n, mp) },
			setExe:    func(e, n uintptr) error { return drv.GraphExecMemsetNodeSetParams(cm, e, n, mp, d.ctx) },
		}, nil
	case backend.NodeMemcpy:
		p := &op.Memcpy
		if p.DstHost != nil && p.SrcHost != nil {
			return nodeCalls{}, backend.Errorf(backend.ErrNotSupported, "host-to-host copies are not supported on the cuda backend")
		}
		mp := driver.Memcpy{SrcHost: p.SrcHost, SrcDevice: p.Src, DstHost: p.DstHost, DstDevice: p.Dst, Size: uint64(p.Size)}
		return nodeCalls{
			add: func(g uintptr, deps []uintptr) (uintptr, error) {
				return drv.GraphAddMemcpyNode(cm, g, deps, mp, d.ctx)
			},
			setParams: func(_, n uintptr) error { return drv.GraphMemcpyNodeSetParams(cm, n, mp) },
			setExe:    func(e, n uintptr) error { return drv.GraphExecMemcpyNodeSetParams(cm, e, n, mp, d.ctx) },
		}, nil
	case backend.NodeHost:
		hp := driver.HostNodeParams{Fn: hostCallbackPtr(), UserData: d.registerHostFunc(op.Host, false)}
		return nodeCalls{
			add:       func(g uintptr, deps []uintptr) (uintptr, error) { return drv.GraphAddHostNode(cm, g, deps, hp) },
			setParams: func(_, n uintptr) error { return drv.GraphHostNodeSetParams(cm, n, hp) },
			setExe:    func(e, n uintptr) error { return drv.GraphExecHostNodeSetParams(cm, e, n, hp) },
		}, nil
	case backend.NodeExtSemSignal:
		es := extSems(op.Sems, op.Values)
		return nodeCalls{
			add: func(g uintptr, deps []uintptr) (uintptr, error) {
				return drv.GraphAddExternalSemaphoresSignalNode(cm, g, deps, es)
			},
			setParams: func(_, n uintptr) error { return drv.GraphExternalSemaphoresSignalNodeSetParams(cm, n, es) },
			setExe:    func(e, n uintptr) error { return drv.GraphExecExternalSemaphoresSignalNodeSetParams(cm, e, n, es) },
		}, nil
	case backend.NodeExtSemWait:
		es := extSems(op.Sems, op.Values)
		return nodeCalls{
			add: func(g uintptr, deps []uintptr) (uintptr, error) {
				return drv.GraphAddExternalSemaphoresWaitNode(cm, g, deps, es)
			},
			setParams: func(_, n uintptr) error { return drv.GraphExternalSemaphoresWaitNodeSetParams(cm, n, es) },
			setExe:    func(e, n uintptr) error { return drv.GraphExecExternalSemaphoresWaitNodeSetParams(cm, e, n, es) },
		}, nil
	}
	return nodeCalls{}, backend.Errorf(backend.ErrNotSupported, "node type %d is not supported on the cuda backend yet", op.Type)
}

// AddNode adds a node for op to graph g after deps.
func (d *Device) AddNode(g uintptr, deps []uintptr, op *backend.Op) (uintptr, error) {
	var n uintptr
	err := d.Do(func() error {
		d.cm.Lock()
		defer d.cm.Unlock()
		c, err := d.calls(op)
		if err != nil {
			return err
		}
		n, err = c.add(g, deps)
		return err
	})
	return n, err
}

// SetNodeParams sets the parameters of node n of a graph
// (cuGraph*NodeSetParams); exec != 0 sets those of n in the executable
// graph exec instead (cuGraphExec*NodeSetParams).
func (d *Device) SetNodeParams(exec, n uintptr, op *backend.Op) error {
	return d.Do(func() error {
		d.cm.Lock()
		defer d.cm.Unlock()
		c, err := d.calls(op)
		if err != nil {
			return err
		}
		switch {
		case exec != 0 && c.setExe != nil:
			return c.setExe(exec, n)
		case c.setParams != nil: // as the graph's node: empty nodes have nothing to set
			return c.setParams(0, n)
		}
		return backend.Errorf(backend.ErrNotSupported, "changing node type %d is not supported on the cuda backend", op.Type)
	})
}

// AddChildGraphNode adds a node that runs a clone of child, and returns it
// with the driver's clone (the graph embedded in the node).
func (d *Device) AddChildGraphNode(g uintptr, deps []uintptr, child uintptr) (n, emb uintptr, err error) {
	err = d.Do(func() error {
		var err error
		if n, err = d.drv.GraphAddChildGraphNode(g, deps, child); err != nil {
			return err
		}
		emb, err = d.drv.GraphChildGraphNodeGetGraph(n)
		return err
	})
	return n, emb, err
}

// SetChildGraph replaces the graph embedded in child graph node n with a
// clone of child (cuGraphNodeSetParams), and returns the driver's clone;
// exec != 0 sets it in the executable graph exec instead (and returns 0).
func (d *Device) SetChildGraph(exec, n, child uintptr) (emb uintptr, err error) {
	err = d.Do(func() error {
		if exec != 0 {
			return d.drv.GraphExecChildGraphNodeSetParams(exec, n, child)
		}
		if err := d.drv.GraphNodeSetChildGraph(n, child); err != nil {
			return err
		}
		var err error
		emb, err = d.drv.GraphChildGraphNodeGetGraph(n)
		return err
	})
	return emb, err
}

// ChildGraph is the graph embedded in child graph node n.
func (d *Device) ChildGraph(n uintptr) (uintptr, error) {
	var g uintptr
	err := d.Do(func() error { var err error; g, err = d.drv.GraphChildGraphNodeGetGraph(n); return err })
	return g, err
}

// AddMemAllocNode adds an allocation node of size bytes resident on the
// device, accessible to the devices of access too, and returns it with the
// allocation's address (tracked for range checks).
func (d *Device) AddMemAllocNode(g uintptr, deps []uintptr, size int, access []int) (n uintptr, ptr uint64, err error) {
	ap := driver.MemAllocNodeParams{PoolProps: driver.MemPoolProps{AllocType: 1, LocationType: 1, LocationID: int32(d.ord)}, Bytesize: uint64(size)}
	for _, dev := range access {
		ap.Access = append(ap.Access, driver.MemAccessDesc{LocationType: 1, LocationID: int32(dev), Flags: 3})
	}
	err = d.Do(func() error {
		d.cm.Lock()
		defer d.cm.Unlock()
		var err error
		n, ptr, err = d.drv.GraphAddMemAllocNode(d.cm, g, deps, ap)
		return err
	})
	if err == nil {
		d.track(ptr, size)
		d.ownGraphMem(ptr)
	}
	return n, ptr, err
}

// AddMemFreeNode adds a node that frees the graph allocation at ptr.
func (d *Device) AddMemFreeNode(g uintptr, deps []uintptr, ptr uint64) (uintptr, error) {
	var n uintptr
	err := d.Do(func() error { var err error; n, err = d.drv.GraphAddMemFreeNode(g, deps, ptr); return err })
	return n, err
}

// CondHandleCreate is cuGraphConditionalHandleCreate.
func (d *Device) CondHandleCreate(g uintptr, def, flags uint32) (uint64, error) {
	var h uint64
	err := d.Do(func() error {
		var err error
		h, err = d.drv.GraphConditionalHandleCreate(g, d.ctx, def, flags)
		return err
	})
	return h, err
}

// AddConditionalNode adds a conditional node and returns it with its body
// graphs, which the driver creates.
func (d *Device) AddConditionalNode(g uintptr, deps []uintptr, handle uint64, typ, size int) (n uintptr, bodies []uintptr, err error) {
	err = d.Do(func() error {
		d.cm.Lock()
		defer d.cm.Unlock()
		cp := driver.ConditionalNodeParams{Handle: handle, Type: uint32(typ), Size: uint32(size), Ctx: d.ctx}
		var err error
		n, bodies, err = d.drv.GraphAddConditionalNode(d.cm, g, deps, cp)
		return err
	})
	return n, bodies, err
}

// AddEdges and RemoveEdges add or remove the edges from[i] -> to[i], with
// their data (nil: all default).
func (d *Device) AddEdges(g uintptr, from, to []uintptr, data []backend.EdgeData) error {
	ed := edgeData(data)
	return d.Do(func() error { return d.drv.GraphAddDependencies(g, from, to, ed) })
}

// RemoveEdges: see AddEdges.
func (d *Device) RemoveEdges(g uintptr, from, to []uintptr, data []backend.EdgeData) error {
	ed := edgeData(data)
	return d.Do(func() error { return d.drv.GraphRemoveDependencies(g, from, to, ed) })
}

// DestroyNode is cuGraphDestroyNode.
func (d *Device) DestroyNode(n uintptr) error {
	return d.Do(func() error { return d.drv.GraphDestroyNode(n) })
}

// CloneGraph is cuGraphClone.
func (d *Device) CloneGraph(g uintptr) (uintptr, error) {
	var c uintptr
	err := d.Do(func() error { var err error; c, err = d.drv.GraphClone(g); return err })
	d.own(kindGraph, c)
	return c, err
}

// FindInClone is cuGraphNodeFindInClone: the node of clone that is orig's
// clone.
func (d *Device) FindInClone(orig, clone uintptr) (uintptr, error) {
	var n uintptr
	err := d.Do(func() error { var err error; n, err = d.drv.GraphNodeFindInClone(orig, clone); return err })
	return n, err
}

// NodeInfo is what the driver says of a node: enough for the gpugraph
// package to mirror a graph the driver built (by capture).
type NodeInfo struct {
	Type     backend.NodeType
	Deps     []uintptr
	Data     []backend.EdgeData // parallel to Deps
	Ptr      uint64             // an alloc node's address, a free node's pointer
	Size     int                // an alloc node's size
	Location int                // an alloc node's resident device
	Access   []int              // an alloc node's peers with read-write access
	Name     string             // a kernel node's function name, where the driver says
	Pointers []uint64           // a kernel node's Pointer arguments (for functions of open devices), a memcpy node's device sides, a memset node's destination
}

// GraphNodes lists the nodes of g.
func (d *Device) GraphNodes(g uintptr) ([]uintptr, error) {
	var ns []uintptr
	err := d.Do(func() error { var err error; ns, err = d.drv.GraphGetNodes(g); return err })
	return ns, err
}

// NativeMemsetHeight returns the rows of memset node n, one the driver
// made (backend.NativeMemsets).
func (d *Device) NativeMemsetHeight(n uintptr) (int, error) {
	var h int
	err := d.Do(func() error {
		p, err := d.drv.GraphMemsetNodeParams(n)
		h = int(p.Height)
		return err
	})
	return h, err
}

// Node describes node n: its dependencies and, withParams, its type and
// the parameters gpugraph models.
func (d *Device) Node(n uintptr, withParams bool) (NodeInfo, error) {
	var info NodeInfo
	err := d.Do(func() error {
		deps, ed, err := d.drv.GraphNodeGetDependencies(n)
		if err != nil {
			return err
		}
		info.Deps, info.Data = deps, fromEdgeData(ed, len(deps))
		if !withParams {
			return nil
		}
		t, err := d.drv.GraphNodeGetType(n)
		if err != nil {
			return err
		}
		info.Type = backend.NodeType(t)
		switch info.Type {
		case backend.NodeMemAlloc:
			if p, err := d.drv.GraphMemAllocNodeGetParams(n); err == nil {
				info.Ptr, info.Size, info.Location = p.Dptr, int(p.Bytesize), int(p.PoolProps.LocationID)
				info.Access = peerAccess(p)
				// A captured alloc node's allocation, as an added one's,
				// is in the range checks and Close's to free if the
				// program leaves it live.
				d.track(p.Dptr, int(p.Bytesize))
				d.ownGraphMem(p.Dptr)
			}
		case backend.NodeMemFree:
			if ptr, err := d.drv.GraphMemFreeNodeGetParams(n); err == nil {
				info.Ptr = ptr
			}
		case backend.NodeKernel:
			info.Name, info.Pointers = d.kernelInfo(n)
		// A copy's and a memset's memory, a driver call each, matter only
		// while another device is open (whose memory they might use): the
		// read-back of a capture on one device skips them.
		case backend.NodeMemcpy:
			if d.OpenDevices() > 1 {
				info.Pointers, _ = d.drv.GraphMemcpyNodeDevicePtrs(n)
			}
		case backend.NodeMemset:
			if d.OpenDevices() > 1 {
				if p, err := d.drv.GraphMemsetNodeParams(n); err == nil {
					info.Pointers = []uint64{p.Dst}
				}
			}
		}
		return nil
	})
	return info, err
}

// kernelInfo returns kernel node n's function name (cuFuncGetName, or
// cuKernelGetName for library kernels; "" if the driver does not say) and
// the values of its Pointer arguments, when its function is one an open
// device loaded (its parameters known).
func (d *Device) kernelInfo(n uintptr) (name string, ptrs []uint64) {
	ka, err := d.drv.GraphKernelNodeArgs(n, func(fn uintptr) []int {
		if idx, ok := d.ptrArgs.Load(fn); ok {
			return idx.([]int)
		}
		for _, o := range openDevices.snapshot() { // a kernel of another device, captured in its stream
			if idx, ok := o.ptrArgs.Load(fn); ok {
				return idx.([]int)
			}
		}
		return nil
	})
	if err != nil {
		return "", nil
	}
	key, get := ka.Func, d.drv.FuncGetName
	if key == 0 {
		key, get = ka.Kern, d.drv.KernelGetName
	}
	if key == 0 {
		return "", ka.Args
	}
	if v, ok := d.names.Load(key); ok {
		return v.(string), ka.Args
	}
	if name, err = get(key); err != nil {
		return "", ka.Args
	}
	d.names.Store(key, name)
	return name, ka.Args
}

// Instantiate is cuGraphInstantiateWithParams: flags as
// cudaGraphInstantiateFlags, upload the stream of an upload flag (or
// nil). It returns the executable graph, the driver's result and the node
// it names, if any.
func (d *Device) Instantiate(g uintptr, flags uint64, upload backend.Stream) (exec uintptr, result int, errNode uintptr, err error) {
	ip := driver.GraphInstantiateParams{Flags: flags}
	if upload != nil {
		ip.UploadStream = upload.(*Stream).h
	}
	err = d.Do(func() error { var err error; exec, err = d.drv.InstantiateWithParams(g, &ip); return err })
	d.own(kindExec, exec)
	return exec, int(ip.Result), ip.ErrNode, err
}

// Launch launches the executable graph exec into s, with the context taken
// from the stream as for kernel launches.
func (d *Device) Launch(exec uintptr, s backend.Stream) error {
	st := s.(*Stream)
	if st.h == driver.StreamLegacy {
		return st.call(func() error { return st.l.GraphLaunch(exec, st.h) })
	}
	if err := st.l.GraphLaunch(exec, st.h); err != nil {
		return d.retry(err, func() error { return st.l.GraphLaunch(exec, st.h) })
	}
	return nil
}

// Upload is cuGraphUpload.
func (d *Device) Upload(exec uintptr, s backend.Stream) error {
	return d.Do(func() error { return d.drv.GraphUpload(exec, s.(*Stream).h) })
}

// UpdateInfo is cuGraphExecUpdate's result.
type UpdateInfo struct {
	Result           int
	ErrNode, ErrFrom uintptr
}

// Update is cuGraphExecUpdate of exec from g.
func (d *Device) Update(exec, g uintptr) (UpdateInfo, error) {
	var info driver.UpdateResultInfo
	err := d.bound(func() error { var err error; info, err = d.drv.GraphExecUpdate(exec, g); return err })
	return UpdateInfo{int(info.Result), info.ErrorNode, info.ErrorFromNode}, err
}

// SetEnabled is cuGraphNodeSetEnabled.
func (d *Device) SetEnabled(exec, n uintptr, on bool) error {
	return d.Do(func() error { return d.drv.GraphNodeSetEnabled(exec, n, on) })
}

// Enabled is cuGraphNodeGetEnabled.
func (d *Device) Enabled(exec, n uintptr) (bool, error) {
	var on bool
	err := d.Do(func() error { var err error; on, err = d.drv.GraphNodeGetEnabled(exec, n); return err })
	return on, err
}

// DestroyExec is cuGraphExecDestroy.
func (d *Device) DestroyExec(exec uintptr) error {
	d.disown(kindExec, exec)
	return d.bound(func() error { return d.drv.GraphExecDestroy(exec) })
}

// RetainUserObject is cuGraphRetainUserObject.
func (d *Device) RetainUserObject(g uintptr, o backend.UserObject, n int, flags uint) error {
	return d.Do(func() error { return d.drv.GraphRetainUserObject(g, o.(*UserObject).h, uint32(n), uint32(flags)) })
}

// ReleaseUserObject is cuGraphReleaseUserObject.
func (d *Device) ReleaseUserObject(g uintptr, o backend.UserObject, n int) error {
	return d.Do(func() error { return d.drv.GraphReleaseUserObject(g, o.(*UserObject).h, uint32(n)) })
}

// Stream capture is the driver's own: work anyone enqueues on the native
// stream is captured. Captures begin and end on the device's capture
// thread (onCaptureThread).

// BeginCapture is cuStreamBeginCapture.
func (s *Stream) BeginCapture(mode int) error {
	return Err(s.d.onCaptureThread(func() error { return s.d.drv.StreamBeginCapture(s.h, mode) }))
}

// BeginCaptureToGraph is cuStreamBeginCaptureToGraph: capture into g after
// deps.
func (s *Stream) BeginCaptureToGraph(g backend.Graph, deps []backend.Node, data []backend.EdgeData, mode int) error {
	ed, hs, gh := edgeData(data), handles(deps), g.(*Graph).h
	return Err(s.d.onCaptureThread(func() error {
		err := s.d.drv.StreamBeginCaptureToGraph(s.h, gh, hs, ed, mode)
		if err == nil {
			if s.d.captureInto == nil {
				s.d.captureInto = map[uintptr]uintptr{}
			}
			s.d.captureInto[s.h] = gh
		}
		return err
	}))
}

// EndCapture is cuStreamEndCapture; it returns the captured graph.
func (s *Stream) EndCapture() (backend.Graph, error) {
	g, into, err := s.d.endCapture(s.h)
	if err != nil {
		return nil, Err(err)
	}
	if g != into { // a graph the capture made: the device's until destroyed
		s.d.own(kindGraph, g)
	}
	return s.d.graphOf(g), nil
}

// endCapture is cuStreamEndCapture of stream h, on the capture thread; into
// is the graph the capture went into (BeginCaptureToGraph), or 0.
func (d *Device) endCapture(h uintptr) (g, into uintptr, err error) {
	err = d.onCaptureThread(func() error {
		var err error
		g, err = d.drv.StreamEndCapture(h)
		into = d.captureInto[h]
		delete(d.captureInto, h)
		return err
	})
	return g, into, err
}

// CaptureInfo is cuStreamGetCaptureInfo.
func (s *Stream) CaptureInfo() (backend.CaptureInfo, error) {
	var ci driver.CaptureInfo
	err := s.d.Do(func() error { var err error; ci, err = s.d.drv.StreamGetCaptureInfo(s.h); return err })
	if err != nil {
		return backend.CaptureInfo{}, err
	}
	info := backend.CaptureInfo{Status: ci.Status, ID: ci.ID, Data: fromEdgeData(ci.Data, len(ci.Deps))}
	if ci.Graph != 0 {
		info.Graph = s.d.graphOf(ci.Graph)
	}
	for _, h := range ci.Deps {
		info.Deps = append(info.Deps, Node(h))
	}
	return info, nil
}

// UpdateCaptureDependencies is cuStreamUpdateCaptureDependencies.
func (s *Stream) UpdateCaptureDependencies(deps []backend.Node, data []backend.EdgeData, flags uint32) error {
	ed, hs := edgeData(data), handles(deps)
	return s.d.Do(func() error { return s.d.drv.StreamUpdateCaptureDependencies(s.h, hs, ed, flags) })
}

// edgeData is the driver's form of data, nil when it is all default (the
// driver takes NULL for that).
func edgeData(data []backend.EdgeData) []driver.GraphEdgeData {
	def := true
	for _, x := range data {
		if x != (backend.EdgeData{}) {
			def = false
		}
	}
	if def {
		return nil
	}
	ed := make([]driver.GraphEdgeData, len(data))
	for i, x := range data {
		ed[i] = driver.GraphEdgeData{FromPort: x.FromPort, ToPort: x.ToPort, Type: x.Type}
	}
	return ed
}

// fromEdgeData is the edge data of n dependencies as the driver reports it
// (nil: all default).
func fromEdgeData(ed []driver.GraphEdgeData, n int) []backend.EdgeData {
	data := make([]backend.EdgeData, n)
	for i := range ed {
		data[i] = backend.EdgeData{FromPort: ed[i].FromPort, ToPort: ed[i].ToPort, Type: ed[i].Type}
	}
	return data
}

// peerAccess lists the devices other than the resident one that an alloc
// node maps read-write, sorted: the driver's descriptors as gpugraph's
// MemAllocParams.Access has them (the resident device implicit, as seed
// and driver both treat it).
func peerAccess(p driver.MemAllocNodeParams) []int {
	var devs []int
	for _, a := range p.Access {
		const device, readWrite = 1, 3
		if a.LocationType == device && a.Flags == readWrite && a.LocationID != p.PoolProps.LocationID {
			devs = append(devs, int(a.LocationID))
		}
	}
	slices.Sort(devs)
	return slices.Compact(devs)
}
