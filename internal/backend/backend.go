package backend

import "time"

// Device is one device of a backend. Its methods run after the gpugraph
// package's own checks (a closed device, an unsafe call during capture,
// argument shapes), so a backend checks only what it alone knows: that a
// pointer is memory of its own, that it can do what is asked.
type Device interface {
	// Synchronize waits for all work on the device.
	Synchronize() error
	// Malloc allocates n > 0 bytes; Free frees what Malloc, a stream
	// allocation or a graph allocation returned.
	Malloc(n int) (uint64, error)
	Free(p uint64) error
	// Memcpy and Memset run after all work on the device and wait for
	// themselves (cudaMemcpy, cudaMemset).
	Memcpy(p *Memcpy) error
	Memset(p *Memset) error
	NewStream() (Stream, error)
	NewEvent(flags EventFlags) (Event, error)
	// CheckRange reports whether [p, p+n) lies inside one live allocation
	// of the device.
	CheckRange(p uint64, n int) error
	// Close lets the device's streams finish and releases what the
	// backend holds; the caller has synchronized.
	Close() error
}

// Stream is a queue of work on a device.
type Stream interface {
	// Launch queues a kernel launch. The backend copies what it keeps:
	// l and l.Args may be reused when Launch returns. The caller never
	// makes two Launch calls on one stream at once (the root package
	// holds the stream's argument lock), so state of the stream's own
	// needs no lock of the backend's.
	Launch(l *Launch) error
	// HostFunc queues fn to run on the host in stream order.
	HostFunc(fn func()) error
	Memcpy(p *Memcpy) error
	Memset(p *Memset) error
	// Record and Wait are cudaEventRecord and cudaStreamWaitEvent; e is an
	// event of the same backend.
	Record(e Event) error
	Wait(e Event) error
	Synchronize() error
	// Query returns nil when all work issued has completed, an error with
	// ErrNotReady while some is pending.
	Query() error
	Destroy() error
}

// DefaultStreams is implemented by devices whose driver has CUDA's legacy
// default stream and orders it against blocking streams itself (the cuda
// backend). On other backends the gpugraph package makes the legacy stream
// and blocking streams with NewStream and orders their work with events.
type DefaultStreams interface {
	// LegacyStream is the legacy default stream (CU_STREAM_LEGACY). The
	// caller never destroys it.
	LegacyStream() (Stream, error)
	// NewBlockingStream creates a stream that synchronizes with the legacy
	// stream (cuStreamCreate with CU_STREAM_DEFAULT); NewStream's streams
	// do not (CU_STREAM_NON_BLOCKING).
	NewBlockingStream() (Stream, error)
}

// ExternalEvents is implemented by streams whose driver captures work
// itself (Capturer): RecordExternal and WaitExternal are Record and Wait
// with cudaEventRecordExternal / cudaEventWaitExternal, which a capture
// turns into event record and wait nodes instead of dependencies.
type ExternalEvents interface {
	RecordExternal(e Event) error
	WaitExternal(e Event) error
}

// Event marks a point in a stream's work.
type Event interface {
	Synchronize() error
	Query() error
	Destroy() error
	// ElapsedTime is the time from start's completion to this event's.
	ElapsedTime(start Event) (time.Duration, error)
}

// Native is implemented by objects with a driver handle (the cuda
// backend's CUstream, CUevent, ...), for code that calls other CUDA
// libraries.
type Native interface {
	Native() uintptr
}

// Abandoner is implemented by graphs whose backend can forget a graph
// without destroying it: one the driver already destroyed, or one holding a
// graph the driver destroyed, which destroying would free twice.
type Abandoner interface {
	Abandon()
}

// CaptureMarker is implemented by nodes of backends that emulate stream
// capture (the host backend): the gpugraph package marks the nodes a
// capture made, which the driver treats apart in some updates.
type CaptureMarker interface {
	MarkCaptured()
}

// EventFlags are cudaEventCreateWithFlags' flags, with gpugraph's values.
type EventFlags uint

// EventDisableTiming makes an event that ElapsedTime refuses.
const EventDisableTiming EventFlags = 1

// Kernel is a kernel as a backend sees it. Key identifies it across
// launches (the public *gpugraph.Kernel), so a backend may keep what it
// builds from it (a compiled module) under that key.
type Kernel struct {
	Key           any
	Go            any // the body a backend that runs Go calls (host.Body)
	Name          string
	Source        string // CUDA C++, PTX or a cubin image
	DeviceRuntime bool   // the kernel launches graphs: link the device runtime
	Pointers      uint64 // bit i: argument i (of the first 64) is a device pointer
}

// Launch is one launch of a kernel with its arguments marshalled, one
// 64-bit word per parameter (pointers and integers as their values,
// floats as their bits).
type Launch struct {
	// The fields a stream launch reads come first: with Kernel.Key after
	// them they share a cache line with the root Stream's own.
	Grid, Block [3]uint32
	Shared      uint32
	Args        []uint64
	Kernel      Kernel
}

// Memcpy is a checked copy of Size bytes. Each side is device memory
// (Dst, Src) or a host slice (DstHost, SrcHost) at least Size long.
// DstPinned and SrcPinned say that a host side is page-locked memory
// (HostMemory), which the gpugraph package decides: a graph's memcpy node
// reads a pinned source when the node runs, a pageable one (host memory
// that is not pinned) when the graph is launched, at the Launch call, as
// the driver stages it.
type Memcpy struct {
	Dst, Src             uint64
	DstHost, SrcHost     []byte
	Size                 int
	DstPinned, SrcPinned bool
}

// Staged reports whether a graph's memcpy node of p reads its source
// when the graph is launched: the source is pageable host memory.
func (p *Memcpy) Staged() bool { return p.SrcHost != nil && !p.SrcPinned }

// Pageable reports whether a side of p is pageable host memory, which
// device graphs and conditional bodies cannot copy.
func (p *Memcpy) Pageable() bool {
	return (p.SrcHost != nil && !p.SrcPinned) || (p.DstHost != nil && !p.DstPinned)
}

// CopyKind names a copy's direction as cudaMemcpyKind does, from which
// sides are host memory.
func CopyKind(dstHost, srcHost bool) string {
	switch {
	case dstHost && srcHost:
		return "HtoH"
	case dstHost:
		return "DtoH"
	case srcHost:
		return "HtoD"
	}
	return "DtoD"
}

// Memset is a checked fill of Height rows of Width elements of ElementSize
// (1, 2 or 4) bytes with Value, rows Pitch bytes apart (for one row, Pitch
// is the row's length); Total is the bytes from the first to the end of
// the last row.
type Memset struct {
	Dst         uint64
	Value       uint32
	ElementSize int
	Width       int
	Height      int
	Pitch       int
	Total       int
}

// Properties describe a device, as cudaDeviceProp does.
type Properties struct {
	Ordinal              int // the device's number among its backend's devices
	Name                 string
	DriverVersion        int
	MemoryPoolsSupported bool
	TotalMem             uint64
	MultiProcessorCount  int
	MaxThreadsPerBlock   int
	MaxBlockDim          [3]int
	MaxGridDim           [3]int
	WarpSize             int
	SharedMemPerBlock    int
}

// Peers is implemented by devices of backends with several devices and
// peer access between them (cudaDeviceCanAccessPeer,
// cudaDeviceEnablePeerAccess): access from this device to memory of peer,
// a device of the same backend.
type Peers interface {
	CanAccessPeer(peer Device) (bool, error)
	EnablePeerAccess(peer Device) error
	DisablePeerAccess(peer Device) error
	// PeerAccessEnabled reports whether work on the backend's device
	// from may use memory of its device to (ordinals), as EnablePeerAccess
	// and DisablePeerAccess of the process's devices left it: access
	// enabled outside gpugraph (another library on the same driver
	// contexts, NCCL among them) is not seen.
	PeerAccessEnabled(from, to int) bool
}

// NativeMemsets is implemented by devices whose graphs hold memset nodes
// the driver made (stream capture on the cuda backend), whose parameters
// the gpugraph package does not keep: it reads their rows when a rule
// needs them.
type NativeMemsets interface {
	NativeMemsetHeight(node uintptr) (int, error)
}

// MemoryOwners is implemented by devices that can say which open device of
// their backend holds a device address: the device the allocation was made
// on (for the cuda backend, of the allocations it tracks: cuMemAlloc,
// stream-ordered and graph allocations). The gpugraph package decides what
// follows from it (an executable graph's memset and memcpy nodes keep the
// devices of their memory).
type MemoryOwners interface {
	// MemoryOwner returns the ordinal of the open device whose memory
	// holds p, or -1 when none does.
	MemoryOwner(p uint64) int
	// OpenDevices is the number of the backend's devices open in the
	// process.
	OpenDevices() int
}

// HostMemory is implemented by devices with page-locked host memory
// (cuMemHostAlloc, cuMemHostRegister). The gpugraph package keeps the
// ranges and checks the arguments: FreeHost gets a whole allocation of
// MallocHost, HostUnregister a whole registration of HostRegister.
type HostMemory interface {
	// MallocHost allocates n > 0 bytes of page-locked memory, outside the
	// Go heap.
	MallocHost(n int) ([]byte, error)
	FreeHost(b []byte) error
	// HostRegister page-locks b (len(b) > 0), which stays where it is
	// until HostUnregister.
	HostRegister(b []byte) error
	HostUnregister(b []byte) error
}

// Pools is implemented by devices with stream-ordered allocation
// (cudaMallocAsync and memory pools).
type Pools interface {
	// DefaultMemPool is the device's default pool.
	DefaultMemPool() (MemPool, error)
	// NewMemPool creates a pool resident on device location, of at most
	// maxSize bytes (0: the backend's default).
	NewMemPool(location int, maxSize uint64) (MemPool, error)
	// MallocAsync allocates n > 0 bytes from p in s's order; FreeAsync
	// frees in s's order.
	MallocAsync(s Stream, n int, p MemPool) (uint64, error)
	FreeAsync(s Stream, ptr uint64) error
}

// MemPool is a pool of device memory for stream-ordered allocation.
type MemPool interface {
	Destroy() error
	TrimTo(minBytesToKeep uint64) error
	SetReleaseThreshold(bytes uint64) error
	ReleaseThreshold() (uint64, error)
	Stats() (PoolStats, error)
	ResetHigh() error
	// SetAccess sets device's access to the pool's memory, flags as
	// cudaMemAccessFlags (0 none, 1 read, 3 read-write).
	SetAccess(device int, flags int) error
}

// PoolStats is a pool's footprint, as the driver's pool attributes count
// it: reserved in the granules the pool holds, used in the bytes
// allocations asked for.
type PoolStats struct {
	ReservedCurrent, ReservedHigh uint64
	UsedCurrent, UsedHigh         uint64
}

// GraphMemory is implemented by devices that report and trim the memory
// of graph allocations (cudaDeviceGetGraphMemAttribute,
// cudaDeviceGraphMemTrim).
type GraphMemory interface {
	GraphMemStats() (GraphMemStats, error)
	ResetGraphMemHigh() error
	TrimGraphMem() error
}

// GraphMemStats report a device's graph memory.
type GraphMemStats struct {
	UsedCurrent, UsedHigh         uint64
	ReservedCurrent, ReservedHigh uint64
}

// ExternalSemaphores is implemented by devices that import semaphores
// made by a graphics API (cuImportExternalSemaphore).
type ExternalSemaphores interface {
	// ImportExternalSemaphoreFD imports a semaphore of handle type kind
	// (cudaExternalSemaphoreHandleType) from a file descriptor.
	ImportExternalSemaphoreFD(kind, fd int) (ExternalSemaphore, error)
	// SignalExternalSemaphores and WaitExternalSemaphores queue a signal
	// of, or a wait for, sems[i] at values[i] in s.
	SignalExternalSemaphores(s Stream, sems []ExternalSemaphore, values []uint64) error
	WaitExternalSemaphores(s Stream, sems []ExternalSemaphore, values []uint64) error
}

// ExternalSemaphore is an imported semaphore.
type ExternalSemaphore interface {
	Destroy() error
}

// UserObjects is implemented by devices whose driver keeps user objects
// (cuUserObjectCreate).
type UserObjects interface {
	// NewUserObject creates an object with refs references whose
	// destructor the driver calls, on a thread of its own, once the last is
	// released: destroy must only hand the destructor over, never run it.
	NewUserObject(destroy func(), refs int, flags uint) (UserObject, error)
}

// UserObject is a reference-counted user object of the driver.
type UserObject interface {
	Retain(n int) error
	Release(n int) error
}

// NodeType is a graph node's type, with CUDA's values (CUgraphNodeType).
type NodeType int

// Node types.
const (
	NodeKernel       NodeType = 0
	NodeMemcpy       NodeType = 1
	NodeMemset       NodeType = 2
	NodeHost         NodeType = 3
	NodeChildGraph   NodeType = 4
	NodeEmpty        NodeType = 5
	NodeEventWait    NodeType = 6
	NodeEventRecord  NodeType = 7
	NodeExtSemSignal NodeType = 8
	NodeExtSemWait   NodeType = 9
	NodeMemAlloc     NodeType = 10
	NodeMemFree      NodeType = 11
	NodeConditional  NodeType = 13
)

// Op is the operation of a graph node whose parameters a backend can set
// (kernel, copy, memset, host function, empty, event record and wait,
// external semaphore signal and wait), lowered by the gpugraph package:
// the field of Type is the one used.
type Op struct {
	// Device is the device the op runs on when it is not its graph's
	// (a graph of several devices); nil otherwise.
	Device Device
	Type   NodeType
	Launch Launch
	Memcpy Memcpy
	Memset Memset
	Host   func()
	Event  Event
	Sems   []ExternalSemaphore
	Values []uint64
}

// EdgeData is a dependency's ports and type (CUgraphEdgeData).
type EdgeData struct {
	FromPort, ToPort uint8
	Type             uint8
}

// Ports and types of edges, with CUDA's values.
const (
	PortDefault          = 0 // cudaGraphKernelNodePortDefault
	PortProgrammatic     = 1 // cudaGraphKernelNodePortProgrammatic
	PortLaunchCompletion = 2 // cudaGraphKernelNodePortLaunchCompletion

	DependencyProgrammatic = 1 // cudaGraphDependencyTypeProgrammatic
)

// Early reports whether the edge lets its downstream node start before its
// upstream kernel completes.
func (d EdgeData) Early() bool { return d.FromPort != PortDefault }

// LoopsAlone is implemented by devices whose driver must not run a WHILE
// loop beside other nodes of the same graph: there the gpugraph package
// orders every node that holds a loop before or after all the others of
// its graph in the backend's graph, for as long as an instantiation or
// update reads it, and leaves its own graph as the user made it.
type LoopsAlone interface {
	LoopsAlone()
}
