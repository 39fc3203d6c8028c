package driver

import (
	"unsafe"
)

// Typed wrappers, named after the driver calls without "cu". Handles are
// uintptrs, device addresses uint64s.

// Devices and contexts.

func (d *Driver) DeviceGet(ordinal int) (int, error) {
	var dev int32
	err := d.call("cuDeviceGet", uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))
	return int(dev), err
}

func (d *Driver) DeviceCount() (int, error) {
	var n int32
	err := d.call("cuDeviceGetCount", uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

// DeviceCanAccessPeer is cuDeviceCanAccessPeer.
func (d *Driver) DeviceCanAccessPeer(dev, peer int) (bool, error) {
	var ok int32
	err := d.call("cuDeviceCanAccessPeer", uintptr(unsafe.Pointer(&ok)), uintptr(dev), uintptr(peer))
	return ok != 0, err
}

// CtxEnablePeerAccess lets the current context use the memory of peerCtx.
func (d *Driver) CtxEnablePeerAccess(peerCtx uintptr) error {
	return d.call("cuCtxEnablePeerAccess", peerCtx, 0)
}

// CtxDisablePeerAccess revokes CtxEnablePeerAccess.
func (d *Driver) CtxDisablePeerAccess(peerCtx uintptr) error {
	return d.call("cuCtxDisablePeerAccess", peerCtx)
}

func (d *Driver) TotalMem(dev int) (uint64, error) {
	var n uint64
	err := d.call("cuDeviceTotalMem_v2", uintptr(unsafe.Pointer(&n)), uintptr(dev))
	return n, err
}

// PrimaryContext retains the device's primary context, the one the runtime
// API and CUDA libraries use, so handles are shared with them.
func (d *Driver) PrimaryContext(dev int) (uintptr, error) {
	var ctx uintptr
	err := d.call("cuDevicePrimaryCtxRetain", uintptr(unsafe.Pointer(&ctx)), uintptr(dev))
	return ctx, err
}

// PrimaryContextRelease releases one retain of the device's primary
// context; the last release destroys it.
func (d *Driver) PrimaryContextRelease(dev int) error {
	return d.call("cuDevicePrimaryCtxRelease_v2", uintptr(dev))
}

// PrimaryContextReset destroys every resource of the device's primary
// context and resets it, for every retainer in the process: the way out of
// a sticky error.
func (d *Driver) PrimaryContextReset(dev int) error {
	return d.call("cuDevicePrimaryCtxReset_v2", uintptr(dev))
}

// MemGetInfo reports free and total memory of the current context's device.
func (d *Driver) MemGetInfo() (free, total uint64, err error) {
	err = d.call("cuMemGetInfo_v2", uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return free, total, err
}

// ModuleUnload unloads a module loaded by ModuleLoadData.
func (d *Driver) ModuleUnload(mod uintptr) error { return d.call("cuModuleUnload", mod) }

func (d *Driver) SetCurrent(ctx uintptr) error { return d.call("cuCtxSetCurrent", ctx) }

// CtxSynchronize waits for all work of the current context.
func (d *Driver) CtxSynchronize() error { return d.call("cuCtxSynchronize") }

// Streams.

// The driver's stream handles that name no created stream: the legacy
// default stream and the calling thread's per-thread default stream.
const (
	StreamLegacy    uintptr = 0x1 // CU_STREAM_LEGACY
	StreamPerThread uintptr = 0x2 // CU_STREAM_PER_THREAD
)

// Stream creation flags (cuStreamCreate).
const (
	StreamDefault     = 0x0 // CU_STREAM_DEFAULT: synchronizes with the legacy stream
	StreamNonBlocking = 0x1 // CU_STREAM_NON_BLOCKING
)

func (d *Driver) StreamCreate(flags int) (uintptr, error) {
	var s uintptr
	err := d.call("cuStreamCreate", uintptr(unsafe.Pointer(&s)), uintptr(flags))
	return s, err
}

func (d *Driver) StreamDestroy(stream uintptr) error { return d.call("cuStreamDestroy_v2", stream) }

func (d *Driver) StreamSynchronize(stream uintptr) error {
	return d.call("cuStreamSynchronize", stream)
}

func (d *Driver) StreamQuery(stream uintptr) error { return d.call("cuStreamQuery", stream) }

func (d *Driver) StreamWaitEvent(stream, event uintptr, flags uint32) error {
	return d.call("cuStreamWaitEvent", stream, event, uintptr(flags))
}

// LaunchHostFunc queues fn(userData), a C function pointer (a purego
// callback), on stream.
func (d *Driver) LaunchHostFunc(stream, fn, userData uintptr) error {
	return d.call("cuLaunchHostFunc", stream, fn, userData)
}

// Events.

func (d *Driver) EventCreate(flags int) (uintptr, error) {
	var e uintptr
	err := d.call("cuEventCreate", uintptr(unsafe.Pointer(&e)), uintptr(flags))
	return e, err
}

func (d *Driver) EventRecord(event, stream uintptr) error {
	return d.call("cuEventRecord", event, stream)
}

// EventRecordWithFlags is cuEventRecordWithFlags; CU_EVENT_RECORD_EXTERNAL
// (1) makes a capture record an event record node instead of a dependency
// on the capture.
func (d *Driver) EventRecordWithFlags(event, stream uintptr, flags uint32) error {
	return d.call("cuEventRecordWithFlags", event, stream, uintptr(flags))
}

func (d *Driver) EventSynchronize(event uintptr) error {
	return d.call("cuEventSynchronize", event)
}

func (d *Driver) EventQuery(event uintptr) error { return d.call("cuEventQuery", event) }

func (d *Driver) EventDestroy(event uintptr) error { return d.call("cuEventDestroy_v2", event) }

// ElapsedTime returns milliseconds between two recorded events.
func (d *Driver) ElapsedTime(start, end uintptr) (float32, error) {
	var ms float32
	err := d.call("cuEventElapsedTime_v2", uintptr(unsafe.Pointer(&ms)), start, end)
	return ms, err
}

// Memory.

func (d *Driver) MemAlloc(n int) (uint64, error) {
	var p uint64
	err := d.call("cuMemAlloc_v2", uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

func (d *Driver) MemFree(p uint64) error { return d.call("cuMemFree_v2", uintptr(p)) }

// Flags of MemHostAlloc and MemHostRegister.
const (
	MemHostPortable  = 0x01 // CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE: pinned for every context
	MemHostDeviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP: mapped into the devices' address space
)

// MemHostAlloc allocates n bytes of page-locked host memory
// (cuMemHostAlloc). The memory is not Go memory: it stays where it is
// until MemFreeHost.
func (d *Driver) MemHostAlloc(n int, flags uint) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := d.call("cuMemHostAlloc", uintptr(unsafe.Pointer(&p)), uintptr(n), uintptr(flags))
	return p, err
}

// MemFreeHost frees memory of MemHostAlloc (cuMemFreeHost).
func (d *Driver) MemFreeHost(p unsafe.Pointer) error {
	return d.call("cuMemFreeHost", uintptr(p))
}

// MemHostRegister page-locks the host memory of b (cuMemHostRegister_v2).
// b must stay where it is, and alive, until MemHostUnregister.
func (d *Driver) MemHostRegister(b []byte, flags uint) error {
	return d.call("cuMemHostRegister_v2", uintptr(sliceptr(b)), uintptr(len(b)), uintptr(flags))
}

// MemHostUnregister unregisters the memory registered at p
// (cuMemHostUnregister).
func (d *Driver) MemHostUnregister(p unsafe.Pointer) error {
	return d.call("cuMemHostUnregister", uintptr(p))
}

// MemcpyHtoDAsync copies the first n bytes of src to dst. src is Go memory
// the driver reads until the copy has run: keep it alive until then.
func (d *Driver) MemcpyHtoDAsync(dst uint64, src []byte, n int, stream uintptr) error {
	const name = "cuMemcpyHtoDAsync_v2"
	if n > len(src) {
		return hostRangeError(name)
	}
	return d.call(name, uintptr(dst), uintptr(sliceptr(src)), uintptr(n), stream)
}

// MemcpyDtoHAsync copies n bytes from src to the start of dst, Go memory
// that must stay alive until the copy has run.
func (d *Driver) MemcpyDtoHAsync(dst []byte, src uint64, n int, stream uintptr) error {
	const name = "cuMemcpyDtoHAsync_v2"
	if n > len(dst) {
		return hostRangeError(name)
	}
	return d.call(name, uintptr(sliceptr(dst)), uintptr(src), uintptr(n), stream)
}

func (d *Driver) MemcpyDtoDAsync(dst, src uint64, n int, stream uintptr) error {
	return d.call("cuMemcpyDtoDAsync_v2", uintptr(dst), uintptr(src), uintptr(n), stream)
}

// hostRangeError refuses a copy longer than its host slice, before the
// driver could read or write past it.
func hostRangeError(call string) error {
	return &Result{Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Call: call + " (host slice shorter than the copy)"}
}

// MemsetD32Async sets n 32-bit words at dst to value.
func (d *Driver) MemsetD32Async(dst uint64, value uint32, n int, stream uintptr) error {
	return d.call("cuMemsetD32Async", uintptr(dst), uintptr(value), uintptr(n), stream)
}

// MemsetD2D8Async fills height rows of width bytes, pitch bytes apart.
func (d *Driver) MemsetD2D8Async(dst, pitch uint64, value uint8, width, height uint64, stream uintptr) error {
	return d.call("cuMemsetD2D8Async", uintptr(dst), uintptr(pitch), uintptr(value), uintptr(width), uintptr(height), stream)
}

// MemsetD2D16Async fills height rows of width 16-bit elements.
func (d *Driver) MemsetD2D16Async(dst, pitch uint64, value uint16, width, height uint64, stream uintptr) error {
	return d.call("cuMemsetD2D16Async", uintptr(dst), uintptr(pitch), uintptr(value), uintptr(width), uintptr(height), stream)
}

// MemsetD2D32Async fills height rows of width 32-bit elements.
func (d *Driver) MemsetD2D32Async(dst, pitch uint64, value uint32, width, height uint64, stream uintptr) error {
	return d.call("cuMemsetD2D32Async", uintptr(dst), uintptr(pitch), uintptr(value), uintptr(width), uintptr(height), stream)
}

// Modules and launches.

func (d *Driver) ModuleLoadData(image []byte) (uintptr, error) {
	var m uintptr
	err := d.call("cuModuleLoadData", uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))
	return m, err
}

func (d *Driver) ModuleGetFunction(mod uintptr, name string) (uintptr, error) {
	var f uintptr
	cname := CString(name)
	err := d.call("cuModuleGetFunction", uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(cname)))
	return f, err
}

// FuncGetName returns a function's name.
func (d *Driver) FuncGetName(f uintptr) (string, error) {
	var name *byte
	err := d.call("cuFuncGetName", uintptr(unsafe.Pointer(&name)), f)
	return GoString(name), err
}

// KernelGetName returns a library kernel's name.
func (d *Driver) KernelGetName(k uintptr) (string, error) {
	var name *byte
	err := d.call("cuKernelGetName", uintptr(unsafe.Pointer(&name)), k)
	return GoString(name), err
}

// Launch launches f with its parameter array already laid out in C memory
// (CMem.Params). It is the hot path: one fastCall, no allocation.
func (d *Driver) Launch(f uintptr, grid, block [3]uint32, shared uint32, stream, params uintptr) error {
	l := d.Launcher()
	return l.Launch(f, grid, block, shared, stream, params)
}

// Launcher is the launch fast path (cuLaunchKernel, cuGraphLaunch) for a
// caller that keeps it beside its own data, as a stream does: the entry
// points are copied into it, so a launch reads no cache line of the
// Driver's, which the driver's own run between two launches has likely
// evicted (docs/performance-log.md, "The stream launch path").
type Launcher struct {
	d             *Driver
	kernel, graph uintptr
}

// Launcher returns d's launch fast path.
func (d *Driver) Launcher() Launcher { return Launcher{d, d.launchKernel, d.graphLaunch} }

// Launch is Driver.Launch.
func (l *Launcher) Launch(f uintptr, grid, block [3]uint32, shared uint32, stream, params uintptr) error {
	if t := trace.Load(); t != nil {
		return l.traced(t, "cuLaunchKernel", l.kernel, [12]uintptr{f,
			uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
			uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
			uintptr(shared), stream, params, 0}, 10)
	}
	r := fastCall(l.kernel, [12]uintptr{f,
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(shared), stream, params, 0})
	if r == 0 {
		return nil
	}
	return l.d.check("cuLaunchKernel", r)
}

// traced makes a launch while the trace is on: its first n words logged
// before it, its result after.
func (l *Launcher) traced(t *tracer, name string, fn uintptr, a [12]uintptr, n int) error {
	tn := t.begin(name, a[:n])
	r := fastCall(fn, a)
	t.end(tn, r)
	if r == 0 {
		return nil
	}
	return l.d.check(name, r)
}

// GraphLaunch is Driver.GraphLaunch.
func (l *Launcher) GraphLaunch(exec, stream uintptr) error {
	if t := trace.Load(); t != nil {
		return l.traced(t, "cuGraphLaunch", l.graph, [12]uintptr{exec, stream}, 2)
	}
	r := fastCall(l.graph, [12]uintptr{exec, stream})
	if r == 0 {
		return nil
	}
	return l.d.check("cuGraphLaunch", r)
}
