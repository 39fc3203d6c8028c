//go:build linux

package gpugraph

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda"
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
	drv          *cuda.Driver
	ord          int
	ctx          uintptr
	major, minor int
	cm           *cuda.CMem // kernel parameter arrays, one call at a time

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
	drv, err := cuda.Load()
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
	cm, err := cuda.NewCMem(1 << 20)
	if err != nil {
		return nil, newErr(op, ErrMemoryAllocation, "%v", err)
	}
	c := &cudaDev{drv: drv, ord: dev, ctx: ctx, cm: cm, funcs: map[*Kernel]uintptr{}}
	attr := func(a int) int { v, _ := drv.Attribute(a, dev); return v }
	c.major, c.minor = attr(cuda.AttrComputeCapMajor), attr(cuda.AttrComputeCapMinor)
	name, _ := drv.DeviceName(dev)
	mem, _ := drv.TotalMem(dev)
	d := &Device{
		props: Properties{
			Name: name, Backend: BackendCUDA, DriverVersion: drv.Version(),
			MemoryPoolsSupported: attr(cuda.AttrMemoryPoolsSupported) != 0,
			TotalMem:             mem,
			MultiProcessorCount:  attr(cuda.AttrMultiprocessorCount),
			MaxThreadsPerBlock:   attr(cuda.AttrMaxThreadsPerBlock),
			MaxBlockDim:          Dim3{attr(cuda.AttrMaxBlockDimX), attr(cuda.AttrMaxBlockDimY), attr(cuda.AttrMaxBlockDimZ)},
			MaxGridDim:           Dim3{attr(cuda.AttrMaxGridDimX), attr(cuda.AttrMaxGridDimY), attr(cuda.AttrMaxGridDimZ)},
			WarpSize:             attr(cuda.AttrWarpSize),
			SharedMemPerBlock:    attr(cuda.AttrMaxSharedPerBlock),
		},
		cu:      c,
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
func cudaErr(op string, err error) error {
	var r *cuda.Result
	if !errors.As(err, &r) {
		return newErr(op, ErrLaunchFailure, "%v", err)
	}
	code, ok := cudaCodes[r.Code]
	if !ok {
		code = backend.NewCode(r.Code, r.Name, "CUDA driver error")
	}
	return newErr(op, code, "%s", r.Call)
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
		nv, err := cuda.LoadNVRTC()
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
	return true, c.do(func() error { return c.drv.Call("cuMemFree_v2", uintptr(p)) })
}

// cudaKernel checks a launch for the cuda backend and resolves its function.
func (d *Device) cudaKernel(p *KernelParams) (kernelOp, uintptr, *Code, string) {
	k, code, msg := d.prepareKernel(p)
	if code != nil {
		return k, 0, code, msg
	}
	f, err := d.cu.function(k.k)
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
func (c *cudaDev) launch(k kernelOp, f, stream uintptr) error {
	c.cm.Lock()
	defer c.cm.Unlock()
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
	var r *cuda.Result
	return errors.As(err, &r) && (r.Code == 201 || r.Code == 400 || r.Code == 709) // INVALID_CONTEXT, INVALID_HANDLE, CONTEXT_IS_DESTROYED
}

// cudaCopy checks a copy on the cuda backend and returns the memcpy
// direction's driver call and its arguments.
func (d *Device) cudaCopy(p *MemcpyParams) (string, []uintptr, *Code, string) {
	checkOnly := func(dev DevicePtr, n int) ([]byte, error) { return nil, d.cu.checkRange(dev, n) }
	if _, _, msg := memcpySides(p, checkOnly); msg != "" {
		return "", nil, ErrInvalidValue, msg
	}
	hostPtr := func(b []byte) uintptr {
		if len(b) == 0 {
			return 0
		}
		return uintptr(unsafe.Pointer(&b[0]))
	}
	switch p.Kind() {
	case "HtoD":
		return "cuMemcpyHtoDAsync_v2", []uintptr{uintptr(p.Dst), hostPtr(p.SrcHost), uintptr(p.Size)}, nil, ""
	case "DtoH":
		return "cuMemcpyDtoHAsync_v2", []uintptr{hostPtr(p.DstHost), uintptr(p.Src), uintptr(p.Size)}, nil, ""
	case "DtoD":
		return "cuMemcpyDtoDAsync_v2", []uintptr{uintptr(p.Dst), uintptr(p.Src), uintptr(p.Size)}, nil, ""
	}
	return "", nil, ErrNotSupported, "host-to-host copies are not supported on the cuda backend"
}

// cudaMemset checks a memset on the cuda backend and returns its call.
func (d *Device) cudaMemset(p *MemsetParams) (string, []uintptr, *Code, string) {
	o, code, msg := d.memsetShape(p)
	if code != nil {
		return "", nil, code, msg
	}
	if p.Height == 1 {
		// cuMemsetD2D* wants a pitch of at least a row even for one row.
		o.pitch = max(o.pitch, 1)
	}
	if o.total > 0 {
		if err := d.cu.checkRange(p.Dst, o.total); err != nil {
			return "", nil, ErrInvalidValue, err.Error()
		}
	}
	name := map[int]string{1: "cuMemsetD2D8Async", 2: "cuMemsetD2D16Async", 4: "cuMemsetD2D32Async"}[p.ElementSize]
	return name, []uintptr{uintptr(p.Dst), uintptr(o.pitch), uintptr(p.Value), uintptr(p.Width), uintptr(p.Height)}, nil, ""
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
	c := d.cu
	deps := make([]uintptr, len(n.deps))
	for i, x := range n.deps {
		deps[i] = x.cu
	}
	h := n.cu
	setter := func(name string, args ...uintptr) error {
		if exec != 0 {
			name = strings.Replace(name, "cuGraph", "cuGraphExec", 1)
			if strings.HasPrefix(name, "cuGraphExecMem") { // memcpy and memset setters take the context
				args = append(args, c.ctx)
			}
			return c.drv.Call(name, append([]uintptr{exec, n.cu}, args...)...)
		}
		return c.drv.Call(name, append([]uintptr{n.cu}, args...)...)
	}
	err := c.do(func() error {
		var err error
		if set {
			switch p := params.(type) {
			case ChildGraphParams:
				if exec != 0 {
					return c.drv.Call("cuGraphExecChildGraphNodeSetParams", exec, n.cu, p.Graph.cu)
				}
				return c.setChild(n, p.Graph)
			case MemAllocParams, MemFreeParams:
				return newErr("", ErrNotSupported, "changing %v nodes is not supported on the cuda backend yet", n.typ)
			}
		}
		switch p := params.(type) {
		case KernelParams:
			k, f, code, msg := d.cudaKernel(&p)
			if code != nil {
				return newErr("", code, "%s", msg)
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			kp := (*cuda.KernelNodeParams)(c.cm.Alloc(int(unsafe.Sizeof(cuda.KernelNodeParams{}))))
			*kp = cuda.KernelNodeParams{Func: f, GridX: uint32(k.grid.X), GridY: uint32(k.grid.Y), GridZ: uint32(k.grid.Z),
				BlockX: uint32(k.block.X), BlockY: uint32(k.block.Y), BlockZ: uint32(k.block.Z),
				SharedMemBytes: uint32(k.shared), KernelParams: c.cm.Params(k.args.w)}
			if set {
				return setter("cuGraphKernelNodeSetParams_v2", uintptr(unsafe.Pointer(kp)))
			}
			h, err = c.drv.AddKernelNode(g.cu, deps, kp)
		case EmptyParams:
			if set {
				return nil
			}
			h, err = c.drv.AddEmptyNode(g.cu, deps)
		case ChildGraphParams:
			if h, err = c.drv.AddChildGraphNode(g.cu, deps, p.Graph.cu); err == nil {
				var emb uintptr
				if err = c.drv.Call("cuGraphChildGraphNodeGetGraph", h, uintptr(unsafe.Pointer(&emb))); err == nil {
					p.Graph.cu = emb
					err = c.bindClone(p.Graph)
				}
			}
		case EventRecordParams:
			if err := p.Event.check("", d); err != nil {
				return err
			}
			if set {
				return setter("cuGraphEventRecordNodeSetEvent", p.Event.cu)
			}
			h, err = c.drv.AddEventNode(true, g.cu, deps, p.Event.cu)
		case EventWaitParams:
			if err := p.Event.check("", d); err != nil {
				return err
			}
			if set {
				return setter("cuGraphEventWaitNodeSetEvent", p.Event.cu)
			}
			h, err = c.drv.AddEventNode(false, g.cu, deps, p.Event.cu)
		case MemsetParams:
			o, code, msg := d.memsetShape(&p)
			if code == nil {
				_, _, code, msg = d.cudaMemset(&p)
			}
			if code != nil {
				return newErr("", code, "%s", msg)
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			mp := (*cuda.MemsetNodeParams)(c.cm.Alloc(int(unsafe.Sizeof(cuda.MemsetNodeParams{}))))
			*mp = cuda.MemsetNodeParams{Dst: uint64(p.Dst), Pitch: uint64(o.pitch), Value: p.Value,
				ElementSize: uint32(p.ElementSize), Width: uint64(p.Width), Height: uint64(p.Height)}
			if set {
				return setter("cuGraphMemsetNodeSetParams", uintptr(unsafe.Pointer(mp)))
			}
			h, err = c.drv.AddMemsetNode(g.cu, deps, mp, c.ctx)
		case MemcpyParams:
			if _, _, code, msg := d.cudaCopy(&p); code != nil {
				return newErr("", code, "%s", msg)
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			mp := (*cuda.Memcpy3D)(c.cm.Alloc(int(unsafe.Sizeof(cuda.Memcpy3D{}))))
			*mp = cuda.Memcpy3D{WidthInBytes: uint64(p.Size), Height: 1, Depth: 1}
			if p.SrcHost != nil {
				mp.SrcMemoryType, mp.SrcHost = cuda.MemoryTypeHost, uintptr(unsafe.Pointer(&p.SrcHost[0]))
			} else {
				mp.SrcMemoryType, mp.SrcDevice = cuda.MemoryTypeDevice, uint64(p.Src)
			}
			if p.DstHost != nil {
				mp.DstMemoryType, mp.DstHost = cuda.MemoryTypeHost, uintptr(unsafe.Pointer(&p.DstHost[0]))
			} else {
				mp.DstMemoryType, mp.DstDevice = cuda.MemoryTypeDevice, uint64(p.Dst)
			}
			if set {
				return setter("cuGraphMemcpyNodeSetParams", uintptr(unsafe.Pointer(mp)))
			}
			h, err = c.drv.AddMemcpyNode(g.cu, deps, mp, c.ctx)
		case HostParams:
			if p.Fn == nil {
				return newErr("", ErrInvalidValue, "nil host function")
			}
			c.cm.Lock()
			defer c.cm.Unlock()
			hp := (*[2]uintptr)(c.cm.Alloc(16))
			hp[0], hp[1] = cudaHostCallback(), registerHostFunc(d, p.Fn, false)
			if set {
				return setter("cuGraphHostNodeSetParams", uintptr(unsafe.Pointer(hp)))
			}
			var node uintptr
			err = c.drv.Call("cuGraphAddHostNode", uintptr(unsafe.Pointer(&node)), g.cu, cudaDeps(deps), uintptr(len(deps)), uintptr(unsafe.Pointer(hp)))
			h = node
		case MemAllocParams:
			c.cm.Lock()
			defer c.cm.Unlock()
			ap := (*cuda.MemAllocNodeParams)(c.cm.Alloc(int(unsafe.Sizeof(cuda.MemAllocNodeParams{}))))
			*ap = cuda.MemAllocNodeParams{AllocType: 1, LocationType: 1, LocationID: int32(c.ord), Bytesize: uint64(p.Size)}
			var descs []cuda.MemAccessDesc
			for _, a := range p.Access {
				descs = append(descs, cuda.MemAccessDesc{LocationType: 1, LocationID: int32(a.Device), Flags: 3})
			}
			if len(descs) > 0 {
				arr := unsafe.Slice((*cuda.MemAccessDesc)(c.cm.Alloc(len(descs)*int(unsafe.Sizeof(cuda.MemAccessDesc{})))), len(descs))
				copy(arr, descs)
				ap.AccessDescs, ap.AccessDescCount = uintptr(unsafe.Pointer(&arr[0])), uint64(len(descs))
			}
			var node uintptr
			if err = c.drv.Call("cuGraphAddMemAllocNode", uintptr(unsafe.Pointer(&node)), g.cu, cudaDeps(deps), uintptr(len(deps)), uintptr(unsafe.Pointer(ap))); err == nil {
				h = node
				p.Ptr = DevicePtr(ap.Dptr)
				p.Access = append([]MemAccessDesc(nil), p.Access...)
				n.params = p
				c.track(p.Ptr, p.Size)
			}
		case ExtSemaphoreSignalParams, ExtSemaphoreWaitParams:
			if set {
				return d.cudaSetExtSemNode(n.cu, params)
			}
			h, err = d.cudaAddExtSemNode(g.cu, deps, params)
		case MemFreeParams:
			var node uintptr
			err = c.drv.Call("cuGraphAddMemFreeNode", uintptr(unsafe.Pointer(&node)), g.cu, cudaDeps(deps), uintptr(len(deps)), uintptr(p.Ptr))
			h = node
		case ConditionalParams:
			h, err = d.cudaCondNode(g, n, p, deps)
		default:
			return newErr("", ErrNotSupported, "%v nodes are not supported on the cuda backend yet", n.typ)
		}
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
	var p cuda.GraphNodeParams
	p.Type = int32(NodeChildGraph)
	p.Union[0] = int64(g.cu) // CUDA_CHILD_GRAPH_NODE_PARAMS.graph; ownership 0: clone
	if err := c.drv.Call("cuGraphNodeSetParams", n.cu, uintptr(unsafe.Pointer(&p))); err != nil {
		return err
	}
	var emb uintptr
	if err := c.drv.Call("cuGraphChildGraphNodeGetGraph", n.cu, uintptr(unsafe.Pointer(&emb))); err != nil {
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
		if err := c.drv.Call("cuGraphNodeFindInClone", uintptr(unsafe.Pointer(&m.cu)), o.cu, g.cu); err != nil {
			return err
		}
	}
	return nil
}

func cudaDeps(deps []uintptr) uintptr {
	if len(deps) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&deps[0]))
}

// Dispatch from the public API. Each runs after the API's own checks.

func (d *Device) cudaSynchronize() error {
	return d.cuCall("Device.Synchronize", func() error { return d.cu.drv.Call("cuCtxSynchronize") })
}

// cuCall runs f in the device's context and maps its error.
func (d *Device) cuCall(op string, f func() error) error {
	if err := d.cu.do(f); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return withOp(op, e)
		}
		return cudaErr(op, err)
	}
	return nil
}

func (d *Device) cudaMalloc(n int) (DevicePtr, error) {
	p, err := d.cu.malloc(n)
	if err != nil {
		return 0, cudaErr("Device.Malloc", err)
	}
	return p, nil
}

func (d *Device) cudaFree(p DevicePtr) error {
	ok, err := d.cu.free(p)
	if !ok {
		// Graph allocations and MallocAsync memory are the driver's to
		// check: cuMemFree frees them (and refuses what is not live).
		err = d.cu.do(func() error { return d.cu.drv.Call("cuMemFree_v2", uintptr(p)) })
	}
	if err != nil {
		return cudaErr("Device.Free", err)
	}
	return nil
}

func (s *Stream) cudaMallocAsync(op string, n int, pool *MemPool) (DevicePtr, error) {
	var p uint64
	err := s.dev.cuCall(op, func() error {
		return s.dev.cu.drv.Call("cuMemAllocFromPoolAsync", uintptr(unsafe.Pointer(&p)), uintptr(n), pool.cu, s.cu)
	})
	if err != nil {
		return 0, err
	}
	s.dev.cu.track(DevicePtr(p), n)
	return DevicePtr(p), nil
}

func (s *Stream) cudaFreeAsync(op string, p DevicePtr) error {
	return s.dev.cuCall(op, func() error { return s.dev.cu.drv.Call("cuMemFreeAsync", uintptr(p), s.cu) })
}

// Graph memory attributes (CUgraphMem_attribute).
const (
	graphMemUsedCurrent = iota
	graphMemUsedHigh
	graphMemReservedCurrent
	graphMemReservedHigh
)

func (d *Device) cudaGraphMemStats(op string) (GraphMemStats, error) {
	var v [4]uint64
	err := d.cuCall(op, func() error {
		for i := range v {
			if err := d.cu.drv.Call("cuDeviceGetGraphMemAttribute", uintptr(d.cu.ord), uintptr(i), uintptr(unsafe.Pointer(&v[i]))); err != nil {
				return err
			}
		}
		return nil
	})
	return GraphMemStats{UsedCurrent: v[graphMemUsedCurrent], UsedHigh: v[graphMemUsedHigh],
		ReservedCurrent: v[graphMemReservedCurrent], ReservedHigh: v[graphMemReservedHigh]}, err
}

func (d *Device) cudaResetGraphMemHigh(op string) error {
	var zero uint64
	return d.cuCall(op, func() error {
		for _, a := range []int{graphMemUsedHigh, graphMemReservedHigh} {
			if err := d.cu.drv.Call("cuDeviceSetGraphMemAttribute", uintptr(d.cu.ord), uintptr(a), uintptr(unsafe.Pointer(&zero))); err != nil {
				return err
			}
		}
		return nil
	})
}

func (d *Device) cudaTrimGraphMem(op string) error {
	return d.cuCall(op, func() error { return d.cu.drv.Call("cuDeviceGraphMemTrim", uintptr(d.cu.ord)) })
}

func (d *Device) cudaMemcpySync(op string, p *MemcpyParams) error {
	call, args, code, msg := d.cudaCopy(p)
	return d.cudaSyncCall(op, call, args, code, msg)
}

func (d *Device) cudaMemsetSync(op string, p *MemsetParams) error {
	call, args, code, msg := d.cudaMemset(p)
	return d.cudaSyncCall(op, call, args, code, msg)
}

// cudaSyncCall runs a checked async copy or memset synchronously, after all
// work on the device, as cudaMemcpy and cudaMemset do.
func (d *Device) cudaSyncCall(op, call string, args []uintptr, code *Code, msg string) error {
	if code != nil {
		return newErr(op, code, "%s", msg)
	}
	return d.cuCall(op, func() error {
		if err := d.cu.drv.Call("cuCtxSynchronize"); err != nil {
			return err
		}
		if err := d.cu.drv.Call(call, append(args, 0)...); err != nil {
			return err
		}
		return d.cu.drv.Call("cuStreamSynchronize", 0)
	})
}

func (d *Device) cudaNewStream(s *Stream) error {
	return d.cuCall("Device.NewStream", func() error {
		var err error
		s.cu, err = d.cu.drv.StreamCreate(1) // CU_STREAM_NON_BLOCKING: no implicit legacy-stream sync
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
		e.cu, err = d.cu.drv.EventCreate(flags)
		return err
	})
}

func (d *Device) cudaNewGraph(g *Graph) error {
	return d.cuCall("Device.NewGraph", func() error {
		var err error
		g.cu, err = d.cu.drv.GraphCreate()
		return err
	})
}

func (d *Device) cudaEdges(op string, g *Graph, edges []Edge, add bool) error {
	from, to := make([]uintptr, len(edges)), make([]uintptr, len(edges))
	for i, e := range edges {
		from[i], to[i] = e.From.cu, e.To.cu
	}
	name := "cuGraphRemoveDependencies_v2"
	if add {
		name = "cuGraphAddDependencies_v2"
	}
	ed := cuEdgeData(edgesData(edges))
	return d.cuCall(op, func() error {
		err := d.cu.drv.Call(name, g.cu, cudaDeps(from), cudaDeps(to), cuEdgeDataPtr(ed), uintptr(len(edges)))
		runtime.KeepAlive(ed)
		return err
	})
}

func (d *Device) cudaDestroyNode(op string, n *Node) error {
	return d.cuCall(op, func() error { return d.cu.drv.Call("cuGraphDestroyNode", n.cu) })
}

func (d *Device) cudaDestroyGraph(g *Graph) {
	d.cuCall("Graph.Destroy", func() error { return d.cu.drv.Call("cuGraphDestroy", g.cu) })
}

func (d *Device) cudaInstantiate(op string, e *Exec, g *Graph, p *InstantiateParams) error {
	return d.cudaInstantiateWithParams(op, e, g, p)
}

func (s *Stream) cudaLaunch(op string, p *KernelParams) error {
	d := s.dev
	k, f, code, msg := d.cudaKernel(p)
	if code != nil {
		return newErr(op, code, "%s", msg)
	}
	if err := d.cu.launch(k, f, s.cu); err != nil {
		return cudaErr(op, err)
	}
	return nil
}

func (s *Stream) cudaHostFunc(op string, fn func()) error {
	id := registerHostFunc(s.dev, fn, true)
	return s.dev.cuCall(op, func() error {
		return s.dev.cu.drv.Call("cuLaunchHostFunc", s.cu, cudaHostCallback(), id)
	})
}

func (s *Stream) cudaMemcpy(op string, p *MemcpyParams) error {
	call, args, code, msg := s.dev.cudaCopy(p)
	if code != nil {
		return newErr(op, code, "%s", msg)
	}
	return s.dev.cuCall(op, func() error { return s.dev.cu.drv.Call(call, append(args, s.cu)...) })
}

func (s *Stream) cudaMemset(op string, p *MemsetParams) error {
	call, args, code, msg := s.dev.cudaMemset(p)
	if code != nil {
		return newErr(op, code, "%s", msg)
	}
	return s.dev.cuCall(op, func() error { return s.dev.cu.drv.Call(call, append(args, s.cu)...) })
}

// streamCall makes a stream-bound driver call without making the context
// current (the driver takes it from the stream, as for launches), and again
// with it only if the driver objects.
func (s *Stream) streamCall(op, name string, args ...uintptr) error {
	c := s.dev.cu
	err := c.drv.Call(name, args...)
	if contextError(err) {
		err = c.do(func() error { return c.drv.Call(name, args...) })
	}
	if err != nil {
		return cudaErr(op, err)
	}
	return nil
}

func (s *Stream) cudaRecord(op string, e *Event) error {
	return s.streamCall(op, "cuEventRecord", e.cu, s.cu)
}

func (s *Stream) cudaWait(op string, e *Event) error {
	return s.streamCall(op, "cuStreamWaitEvent", s.cu, e.cu, 0)
}

func (s *Stream) cudaSynchronize(op string) error {
	return s.streamCall(op, "cuStreamSynchronize", s.cu)
}

func (s *Stream) cudaQuery(op string) error {
	return s.streamCall(op, "cuStreamQuery", s.cu)
}

func (s *Stream) cudaDestroy(op string) error {
	return s.dev.cuCall(op, func() error { return s.dev.cu.drv.Call("cuStreamDestroy_v2", s.cu) })
}

func (e *Event) cudaSynchronize(op string) error {
	return e.dev.cuCall(op, func() error { return e.dev.cu.drv.Call("cuEventSynchronize", e.cu) })
}

func (e *Event) cudaQuery(op string) error {
	return e.dev.cuCall(op, func() error { return e.dev.cu.drv.Call("cuEventQuery", e.cu) })
}

func (e *Event) cudaDestroy(op string) error {
	return e.dev.cuCall(op, func() error { return e.dev.cu.drv.Call("cuEventDestroy_v2", e.cu) })
}

func cudaElapsed(op string, start, end *Event) (float32, error) {
	var ms float32
	err := start.dev.cuCall(op, func() error {
		var err error
		ms, err = start.dev.cu.drv.ElapsedTime(start.cu, end.cu)
		return err
	})
	return ms, err
}

func (e *Exec) cudaLaunch(op string, s *Stream) error {
	c := e.dev.cu
	err := c.drv.GraphLaunch(e.cu, s.cu) // context from the stream, as launch
	if contextError(err) {
		err = c.do(func() error { return c.drv.GraphLaunch(e.cu, s.cu) })
	}
	if err != nil {
		return cudaErr(op, err)
	}
	return nil
}

// cudaUpdate is cuGraphExecUpdate; the result's nodes are found in g.
func (e *Exec) cudaUpdate(op string, g *Graph) (UpdateResultInfo, error) {
	var info struct {
		result           int32
		errNode, errFrom uintptr
	}
	err := e.dev.cuCall(op, func() error {
		return e.dev.cu.drv.Call("cuGraphExecUpdate_v2", e.cu, g.cu, uintptr(unsafe.Pointer(&info)))
	})
	g.mu.Lock()
	res := UpdateResultInfo{Result: UpdateResult(info.result), ErrorNode: findNative(g, info.errNode), ErrorFromNode: findNative(g, info.errFrom)}
	g.mu.Unlock()
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			c := *ge
			c.Node = res.ErrorNode
			c.Detail = res.Result.String() + ": " + c.Detail
			return res, &c
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
func (e *Exec) cudaSetParams(op string, n *Node, p NodeParams) error {
	if err := e.dev.cudaNode(n.g, n, p, true, e.cu); err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			c := *ge
			c.Op, c.Node = op, n
			return &c
		}
		return err
	}
	return nil
}

func (e *Exec) cudaSetEnabled(op string, n *Node, on bool) error {
	v := uintptr(0)
	if on {
		v = 1
	}
	return e.dev.cuCall(op, func() error { return e.dev.cu.drv.Call("cuGraphNodeSetEnabled", e.cu, n.cu, v) })
}

func (e *Exec) cudaEnabled(op string, n *Node) (bool, error) {
	var v uint32
	err := e.dev.cuCall(op, func() error {
		return e.dev.cu.drv.Call("cuGraphNodeGetEnabled", e.cu, n.cu, uintptr(unsafe.Pointer(&v)))
	})
	return v != 0, err
}

func (e *Exec) cudaUpload(op string, s *Stream) error {
	return e.dev.cuCall(op, func() error { return e.dev.cu.drv.Call("cuGraphUpload", e.cu, s.cu) })
}

func (e *Exec) cudaDestroy(op string) error {
	return e.dev.cuCall(op, func() error { return e.dev.cu.drv.Call("cuGraphExecDestroy", e.cu) })
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

func (s *Stream) cudaBeginCapture(op string, mode CaptureMode) error {
	c := s.dev.cu
	err := c.onCaptureThread(func() error { return c.drv.Call("cuStreamBeginCapture_v2", s.cu, uintptr(mode)) })
	if err != nil {
		return cudaErr(op, err)
	}
	return nil
}

func (s *Stream) cudaEndCapture(op string) (*Graph, error) {
	c := s.dev.cu
	var h uintptr
	err := c.onCaptureThread(func() error { var err error; h, err = c.drv.EndCapture(s.cu); return err })
	into := s.capInto
	s.capInto = nil
	if err != nil {
		return nil, cudaErr(op, err)
	}
	g := into
	if g == nil {
		g = &Graph{dev: s.dev, id: graphIDs.Add(1), cu: h}
	} else {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	if err := c.do(func() error { return c.mirror(g) }); err != nil {
		return nil, cudaErr(op, err)
	}
	return g, nil
}

// mirror brings the Go view of a native graph up to date: nodes the Go
// side knows keep their identity, nodes the driver added (by capture) are
// appended in the driver's order with NativeNodeParams, and every node's
// dependencies are read back. g must be locked or not yet shared.
func (c *cudaDev) mirror(g *Graph) error {
	var n uintptr
	if err := c.drv.Call("cuGraphGetNodes", g.cu, 0, uintptr(unsafe.Pointer(&n))); err != nil {
		return err
	}
	handles := make([]uintptr, n)
	if n > 0 {
		if err := c.drv.Call("cuGraphGetNodes", g.cu, uintptr(unsafe.Pointer(&handles[0])), uintptr(unsafe.Pointer(&n))); err != nil {
			return err
		}
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
		var t int32
		if err := c.drv.Call("cuGraphNodeGetType", h, uintptr(unsafe.Pointer(&t))); err != nil {
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
		var p cuda.MemAllocNodeParams
		if c.drv.Call("cuGraphMemAllocNodeGetParams", h, uintptr(unsafe.Pointer(&p))) == nil {
			return MemAllocParams{Size: int(p.Bytesize), Location: int(p.LocationID), Ptr: DevicePtr(p.Dptr)}
		}
	case NodeMemFree:
		var ptr uint64
		if c.drv.Call("cuGraphMemFreeNodeGetParams", h, uintptr(unsafe.Pointer(&ptr))) == nil {
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
	var p cuda.KernelNodeParams
	if c.drv.Call("cuGraphKernelNodeGetParams_v2", h, uintptr(unsafe.Pointer(&p))) != nil {
		return ""
	}
	var name *byte
	switch {
	case p.Func != 0:
		if c.drv.Call("cuFuncGetName", uintptr(unsafe.Pointer(&name)), p.Func) != nil {
			return ""
		}
	case p.Kern != 0:
		if c.drv.Call("cuKernelGetName", uintptr(unsafe.Pointer(&name)), p.Kern) != nil {
			return ""
		}
	}
	return cuda.GoString(name)
}

func (c *cudaDev) nodeDeps(h uintptr) ([]uintptr, []EdgeData, error) {
	var k uintptr
	if err := c.drv.Call("cuGraphNodeGetDependencies_v2", h, 0, 0, uintptr(unsafe.Pointer(&k))); err != nil || k == 0 {
		return nil, nil, err
	}
	deps := make([]uintptr, k)
	ed := make([]cuda.GraphEdgeData, k)
	err := c.drv.Call("cuGraphNodeGetDependencies_v2", h, uintptr(unsafe.Pointer(&deps[0])), uintptr(unsafe.Pointer(&ed[0])), uintptr(unsafe.Pointer(&k)))
	return deps[:k], fromCUEdgeData(ed[:k]), err
}

// cudaBeginCaptureToGraph captures into g after deps.
func (s *Stream) cudaBeginCaptureToGraph(op string, g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	c := s.dev.cu
	hs := make([]uintptr, len(deps))
	for i, n := range deps {
		hs[i] = n.cu
	}
	ed := cuEdgeData(data)
	err := c.onCaptureThread(func() error {
		err := c.drv.Call("cuStreamBeginCaptureToGraph", s.cu, g.cu, cudaDeps(hs), cuEdgeDataPtr(ed), uintptr(len(hs)), uintptr(mode))
		runtime.KeepAlive(ed)
		return err
	})
	if err != nil {
		return cudaErr(op, err)
	}
	s.capInto = g
	return nil
}

// cudaUpdateCaptureDependencies sets or adds to the capture's dependencies.
func (s *Stream) cudaUpdateCaptureDependencies(op string, nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	hs := make([]uintptr, len(nodes))
	for i, n := range nodes {
		hs[i] = n.cu
	}
	ed := cuEdgeData(data)
	return s.dev.cuCall(op, func() error {
		err := s.dev.cu.drv.Call("cuStreamUpdateCaptureDependencies_v2", s.cu, cudaDeps(hs), cuEdgeDataPtr(ed), uintptr(len(hs)), uintptr(flags))
		runtime.KeepAlive(ed)
		return err
	})
}

// cudaClone clones g natively; the clone's nodes keep the originals'
// parameters and ids, found with cuGraphNodeFindInClone.
func (g *Graph) cudaClone(op string) (*Graph, error) {
	c := g.dev.cu
	cl := &Graph{dev: g.dev, id: graphIDs.Add(1), nextID: g.nextID, sinkSeq: g.sinkSeq, clonedBy: map[*Node]*Node{}}
	err := c.do(func() error {
		if err := c.drv.Call("cuGraphClone", uintptr(unsafe.Pointer(&cl.cu)), g.cu); err != nil {
			return err
		}
		for _, n := range g.nodes {
			var h uintptr
			if err := c.drv.Call("cuGraphNodeFindInClone", uintptr(unsafe.Pointer(&h)), n.cu, cl.cu); err != nil {
				return err
			}
			m := &Node{g: cl, id: n.id, typ: n.typ, params: copyParams(n.params), cu: h, sink: n.sink}
			if n.child != nil {
				m.child = &Graph{dev: g.dev, id: graphIDs.Add(1), parent: m}
				if err := c.drv.Call("cuGraphChildGraphNodeGetGraph", h, uintptr(unsafe.Pointer(&m.child.cu))); err != nil {
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
		return nil, cudaErr(op, err)
	}
	return cl, nil
}

// cudaCaptureInfo reports a native capture. Graph is a Go view of the graph
// being built, made for this call; Dependencies are nodes of that view.
func (s *Stream) cudaCaptureInfo(op string) (CaptureInfo, error) {
	c := s.dev.cu
	var (
		st    int32
		id    uint64
		graph uintptr
		deps  uintptr // const CUgraphNode*, owned by the driver
		edata uintptr // const CUgraphEdgeData*, owned by the driver
		n     uintptr
	)
	err := c.do(func() error {
		return c.drv.Call("cuStreamGetCaptureInfo_v3", s.cu, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&id)),
			uintptr(unsafe.Pointer(&graph)), uintptr(unsafe.Pointer(&deps)), uintptr(unsafe.Pointer(&edata)), uintptr(unsafe.Pointer(&n)))
	})
	if err != nil {
		return CaptureInfo{}, cudaErr(op, err)
	}
	info := CaptureInfo{Status: CaptureStatus(st), ID: id}
	if st != int32(CaptureStatusActive) || graph == 0 {
		return info, nil
	}
	g := &Graph{dev: s.dev, id: graphIDs.Add(1), cu: graph}
	if err := c.do(func() error { return c.mirror(g) }); err != nil {
		return CaptureInfo{}, cudaErr(op, err)
	}
	info.Graph = g
	if n > 0 {
		hs := unsafe.Slice(*(**uintptr)(unsafe.Pointer(&deps)), n) // deps is a C pointer
		data := captureEdgeData(edata, n)
		for i, h := range hs {
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
	c := d.cu
	c.poolOnce.Do(func() {
		c.defPool = &MemPool{dev: d, isDefault: true}
		d.cuCall("Device.DefaultMemPool", func() error {
			return c.drv.Call("cuDeviceGetDefaultMemPool", uintptr(unsafe.Pointer(&c.defPool.cu)), uintptr(c.ord))
		})
	})
	return c.defPool
}

func (d *Device) cudaNewMemPool(op string, props MemPoolProps) (*MemPool, error) {
	c := d.cu
	p := &MemPool{dev: d, props: props}
	var pp cuda.MemPoolProps
	pp.AllocType, pp.LocationType, pp.LocationID, pp.MaxSize = 1, 1, int32(props.Location), props.MaxSize
	err := d.cuCall(op, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		cp := (*cuda.MemPoolProps)(c.cm.Alloc(int(unsafe.Sizeof(pp))))
		*cp = pp
		return c.drv.Call("cuMemPoolCreate", uintptr(unsafe.Pointer(&p.cu)), uintptr(unsafe.Pointer(cp)))
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *MemPool) cudaCall(op, name string, args ...uintptr) error {
	return p.dev.cuCall(op, func() error { return p.dev.cu.drv.Call(name, args...) })
}

func (p *MemPool) cudaSetAttr(op string, attr int, v uint64) error {
	return p.cudaCall(op, "cuMemPoolSetAttribute", p.cu, uintptr(attr), uintptr(unsafe.Pointer(&v)))
}

func (p *MemPool) cudaAttr(attr int) uint64 {
	var v uint64
	p.cudaCall("MemPool.Stats", "cuMemPoolGetAttribute", p.cu, uintptr(attr), uintptr(unsafe.Pointer(&v)))
	return v
}

func (p *MemPool) cudaSetAccess(op string, device int, flags AccessFlags) error {
	c := p.dev.cu
	return p.dev.cuCall(op, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		desc := (*cuda.MemAccessDesc)(c.cm.Alloc(int(unsafe.Sizeof(cuda.MemAccessDesc{}))))
		*desc = cuda.MemAccessDesc{LocationType: 1, LocationID: int32(device), Flags: int32(flags)}
		return c.drv.Call("cuMemPoolSetAccess", p.cu, uintptr(unsafe.Pointer(desc)), 1)
	})
}
