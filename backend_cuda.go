package gpugraph

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// BackendCUDA names the cuda backend in Open.
const BackendCUDA = "cuda"

// cudaDev is a device of the cuda backend: the same API on an NVIDIA GPU
// through the driver API. Streams, events, graphs and executable graphs
// are the driver's own, so launches cost what native launches cost and
// work enqueued on a stream's native handle by other libraries is ordered
// (and captured) with ours.
//
// Each call makes the device's primary context current on the calling OS
// thread and locks the goroutine to that thread for the call: a context is
// current per thread, and goroutines move between threads.
type cudaDev struct {
	drv          *driver.Driver
	ord          int
	ctx          uintptr
	major, minor int
	cm           *driver.CMem // kernel parameter arrays, one call at a time
	words        []uint64     // a stream launch's argument words; guarded by cm's lock

	capOnce  sync.Once
	capCalls chan func() // run on the OS thread that begins and ends captures

	poolOnce sync.Once
	defPool  *MemPool // the device's default CUmemoryPool

	mu     sync.Mutex
	funcs  map[*Kernel]uintptr
	fast   sync.Map    // *Kernel -> uintptr, read without the lock on every launch
	allocs []cudaAlloc // live cuMemAlloc allocations by address, for range checks
}

type cudaAlloc struct {
	p    DevicePtr
	size int
}

func openCUDA() (*Device, error) {
	const op = "Open"
	drv, err := driver.Load()
	if err != nil {
		return nil, newErr(op, ErrNoDevice, "%v", err)
	}
	n, err := drv.DeviceCount()
	if err != nil || n == 0 {
		return nil, newErr(op, ErrNoDevice, "no CUDA device: %v", err)
	}
	dev, err := drv.DeviceGet(0)
	if err != nil {
		return nil, cudaErr(op, err)
	}
	ctx, err := drv.PrimaryContext(dev)
	if err != nil {
		return nil, cudaErr(op, err)
	}
	cm, err := driver.NewCMem(1 << 20)
	if err != nil {
		return nil, newErr(op, ErrMemoryAllocation, "%v", err)
	}
	c := &cudaDev{drv: drv, ord: dev, ctx: ctx, cm: cm, funcs: map[*Kernel]uintptr{}}
	attr := func(a int) int { v, _ := drv.Attribute(a, dev); return v }
	c.major, c.minor = attr(driver.AttrComputeCapMajor), attr(driver.AttrComputeCapMinor)
	name, _ := drv.DeviceName(dev)
	mem, _ := drv.TotalMem(dev)
	d := &Device{
		props: Properties{
			Name: name, Backend: BackendCUDA, DriverVersion: drv.Version(),
			MemoryPoolsSupported: attr(driver.AttrMemoryPoolsSupported) != 0,
			TotalMem:             mem,
			MultiProcessorCount:  attr(driver.AttrMultiprocessorCount),
			MaxThreadsPerBlock:   attr(driver.AttrMaxThreadsPerBlock),
			MaxBlockDim:          Dim3{attr(driver.AttrMaxBlockDimX), attr(driver.AttrMaxBlockDimY), attr(driver.AttrMaxBlockDimZ)},
			MaxGridDim:           Dim3{attr(driver.AttrMaxGridDimX), attr(driver.AttrMaxGridDimY), attr(driver.AttrMaxGridDimZ)},
			WarpSize:             attr(driver.AttrWarpSize),
			SharedMemPerBlock:    attr(driver.AttrMaxSharedPerBlock),
		},
		cuda:    c,
		streams: map[*Stream]struct{}{},
	}
	return d, nil
}

// do runs f with the device's context current on a locked OS thread.
func (c *cudaDev) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.drv.SetCurrent(c.ctx); err != nil {
		return err
	}
	return f()
}

// cudaErr maps a driver error to the Code of the same name.
func cudaErr(opName string, err error) error {
	var r *driver.Result
	if !errors.As(err, &r) {
		return newErr(opName, ErrLaunchFailure, "%v", err)
	}
	code, ok := cudaCodes[r.Code]
	if !ok {
		code = backend.NewCode(r.Code, r.Name, "CUDA driver error")
	}
	return newErr(opName, code, "%s", r.Call)
}

// cudaCodes maps CUresult values to the Codes with CUDA runtime names.
var cudaCodes = map[int]*Code{
	1: ErrInvalidValue, 2: ErrMemoryAllocation, 100: ErrNoDevice, 101: ErrInvalidDevice,
	400: ErrInvalidResourceHandle, 401: ErrIllegalState, 600: ErrNotReady, 700: ErrIllegalAddress,
	701: ErrInvalidConfiguration, 709: ErrContextIsDestroyed, 719: ErrLaunchFailure, 801: ErrNotSupported,
	900: ErrStreamCaptureUnsupported, 901: ErrStreamCaptureInvalidated, 902: ErrStreamCaptureMerge,
	903: ErrStreamCaptureUnmatched, 904: ErrStreamCaptureUnjoined, 905: ErrStreamCaptureIsolation,
	906: ErrStreamCaptureImplicit, 907: ErrCapturedEvent, 908: ErrStreamCaptureWrongThread,
	402: ErrLossyQuery, 800: ErrNotPermitted, 910: ErrGraphExecUpdateFailure,
	500: ErrInvalidDeviceFunction, 218: ErrInvalidDeviceFunction, 209: ErrInvalidDeviceFunction,
}

// function returns k's CUDA function, compiling k.CUDA (CUDA C++ with NVRTC;
// PTX text and cubin images load as they are) on first use on this device.
func (c *cudaDev) function(k *Kernel) (uintptr, error) {
	if f, ok := c.fast.Load(k); ok {
		return f.(uintptr), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.funcs[k]; ok {
		return f, nil
	}
	var image []byte
	switch {
	case strings.HasPrefix(k.CUDA, "\x7fELF"): // a cubin
		image = []byte(k.CUDA)
	case strings.Contains(k.CUDA, ".entry") && strings.Contains(k.CUDA, ".version"): // PTX
		image = append([]byte(k.CUDA), 0)
	default:
		nv, err := driver.LoadNVRTC()
		if err != nil {
			return 0, err
		}
		src, opts := devRTSource(k)
		if image, err = nv.Compile(src, k.Name, c.major, c.minor, opts...); err != nil {
			return 0, fmt.Errorf("kernel %q: %v", k.Name, err)
		}
	}
	var f uintptr
	err := c.do(func() error {
		image, err := c.linkDevRT(k, image) // kernels that launch graphs
		if err != nil {
			return err
		}
		mod, err := c.drv.ModuleLoadData(image)
		if err != nil {
			return err
		}
		f, err = c.drv.ModuleGetFunction(mod, k.Name)
		return err
	})
	if err != nil {
		return 0, err
	}
	c.funcs[k] = f
	c.fast.Store(k, f)
	return f, nil
}

// checkRange reports whether [p, p+n) lies inside one live allocation.
func (c *cudaDev) checkRange(p DevicePtr, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.allocs), func(i int) bool { return c.allocs[i].p > p }) - 1
	if i < 0 || p+DevicePtr(n) > c.allocs[i].p+DevicePtr(c.allocs[i].size) {
		return fmt.Errorf("[%#x, +%d) is not inside a live allocation of this device", uint64(p), n)
	}
	return nil
}

func (c *cudaDev) malloc(n int) (DevicePtr, error) {
	var p uint64
	err := c.do(func() error { var err error; p, err = c.drv.MemAlloc(n); return err })
	if err != nil {
		return 0, err
	}
	c.track(DevicePtr(p), n)
	return DevicePtr(p), nil
}

// track records an allocation for the range checks of copies and memsets:
// cuMemAlloc, MallocAsync and graph allocations (whose addresses are fixed
// for their node's life).
func (c *cudaDev) track(p DevicePtr, n int) {
	c.mu.Lock()
	i := sort.Search(len(c.allocs), func(i int) bool { return c.allocs[i].p > p })
	c.allocs = append(c.allocs, cudaAlloc{})
	copy(c.allocs[i+1:], c.allocs[i:])
	if i > 0 && c.allocs[i-1].p == p { // an address reused (graph allocations)
		c.allocs = append(c.allocs[:i], c.allocs[i+1:]...)
		c.allocs[i-1].size = max(c.allocs[i-1].size, n)
	} else {
		c.allocs[i] = cudaAlloc{p, n}
	}
	c.mu.Unlock()
}

func (c *cudaDev) free(p DevicePtr) (bool, error) {
	c.mu.Lock()
	i := sort.Search(len(c.allocs), func(i int) bool { return c.allocs[i].p >= p })
	if i == len(c.allocs) || c.allocs[i].p != p {
		c.mu.Unlock()
		return false, nil
	}
	c.allocs = append(c.allocs[:i], c.allocs[i+1:]...)
	c.mu.Unlock()
	return true, c.do(func() error { return c.drv.MemFree(uint64(p)) })
}

// cudaKernel checks a launch for the cuda backend and resolves its function.
func (d *Device) cudaKernel(p *KernelParams) (kernelOp, uintptr, *Code, string) {
	k, code, msg := d.prepareKernel(p)
	if code != nil {
		return k, 0, code, msg
	}
	f, err := d.cuda.function(k.k)
	if err != nil {
		return k, 0, ErrInvalidDeviceFunction, err.Error()
	}
	return k, f, nil, ""
}

func dims(d Dim3) [3]uint32 { return [3]uint32{uint32(d.X), uint32(d.Y), uint32(d.Z)} }

// launch launches a kernel into a native stream. Stream-bound calls take
// their context from the stream (measured: cuLaunchKernel and cuGraphLaunch
// succeed with no current context), so the hot path makes no
// cuCtxSetCurrent call; only if the driver objects, because another
// context is current on this thread, is the call repeated with ours made
// current.
// c.cm is locked by the caller.
func (c *cudaDev) launch(k kernelOp, f, stream uintptr) error {
	params := c.cm.Params(k.args.w)
	err := c.drv.Launch(f, dims(k.grid), dims(k.block), uint32(k.shared), stream, params)
	if !contextError(err) {
		return err
	}
	return c.do(func() error {
		return c.drv.Launch(f, dims(k.grid), dims(k.block), uint32(k.shared), stream, params)
	})
}

// contextError reports a driver error that a current context would fix.
func contextError(err error) bool {
	if err == nil {
		return false // before r: errors.As moves r to the heap, on every launch
	}
	var r *driver.Result
	return errors.As(err, &r) && (r.Code == 201 || r.Code == 400 || r.Code == 709) // INVALID_CONTEXT, INVALID_HANDLE, CONTEXT_IS_DESTROYED
}

// cudaStreamOp is a checked copy or memset, to issue on a native stream.
type cudaStreamOp func(stream uintptr) error

// cudaCopy checks a copy on the cuda backend and returns the driver call of
// its direction.
func (d *Device) cudaCopy(p *MemcpyParams) (cudaStreamOp, *Code, string) {
	checkOnly := func(dev DevicePtr, n int) ([]byte, error) { return nil, d.cuda.checkRange(dev, n) }
	if _, _, msg := memcpySides(p, checkOnly); msg != "" {
		return nil, ErrInvalidValue, msg
	}
	drv, dst, src, size := d.cuda.drv, uint64(p.Dst), uint64(p.Src), p.Size
	switch p.Kind() {
	case "HtoD":
		host := p.SrcHost
		return func(s uintptr) error { return drv.MemcpyHtoDAsync(dst, host, size, s) }, nil, ""
	case "DtoH":
		host := p.DstHost
		return func(s uintptr) error { return drv.MemcpyDtoHAsync(host, src, size, s) }, nil, ""
	case "DtoD":
		return func(s uintptr) error { return drv.MemcpyDtoDAsync(dst, src, size, s) }, nil, ""
	}
	return nil, ErrNotSupported, "host-to-host copies are not supported on the cuda backend"
}

// cudaMemset checks a memset on the cuda backend and returns its driver
// call (cuMemsetD2D8Async, cuMemsetD2D16Async or cuMemsetD2D32Async).
func (d *Device) cudaMemset(p *MemsetParams) (cudaStreamOp, *Code, string) {
	o, code, msg := d.memsetShape(p)
	if code != nil {
		return nil, code, msg
	}
	if p.Height == 1 {
		// cuMemsetD2D* wants a pitch of at least a row even for one row.
		o.pitch = max(o.pitch, 1)
	}
	if o.total > 0 {
		if err := d.cuda.checkRange(p.Dst, o.total); err != nil {
			return nil, ErrInvalidValue, err.Error()
		}
	}
	drv, dst, pitch, v, w, h := d.cuda.drv, uint64(p.Dst), uint64(o.pitch), p.Value, uint64(p.Width), uint64(p.Height)
	switch p.ElementSize {
	case 1:
		return func(s uintptr) error { return drv.MemsetD2D8Async(dst, pitch, uint8(v), w, h, s) }, nil, ""
	case 2:
		return func(s uintptr) error { return drv.MemsetD2D16Async(dst, pitch, uint16(v), w, h, s) }, nil, ""
	}
	return func(s uintptr) error { return drv.MemsetD2D32Async(dst, pitch, v, w, h, s) }, nil, ""
}

// Host functions run through one C callback; userData indexes hostFuncs.
var (
	hostCallbackOnce sync.Once
	hostCallback     uintptr
	hostFuncs        sync.Map // uintptr -> *hostFunc
	hostFuncIDs      atomic.Uintptr
)

type hostFunc struct {
	fn      func()
	oneShot bool
	dev     *Device
}

func cudaHostCallback() uintptr {
	hostCallbackOnce.Do(func() {
		hostCallback = purego.NewCallback(func(id uintptr) uintptr {
			v, ok := hostFuncs.Load(id)
			if !ok {
				return 0
			}
			h := v.(*hostFunc)
			if h.oneShot {
				hostFuncs.Delete(id)
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						h.dev.fail(newErr("host function", ErrLaunchFailure, "panic: %v", p))
					}
				}()
				h.fn()
			}()
			return 0
		})
	})
	return hostCallback
}

func registerHostFunc(d *Device, fn func(), oneShot bool) uintptr {
	id := hostFuncIDs.Add(1)
	hostFuncs.Store(id, &hostFunc{fn, oneShot, d})
	return id
}

// Native graph nodes.

// cudaAddNode adds n's native node to g's native graph.
func (d *Device) cudaAddNode(g *Graph, n *Node) error { return d.cudaNode(g, n, n.params, false, 0) }

// cudaSetParams sets the parameters of n's native node to p.
func (d *Device) cudaSetParams(n *Node, p NodeParams) error { return d.cudaNode(n.g, n, p, true, 0) }

// cudaNode makes n's native node from params, or with set, changes the
// parameters of the existing one (cuGraph*NodeSetParams), or with set and
// exec, those of n in the executable graph exec (cuGraphExec*NodeSetParams).
func (d *Device) cudaNode(g *Graph, n *Node, params NodeParams, set bool, exec uintptr) error {
	c := d.cuda
	deps := make([]uintptr, len(n.deps))
	for i, x := range n.deps {
		deps[i] = x.cu
	}
	h := n.cu // kept when only parameters are set
	err := c.do(func() error {
		if set {
			switch p := params.(type) {
			case ChildGraphParams:
				if exec != 0 {
					return c.drv.GraphExecChildGraphNodeSetParams(exec, n.cu, p.Graph.cu)
				}
				return c.setChild(n, p.Graph)
			case MemAllocParams, MemFreeParams:
				return newErr("", ErrNotSupported, "changing %v nodes is not supported on the cuda backend yet", n.typ)
			}
		}
		// Each node type gives its driver calls: add the node, and where
		// the driver has them, set the parameters of a node of a graph
		// (setParams) or of an executable graph (setExec).
		var (
			add                func() (uintptr, error)
			setParams, setExec func() error
		)
		switch p := params.(type) {
		case KernelParams:
			k, f, code, msg := d.cudaKernel(&p)
			if code != nil {
				return newErr("", code, "%s", msg)
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			kp := driver.KernelNodeParams{Func: f, GridX: uint32(k.grid.X), GridY: uint32(k.grid.Y), GridZ: uint32(k.grid.Z),
				BlockX: uint32(k.block.X), BlockY: uint32(k.block.Y), BlockZ: uint32(k.block.Z),
				SharedMemBytes: uint32(k.shared), KernelParams: c.cm.Params(k.args.w)}
			add = func() (uintptr, error) { return c.drv.GraphAddKernelNode(c.cm, g.cu, deps, kp) }
			setParams = func() error { return c.drv.GraphKernelNodeSetParams(c.cm, n.cu, kp) }
			setExec = func() error { return c.drv.GraphExecKernelNodeSetParams(c.cm, exec, n.cu, kp) }
		case EmptyParams:
			add = func() (uintptr, error) { return c.drv.GraphAddEmptyNode(g.cu, deps) }
			setParams = func() error { return nil }
		case ChildGraphParams:
			add = func() (uintptr, error) {
				h, err := c.drv.GraphAddChildGraphNode(g.cu, deps, p.Graph.cu)
				if err == nil {
					var emb uintptr
					if emb, err = c.drv.GraphChildGraphNodeGetGraph(h); err == nil {
						p.Graph.cu = emb
						err = c.bindClone(p.Graph)
					}
				}
				return h, err
			}
		case EventRecordParams:
			if err := p.Event.check("", d); err != nil {
				return err
			}
			ev := p.Event.cu
			add = func() (uintptr, error) { return c.drv.GraphAddEventRecordNode(g.cu, deps, ev) }
			setParams = func() error { return c.drv.GraphEventRecordNodeSetEvent(n.cu, ev) }
			setExec = func() error { return c.drv.GraphExecEventRecordNodeSetEvent(exec, n.cu, ev) }
		case EventWaitParams:
			if err := p.Event.check("", d); err != nil {
				return err
			}
			ev := p.Event.cu
			add = func() (uintptr, error) { return c.drv.GraphAddEventWaitNode(g.cu, deps, ev) }
			setParams = func() error { return c.drv.GraphEventWaitNodeSetEvent(n.cu, ev) }
			setExec = func() error { return c.drv.GraphExecEventWaitNodeSetEvent(exec, n.cu, ev) }
		case MemsetParams:
			o, code, msg := d.memsetShape(&p)
			if code == nil {
				_, code, msg = d.cudaMemset(&p)
			}
			if code != nil {
				return newErr("", code, "%s", msg)
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			mp := driver.MemsetNodeParams{Dst: uint64(p.Dst), Pitch: uint64(o.pitch), Value: p.Value,
				ElementSize: uint32(p.ElementSize), Width: uint64(p.Width), Height: uint64(p.Height)}
			add = func() (uintptr, error) { return c.drv.GraphAddMemsetNode(c.cm, g.cu, deps, mp, c.ctx) }
			setParams = func() error { return c.drv.GraphMemsetNodeSetParams(c.cm, n.cu, mp) }
			setExec = func() error { return c.drv.GraphExecMemsetNodeSetParams(c.cm, exec, n.cu, mp, c.ctx) }
		case MemcpyParams:
			if _, code, msg := d.cudaCopy(&p); code != nil {
				return newErr("", code, "%s", msg)
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			mp := driver.Memcpy{SrcHost: p.SrcHost, SrcDevice: uint64(p.Src), DstHost: p.DstHost, DstDevice: uint64(p.Dst), Size: uint64(p.Size)}
			add = func() (uintptr, error) { return c.drv.GraphAddMemcpyNode(c.cm, g.cu, deps, mp, c.ctx) }
			setParams = func() error { return c.drv.GraphMemcpyNodeSetParams(c.cm, n.cu, mp) }
			setExec = func() error { return c.drv.GraphExecMemcpyNodeSetParams(c.cm, exec, n.cu, mp, c.ctx) }
		case HostParams:
			if p.Fn == nil {
				return newErr("", ErrInvalidValue, "nil host function")
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			hp := driver.HostNodeParams{Fn: cudaHostCallback(), UserData: registerHostFunc(d, p.Fn, false)}
			add = func() (uintptr, error) { return c.drv.GraphAddHostNode(c.cm, g.cu, deps, hp) }
			setParams = func() error { return c.drv.GraphHostNodeSetParams(c.cm, n.cu, hp) }
			setExec = func() error { return c.drv.GraphExecHostNodeSetParams(c.cm, exec, n.cu, hp) }
		case MemAllocParams:
			c.cm.Lock()
			defer c.cm.Unlock()
			ap := driver.MemAllocNodeParams{PoolProps: driver.MemPoolProps{AllocType: 1, LocationType: 1, LocationID: int32(c.ord)}, Bytesize: uint64(p.Size)}
			for _, a := range p.Access {
				ap.Access = append(ap.Access, driver.MemAccessDesc{LocationType: 1, LocationID: int32(a.Device), Flags: 3})
			}
			add = func() (uintptr, error) {
				h, ptr, err := c.drv.GraphAddMemAllocNode(c.cm, g.cu, deps, ap)
				if err == nil {
					p.Ptr = DevicePtr(ptr)
					p.Access = append([]MemAccessDesc(nil), p.Access...)
					n.params = p
					c.track(p.Ptr, p.Size)
				}
				return h, err
			}
		case ExtSemaphoreSignalParams, ExtSemaphoreWaitParams:
			add = func() (uintptr, error) { return d.cudaAddExtSemNode(g.cu, deps, params) }
			setParams = func() error { return d.cudaSetExtSemNode(n.cu, params) }
		case MemFreeParams:
			add = func() (uintptr, error) { return c.drv.GraphAddMemFreeNode(g.cu, deps, uint64(p.Ptr)) }
		case ConditionalParams:
			add = func() (uintptr, error) { return d.cudaCondNode(g, n, p, deps) }
		default:
			return newErr("", ErrNotSupported, "%v nodes are not supported on the cuda backend yet", n.typ)
		}
		switch {
		case set && exec != 0 && setExec != nil:
			return setExec()
		case set && setParams != nil:
			return setParams()
		}
		var err error
		h, err = add()
		return err
	})
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return cudaErr("", err)
	}
	n.cu = h
	return nil
}

// setChild replaces the graph embedded in child graph node n with a clone of
// the native graph g.cu (cuGraphNodeSetParams, CU_GRAPH_NODE_TYPE_GRAPH),
// then points g, the Go clone, at the driver's clone.
func (c *cudaDev) setChild(n *Node, g *Graph) error {
	if err := c.drv.GraphNodeSetChildGraph(n.cu, g.cu); err != nil {
		return err
	}
	emb, err := c.drv.GraphChildGraphNodeGetGraph(n.cu)
	if err != nil {
		return err
	}
	g.cu = emb
	return c.bindClone(g)
}

// bindClone gives the nodes of a Go clone the handles of the driver's clone
// of the same graph (g.cu), so the embedded graph of a child graph node can
// be edited like any other. Graphs embedded deeper keep no handles.
func (c *cudaDev) bindClone(g *Graph) error {
	orig := make(map[*Node]*Node, len(g.clonedBy))
	for o, m := range g.clonedBy {
		orig[m] = o
	}
	for _, m := range g.nodes {
		o := orig[m]
		if o == nil || o.cu == 0 {
			continue
		}
		h, err := c.drv.GraphNodeFindInClone(o.cu, g.cu)
		if err != nil {
			return err
		}
		m.cu = h
	}
	return nil
}

// Dispatch from the public API. Each runs after the API's own checks.

func (d *Device) cudaSynchronize() error {
	return d.cuCall("Device.Synchronize", func() error { return d.cuda.drv.CtxSynchronize() })
}

// cuCall runs f in the device's context and maps its error.
func (d *Device) cuCall(opName string, f func() error) error {
	if err := d.cuda.do(f); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return withOp(opName, e)
		}
		return cudaErr(opName, err)
	}
	return nil
}

func (d *Device) cudaMalloc(n int) (DevicePtr, error) {
	p, err := d.cuda.malloc(n)
	if err != nil {
		return 0, cudaErr("Device.Malloc", err)
	}
	return p, nil
}

func (d *Device) cudaFree(p DevicePtr) error {
	ok, err := d.cuda.free(p)
	if !ok {
		// Graph allocations and MallocAsync memory are the driver's to
		// check: cuMemFree frees them (and refuses what is not live).
		err = d.cuda.do(func() error { return d.cuda.drv.MemFree(uint64(p)) })
	}
	if err != nil {
		return cudaErr("Device.Free", err)
	}
	return nil
}

func (s *Stream) cudaMallocAsync(opName string, n int, pool *MemPool) (DevicePtr, error) {
	var p uint64
	err := s.dev.cuCall(opName, func() error {
		var err error
		p, err = s.dev.cuda.drv.MemAllocFromPoolAsync(n, pool.cu, s.cu)
		return err
	})
	if err != nil {
		return 0, err
	}
	s.dev.cuda.track(DevicePtr(p), n)
	return DevicePtr(p), nil
}

func (s *Stream) cudaFreeAsync(opName string, p DevicePtr) error {
	return s.dev.cuCall(opName, func() error { return s.dev.cuda.drv.MemFreeAsync(uint64(p), s.cu) })
}

// Graph memory attributes (CUgraphMem_attribute).
const (
	graphMemUsedCurrent = iota
	graphMemUsedHigh
	graphMemReservedCurrent
	graphMemReservedHigh
)

func (d *Device) cudaGraphMemStats(opName string) (GraphMemStats, error) {
	var v [4]uint64
	err := d.cuCall(opName, func() error {
		for i := range v {
			var err error
			if v[i], err = d.cuda.drv.DeviceGetGraphMemAttribute(d.cuda.ord, i); err != nil {
				return err
			}
		}
		return nil
	})
	return GraphMemStats{UsedCurrent: v[graphMemUsedCurrent], UsedHigh: v[graphMemUsedHigh],
		ReservedCurrent: v[graphMemReservedCurrent], ReservedHigh: v[graphMemReservedHigh]}, err
}

func (d *Device) cudaResetGraphMemHigh(opName string) error {
	return d.cuCall(opName, func() error {
		for _, a := range []int{graphMemUsedHigh, graphMemReservedHigh} {
			if err := d.cuda.drv.DeviceSetGraphMemAttribute(d.cuda.ord, a, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

func (d *Device) cudaTrimGraphMem(opName string) error {
	return d.cuCall(opName, func() error { return d.cuda.drv.DeviceGraphMemTrim(d.cuda.ord) })
}

func (d *Device) cudaMemcpySync(opName string, p *MemcpyParams) error {
	call, code, msg := d.cudaCopy(p)
	return d.cudaSyncCall(opName, call, code, msg)
}

func (d *Device) cudaMemsetSync(opName string, p *MemsetParams) error {
	call, code, msg := d.cudaMemset(p)
	return d.cudaSyncCall(opName, call, code, msg)
}

// cudaSyncCall runs a checked async copy or memset synchronously, after all
// work on the device, as cudaMemcpy and cudaMemset do: in the legacy
// default stream (0).
func (d *Device) cudaSyncCall(opName string, call cudaStreamOp, code *Code, msg string) error {
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return d.cuCall(opName, func() error {
		if err := d.cuda.drv.CtxSynchronize(); err != nil {
			return err
		}
		if err := call(0); err != nil {
			return err
		}
		return d.cuda.drv.StreamSynchronize(0)
	})
}

func (d *Device) cudaNewStream(s *Stream) error {
	return d.cuCall("Device.NewStream", func() error {
		var err error
		s.cu, err = d.cuda.drv.StreamCreate(1) // CU_STREAM_NON_BLOCKING: no implicit legacy-stream sync
		return err
	})
}

func (d *Device) cudaNewEvent(e *Event) error {
	flags := 0
	if e.flags&EventDisableTiming != 0 {
		flags = 2 // CU_EVENT_DISABLE_TIMING
	}
	return d.cuCall("Device.NewEvent", func() error {
		var err error
		e.cu, err = d.cuda.drv.EventCreate(flags)
		return err
	})
}

func (d *Device) cudaNewGraph(g *Graph) error {
	return d.cuCall("Device.NewGraph", func() error {
		var err error
		g.cu, err = d.cuda.drv.GraphCreate()
		return err
	})
}

func (d *Device) cudaEdges(opName string, g *Graph, edges []Edge, add bool) error {
	from, to := make([]uintptr, len(edges)), make([]uintptr, len(edges))
	for i, e := range edges {
		from[i], to[i] = e.From.cu, e.To.cu
	}
	ed := cuEdgeData(edgesData(edges))
	return d.cuCall(opName, func() error {
		if add {
			return d.cuda.drv.GraphAddDependencies(g.cu, from, to, ed)
		}
		return d.cuda.drv.GraphRemoveDependencies(g.cu, from, to, ed)
	})
}

func (d *Device) cudaDestroyNode(opName string, n *Node) error {
	return d.cuCall(opName, func() error { return d.cuda.drv.GraphDestroyNode(n.cu) })
}

func (d *Device) cudaDestroyGraph(g *Graph) {
	d.cuCall("Graph.Destroy", func() error { return d.cuda.drv.GraphDestroy(g.cu) })
}

func (d *Device) cudaInstantiate(opName string, e *Exec, g *Graph, p *InstantiateParams) error {
	return d.cudaInstantiateWithParams(opName, e, g, p)
}

// cudaLaunch marshals the arguments into c.words, a buffer kept for it
// under c.cm's lock: the driver copies them at the call, so a stream launch
// allocates nothing (TestLaunchAllocs).
func (s *Stream) cudaLaunch(opName string, p *KernelParams) error {
	d, c := s.dev, s.dev.cuda
	c.cm.Lock()
	defer c.cm.Unlock()
	if cap(c.words) < len(p.Args) {
		c.words = make([]uint64, 0, max(16, len(p.Args)))
	}
	c.words = c.words[:0]
	k, code, msg := d.prepareKernelIn(p, &c.words)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	f, err := c.function(k.k)
	if err != nil {
		return newErr(opName, ErrInvalidDeviceFunction, "%s", err.Error())
	}
	if err := c.launch(k, f, s.cu); err != nil {
		return cudaErr(opName, err)
	}
	return nil
}

func (s *Stream) cudaHostFunc(opName string, fn func()) error {
	id := registerHostFunc(s.dev, fn, true)
	return s.dev.cuCall(opName, func() error {
		return s.dev.cuda.drv.LaunchHostFunc(s.cu, cudaHostCallback(), id)
	})
}

func (s *Stream) cudaMemcpy(opName string, p *MemcpyParams) error {
	call, code, msg := s.dev.cudaCopy(p)
	return s.cudaStreamOp(opName, call, code, msg)
}

func (s *Stream) cudaMemset(opName string, p *MemsetParams) error {
	call, code, msg := s.dev.cudaMemset(p)
	return s.cudaStreamOp(opName, call, code, msg)
}

// cudaStreamOp issues a checked copy or memset into the native stream.
func (s *Stream) cudaStreamOp(opName string, call cudaStreamOp, code *Code, msg string) error {
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return s.dev.cuCall(opName, func() error { return call(s.cu) })
}

// streamCall makes a stream-bound driver call without making the context
// current (the driver takes it from the stream, as for launches), and again
// with it only if the driver objects.
func (s *Stream) streamCall(opName string, call func() error) error {
	err := call()
	if contextError(err) {
		err = s.dev.cuda.do(call)
	}
	if err != nil {
		return cudaErr(opName, err)
	}
	return nil
}

func (s *Stream) cudaRecord(opName string, e *Event) error {
	return s.streamCall(opName, func() error { return s.dev.cuda.drv.EventRecord(e.cu, s.cu) })
}

func (s *Stream) cudaWait(opName string, e *Event) error {
	return s.streamCall(opName, func() error { return s.dev.cuda.drv.StreamWaitEvent(s.cu, e.cu, 0) })
}

func (s *Stream) cudaSynchronize(opName string) error {
	return s.streamCall(opName, func() error { return s.dev.cuda.drv.StreamSynchronize(s.cu) })
}

func (s *Stream) cudaQuery(opName string) error {
	return s.streamCall(opName, func() error { return s.dev.cuda.drv.StreamQuery(s.cu) })
}

func (s *Stream) cudaDestroy(opName string) error {
	return s.dev.cuCall(opName, func() error { return s.dev.cuda.drv.StreamDestroy(s.cu) })
}

func (e *Event) cudaSynchronize(opName string) error {
	return e.dev.cuCall(opName, func() error { return e.dev.cuda.drv.EventSynchronize(e.cu) })
}

func (e *Event) cudaQuery(opName string) error {
	return e.dev.cuCall(opName, func() error { return e.dev.cuda.drv.EventQuery(e.cu) })
}

func (e *Event) cudaDestroy(opName string) error {
	return e.dev.cuCall(opName, func() error { return e.dev.cuda.drv.EventDestroy(e.cu) })
}

func cudaElapsed(opName string, start, end *Event) (float32, error) {
	var ms float32
	err := start.dev.cuCall(opName, func() error {
		var err error
		ms, err = start.dev.cuda.drv.ElapsedTime(start.cu, end.cu)
		return err
	})
	return ms, err
}

func (e *Exec) cudaLaunch(opName string, s *Stream) error {
	c := e.dev.cuda
	err := c.drv.GraphLaunch(e.cu, s.cu) // context from the stream, as launch
	if contextError(err) {
		err = c.do(func() error { return c.drv.GraphLaunch(e.cu, s.cu) })
	}
	if err != nil {
		return cudaErr(opName, err)
	}
	return nil
}

// cudaUpdate is cuGraphExecUpdate; the result's nodes are found in g.
func (e *Exec) cudaUpdate(opName string, g *Graph) (UpdateResultInfo, error) {
	var info driver.UpdateResultInfo
	err := e.dev.cuCall(opName, func() error {
		var err error
		info, err = e.dev.cuda.drv.GraphExecUpdate(e.cu, g.cu)
		return err
	})
	g.mu.Lock()
	res := UpdateResultInfo{Result: UpdateResult(info.Result), ErrorNode: findNative(g, info.ErrorNode), ErrorFromNode: findNative(g, info.ErrorFromNode)}
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

// findNative finds the node of g (or of a graph embedded in it) with native
// handle h. g must be locked.
func findNative(g *Graph, h uintptr) *Node {
	if h == 0 {
		return nil
	}
	for _, n := range g.nodes {
		if n.cu == h {
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
	if err := e.dev.cudaNode(n.g, n, p, true, e.cu); err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			return ge.at(opName, n)
		}
		return err
	}
	return nil
}

func (e *Exec) cudaSetEnabled(opName string, n *Node, on bool) error {
	return e.dev.cuCall(opName, func() error { return e.dev.cuda.drv.GraphNodeSetEnabled(e.cu, n.cu, on) })
}

func (e *Exec) cudaEnabled(opName string, n *Node) (bool, error) {
	var on bool
	err := e.dev.cuCall(opName, func() error {
		var err error
		on, err = e.dev.cuda.drv.GraphNodeGetEnabled(e.cu, n.cu)
		return err
	})
	return on, err
}

func (e *Exec) cudaUpload(opName string, s *Stream) error {
	return e.dev.cuCall(opName, func() error { return e.dev.cuda.drv.GraphUpload(e.cu, s.cu) })
}

func (e *Exec) cudaDestroy(opName string) error {
	return e.dev.cuCall(opName, func() error { return e.dev.cuda.drv.GraphExecDestroy(e.cu) })
}

// onCaptureThread runs f on the device's capture thread. Stream capture on
// the cuda backend is the driver's own: work anyone enqueues on the native
// stream, gpugraph or another library, is captured. The driver ties global
// and thread-local captures to the OS thread that began them, and
// goroutines move between threads, so every capture begins and ends on one
// OS thread per device, owned by a goroutine.
func (c *cudaDev) onCaptureThread(f func() error) error {
	c.capOnce.Do(func() {
		c.capCalls = make(chan func(), 1)
		go func() {
			runtime.LockOSThread()
			c.drv.SetCurrent(c.ctx)
			for f := range c.capCalls {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	c.capCalls <- func() { done <- f() }
	return <-done
}

func (s *Stream) cudaBeginCapture(opName string, mode CaptureMode) error {
	c := s.dev.cuda
	err := c.onCaptureThread(func() error { return c.drv.StreamBeginCapture(s.cu, int(mode)) })
	if err != nil {
		return cudaErr(opName, err)
	}
	return nil
}

func (s *Stream) cudaEndCapture(opName string) (*Graph, error) {
	c := s.dev.cuda
	var h uintptr
	err := c.onCaptureThread(func() error { var err error; h, err = c.drv.StreamEndCapture(s.cu); return err })
	into := s.capInto
	s.capInto = nil
	if err != nil {
		return nil, cudaErr(opName, err)
	}
	g := into
	if g == nil {
		g = &Graph{dev: s.dev, id: graphIDs.Add(1), cu: h}
	} else {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	if err := c.do(func() error { return c.mirror(g) }); err != nil {
		return nil, cudaErr(opName, err)
	}
	return g, nil
}

// mirror brings the Go view of a native graph up to date: nodes the Go
// side knows keep their identity, nodes the driver added (by capture) are
// appended in the driver's order with NativeNodeParams, and every node's
// dependencies are read back. g must be locked or not yet shared.
func (c *cudaDev) mirror(g *Graph) error {
	handles, err := c.drv.GraphGetNodes(g.cu)
	if err != nil {
		return err
	}
	byHandle := map[uintptr]*Node{}
	g.edata = nil
	for _, node := range g.nodes {
		byHandle[node.cu] = node
		node.deps, node.outs = nil, nil
	}
	for _, h := range handles {
		if byHandle[h] != nil {
			continue
		}
		t, err := c.drv.GraphNodeGetType(h)
		if err != nil {
			return err
		}
		node := &Node{g: g, id: g.nextID, typ: NodeType(t), params: c.nativeParams(NodeType(t), h), cu: h}
		g.nextID++
		byHandle[h] = node
		g.nodes = append(g.nodes, node)
	}
	for _, node := range g.nodes {
		deps, data, err := c.nodeDeps(node.cu)
		if err != nil {
			return err
		}
		for i, d := range deps {
			if dn := byHandle[d]; dn != nil {
				node.deps = append(node.deps, dn)
				dn.outs = append(dn.outs, node)
				g.setEdgeDataLocked(dn, node, data[i])
			}
		}
	}
	return nil
}

// nodeDeps returns a native node's dependencies and the data of their
// edges (asking without the data fails with CUDA_ERROR_LOSSY_QUERY when
// some is not default).
// nativeParams reads back the parameters of a node the driver made where
// gpugraph models them (memory nodes: their address and size, which graph
// memory accounting and layouts need); others stay NativeNodeParams.
func (c *cudaDev) nativeParams(t NodeType, h uintptr) NodeParams {
	switch t {
	case NodeMemAlloc:
		if p, err := c.drv.GraphMemAllocNodeGetParams(h); err == nil {
			return MemAllocParams{Size: int(p.Bytesize), Location: int(p.PoolProps.LocationID), Ptr: DevicePtr(p.Dptr)}
		}
	case NodeMemFree:
		if ptr, err := c.drv.GraphMemFreeNodeGetParams(h); err == nil {
			return MemFreeParams{Ptr: DevicePtr(ptr)}
		}
	case NodeKernel:
		return NativeNodeParams{Type: t, Node: h, Name: c.kernelName(h)}
	}
	return NativeNodeParams{Type: t, Node: h}
}

// kernelName is the function name of kernel node h (cuFuncGetName, or
// cuKernelGetName for library kernels), or "" if the driver does not say.
func (c *cudaDev) kernelName(h uintptr) string {
	p, err := c.drv.GraphKernelNodeGetParams(h)
	if err != nil {
		return ""
	}
	var name string
	switch {
	case p.Func != 0:
		name, err = c.drv.FuncGetName(p.Func)
	case p.Kern != 0:
		name, err = c.drv.KernelGetName(p.Kern)
	}
	if err != nil {
		return ""
	}
	return name
}

func (c *cudaDev) nodeDeps(h uintptr) ([]uintptr, []EdgeData, error) {
	deps, ed, err := c.drv.GraphNodeGetDependencies(h)
	return deps, fromCUEdgeData(ed), err
}

// cudaBeginCaptureToGraph captures into g after deps.
func (s *Stream) cudaBeginCaptureToGraph(opName string, g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	c := s.dev.cuda
	hs := make([]uintptr, len(deps))
	for i, n := range deps {
		hs[i] = n.cu
	}
	ed := cuEdgeData(data)
	err := c.onCaptureThread(func() error { return c.drv.StreamBeginCaptureToGraph(s.cu, g.cu, hs, ed, int(mode)) })
	if err != nil {
		return cudaErr(opName, err)
	}
	s.capInto = g
	return nil
}

// cudaUpdateCaptureDependencies sets or adds to the capture's dependencies.
func (s *Stream) cudaUpdateCaptureDependencies(opName string, nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	hs := make([]uintptr, len(nodes))
	for i, n := range nodes {
		hs[i] = n.cu
	}
	ed := cuEdgeData(data)
	return s.dev.cuCall(opName, func() error {
		return s.dev.cuda.drv.StreamUpdateCaptureDependencies(s.cu, hs, ed, uint32(flags))
	})
}

// cudaClone clones g natively; the clone's nodes keep the originals'
// parameters and ids, found with cuGraphNodeFindInClone.
func (g *Graph) cudaClone(opName string) (*Graph, error) {
	c := g.dev.cuda
	cl := &Graph{dev: g.dev, id: graphIDs.Add(1), nextID: g.nextID, sinkSeq: g.sinkSeq, clonedBy: map[*Node]*Node{}}
	err := c.do(func() error {
		var err error
		if cl.cu, err = c.drv.GraphClone(g.cu); err != nil {
			return err
		}
		for _, n := range g.nodes {
			h, err := c.drv.GraphNodeFindInClone(n.cu, cl.cu)
			if err != nil {
				return err
			}
			m := &Node{g: cl, id: n.id, typ: n.typ, params: copyParams(n.params), cu: h, sink: n.sink}
			if n.child != nil {
				m.child = &Graph{dev: g.dev, id: graphIDs.Add(1), parent: m}
				if m.child.cu, err = c.drv.GraphChildGraphNodeGetGraph(h); err != nil {
					return err
				}
				if err := c.mirror(m.child); err != nil {
					return err
				}
				m.params = ChildGraphParams{m.child}
			}
			cl.clonedBy[n] = m
			cl.nodes = append(cl.nodes, m)
		}
		return c.mirror(cl) // dependencies
	})
	if err != nil {
		return nil, cudaErr(opName, err)
	}
	return cl, nil
}

// cudaCaptureInfo reports a native capture. Graph is a Go view of the graph
// being built, made for this call; Dependencies are nodes of that view.
func (s *Stream) cudaCaptureInfo(opName string) (CaptureInfo, error) {
	c := s.dev.cuda
	var ci driver.CaptureInfo
	err := c.do(func() error {
		var err error
		ci, err = c.drv.StreamGetCaptureInfo(s.cu)
		return err
	})
	if err != nil {
		return CaptureInfo{}, cudaErr(opName, err)
	}
	info := CaptureInfo{Status: CaptureStatus(ci.Status), ID: ci.ID}
	if ci.Status != int(CaptureStatusActive) || ci.Graph == 0 {
		return info, nil
	}
	g := &Graph{dev: s.dev, id: graphIDs.Add(1), cu: ci.Graph}
	if err := c.do(func() error { return c.mirror(g) }); err != nil {
		return CaptureInfo{}, cudaErr(opName, err)
	}
	info.Graph = g
	if n := len(ci.Deps); n > 0 {
		data := captureEdgeData(ci.Data, n)
		for i, h := range ci.Deps {
			for _, node := range g.nodes {
				if node.cu == h {
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
		d.cuCall("Device.DefaultMemPool", func() error {
			var err error
			c.defPool.cu, err = c.drv.DeviceGetDefaultMemPool(c.ord)
			return err
		})
	})
	return c.defPool
}

func (d *Device) cudaNewMemPool(opName string, props MemPoolProps) (*MemPool, error) {
	c := d.cuda
	p := &MemPool{dev: d, props: props}
	pp := driver.MemPoolProps{AllocType: 1, LocationType: 1, LocationID: int32(props.Location), MaxSize: props.MaxSize}
	err := d.cuCall(opName, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		var err error
		p.cu, err = c.drv.MemPoolCreate(c.cm, pp)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *MemPool) cudaDestroy(opName string) error {
	return p.dev.cuCall(opName, func() error { return p.dev.cuda.drv.MemPoolDestroy(p.cu) })
}

func (p *MemPool) cudaTrimTo(opName string, minBytesToKeep uint64) error {
	return p.dev.cuCall(opName, func() error { return p.dev.cuda.drv.MemPoolTrimTo(p.cu, minBytesToKeep) })
}

func (p *MemPool) cudaSetAttr(opName string, attr int, v uint64) error {
	return p.dev.cuCall(opName, func() error { return p.dev.cuda.drv.MemPoolSetAttribute(p.cu, attr, v) })
}

func (p *MemPool) cudaAttr(attr int) uint64 {
	var v uint64
	p.dev.cuCall("MemPool.Stats", func() error {
		var err error
		v, err = p.dev.cuda.drv.MemPoolGetAttribute(p.cu, attr)
		return err
	})
	return v
}

func (p *MemPool) cudaSetAccess(opName string, device int, flags AccessFlags) error {
	c := p.dev.cuda
	return p.dev.cuCall(opName, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		desc := driver.MemAccessDesc{LocationType: 1, LocationID: int32(device), Flags: int32(flags)}
		return c.drv.MemPoolSetAccess(c.cm, p.cu, []driver.MemAccessDesc{desc})
	})
}
