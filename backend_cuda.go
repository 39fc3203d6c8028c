package gpugraph

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda"
)

// BackendCUDA names the cuda backend in Open.
const BackendCUDA = "cuda"

// cudaDev is the cuda backend's device (internal/cuda): its devices,
// streams, events, pools, semaphores and user objects are reached through
// the backend interfaces, its graphs through methods named by driver
// handles, and this package keeps its view of each graph (the files
// backend_cuda*.go and *_cuda.go: lowering and that view's bookkeeping).
type cudaDev struct {
	*cuda.Device

	poolOnce sync.Once
	defPool  *MemPool // the device's default CUmemoryPool
}

func openCUDA() (*Device, error) {
	d := &Device{streams: map[*Stream]struct{}{}}
	cd, p, err := cuda.Open(func(err error) { d.fail(fromBackend("host function", err).(*Error)) })
	if err != nil {
		return nil, fromBackend("Open", err)
	}
	d.cuda = &cudaDev{Device: cd}
	d.props = Properties{
		Name: p.Name, Backend: BackendCUDA, DriverVersion: p.DriverVersion,
		MemoryPoolsSupported: p.MemoryPoolsSupported,
		TotalMem:             p.TotalMem,
		MultiProcessorCount:  p.MultiProcessorCount,
		MaxThreadsPerBlock:   p.MaxThreadsPerBlock,
		MaxBlockDim:          Dim3{p.MaxBlockDim[0], p.MaxBlockDim[1], p.MaxBlockDim[2]},
		MaxGridDim:           Dim3{p.MaxGridDim[0], p.MaxGridDim[1], p.MaxGridDim[2]},
		WarpSize:             p.WarpSize,
		SharedMemPerBlock:    p.SharedMemPerBlock,
	}
	return d, nil
}

// cudaErr reports err, a driver's or a backend's error or an *Error, as
// the public operation opName's.
func cudaErr(opName string, err error) error { return fromBackend(opName, cuda.Err(err)) }

// lowerKernel is k as the cuda backend sees it.
func lowerKernel(k *Kernel) backend.Kernel {
	return backend.Kernel{Key: k, Name: k.Name, Source: k.CUDA, DeviceRuntime: k.DeviceRuntime}
}

// checkRange reports whether [p, p+n) lies inside one live allocation.
func (c *cudaDev) checkRange(p DevicePtr, n int) error { return c.CheckRange(uint64(p), n) }

// cudaCopy checks a copy on the cuda backend (device sides inside live
// allocations) and lowers it.
func (d *Device) cudaCopy(p *MemcpyParams) (backend.Memcpy, *Code, string) {
	checkOnly := func(dev DevicePtr, n int) ([]byte, error) { return nil, d.cuda.checkRange(dev, n) }
	if _, _, msg := memcpySides(p, checkOnly); msg != "" {
		return backend.Memcpy{}, ErrInvalidValue, msg
	}
	return backend.Memcpy{Dst: uint64(p.Dst), Src: uint64(p.Src), DstHost: p.DstHost, SrcHost: p.SrcHost, Size: p.Size}, nil, ""
}

// cudaMemset checks a memset on the cuda backend and lowers it.
func (d *Device) cudaMemset(p *MemsetParams) (backend.Memset, *Code, string) {
	o, code, msg := d.memsetShape(p)
	if code != nil {
		return backend.Memset{}, code, msg
	}
	if o.total > 0 {
		if err := d.cuda.checkRange(p.Dst, o.total); err != nil {
			return backend.Memset{}, ErrInvalidValue, err.Error()
		}
	}
	return backend.Memset{Dst: uint64(p.Dst), Value: p.Value, ElementSize: p.ElementSize,
		Width: p.Width, Height: p.Height, Pitch: o.pitch, Total: o.total}, nil, ""
}

// Native graph nodes.

// cudaAddNode adds n's native node to g's native graph, after n's
// dependencies with data (nil: all default).
func (d *Device) cudaAddNode(g *Graph, n *Node, data []EdgeData) error {
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
		}
	case MemFreeParams:
		h, err = g.be.AddMemFreeNode(uint64(p.Ptr), deps, ed, n)
	case ConditionalParams:
		var bodies []backend.Graph
		if h, bodies, err = g.be.AddConditionalNode(backend.Cond{Handle: uint64(p.Handle), Type: int(p.Type), Bodies: p.Size}, deps, ed, n); err == nil {
			gs := make([]*Graph, len(bodies))
			for i, b := range bodies {
				gs[i] = &Graph{dev: d, id: graphIDs.Add(1), parent: n, be: b}
			}
			n.conds = &condNode{bodies: gs}
		}
	default:
		op, code, msg := d.cudaOp(n.params)
		if code != nil {
			return newErr("", code, "%s", msg)
		}
		h, err = g.be.AddNode(&op, deps, ed, n)
	}
	if err != nil {
		return cudaErr("", err)
	}
	n.be = h
	return nil
}

// cudaSetParams sets the parameters of n's native node to p.
func (d *Device) cudaSetParams(n *Node, params NodeParams) error {
	switch p := params.(type) {
	case ChildGraphParams:
		emb, err := n.g.be.SetChildGraph(n.be, p.Graph.be)
		if err != nil {
			return cudaErr("", err)
		}
		p.Graph.be = emb
		return cudaErr("", bindClone(p.Graph))
	case MemAllocParams, MemFreeParams:
		return newErr("", ErrNotSupported, "changing %v nodes is not supported on the cuda backend yet", n.typ)
	}
	op, code, msg := d.cudaOp(params)
	if code != nil {
		return newErr("", code, "%s", msg)
	}
	return cudaErr("", n.g.be.SetParams(n.be, &op))
}

// cudaOp checks params and lowers them to the backend's Op, for the node
// types whose parameters the driver sets.
func (d *Device) cudaOp(params NodeParams) (backend.Op, *Code, string) {
	switch p := params.(type) {
	case KernelParams:
		// The backend resolves (compiles) the function, once per kernel.
		k, code, msg := d.prepareKernel(&p)
		if code != nil {
			return backend.Op{}, code, msg
		}
		return backend.Op{Type: backend.NodeKernel, Launch: backend.Launch{Kernel: lowerKernel(k.k),
			Grid: dims(k.grid), Block: dims(k.block), Shared: uint32(k.shared), Args: k.args.w}}, nil, ""
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
		m, code, msg := d.cudaMemset(&p)
		if code != nil {
			return backend.Op{}, code, msg
		}
		return backend.Op{Type: backend.NodeMemset, Memset: m}, nil, ""
	case MemcpyParams:
		m, code, msg := d.cudaCopy(&p)
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
	return backend.Op{}, ErrNotSupported, fmt.Sprintf("%v nodes are not supported on the cuda backend yet", params.NodeType())
}

// codeOf is the code and detail of an *Error; nil for nil.
func codeOf(err error) (*Code, string) {
	var e *Error
	if !errors.As(err, &e) {
		return nil, ""
	}
	return e.Code, e.Detail
}

// bindClone gives the nodes of a Go clone the nodes of the driver's clone
// of the same graph (g.be), so the embedded graph of a child graph node can
// be edited like any other. Graphs embedded deeper keep no backend nodes.
func bindClone(g *Graph) error {
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
			return err
		}
		m.be = h
	}
	return nil
}

// Dispatch from the public API. Each runs after the API's own checks.

func (d *Device) cudaSynchronize() error { return cudaErr("Device.Synchronize", d.cuda.Synchronize()) }

func (d *Device) cudaMalloc(n int) (DevicePtr, error) {
	p, err := d.cuda.Malloc(n)
	if err != nil {
		return 0, cudaErr("Device.Malloc", err)
	}
	return DevicePtr(p), nil
}

func (d *Device) cudaFree(p DevicePtr) error {
	if err := d.cuda.Free(uint64(p)); err != nil {
		return cudaErr("Device.Free", err)
	}
	return nil
}

func (s *Stream) cudaMallocAsync(opName string, n int, pool *MemPool) (DevicePtr, error) {
	if pool.be == nil {
		return 0, newErr(opName, ErrMemoryAllocation, "the device's default memory pool could not be had from the driver")
	}
	p, err := s.dev.cuda.MallocAsync(s.be, n, pool.be)
	if err != nil {
		return 0, cudaErr(opName, err)
	}
	return DevicePtr(p), nil
}

func (s *Stream) cudaFreeAsync(opName string, p DevicePtr) error {
	return cudaErr(opName, s.dev.cuda.FreeAsync(s.be, uint64(p)))
}

func (d *Device) cudaGraphMemStats(opName string) (GraphMemStats, error) {
	st, err := d.cuda.GraphMemStats()
	return GraphMemStats(st), cudaErr(opName, err)
}

func (d *Device) cudaResetGraphMemHigh(opName string) error {
	return cudaErr(opName, d.cuda.ResetGraphMemHigh())
}

func (d *Device) cudaTrimGraphMem(opName string) error { return cudaErr(opName, d.cuda.TrimGraphMem()) }

func (d *Device) cudaMemcpySync(opName string, p *MemcpyParams) error {
	bp, code, msg := d.cudaCopy(p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return cudaErr(opName, d.cuda.Memcpy(&bp))
}

func (d *Device) cudaMemsetSync(opName string, p *MemsetParams) error {
	bp, code, msg := d.cudaMemset(p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return cudaErr(opName, d.cuda.Memset(&bp))
}

func (d *Device) cudaNewStream(s *Stream) error {
	be, err := d.cuda.NewStream()
	if err != nil {
		return cudaErr("Device.NewStream", err)
	}
	s.be = be
	return nil
}

func (d *Device) cudaNewEvent(e *Event) error {
	be, err := d.cuda.NewEvent(backend.EventFlags(e.flags & EventDisableTiming))
	if err != nil {
		return cudaErr("Device.NewEvent", err)
	}
	e.be = be
	return nil
}

func (d *Device) cudaNewGraph(g *Graph) error {
	be, err := d.cuda.NewGraph()
	g.be = be
	return cudaErr("Device.NewGraph", err)
}

func (d *Device) cudaEdges(opName string, g *Graph, edges []Edge, add bool) error {
	from, to := make([]backend.Node, len(edges)), make([]backend.Node, len(edges))
	for i, e := range edges {
		from[i], to[i] = e.From.be, e.To.be
	}
	ed := backendEdgeData(edgesData(edges))
	if add {
		return cudaErr(opName, g.be.AddEdges(from, to, ed))
	}
	return cudaErr(opName, g.be.RemoveEdges(from, to, ed))
}

func (d *Device) cudaDestroyNode(opName string, n *Node) error {
	return cudaErr(opName, n.g.be.DestroyNode(n.be))
}

func (d *Device) cudaDestroyGraph(g *Graph) {
	g.be.Destroy()
}

func (d *Device) cudaInstantiate(opName string, e *Exec, g *Graph, p *InstantiateParams) error {
	return d.cudaInstantiateWithParams(opName, e, g, p)
}

// cudaLaunch checks and marshals a launch into the stream's argument
// buffer (the backend copies the words at the call), so a stream launch
// allocates nothing (TestLaunchAllocs).
func (s *Stream) cudaLaunch(opName string, p *KernelParams) error {
	s.argMu.Lock()
	defer s.argMu.Unlock()
	if cap(s.args) < len(p.Args) {
		s.args = make([]uint64, 0, max(16, len(p.Args)))
	}
	s.args = s.args[:0]
	k, code, msg := s.dev.prepareKernelIn(p, &s.args)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	err := s.be.Launch(backend.Launch{Kernel: lowerKernel(k.k), Grid: dims(k.grid), Block: dims(k.block),
		Shared: uint32(k.shared), Args: k.args.w})
	if err != nil {
		return cudaErr(opName, err)
	}
	return nil
}

func dims(d Dim3) [3]uint32 { return [3]uint32{uint32(d.X), uint32(d.Y), uint32(d.Z)} }

func (s *Stream) cudaHostFunc(opName string, fn func()) error {
	return cudaErr(opName, s.be.HostFunc(fn))
}

func (s *Stream) cudaMemcpy(opName string, p *MemcpyParams) error {
	bp, code, msg := s.dev.cudaCopy(p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return cudaErr(opName, s.be.Memcpy(&bp))
}

func (s *Stream) cudaMemset(opName string, p *MemsetParams) error {
	bp, code, msg := s.dev.cudaMemset(p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return cudaErr(opName, s.be.Memset(&bp))
}

func (s *Stream) cudaRecord(opName string, e *Event) error { return cudaErr(opName, s.be.Record(e.be)) }

func (s *Stream) cudaWait(opName string, e *Event) error { return cudaErr(opName, s.be.Wait(e.be)) }

func (s *Stream) cudaSynchronize(opName string) error { return cudaErr(opName, s.be.Synchronize()) }

func (s *Stream) cudaQuery(opName string) error { return cudaErr(opName, s.be.Query()) }

func (s *Stream) cudaDestroy(opName string) error { return cudaErr(opName, s.be.Destroy()) }

func (e *Event) cudaSynchronize(opName string) error { return cudaErr(opName, e.be.Synchronize()) }

func (e *Event) cudaQuery(opName string) error { return cudaErr(opName, e.be.Query()) }

func (e *Event) cudaDestroy(opName string) error { return cudaErr(opName, e.be.Destroy()) }

func cudaElapsed(opName string, start, end *Event) (time.Duration, error) {
	d, err := end.be.ElapsedTime(start.be)
	return d, cudaErr(opName, err)
}

func (e *Exec) cudaLaunch(opName string, s *Stream) error {
	return cudaErr(opName, e.be.Launch(s.be))
}

// cudaUpdate is cuGraphExecUpdate; the result's nodes are found in g.
func (e *Exec) cudaUpdate(opName string, g *Graph) (UpdateResultInfo, error) {
	info, err := e.be.Update(g.be)
	err = cudaErr(opName, err)
	g.mu.Lock()
	res := UpdateResultInfo{Result: UpdateResult(info.Result), ErrorNode: findNative(g, info.ErrorNode), ErrorFromNode: findNative(g, info.ErrFrom)}
	g.mu.Unlock()
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			c := ge.at(ge.Op, res.ErrorNode)
			c.Detail = res.Result.String() + ": " + c.Detail
			return res, c
		}
	}
	return res, err
}

// findNative finds the node of g (or of a graph embedded in it) whose
// backend node is h. g must be locked.
func findNative(g *Graph, h backend.Node) *Node {
	if h == nil {
		return nil
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

// cudaSetParams changes n's parameters in e (cuGraphExec*NodeSetParams).
func (e *Exec) cudaSetParams(opName string, n *Node, p NodeParams) error {
	var err error
	if cp, ok := p.(ChildGraphParams); ok {
		err = cudaErr("", e.be.SetChildGraph(n.be, cp.Graph.be))
	} else {
		op, code, msg := e.dev.cudaOp(p)
		if code != nil {
			return nodeErr(opName, n, code, "%s", msg)
		}
		err = cudaErr("", e.be.SetParams(n.be, &op))
	}
	var ge *Error
	if errors.As(err, &ge) {
		return ge.at(opName, n)
	}
	return err
}

func (e *Exec) cudaSetEnabled(opName string, n *Node, on bool) error {
	return cudaErr(opName, e.be.SetEnabled(n.be, on))
}

func (e *Exec) cudaEnabled(opName string, n *Node) (bool, error) {
	on, err := e.be.Enabled(n.be)
	return on, cudaErr(opName, err)
}

func (e *Exec) cudaUpload(opName string, s *Stream) error {
	return cudaErr(opName, e.be.Upload(s.be))
}

func (e *Exec) cudaDestroy(opName string) error {
	return cudaErr(opName, e.be.Destroy())
}

func (s *Stream) cudaBeginCapture(opName string, mode CaptureMode) error {
	return cudaErr(opName, s.be.(backend.Capturer).BeginCapture(int(mode)))
}

func (s *Stream) cudaEndCapture(opName string) (*Graph, error) {
	h, err := s.be.(backend.Capturer).EndCapture()
	into := s.capInto
	s.capInto = nil
	if err != nil {
		return nil, cudaErr(opName, err)
	}
	g := into
	if g == nil {
		g = &Graph{dev: s.dev, id: graphIDs.Add(1), be: h}
	} else {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	if err := mirror(g); err != nil {
		return nil, cudaErr(opName, err)
	}
	return g, nil
}

// mirror brings the Go view of a native graph up to date: nodes the Go
// side knows keep their identity, nodes the driver added (by capture) are
// appended in the driver's order with NativeNodeParams, and every node's
// dependencies are read back. g must be locked or not yet shared.
func mirror(g *Graph) error {
	in := g.be.(backend.Inspector)
	handles, err := in.Nodes()
	if err != nil {
		return err
	}
	byHandle := map[backend.Node]*Node{}
	g.edata = nil
	for _, node := range g.nodes {
		byHandle[node.be] = node
		node.deps, node.outs = nil, nil
	}
	infos := map[backend.Node]backend.NodeInfo{}
	for _, h := range handles {
		known := byHandle[h] != nil
		info, err := in.Node(h, !known)
		if err != nil {
			return err
		}
		infos[h] = info
		if known {
			continue
		}
		t := NodeType(info.Type)
		node := &Node{g: g, id: g.nextID, typ: t, params: nativeParams(t, info), be: h}
		g.nextID++
		byHandle[h] = node
		g.nodes = append(g.nodes, node)
	}
	for _, node := range g.nodes {
		info, ok := infos[node.be]
		if !ok { // a node the driver no longer lists
			if info, err = in.Node(node.be, false); err != nil {
				return err
			}
		}
		for i, d := range info.Deps {
			if dn := byHandle[d]; dn != nil {
				node.deps = append(node.deps, dn)
				dn.outs = append(dn.outs, node)
				g.setEdgeDataLocked(dn, node, fromBackendEdgeData(info.Data[i]))
			}
		}
	}
	return nil
}

// nativeParams are the parameters of a node the driver made where gpugraph
// models them (memory nodes: their address and size, which graph memory
// accounting and layouts need); others stay NativeNodeParams.
func nativeParams(t NodeType, info backend.NodeInfo) NodeParams {
	switch t {
	case NodeMemAlloc:
		if info.Ptr != 0 {
			return MemAllocParams{Size: info.Size, Location: info.Location, Ptr: DevicePtr(info.Ptr)}
		}
	case NodeMemFree:
		if info.Ptr != 0 {
			return MemFreeParams{Ptr: DevicePtr(info.Ptr)}
		}
	case NodeKernel:
		return NativeNodeParams{Type: t, Node: info.Handle, Name: info.Name}
	}
	return NativeNodeParams{Type: t, Node: info.Handle}
}

// cudaBeginCaptureToGraph captures into g after deps.
func (s *Stream) cudaBeginCaptureToGraph(opName string, g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	hs := make([]backend.Node, len(deps))
	for i, n := range deps {
		hs[i] = n.be
	}
	err := s.be.(backend.Capturer).BeginCaptureToGraph(g.be, hs, backendEdgeData(data), int(mode))
	if err != nil {
		return cudaErr(opName, err)
	}
	s.capInto = g
	return nil
}

// cudaUpdateCaptureDependencies sets or adds to the capture's dependencies.
func (s *Stream) cudaUpdateCaptureDependencies(opName string, nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	hs := make([]backend.Node, len(nodes))
	for i, n := range nodes {
		hs[i] = n.be
	}
	return cudaErr(opName, s.be.(backend.Capturer).UpdateCaptureDependencies(hs, backendEdgeData(data), uint32(flags)))
}

// cudaClone clones g natively; the clone's nodes keep the originals'
// parameters and ids, found with cuGraphNodeFindInClone.
func (g *Graph) cudaClone(opName string) (*Graph, error) {
	cl := &Graph{dev: g.dev, id: graphIDs.Add(1), nextID: g.nextID, sinkSeq: g.sinkSeq, clonedBy: map[*Node]*Node{}}
	err := func() error {
		var err error
		if cl.be, err = g.be.Clone(); err != nil {
			return err
		}
		for _, n := range g.nodes {
			h, err := cl.be.ClonedNode(n.be)
			if err != nil {
				return err
			}
			m := &Node{g: cl, id: n.id, typ: n.typ, params: copyParams(n.params), be: h, sink: n.sink}
			if n.child != nil {
				m.child = &Graph{dev: g.dev, id: graphIDs.Add(1), parent: m}
				if m.child.be, err = cl.be.(backend.Inspector).ChildGraph(h); err != nil {
					return err
				}
				if err := mirror(m.child); err != nil {
					return err
				}
				m.params = ChildGraphParams{m.child}
			}
			cl.clonedBy[n] = m
			cl.nodes = append(cl.nodes, m)
		}
		return mirror(cl) // dependencies
	}()
	if err != nil {
		return nil, cudaErr(opName, err)
	}
	return cl, nil
}

// cudaCaptureInfo reports a native capture. Graph is a Go view of the graph
// being built, made for this call; Dependencies are nodes of that view.
func (s *Stream) cudaCaptureInfo(opName string) (CaptureInfo, error) {
	ci, err := s.be.(backend.Capturer).CaptureInfo()
	if err != nil {
		return CaptureInfo{}, cudaErr(opName, err)
	}
	info := CaptureInfo{Status: CaptureStatus(ci.Status), ID: ci.ID}
	if ci.Status != int(CaptureStatusActive) || ci.Graph == nil {
		return info, nil
	}
	g := &Graph{dev: s.dev, id: graphIDs.Add(1), be: ci.Graph}
	if err := mirror(g); err != nil {
		return CaptureInfo{}, cudaErr(opName, err)
	}
	info.Graph = g
	if n := len(ci.Deps); n > 0 {
		data := fromBackendEdgeDataAll(ci.Data)
		for i, h := range ci.Deps {
			for _, node := range g.nodes {
				if node.be == h {
					info.Dependencies = append(info.Dependencies, node)
					info.DependencyData = append(info.DependencyData, data[i])
				}
			}
		}
		if defaultData(info.DependencyData) {
			info.DependencyData = nil
		}
	}
	return info, nil
}

// Memory pools on the cuda backend are the driver's (CUmemoryPool).

func (d *Device) cudaDefaultPool() *MemPool {
	c := d.cuda
	c.poolOnce.Do(func() {
		c.defPool = &MemPool{dev: d, isDefault: true}
		if be, err := c.DefaultMemPool(); err == nil {
			c.defPool.be = be
		}
	})
	return c.defPool
}

func (d *Device) cudaNewMemPool(opName string, props MemPoolProps) (*MemPool, error) {
	be, err := d.cuda.NewMemPool(props.Location, props.MaxSize)
	if err != nil {
		return nil, cudaErr(opName, err)
	}
	return &MemPool{dev: d, props: props, be: be}, nil
}
