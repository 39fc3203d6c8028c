package driver

import (
	"slices"
	"unsafe"
)

// Graphs, their nodes and executable graphs. The node parameters a call
// reads through a pointer are copied into a CMem arena, which the caller
// holds locked (CMem.Lock) for the call: the parameter structs of cuda.h
// may hold the addresses of other C memory (kernel parameter arrays,
// access descriptors), and Go memory must not.

func (d *Driver) GraphCreate() (uintptr, error) {
	var g uintptr
	err := d.call("cuGraphCreate", uintptr(unsafe.Pointer(&g)), 0)
	return g, err
}

func (d *Driver) GraphDestroy(g uintptr) error { return d.call("cuGraphDestroy", g) }

// addNode calls the cuGraphAdd*Node entry point name whose arguments are
// the new node's out-parameter, the graph, its dependencies and arg: a
// handle, a value, or the address of parameters in C memory.
func (d *Driver) addNode(name string, g uintptr, deps []uintptr, arg uintptr) (uintptr, error) {
	var n uintptr
	err := d.call(name, uintptr(unsafe.Pointer(&n)), g, uintptr(sliceptr(deps)), uintptr(len(deps)), arg)
	return n, err
}

// GraphClone clones a graph; cuGraphNodeFindInClone maps its nodes.
func (d *Driver) GraphClone(g uintptr) (uintptr, error) {
	var c uintptr
	err := d.call("cuGraphClone", uintptr(unsafe.Pointer(&c)), g)
	return c, err
}

// GraphNodeFindInClone returns the node of clone that was made from orig.
func (d *Driver) GraphNodeFindInClone(orig, clone uintptr) (uintptr, error) {
	var n uintptr
	err := d.call("cuGraphNodeFindInClone", uintptr(unsafe.Pointer(&n)), orig, clone)
	return n, err
}

// GraphGetNodes returns a graph's nodes, in the driver's order.
func (d *Driver) GraphGetNodes(g uintptr) ([]uintptr, error) {
	var n uintptr
	if err := d.call("cuGraphGetNodes", g, 0, uintptr(unsafe.Pointer(&n))); err != nil {
		return nil, err
	}
	nodes := make([]uintptr, n)
	if n > 0 {
		if err := d.call("cuGraphGetNodes", g, uintptr(sliceptr(nodes)), uintptr(unsafe.Pointer(&n))); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// GraphNodeGetType returns a node's CUgraphNodeType.
func (d *Driver) GraphNodeGetType(node uintptr) (int, error) {
	var t int32
	err := d.call("cuGraphNodeGetType", node, uintptr(unsafe.Pointer(&t)))
	return int(t), err
}

func (d *Driver) GraphDestroyNode(node uintptr) error { return d.call("cuGraphDestroyNode", node) }

// GraphChildGraphNodeGetGraph returns the graph embedded in a child graph
// node, owned by the node.
func (d *Driver) GraphChildGraphNodeGetGraph(node uintptr) (uintptr, error) {
	var g uintptr
	err := d.call("cuGraphChildGraphNodeGetGraph", node, uintptr(unsafe.Pointer(&g)))
	return g, err
}

// KernelNodeParams is CUDA_KERNEL_NODE_PARAMS (v2), laid out as in cuda.h.
// KernelParams is the address of a parameter array in C memory
// (CMem.Params); Kern and Ctx are only read back.
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

// GraphAddKernelNode adds a kernel node after deps; m must be the arena
// holding p.KernelParams.
func (d *Driver) GraphAddKernelNode(m *CMem, g uintptr, deps []uintptr, p KernelNodeParams) (uintptr, error) {
	return d.addNode("cuGraphAddKernelNode_v2", g, deps, uintptr(unsafe.Pointer(put(m, &p))))
}

// GraphKernelNodeSetParams sets a kernel node's parameters in its graph;
// as for GraphAddKernelNode, m holds p.KernelParams.
func (d *Driver) GraphKernelNodeSetParams(m *CMem, node uintptr, p KernelNodeParams) error {
	return d.call("cuGraphKernelNodeSetParams_v2", node, uintptr(unsafe.Pointer(put(m, &p))))
}

// GraphExecKernelNodeSetParams sets the parameters of a kernel node in the
// executable graph exec; m holds p.KernelParams.
func (d *Driver) GraphExecKernelNodeSetParams(m *CMem, exec, node uintptr, p KernelNodeParams) error {
	return d.call("cuGraphExecKernelNodeSetParams_v2", exec, node, uintptr(unsafe.Pointer(put(m, &p))))
}

// GraphKernelNodeGetParams reads a kernel node's parameters back.
func (d *Driver) GraphKernelNodeGetParams(node uintptr) (KernelNodeParams, error) {
	var p KernelNodeParams
	err := d.call("cuGraphKernelNodeGetParams_v2", node, uintptr(unsafe.Pointer(&p)))
	return p, err
}

// GraphKernelNodeCopy adds to g, without dependencies, a kernel node with
// the parameters of kernel node src: the driver copies the argument
// values, whose sizes it knows.
func (d *Driver) GraphKernelNodeCopy(g, src uintptr) (uintptr, error) {
	p, err := d.GraphKernelNodeGetParams(src)
	if err != nil {
		return 0, err
	}
	return d.addNode("cuGraphAddKernelNode_v2", g, nil, uintptr(unsafe.Pointer(&p)))
}

// GraphExecKernelNodeSetFrom gives kernel node node of exec the
// parameters of kernel node src (of any graph).
func (d *Driver) GraphExecKernelNodeSetFrom(exec, node, src uintptr) error {
	p, err := d.GraphKernelNodeGetParams(src)
	if err != nil {
		return err
	}
	return d.call("cuGraphExecKernelNodeSetParams_v2", exec, node, uintptr(unsafe.Pointer(&p)))
}

// kernelNodeParamsC is KernelNodeParams as the driver fills it for a
// read, its parameter array a pointer (to C memory) for GraphKernelNodeArgs.
type kernelNodeParamsC struct {
	Func                                   uintptr
	GridX, GridY, GridZ                    uint32
	BlockX, BlockY, BlockZ, SharedMemBytes uint32
	_                                      uint32
	KernelParams                           *unsafe.Pointer
	Extra                                  uintptr
	Kern                                   uintptr
	Ctx                                    uintptr
}

// KernelNodeArgs is what GraphKernelNodeArgs reads of a kernel node.
type KernelNodeArgs struct {
	Func, Kern uintptr  // its function, or library kernel
	Args       []uint64 // the 8-byte values of the parameters asked for
}

// GraphKernelNodeArgs reads kernel node node's function and, for the
// function whose parameters idx returns (the indices of its pointer
// parameters; nil when it does not know the function), their 8-byte values
// from the node's parameter array: one cuGraphKernelNodeGetParams.
func (d *Driver) GraphKernelNodeArgs(node uintptr, idx func(fn uintptr) []int) (KernelNodeArgs, error) {
	var p kernelNodeParamsC
	if err := d.call("cuGraphKernelNodeGetParams_v2", node, uintptr(unsafe.Pointer(&p))); err != nil {
		return KernelNodeArgs{}, err
	}
	a := KernelNodeArgs{Func: p.Func, Kern: p.Kern}
	var ix []int
	if p.Func != 0 && idx != nil {
		ix = idx(p.Func)
	}
	if p.KernelParams == nil || len(ix) == 0 {
		return a, nil
	}
	params := unsafe.Slice(p.KernelParams, slices.Max(ix)+1)
	for _, i := range ix {
		a.Args = append(a.Args, *(*uint64)(params[i]))
	}
	return a, nil
}

// GraphMemsetNodeParams returns the parameters of memset node node
// (cuGraphMemsetNodeGetParams).
func (d *Driver) GraphMemsetNodeParams(node uintptr) (MemsetNodeParams, error) {
	var p MemsetNodeParams
	err := d.call("cuGraphMemsetNodeGetParams", node, uintptr(unsafe.Pointer(&p)))
	return p, err
}

// GraphMemcpyNodeDevicePtrs returns the device-side addresses of memcpy
// node node (cuGraphMemcpyNodeGetParams): each side of device or unified
// memory type.
func (d *Driver) GraphMemcpyNodeDevicePtrs(node uintptr) ([]uint64, error) {
	var p memcpy3D
	if err := d.call("cuGraphMemcpyNodeGetParams", node, uintptr(unsafe.Pointer(&p))); err != nil {
		return nil, err
	}
	var ptrs []uint64
	const unified = 4 // CU_MEMORYTYPE_UNIFIED: the address is in the Device field
	if p.SrcMemoryType == memoryTypeDevice || p.SrcMemoryType == unified {
		ptrs = append(ptrs, p.SrcDevice)
	}
	if p.DstMemoryType == memoryTypeDevice || p.DstMemoryType == unified {
		ptrs = append(ptrs, p.DstDevice)
	}
	return ptrs, nil
}

func (d *Driver) GraphAddEmptyNode(g uintptr, deps []uintptr) (uintptr, error) {
	var n uintptr
	err := d.call("cuGraphAddEmptyNode", uintptr(unsafe.Pointer(&n)), g, uintptr(sliceptr(deps)), uintptr(len(deps)))
	return n, err
}

// GraphAddChildGraphNode adds a node embedding a clone of child.
func (d *Driver) GraphAddChildGraphNode(g uintptr, deps []uintptr, child uintptr) (uintptr, error) {
	return d.addNode("cuGraphAddChildGraphNode", g, deps, child)
}

// GraphExecChildGraphNodeSetParams gives a child graph node of exec the
// parameters of child.
func (d *Driver) GraphExecChildGraphNodeSetParams(exec, node, child uintptr) error {
	return d.call("cuGraphExecChildGraphNodeSetParams", exec, node, child)
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

func (d *Driver) GraphAddMemsetNode(m *CMem, g uintptr, deps []uintptr, p MemsetNodeParams, ctx uintptr) (uintptr, error) {
	var n uintptr
	err := d.call("cuGraphAddMemsetNode", uintptr(unsafe.Pointer(&n)), g, uintptr(sliceptr(deps)), uintptr(len(deps)),
		uintptr(unsafe.Pointer(put(m, &p))), ctx)
	return n, err
}

func (d *Driver) GraphMemsetNodeSetParams(m *CMem, node uintptr, p MemsetNodeParams) error {
	return d.call("cuGraphMemsetNodeSetParams", node, uintptr(unsafe.Pointer(put(m, &p))))
}

func (d *Driver) GraphExecMemsetNodeSetParams(m *CMem, exec, node uintptr, p MemsetNodeParams, ctx uintptr) error {
	return d.call("cuGraphExecMemsetNodeSetParams", exec, node, uintptr(unsafe.Pointer(put(m, &p))), ctx)
}

// Memcpy is a linear copy of Size bytes, each side host memory (a Go slice,
// non-nil, which the driver reads or writes whenever the node runs: keep it
// alive as long as the graph) or device memory.
type Memcpy struct {
	SrcHost   []byte // the source if non-nil, else SrcDevice
	SrcDevice uint64
	DstHost   []byte // the destination if non-nil, else DstDevice
	DstDevice uint64
	Size      uint64
}

// memcpy3D is CUDA_MEMCPY3D.
type memcpy3D struct {
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
	memoryTypeHost   = 1
	memoryTypeDevice = 2
)

// put lays c out as CUDA_MEMCPY3D in m.
func (c *Memcpy) put(m *CMem) uintptr {
	p := memcpy3D{WidthInBytes: c.Size, Height: 1, Depth: 1}
	if c.SrcHost != nil {
		p.SrcMemoryType, p.SrcHost = memoryTypeHost, uintptr(unsafe.Pointer(&c.SrcHost[0]))
	} else {
		p.SrcMemoryType, p.SrcDevice = memoryTypeDevice, c.SrcDevice
	}
	if c.DstHost != nil {
		p.DstMemoryType, p.DstHost = memoryTypeHost, uintptr(unsafe.Pointer(&c.DstHost[0]))
	} else {
		p.DstMemoryType, p.DstDevice = memoryTypeDevice, c.DstDevice
	}
	return uintptr(unsafe.Pointer(put(m, &p)))
}

func (d *Driver) GraphAddMemcpyNode(m *CMem, g uintptr, deps []uintptr, c Memcpy, ctx uintptr) (uintptr, error) {
	var n uintptr
	err := d.call("cuGraphAddMemcpyNode", uintptr(unsafe.Pointer(&n)), g, uintptr(sliceptr(deps)), uintptr(len(deps)), c.put(m), ctx)
	return n, err
}

func (d *Driver) GraphMemcpyNodeSetParams(m *CMem, node uintptr, c Memcpy) error {
	return d.call("cuGraphMemcpyNodeSetParams", node, c.put(m))
}

func (d *Driver) GraphExecMemcpyNodeSetParams(m *CMem, exec, node uintptr, c Memcpy, ctx uintptr) error {
	return d.call("cuGraphExecMemcpyNodeSetParams", exec, node, c.put(m), ctx)
}

// HostNodeParams is CUDA_HOST_NODE_PARAMS: a C function (a purego
// callback) and its argument.
type HostNodeParams struct {
	Fn       uintptr
	UserData uintptr
}

func (d *Driver) GraphAddHostNode(m *CMem, g uintptr, deps []uintptr, p HostNodeParams) (uintptr, error) {
	return d.addNode("cuGraphAddHostNode", g, deps, uintptr(unsafe.Pointer(put(m, &p))))
}

func (d *Driver) GraphHostNodeSetParams(m *CMem, node uintptr, p HostNodeParams) error {
	return d.call("cuGraphHostNodeSetParams", node, uintptr(unsafe.Pointer(put(m, &p))))
}

func (d *Driver) GraphExecHostNodeSetParams(m *CMem, exec, node uintptr, p HostNodeParams) error {
	return d.call("cuGraphExecHostNodeSetParams", exec, node, uintptr(unsafe.Pointer(put(m, &p))))
}

func (d *Driver) GraphAddEventRecordNode(g uintptr, deps []uintptr, event uintptr) (uintptr, error) {
	return d.addNode("cuGraphAddEventRecordNode", g, deps, event)
}

func (d *Driver) GraphAddEventWaitNode(g uintptr, deps []uintptr, event uintptr) (uintptr, error) {
	return d.addNode("cuGraphAddEventWaitNode", g, deps, event)
}

func (d *Driver) GraphEventRecordNodeSetEvent(node, event uintptr) error {
	return d.call("cuGraphEventRecordNodeSetEvent", node, event)
}

func (d *Driver) GraphEventWaitNodeSetEvent(node, event uintptr) error {
	return d.call("cuGraphEventWaitNodeSetEvent", node, event)
}

func (d *Driver) GraphExecEventRecordNodeSetEvent(exec, node, event uintptr) error {
	return d.call("cuGraphExecEventRecordNodeSetEvent", exec, node, event)
}

func (d *Driver) GraphExecEventWaitNodeSetEvent(exec, node, event uintptr) error {
	return d.call("cuGraphExecEventWaitNodeSetEvent", exec, node, event)
}

// MemAllocNodeParams describe a graph allocation
// (CUDA_MEM_ALLOC_NODE_PARAMS): Bytesize bytes from a pool with PoolProps,
// accessible as Access says.
type MemAllocNodeParams struct {
	PoolProps MemPoolProps
	Access    []MemAccessDesc
	Bytesize  uint64
	Dptr      uint64 // the address, set by the driver
}

// memAllocNodeParams is CUDA_MEM_ALLOC_NODE_PARAMS (v1): 88 bytes of pool
// properties, then the access descriptors, the size, and the address the
// driver returns.
type memAllocNodeParams struct {
	PoolProps       MemPoolProps
	AccessDescs     uintptr // const CUmemAccessDesc*
	AccessDescCount uint64
	Bytesize        uint64
	Dptr            uint64
}

// MemAccessDesc is CUmemAccessDesc.
type MemAccessDesc struct {
	LocationType int32 // CU_MEM_LOCATION_TYPE_DEVICE = 1
	LocationID   int32
	Flags        int32 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
}

// MemPoolProps is CUmemPoolProps (88 bytes).
type MemPoolProps struct {
	AllocType     int32 // CU_MEM_ALLOCATION_TYPE_PINNED = 1
	HandleTypes   int32
	LocationType  int32 // CU_MEM_LOCATION_TYPE_DEVICE = 1
	LocationID    int32
	Win32Security uintptr
	MaxSize       uint64
	Usage         uint16
	Reserved      [54]byte
}

// GraphAddMemAllocNode adds an allocation node and returns it with the
// address of its memory.
func (d *Driver) GraphAddMemAllocNode(m *CMem, g uintptr, deps []uintptr, p MemAllocNodeParams) (uintptr, uint64, error) {
	cp := put(m, &memAllocNodeParams{PoolProps: p.PoolProps, Bytesize: p.Bytesize})
	if len(p.Access) > 0 {
		cp.AccessDescs, cp.AccessDescCount = putSlice(m, p.Access), uint64(len(p.Access))
	}
	n, err := d.addNode("cuGraphAddMemAllocNode", g, deps, uintptr(unsafe.Pointer(cp)))
	if err != nil {
		return 0, 0, err
	}
	return n, cp.Dptr, nil
}

// GraphMemAllocNodeGetParams reads an allocation node's parameters back,
// its access descriptors copied out of the node's memory (the driver owns
// them, valid while the node lives).
func (d *Driver) GraphMemAllocNodeGetParams(node uintptr) (MemAllocNodeParams, error) {
	var p memAllocNodeParams
	err := d.call("cuGraphMemAllocNodeGetParams", node, uintptr(unsafe.Pointer(&p)))
	out := MemAllocNodeParams{PoolProps: p.PoolProps, Bytesize: p.Bytesize, Dptr: p.Dptr}
	if err == nil && p.AccessDescs != 0 && p.AccessDescCount > 0 && p.AccessDescCount <= 1024 {
		// C memory: read through a pointer-typed copy of the address (a
		// uintptr converted directly would be a vet-flagged misuse).
		descs := unsafe.Slice(*(**MemAccessDesc)(unsafe.Pointer(&p.AccessDescs)), p.AccessDescCount)
		out.Access = slices.Clone(descs)
	}
	return out, err
}

// GraphAddMemFreeNode adds a node freeing the graph allocation at dptr.
func (d *Driver) GraphAddMemFreeNode(g uintptr, deps []uintptr, dptr uint64) (uintptr, error) {
	return d.addNode("cuGraphAddMemFreeNode", g, deps, uintptr(dptr))
}

// GraphMemFreeNodeGetParams returns the address a free node frees.
func (d *Driver) GraphMemFreeNodeGetParams(node uintptr) (uint64, error) {
	var p uint64
	err := d.call("cuGraphMemFreeNodeGetParams", node, uintptr(unsafe.Pointer(&p)))
	return p, err
}

// Executable graphs.

// Instantiate is cuGraphInstantiateWithFlags.
func (d *Driver) Instantiate(g uintptr, flags uint64) (uintptr, error) {
	var e uintptr
	err := d.call("cuGraphInstantiateWithFlags", uintptr(unsafe.Pointer(&e)), g, uintptr(flags))
	return e, err
}

// GraphLaunch is the hot path of a graph launch: one fastCall, no
// allocation.
func (d *Driver) GraphLaunch(exec, stream uintptr) error {
	l := d.Launcher()
	return l.GraphLaunch(exec, stream)
}

func (d *Driver) GraphUpload(exec, stream uintptr) error {
	return d.call("cuGraphUpload", exec, stream)
}

func (d *Driver) GraphExecDestroy(exec uintptr) error { return d.call("cuGraphExecDestroy", exec) }

// UpdateResultInfo is CUgraphExecUpdateResultInfo: the
// CUgraphExecUpdateResult and the nodes it is about (0 if none).
type UpdateResultInfo struct {
	Result        int32
	ErrorNode     uintptr
	ErrorFromNode uintptr
}

// GraphExecUpdate updates exec to the parameters of g where the topology
// allows; the result info is valid on failure too.
func (d *Driver) GraphExecUpdate(exec, g uintptr) (UpdateResultInfo, error) {
	var info UpdateResultInfo
	err := d.call("cuGraphExecUpdate_v2", exec, g, uintptr(unsafe.Pointer(&info)))
	return info, err
}

// GraphNodeSetEnabled turns node on or off in exec.
func (d *Driver) GraphNodeSetEnabled(exec, node uintptr, on bool) error {
	v := uintptr(0)
	if on {
		v = 1
	}
	return d.call("cuGraphNodeSetEnabled", exec, node, v)
}

// GraphNodeGetEnabled reports whether node is on in exec.
func (d *Driver) GraphNodeGetEnabled(exec, node uintptr) (bool, error) {
	var v uint32
	err := d.call("cuGraphNodeGetEnabled", exec, node, uintptr(unsafe.Pointer(&v)))
	return v != 0, err
}
