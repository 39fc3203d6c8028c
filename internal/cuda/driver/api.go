//go:build linux

package driver

import (
	"unsafe"
)

// Thin wrappers, named after the driver calls. Handles are uintptrs.

func (d *Driver) DeviceGet(ordinal int) (int, error) {
	var dev int32
	err := d.Call("cuDeviceGet", uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))
	return int(dev), err
}

func (d *Driver) DeviceCount() (int, error) {
	var n int32
	err := d.Call("cuDeviceGetCount", uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

func (d *Driver) TotalMem(dev int) (uint64, error) {
	var n uint64
	err := d.Call("cuDeviceTotalMem_v2", uintptr(unsafe.Pointer(&n)), uintptr(dev))
	return n, err
}

// PrimaryContext retains the device's primary context, the one the runtime
// API and CUDA libraries use, so handles are shared with them.
func (d *Driver) PrimaryContext(dev int) (uintptr, error) {
	var ctx uintptr
	err := d.Call("cuDevicePrimaryCtxRetain", uintptr(unsafe.Pointer(&ctx)), uintptr(dev))
	return ctx, err
}

func (d *Driver) SetCurrent(ctx uintptr) error { return d.Call("cuCtxSetCurrent", ctx) }

func (d *Driver) StreamCreate(flags int) (uintptr, error) {
	var s uintptr
	err := d.Call("cuStreamCreate", uintptr(unsafe.Pointer(&s)), uintptr(flags))
	return s, err
}

func (d *Driver) EventCreate(flags int) (uintptr, error) {
	var e uintptr
	err := d.Call("cuEventCreate", uintptr(unsafe.Pointer(&e)), uintptr(flags))
	return e, err
}

// ElapsedTime returns milliseconds between two recorded events.
func (d *Driver) ElapsedTime(start, end uintptr) (float32, error) {
	var ms float32
	err := d.Call("cuEventElapsedTime_v2", uintptr(unsafe.Pointer(&ms)), start, end)
	return ms, err
}

func (d *Driver) MemAlloc(n int) (uint64, error) {
	var p uint64
	err := d.Call("cuMemAlloc_v2", uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

func (d *Driver) ModuleLoadData(image []byte) (uintptr, error) {
	var m uintptr
	err := d.Call("cuModuleLoadData", uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))
	return m, err
}

func (d *Driver) ModuleGetFunction(mod uintptr, name string) (uintptr, error) {
	var f uintptr
	cname := CString(name)
	err := d.Call("cuModuleGetFunction", uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(cname)))
	return f, err
}

// Launch launches f with its parameter array already laid out in C memory
// (CMem.Params). It is the hot path: one SyscallN.
func (d *Driver) Launch(f uintptr, grid, block [3]uint32, shared uint32, stream, params uintptr) error {
	r := fastCall(d.launchKernel, [12]uintptr{f,
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(shared), stream, params, 0})
	return d.check("cuLaunchKernel", r)
}

func (d *Driver) GraphCreate() (uintptr, error) {
	var g uintptr
	err := d.Call("cuGraphCreate", uintptr(unsafe.Pointer(&g)), 0)
	return g, err
}

// KernelNodeParams is CUDA_KERNEL_NODE_PARAMS (v2), laid out as in cuda.h.
type KernelNodeParams struct {
	Func                                   uintptr
	GridX, GridY, GridZ                    uint32
	BlockX, BlockY, BlockZ, SharedMemBytes uint32
	_                                      uint32
	KernelParams                           uintptr
	Extra                                  uintptr
	Kern                                   uintptr
	Ctx                                    uintptr
}

// AddKernelNode adds a kernel node; p must live in C memory (CMem) since
// it holds the parameter array's address.
func (d *Driver) AddKernelNode(g uintptr, deps []uintptr, p *KernelNodeParams) (uintptr, error) {
	var n uintptr
	err := d.Call("cuGraphAddKernelNode_v2", uintptr(unsafe.Pointer(&n)), g, depsPtr(deps), uintptr(len(deps)), uintptr(unsafe.Pointer(p)))
	return n, err
}

func (d *Driver) AddEmptyNode(g uintptr, deps []uintptr) (uintptr, error) {
	var n uintptr
	err := d.Call("cuGraphAddEmptyNode", uintptr(unsafe.Pointer(&n)), g, depsPtr(deps), uintptr(len(deps)))
	return n, err
}

func (d *Driver) AddChildGraphNode(g uintptr, deps []uintptr, child uintptr) (uintptr, error) {
	var n uintptr
	err := d.Call("cuGraphAddChildGraphNode", uintptr(unsafe.Pointer(&n)), g, depsPtr(deps), uintptr(len(deps)), child)
	return n, err
}

// MemsetNodeParams is CUDA_MEMSET_NODE_PARAMS.
type MemsetNodeParams struct {
	Dst         uint64
	Pitch       uint64
	Value       uint32
	ElementSize uint32
	Width       uint64
	Height      uint64
}

func (d *Driver) AddMemsetNode(g uintptr, deps []uintptr, p *MemsetNodeParams, ctx uintptr) (uintptr, error) {
	var n uintptr
	err := d.Call("cuGraphAddMemsetNode", uintptr(unsafe.Pointer(&n)), g, depsPtr(deps), uintptr(len(deps)), uintptr(unsafe.Pointer(p)), ctx)
	return n, err
}

// Memcpy3D is CUDA_MEMCPY3D.
type Memcpy3D struct {
	SrcXInBytes, SrcY, SrcZ, SrcLOD uint64
	SrcMemoryType                   uint32
	_                               uint32
	SrcHost                         uintptr
	SrcDevice                       uint64
	SrcArray                        uintptr
	Reserved0                       uintptr
	SrcPitch, SrcHeight             uint64
	DstXInBytes, DstY, DstZ, DstLOD uint64
	DstMemoryType                   uint32
	_                               uint32
	DstHost                         uintptr
	DstDevice                       uint64
	DstArray                        uintptr
	Reserved1                       uintptr
	DstPitch, DstHeight             uint64
	WidthInBytes, Height, Depth     uint64
}

// Memory types of CUDA_MEMCPY3D.
const (
	MemoryTypeHost   = 1
	MemoryTypeDevice = 2
)

func (d *Driver) AddMemcpyNode(g uintptr, deps []uintptr, p *Memcpy3D, ctx uintptr) (uintptr, error) {
	var n uintptr
	err := d.Call("cuGraphAddMemcpyNode", uintptr(unsafe.Pointer(&n)), g, depsPtr(deps), uintptr(len(deps)), uintptr(unsafe.Pointer(p)), ctx)
	return n, err
}

func (d *Driver) AddEventNode(record bool, g uintptr, deps []uintptr, ev uintptr) (uintptr, error) {
	var n uintptr
	name := "cuGraphAddEventWaitNode"
	if record {
		name = "cuGraphAddEventRecordNode"
	}
	err := d.Call(name, uintptr(unsafe.Pointer(&n)), g, depsPtr(deps), uintptr(len(deps)), ev)
	return n, err
}

func (d *Driver) Instantiate(g uintptr, flags uint64) (uintptr, error) {
	var e uintptr
	err := d.Call("cuGraphInstantiateWithFlags", uintptr(unsafe.Pointer(&e)), g, uintptr(flags))
	return e, err
}

// GraphLaunch is the hot path of a graph launch.
func (d *Driver) GraphLaunch(exec, stream uintptr) error {
	r := fastCall(d.graphLaunch, [12]uintptr{exec, stream})
	return d.check("cuGraphLaunch", r)
}

func (d *Driver) EndCapture(stream uintptr) (uintptr, error) {
	var g uintptr
	err := d.Call("cuStreamEndCapture", stream, uintptr(unsafe.Pointer(&g)))
	return g, err
}

// depsPtr returns the address of a dependency array. Node handles are C
// pointers, so a Go slice of them holds no Go pointers and may be passed.
func depsPtr(deps []uintptr) uintptr {
	if len(deps) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&deps[0]))
}

// MemAllocNodeParams is CUDA_MEM_ALLOC_NODE_PARAMS (v1) with its
// CUmemPoolProps inlined: 88 bytes of pool properties, then the access
// descriptors, the size, and the address the driver returns.
type MemAllocNodeParams struct {
	AllocType       int32 // CU_MEM_ALLOCATION_TYPE_PINNED = 1
	HandleTypes     int32
	LocationType    int32 // CU_MEM_LOCATION_TYPE_DEVICE = 1
	LocationID      int32
	Win32Security   uintptr
	MaxSize         uint64
	Usage           uint16
	Reserved        [54]byte
	AccessDescs     uintptr
	AccessDescCount uint64
	Bytesize        uint64
	Dptr            uint64
}

// MemAccessDesc is CUmemAccessDesc.
type MemAccessDesc struct {
	LocationType int32
	LocationID   int32
	Flags        int32 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
}

// MemPoolProps is CUmemPoolProps (88 bytes).
type MemPoolProps struct {
	AllocType     int32
	HandleTypes   int32
	LocationType  int32
	LocationID    int32
	Win32Security uintptr
	MaxSize       uint64
	Usage         uint16
	Reserved      [54]byte
}
