// Package cuda is the cuda backend: devices, streams and events of the
// CUDA driver, through the typed binding in internal/cuda/driver. Streams,
// events, graphs and executable graphs are the driver's own, so launches
// cost what native launches cost and work enqueued on a stream's native
// handle by other libraries is ordered (and captured) with gpugraph's.
//
// Device, its streams, events, pools, semaphores and user objects
// implement the internal/backend interfaces. Graphs, nodes, executable
// graphs and captures are named by their driver handles (graph.go): the
// gpugraph package keeps its own view of each graph and calls these with
// the handles it holds, until the backend.Graph interface that both
// backends implement replaces them (docs/architecture.md).
package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// Device is one CUDA device, with its primary context: the one the
// runtime API and CUDA libraries use, so handles are shared with them.
//
// Each call that needs the context makes it current on the calling OS
// thread and locks the goroutine to that thread for the call (Do): a
// context is current per thread, and goroutines move between threads.
// Stream-bound calls take the context from the stream and skip that,
// unless the driver objects.
type Device struct {
	drv          *driver.Driver
	ord          int
	ctx          uintptr
	major, minor int
	cm           *driver.CMem // kernel parameter arrays, one call at a time
	fail         func(error)  // reports an asynchronous failure to the device's owner

	capOnce  sync.Once
	capCalls chan func(error) // run on the OS thread that begins and ends captures
	// captureInto maps a stream capturing by BeginCaptureToGraph to that
	// graph: ending the capture returns it, and the device does not own it
	// (its creator does, or the conditional node whose body it is). Used
	// on the capture thread only.
	captureInto map[uintptr]uintptr

	owned owned // what Close releases

	mu    sync.Mutex
	funcs map[any]uintptr
	fast  sync.Map // Kernel.Key -> uintptr, read without the lock on every launch
	// ptrArgs: CUfunction -> []int, the indices of its Pointer
	// parameters, for what a captured kernel node addresses (Node).
	ptrArgs sync.Map
	// names: CUfunction or CUkernel -> its name, for the read-back of
	// captured kernel nodes (cuFuncGetName once a function, not once a node).
	names  sync.Map
	allocs []alloc // live allocations by address, for range checks
}

type alloc struct {
	p    uint64
	size int
}

var (
	_ backend.Device         = (*Device)(nil)
	_ backend.DefaultStreams = (*Device)(nil)
)

// DeviceCount is the number of devices the driver reports. Where the
// driver cannot be used it is 0 and the error says why (loadError).
func DeviceCount() (int, error) {
	drv, err := driver.Load()
	if err != nil {
		return 0, loadError(err)
	}
	n, err := drv.DeviceCount()
	return n, Err(err)
}

// Open opens device ordinal of the driver. fail receives asynchronous
// failures that no call returns (a host function that panicked).
func Open(ordinal int, fail func(error)) (*Device, backend.Properties, error) {
	var props backend.Properties
	drv, err := driver.Load()
	if err != nil {
		return nil, props, loadError(err)
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, props, Err(err)
	}
	if n == 0 {
		return nil, props, backend.Errorf(backend.ErrNoDevice, "the driver reports no CUDA device")
	}
	if ordinal < 0 || ordinal >= n {
		return nil, props, backend.Errorf(backend.ErrInvalidDevice, "device %d: the driver reports %d", ordinal, n)
	}
	dev, err := drv.DeviceGet(ordinal)
	if err != nil {
		return nil, props, Err(err)
	}
	ctx, err := drv.PrimaryContext(dev)
	if err != nil {
		return nil, props, Err(err)
	}
	// From here a failure releases the retain.
	fails := func(err error) (*Device, backend.Properties, error) {
		drv.PrimaryContextRelease(dev)
		return nil, backend.Properties{}, Err(err)
	}
	var qerr error // the first failed query: a device described wrong is worse than none
	attr := func(a int) int {
		v, err := drv.Attribute(a, dev)
		if err != nil && qerr == nil {
			qerr = err
		}
		return v
	}
	major, minor := attr(driver.AttrComputeCapMajor), attr(driver.AttrComputeCapMinor)
	name, err := drv.DeviceName(dev)
	if err != nil {
		return fails(err)
	}
	mem, err := drv.TotalMem(dev)
	if err != nil {
		return fails(err)
	}
	props = backend.Properties{
		Ordinal: ordinal, Name: name, DriverVersion: drv.Version(),
		MemoryPoolsSupported: attr(driver.AttrMemoryPoolsSupported) != 0,
		TotalMem:             mem,
		MultiProcessorCount:  attr(driver.AttrMultiprocessorCount),
		MaxThreadsPerBlock:   attr(driver.AttrMaxThreadsPerBlock),
		MaxBlockDim:          [3]int{attr(driver.AttrMaxBlockDimX), attr(driver.AttrMaxBlockDimY), attr(driver.AttrMaxBlockDimZ)},
		MaxGridDim:           [3]int{attr(driver.AttrMaxGridDimX), attr(driver.AttrMaxGridDimY), attr(driver.AttrMaxGridDimZ)},
		WarpSize:             attr(driver.AttrWarpSize),
		SharedMemPerBlock:    attr(driver.AttrMaxSharedPerBlock),
	}
	if qerr != nil {
		return fails(qerr)
	}
	cm, err := driver.NewCMem(1 << 20)
	if err != nil {
		drv.PrimaryContextRelease(dev)
		return nil, props, backend.Errorf(backend.ErrMemoryAllocation, "%v", err)
	}
	d := &Device{drv: drv, ord: dev, ctx: ctx, cm: cm, fail: fail, funcs: map[any]uintptr{}, major: major, minor: minor}
	openDevices.add(d)
	return d, props, nil
}

// loadError says why the driver cannot be used (driver.Load's error), in
// the codes the public package reports: ErrNotSupported on a platform the
// backend does not run on, ErrInsufficientDriver for a driver too old, and
// ErrNoDevice for no driver (with dlopen's reason) or a cuInit that finds
// no usable device (with the driver's result).
func loadError(err error) error {
	var ve *driver.VersionError
	var r *driver.Result
	switch {
	case errors.Is(err, driver.ErrPlatform):
		return backend.Errorf(backend.ErrNotSupported, "%v", err)
	case errors.As(err, &ve):
		return backend.Errorf(backend.ErrInsufficientDriver, "%v", err)
	case errors.As(err, &r):
		why := "the NVIDIA driver failed to initialize"
		switch r.Code {
		case 100: // CUDA_ERROR_NO_DEVICE
			why = "the NVIDIA driver finds no CUDA device"
		case 34: // CUDA_ERROR_STUB_LIBRARY
			why = "the libcuda.so.1 loaded is the CUDA toolkit's stub, not the NVIDIA driver's (check LD_LIBRARY_PATH)"
		}
		code, ok := codes[r.Code]
		if !ok {
			code = backend.ErrNoDevice
		}
		return backend.Errorf(code, "%s (%s: %s)", why, r.Call, r.Name)
	}
	return backend.Errorf(backend.ErrNoDevice, "%v (is an NVIDIA driver installed?)", err)
}

// openDevices are the process's open Devices: a copy may read or write the
// memory of any of them (CheckCopyRange), as the driver copies between
// devices under unified addressing without peer access.
var openDevices deviceSet

type deviceSet struct {
	mu   sync.Mutex
	list []*Device
}

func (s *deviceSet) add(d *Device) {
	s.mu.Lock()
	s.list = append(s.list, d)
	s.mu.Unlock()
}

func (s *deviceSet) remove(d *Device) {
	s.mu.Lock()
	if i := slices.Index(s.list, d); i >= 0 {
		s.list = slices.Delete(s.list, i, i+1)
	}
	s.mu.Unlock()
}

func (s *deviceSet) snapshot() []*Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// Do runs f with the device's context current on a locked OS thread, and
// maps a driver error it returns to the backend's (Err).
func (d *Device) Do(f func() error) error { return Err(d.do(f)) }

func (d *Device) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.drv.SetCurrent(d.ctx); err != nil {
		return err
	}
	return f()
}

// bound runs f, a call on a handle that carries its context, without
// making the device's context current: a stream's (record, wait,
// synchronize, query, semaphores: the driver takes the context from the
// stream, as for launches) or an executable graph's (cuGraphExecUpdate,
// cuGraphExecDestroy: with another context current the driver takes it
// from the handle, measured by TestCUDAExecCallsCarryTheirContext).
// cuCtxSetCurrent before each such call made a 10-node update 3-4 % slower
// (its own foreign call) and the update itself slower still
// (docs/performance-log.md). If the driver objects, as it does to the graph
// calls with no context current on the thread, f is repeated with ours
// made current (retry).
func (d *Device) bound(f func() error) error { return d.retry(f(), f) }

// retry finishes a call f made without making the device's context
// current (bound, the launches), which returned err: if the driver objected
// to the thread's context, f is repeated with ours current. The result is
// mapped as Do's.
func (d *Device) retry(err error, f func() error) error {
	if contextError(err) {
		err = d.do(f)
	}
	return Err(err)
}

// Err maps a driver error to a *backend.Error with the Code of the same
// name (and the entry point as its detail); other errors, nil included,
// pass through (a caller's own error returned from inside Do stays its).
func Err(err error) error {
	if err == nil {
		return nil // before r: errors.As moves r to the heap, on every call
	}
	var r *driver.Result
	if !errors.As(err, &r) {
		return err
	}
	code, ok := codes[r.Code]
	if !ok {
		code = backend.NewCode(r.Code, r.Name, "CUDA driver error")
	}
	return &backend.Error{Code: code, Detail: r.Call}
}

// codes maps CUresult values to the Codes with CUDA runtime names.
var codes = map[int]*backend.Code{
	1: backend.ErrInvalidValue, 2: backend.ErrMemoryAllocation, 100: backend.ErrNoDevice, 101: backend.ErrInvalidDevice,
	400: backend.ErrInvalidResourceHandle, 401: backend.ErrIllegalState, 600: backend.ErrNotReady, 700: backend.ErrIllegalAddress, 702: backend.ErrLaunchTimeout,
	701: backend.ErrInvalidConfiguration, 704: backend.ErrPeerAccessAlreadyEnabled, 705: backend.ErrPeerAccessNotEnabled, 709: backend.ErrContextIsDestroyed, 712: backend.ErrHostMemoryAlreadyRegistered, 713: backend.ErrHostMemoryNotRegistered, 719: backend.ErrLaunchFailure, 801: backend.ErrNotSupported,
	900: backend.ErrStreamCaptureUnsupported, 901: backend.ErrStreamCaptureInvalidated, 902: backend.ErrStreamCaptureMerge,
	903: backend.ErrStreamCaptureUnmatched, 904: backend.ErrStreamCaptureUnjoined, 905: backend.ErrStreamCaptureIsolation,
	906: backend.ErrStreamCaptureImplicit, 907: backend.ErrCapturedEvent, 908: backend.ErrStreamCaptureWrongThread,
	217: backend.ErrPeerAccessUnsupported, 402: backend.ErrLossyQuery, 800: backend.ErrNotPermitted, 910: backend.ErrGraphExecUpdateFailure,
	500: backend.ErrInvalidDeviceFunction, 218: backend.ErrInvalidDeviceFunction, 209: backend.ErrInvalidDeviceFunction,
	303: backend.ErrSharedObjectInitFailed, 999: backend.ErrUnknown,
}

// contextError reports a driver error that a current context would fix.
func contextError(err error) bool {
	if err == nil {
		return false // before r: errors.As moves r to the heap, on every launch
	}
	var r *driver.Result
	return errors.As(err, &r) && (r.Code == 201 || r.Code == 400 || r.Code == 709) // INVALID_CONTEXT, INVALID_HANDLE, CONTEXT_IS_DESTROYED
}

// Function returns k's CUDA function, compiling k.Source (CUDA C++ with
// NVRTC; PTX text and cubin images load as they are) on first use on this
// device. A source that does not compile or load is ErrInvalidDeviceFunction;
// a driver failure (out of memory loading the module) keeps its own code.
func (d *Device) Function(k *backend.Kernel) (uintptr, error) {
	if f, ok := d.fast.Load(k.Key); ok {
		return f.(uintptr), nil
	}
	f, err := d.function(k)
	if err != nil {
		var r *driver.Result
		if errors.As(err, &r) && !moduleError(r.Code) {
			return 0, Err(r)
		}
		return 0, backend.Errorf(backend.ErrInvalidDeviceFunction, "%s", err.Error())
	}
	return f, nil
}

// moduleError reports the CUresults that say a module or its function is
// wrong (CUDA_ERROR_INVALID_IMAGE, _INVALID_PTX, _NO_BINARY_FOR_GPU,
// _UNSUPPORTED_PTX_VERSION, _NOT_FOUND, _INVALID_SOURCE,
// _JIT_COMPILER_NOT_FOUND, ...): those are the kernel's fault.
func moduleError(code int) bool {
	switch code {
	case 200, 209, 218, 221, 222, 300, 301, 302, 303, 500:
		return true
	}
	return false
}

func (d *Device) function(k *backend.Kernel) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.funcs[k.Key]; ok {
		return f, nil
	}
	var image []byte
	switch {
	case strings.HasPrefix(k.Source, "\x7fELF"): // a cubin
		image = []byte(k.Source)
	case strings.Contains(k.Source, ".entry") && strings.Contains(k.Source, ".version"): // PTX
		image = append([]byte(k.Source), 0)
	default:
		nv, err := driver.LoadNVRTC()
		if err != nil {
			return 0, err
		}
		src, opts := devRTSource(k)
		if image, err = compileCached(nv, src, k.Name, d.major, d.minor, opts); err != nil {
			return 0, fmt.Errorf("kernel %q: %v", k.Name, err)
		}
	}
	var f uintptr
	err := d.do(func() error {
		image, err := d.linkDevRT(k, image) // kernels that launch graphs
		if err != nil {
			return err
		}
		mod, err := d.drv.ModuleLoadData(image)
		if err != nil {
			return err
		}
		d.own(kindModule, mod)
		f, err = d.drv.ModuleGetFunction(mod, k.Name)
		return err
	})
	if err != nil {
		return 0, err
	}
	d.funcs[k.Key] = f
	d.fast.Store(k.Key, f)
	var idx []int
	for i := 0; i < 64; i++ {
		if k.Pointers&(1<<i) != 0 {
			idx = append(idx, i)
		}
	}
	d.ptrArgs.Store(f, idx)
	return f, nil
}

// CheckRange reports whether [p, p+n) lies inside one live allocation of
// an open device: the device's own, or a peer's, whose access the driver
// judges when the work is issued (a stream's memset of a peer's memory
// without access: cudaErrorInvalidValue at issue, docs/driver-peer.txt).
func (d *Device) CheckRange(p uint64, n int) error { return d.CheckCopyRange(p, n) }

// ownRange reports whether [p, p+n) lies inside one live allocation of d.
func (d *Device) ownRange(p uint64, n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := sort.Search(len(d.allocs), func(i int) bool { return d.allocs[i].p > p }) - 1
	if i < 0 || p+uint64(n) > d.allocs[i].p+uint64(d.allocs[i].size) {
		return fmt.Errorf("[%#x, +%d) is not inside a live allocation of this device", p, n)
	}
	return nil
}

// CheckCopyRange is CheckRange for a side of a copy, which may be memory
// of any open device of the process: the driver copies between devices'
// allocations without peer access (measured on two GPUs, TestDevicesCUDA
// PeerCopy). What no open device owns is still refused.
func (d *Device) CheckCopyRange(p uint64, n int) error {
	if d.ownRange(p, n) == nil {
		return nil
	}
	for _, o := range openDevices.snapshot() {
		if o != d && o.ownRange(p, n) == nil {
			return nil
		}
	}
	return fmt.Errorf("[%#x, +%d) is not inside a live allocation of any open device", p, n)
}

// MemoryOwner returns the ordinal of the open device of the process that
// made the allocation holding p (backend.MemoryOwners), or -1.
func (d *Device) MemoryOwner(p uint64) int {
	if d.ownRange(p, 1) == nil {
		return d.ord
	}
	for _, o := range openDevices.snapshot() {
		if o != d && o.ownRange(p, 1) == nil {
			return o.ord
		}
	}
	return -1
}

// OpenDevices is the number of the process's open Devices
// (backend.MemoryOwners).
func (d *Device) OpenDevices() int {
	openDevices.mu.Lock()
	defer openDevices.mu.Unlock()
	return len(openDevices.list)
}

// track records an allocation for the range checks of copies and memsets:
// cuMemAlloc, MallocAsync and graph allocations (whose addresses are fixed
// for their node's life).
func (d *Device) track(p uint64, n int) {
	d.mu.Lock()
	i := sort.Search(len(d.allocs), func(i int) bool { return d.allocs[i].p > p })
	d.allocs = append(d.allocs, alloc{})
	copy(d.allocs[i+1:], d.allocs[i:])
	if i > 0 && d.allocs[i-1].p == p { // an address reused (graph allocations)
		d.allocs = append(d.allocs[:i], d.allocs[i+1:]...)
		d.allocs[i-1].size = max(d.allocs[i-1].size, n)
	} else {
		d.allocs[i] = alloc{p, n}
	}
	d.mu.Unlock()
}

// untrack forgets the allocation at p, reporting whether it was tracked.
func (d *Device) untrack(p uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := sort.Search(len(d.allocs), func(i int) bool { return d.allocs[i].p >= p })
	if i == len(d.allocs) || d.allocs[i].p != p {
		return false
	}
	d.allocs = append(d.allocs[:i], d.allocs[i+1:]...)
	return true
}

// Synchronize waits for all work in the context.
func (d *Device) Synchronize() error { return d.Do(d.drv.CtxSynchronize) }

// Malloc is cuMemAlloc.
func (d *Device) Malloc(n int) (uint64, error) {
	var p uint64
	err := d.Do(func() error { var err error; p, err = d.drv.MemAlloc(n); return err })
	if err != nil {
		return 0, err
	}
	d.track(p, n)
	d.ownMem(p, true)
	return p, nil
}

// Free is cuMemFree: of Malloc's memory, and of graph allocations and
// MallocAsync memory, which the driver checks (it refuses what is not
// live).
func (d *Device) Free(p uint64) error {
	if err := d.Do(func() error { return d.drv.MemFree(p) }); err != nil {
		return err // still live: Close frees it
	}
	d.untrack(p)
	d.ownMem(p, false)
	return nil
}

// Memcpy copies after all work in the context, in the legacy default
// stream, and waits for the copy (cudaMemcpy).
func (d *Device) Memcpy(p *backend.Memcpy) error {
	call, err := d.copyCall(p)
	if err != nil {
		return err
	}
	return d.syncCall(call)
}

// Memset fills as Memcpy copies (cudaMemset).
func (d *Device) Memset(p *backend.Memset) error { return d.syncCall(d.memsetCall(p)) }

func (d *Device) syncCall(call func(stream uintptr) error) error {
	return d.Do(func() error {
		if err := d.drv.CtxSynchronize(); err != nil {
			return err
		}
		if err := call(0); err != nil {
			return err
		}
		return d.drv.StreamSynchronize(0)
	})
}

// copyCall returns the driver call of p's direction.
func (d *Device) copyCall(p *backend.Memcpy) (func(stream uintptr) error, error) {
	drv, dst, src, size := d.drv, p.Dst, p.Src, p.Size
	switch {
	case p.DstHost != nil && p.SrcHost != nil:
		return nil, backend.Errorf(backend.ErrNotSupported, "host-to-host copies are not supported on the cuda backend")
	case p.SrcHost != nil:
		host := p.SrcHost
		return func(s uintptr) error { return drv.MemcpyHtoDAsync(dst, host, size, s) }, nil
	case p.DstHost != nil:
		host := p.DstHost
		return func(s uintptr) error { return drv.MemcpyDtoHAsync(host, src, size, s) }, nil
	}
	return func(s uintptr) error { return drv.MemcpyDtoDAsync(dst, src, size, s) }, nil
}

// memsetCall returns p's driver call (cuMemsetD2D8Async,
// cuMemsetD2D16Async or cuMemsetD2D32Async).
func (d *Device) memsetCall(p *backend.Memset) func(stream uintptr) error {
	pitch := uint64(p.Pitch)
	if p.Height == 1 {
		// cuMemsetD2D* wants a pitch of at least a row even for one row.
		pitch = max(pitch, 1)
	}
	drv, dst, v, w, h := d.drv, p.Dst, p.Value, uint64(p.Width), uint64(p.Height)
	switch p.ElementSize {
	case 1:
		return func(s uintptr) error { return drv.MemsetD2D8Async(dst, pitch, uint8(v), w, h, s) }
	case 2:
		return func(s uintptr) error { return drv.MemsetD2D16Async(dst, pitch, uint16(v), w, h, s) }
	}
	return func(s uintptr) error { return drv.MemsetD2D32Async(dst, pitch, v, w, h, s) }
}

// NewStream creates a CU_STREAM_NON_BLOCKING stream: no implicit
// synchronization with the legacy stream.
func (d *Device) NewStream() (backend.Stream, error) { return d.newStream(driver.StreamNonBlocking) }

// NewBlockingStream creates a stream that synchronizes with the legacy
// default stream (CU_STREAM_DEFAULT).
func (d *Device) NewBlockingStream() (backend.Stream, error) {
	return d.newStream(driver.StreamDefault)
}

func (d *Device) newStream(flags int) (backend.Stream, error) {
	s := &Stream{d: d, l: d.drv.Launcher()}
	err := d.Do(func() error { var err error; s.h, err = d.drv.StreamCreate(flags); return err })
	if err != nil {
		return nil, err
	}
	d.own(kindStream, s.h)
	return s, nil
}

// LegacyStream is the context's legacy default stream (CU_STREAM_LEGACY).
// Its handle does not name the context, so every call on it is made with
// the device's context current (Stream.call).
func (d *Device) LegacyStream() (backend.Stream, error) {
	return &Stream{d: d, l: d.drv.Launcher(), h: driver.StreamLegacy}, nil
}

// NewEvent creates an event.
func (d *Device) NewEvent(flags backend.EventFlags) (backend.Event, error) {
	f := 0
	if flags&backend.EventDisableTiming != 0 {
		f = 2 // CU_EVENT_DISABLE_TIMING
	}
	e := &Event{d: d}
	err := d.Do(func() error { var err error; e.h, err = d.drv.EventCreate(f); return err })
	if err != nil {
		return nil, err
	}
	d.own(kindEvent, e.h)
	return e, nil
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
	d       *Device
}

// hostCallbackPtr is the C callback of host functions and host nodes; its
// user data is an id from registerHostFunc.
func hostCallbackPtr() uintptr {
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
						h.d.fail(backend.Errorf(backend.ErrLaunchFailure, "panic: %v", p))
					}
				}()
				h.fn()
			}()
			return 0
		})
	})
	return hostCallback
}

// forgetHostFuncs drops the device's host functions (Close: nothing of
// the device runs them any more).
func (d *Device) forgetHostFuncs() {
	hostFuncs.Range(func(id, v any) bool {
		if v.(*hostFunc).d == d {
			hostFuncs.Delete(id)
		}
		return true
	})
}

// registerHostFunc returns the callback's user data for fn; a one-shot
// function is forgotten once it has run, others when the device closes.
func (d *Device) registerHostFunc(fn func(), oneShot bool) uintptr {
	id := hostFuncIDs.Add(1)
	hostFuncs.Store(id, &hostFunc{fn, oneShot, d})
	return id
}

// errNotCurrent marks the capture thread before its first cuCtxSetCurrent.
var errNotCurrent = errors.New("the device's context is not current on the capture thread")

// onCaptureThread runs f on the device's capture thread. Stream capture on
// the cuda backend is the driver's own: work anyone enqueues on the native
// stream, gpugraph or another library, is captured. The driver ties global
// and thread-local captures to the OS thread that began them, and
// goroutines move between threads, so every capture begins and ends on one
// OS thread per device, owned by a goroutine.
func (d *Device) onCaptureThread(f func() error) error {
	d.capOnce.Do(func() {
		d.capCalls = make(chan func(error), 1)
		go func() {
			runtime.LockOSThread()
			var cur error = errNotCurrent // until cuCtxSetCurrent succeeds on this thread
			for f := range d.capCalls {
				if cur != nil {
					cur = d.drv.SetCurrent(d.ctx)
				}
				f(cur)
			}
		}()
	})
	done := make(chan error, 1)
	d.capCalls <- func(cur error) {
		if cur != nil {
			done <- cur // the context could not be made current: nothing ran
			return
		}
		done <- f()
	}
	return <-done
}

// Driver is the device's driver binding, for benchmarks that call it
// directly.
func (d *Device) Driver() *driver.Driver { return d.drv }

// Context is the device's primary CUcontext.
func (d *Device) Context() uintptr { return d.ctx }

// Close synchronizes the context; the primary context stays retained for
// the process, as the runtime keeps it.

var (
	_ backend.Peers         = (*Device)(nil)
	_ backend.MemoryOwners  = (*Device)(nil)
	_ backend.NativeMemsets = (*Device)(nil)
)

// CanAccessPeer is cuDeviceCanAccessPeer.
func (d *Device) CanAccessPeer(peer backend.Device) (bool, error) {
	var ok bool
	err := d.Do(func() error {
		var err error
		ok, err = d.drv.DeviceCanAccessPeer(d.ord, peer.(*Device).ord)
		return err
	})
	return ok, err
}

// EnablePeerAccess is cuCtxEnablePeerAccess of peer's context from d's.
func (d *Device) EnablePeerAccess(peer backend.Device) error {
	p := peer.(*Device)
	err := d.Do(func() error { return d.drv.CtxEnablePeerAccess(p.ctx) })
	peerState.record(d.ord, p.ord, err, backend.ErrPeerAccessAlreadyEnabled, true)
	return err
}

// DisablePeerAccess is cuCtxDisablePeerAccess.
func (d *Device) DisablePeerAccess(peer backend.Device) error {
	p := peer.(*Device)
	err := d.Do(func() error { return d.drv.CtxDisablePeerAccess(p.ctx) })
	peerState.record(d.ord, p.ord, err, backend.ErrPeerAccessNotEnabled, false)
	return err
}

// PeerAccessEnabled reports whether peer access from device from to
// device to is enabled, as this process's EnablePeerAccess and
// DisablePeerAccess left it (backend.Peers). Access enabled outside
// gpugraph, by another library on the same primary contexts (NCCL among
// them), is not seen: the driver has no query for it.
func (d *Device) PeerAccessEnabled(from, to int) bool {
	peerState.mu.Lock()
	defer peerState.mu.Unlock()
	return peerState.on[[2]int{from, to}]
}

// peerState is the peer access gpugraph enabled between the process's
// primary contexts, by ordinals (from, to). The contexts are the process's
// and stay retained when a Device closes, and so does their access: the
// record is process-wide too.
var peerState peerRecord

type peerRecord struct {
	mu sync.Mutex
	on map[[2]int]bool
}

// record notes the outcome err of enabling (on) or disabling access from
// device from to device to: done, or already so (the driver's answer
// code says access already was as asked).
func (r *peerRecord) record(from, to int, err error, already *backend.Code, on bool) {
	var be *backend.Error
	if err != nil && !(errors.As(err, &be) && be.Code == already) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on == nil {
		r.on = map[[2]int]bool{}
	}
	if on {
		r.on[[2]int{from, to}] = true
	} else {
		delete(r.on, [2]int{from, to})
	}
}

// The PTX of every source compiled in this process, by source, name,
// architecture and options: NVRTC takes milliseconds a kernel, and a process
// that opens devices one after another (a test per device, a service that
// reopens after a fault) would otherwise pay it at every Open. Bounded, so a
// program generating kernels without end does not grow it without end.
var ptxCache struct {
	sync.Mutex
	m map[string][]byte
}

const ptxCacheMax = 512

func compileCached(nv *driver.NVRTC, src, name string, major, minor int, opts []string) ([]byte, error) {
	key := fmt.Sprintf("%s\x00%d.%d\x00%s\x00%s", name, major, minor, strings.Join(opts, " "), src)
	ptxCache.Lock()
	ptx, ok := ptxCache.m[key]
	ptxCache.Unlock()
	if ok {
		return ptx, nil
	}
	ptx, err := nv.Compile(src, name, major, minor, opts...)
	if err != nil {
		return nil, err
	}
	ptxCache.Lock()
	if ptxCache.m == nil {
		ptxCache.m = map[string][]byte{}
	}
	if len(ptxCache.m) < ptxCacheMax {
		ptxCache.m[key] = ptx
	}
	ptxCache.Unlock()
	return ptx, nil
}

// LoopsAlone: the driver (580.159.04 on H100, CUDA 13.0) loses the context
// (Xid 13, "SKEDCHECK22_INVALIDATE_ACTIVE_QMD failed"; every later call
// cudaErrorLaunchFailure) when a WHILE loop runs its body more than once
// while other nodes of its graph run, within a few dozen launches of such a
// graph; nothing running beside the loop, or only other streams' work, it
// never did in 27,000 launches (tools/probe/lostctx.cu,
// docs/driver-lostctx.txt).
func (d *Device) LoopsAlone() {}
