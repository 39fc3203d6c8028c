// Package driver binds the CUDA driver API (libcuda.so.1) and NVRTC
// (libnvrtc) at run time with purego, so the module builds with
// CGO_ENABLED=0 and needs no CUDA toolkit to compile. Every call goes
// through purego.SyscallN on a function pointer looked up once, but the two
// launches, which take the lighter fastCall; the reflection path of
// purego.RegisterLibFunc (about 1 µs a call) is never used.
//
// The package is a thin layer: one typed method per driver entry point,
// handles as uintptrs, parameters as Go values whose C layout (the structs
// of cuda.h, CUDA 13.0, x86-64) is made here, errors as Result values with
// the entry point's name. Semantics live in the packages above.
package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/dl"
)

// Result is a CUresult other than CUDA_SUCCESS.
type Result struct {
	Code int
	Name string
	Call string
}

func (r *Result) Error() string { return fmt.Sprintf("%s: %s (%d)", r.Call, r.Name, r.Code) }

// ErrNoDriver is returned by Load when libcuda.so.1 cannot be loaded (no
// NVIDIA driver installed, or not on the library path); the error wrapping
// it carries dlopen's reason.
var ErrNoDriver = errors.New("the NVIDIA driver's libcuda.so.1 cannot be loaded")

// ErrPlatform is returned by Load on a platform the binding does not
// support: it loads libcuda.so.1 and lays out cuda.h's structs as on
// 64-bit Linux.
var ErrPlatform = errors.New("the cuda backend is not supported on " + runtime.GOOS + "/" + runtime.GOARCH + " (it runs on 64-bit Linux)")

// MinVersion is the oldest driver Load accepts, as cuDriverGetVersion
// reports it (1000*major + 10*minor): CUDA 12.3, the first with every
// graph entry point the packages above build all graphs and captures with
// (cuGraphAddNode_v2, cuStreamGetCaptureInfo_v3,
// cuStreamBeginCaptureToGraph, conditional handles).
const MinVersion = 12030

// VersionError is returned by Load when the driver is older than
// MinVersion.
type VersionError struct {
	Version int // cuDriverGetVersion
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("the NVIDIA driver supports CUDA %s (cuDriverGetVersion %d); the cuda backend needs CUDA %s or later: update the driver",
		VersionString(e.Version), e.Version, VersionString(MinVersion))
}

// VersionString prints a cuDriverGetVersion value as CUDA does: 12030 is
// "12.3".
func VersionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// Driver holds the driver's entry points.
type Driver struct {
	lib uintptr
	fn  map[string]uintptr
	// hot entry points, called through fastCall
	launchKernel, graphLaunch uintptr
	version                   int // cuDriverGetVersion, read once by Load
}

var (
	loadOnce sync.Once
	loaded   *Driver
	loadErr  error
)

// Load loads libcuda.so.1, calls cuInit and checks the driver's version,
// once per process. Its error says why the driver cannot be used: ErrPlatform,
// ErrNoDriver (wrapped with dlopen's reason), cuInit's *Result (such as
// CUDA_ERROR_NO_DEVICE), or a *VersionError.
func Load() (*Driver, error) {
	loadOnce.Do(func() {
		if runtime.GOOS != "linux" || unsafe.Sizeof(uintptr(0)) != 8 {
			loadErr = ErrPlatform
			return
		}
		lib, err := dl.Open("libcuda.so.1")
		if err != nil {
			loadErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		d := &Driver{lib: lib, fn: map[string]uintptr{}}
		for _, name := range driverSymbols {
			// A symbol this driver lacks fails only the calls that need it.
			if p, err := dl.Sym(lib, name); err == nil {
				d.fn[name] = p
			}
		}
		d.launchKernel, d.graphLaunch = d.fn["cuLaunchKernel"], d.fn["cuGraphLaunch"]
		traceFromEnv()
		if err := d.call("cuInit", 0); err != nil {
			loadErr = err
			return
		}
		var v int32
		if err := d.call("cuDriverGetVersion", uintptr(unsafe.Pointer(&v))); err != nil {
			loadErr = err
			return
		}
		if d.version = int(v); d.version < MinVersion {
			loadErr = &VersionError{Version: d.version}
			return
		}
		loaded = d
	})
	return loaded, loadErr
}

// driverSymbols are the entry points used, with the versioned names the
// driver exports for the current ABI: each has its typed method
// (TestSymbolsCalled checks that the two agree).
var driverSymbols = []string{
	"cuInit", "cuDriverGetVersion", "cuGetErrorName",
	"cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceTotalMem_v2", "cuDeviceGetAttribute",
	"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxReset_v2", "cuCtxSetCurrent", "cuCtxSynchronize",
	"cuMemGetInfo_v2", "cuModuleUnload",
	"cuDeviceCanAccessPeer", "cuCtxEnablePeerAccess", "cuCtxDisablePeerAccess",
	"cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamQuery", "cuStreamWaitEvent",
	"cuEventCreate", "cuEventRecord", "cuEventRecordWithFlags", "cuEventSynchronize", "cuEventQuery", "cuEventElapsedTime_v2", "cuEventDestroy_v2",
	"cuMemAlloc_v2", "cuMemFree_v2", "cuMemHostAlloc", "cuMemFreeHost", "cuMemHostRegister_v2", "cuMemHostUnregister",
	"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2",
	"cuMemsetD32Async", "cuMemsetD2D8Async", "cuMemsetD2D16Async", "cuMemsetD2D32Async",
	"cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel", "cuLaunchHostFunc",
	"cuGraphCreate", "cuGraphDestroy", "cuGraphAddKernelNode_v2", "cuGraphAddEmptyNode", "cuGraphAddChildGraphNode",
	"cuGraphAddMemsetNode", "cuGraphAddMemcpyNode", "cuGraphAddHostNode", "cuGraphAddEventRecordNode", "cuGraphAddEventWaitNode",
	"cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphUpload", "cuGraphExecDestroy",
	"cuStreamBeginCapture_v2", "cuStreamEndCapture",
	"cuGraphAddDependencies_v2", "cuGraphRemoveDependencies_v2", "cuGraphDestroyNode",
	"cuGraphChildGraphNodeGetGraph", "cuGraphGetNodes", "cuGraphNodeGetType", "cuGraphNodeGetDependencies_v2",
	"cuGraphAddMemAllocNode", "cuGraphAddMemFreeNode", "cuMemFreeAsync",
	"cuDeviceGetGraphMemAttribute", "cuDeviceSetGraphMemAttribute", "cuDeviceGraphMemTrim",
	"cuStreamBeginCaptureToGraph", "cuStreamGetCaptureInfo_v3", "cuStreamUpdateCaptureDependencies_v2",
	"cuGraphClone", "cuGraphNodeFindInClone",
	"cuGraphKernelNodeSetParams_v2", "cuGraphMemcpyNodeSetParams", "cuGraphMemsetNodeSetParams",
	"cuGraphHostNodeSetParams", "cuGraphEventRecordNodeSetEvent", "cuGraphEventWaitNodeSetEvent",
	"cuDeviceGetDefaultMemPool", "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolTrimTo",
	"cuMemPoolSetAttribute", "cuMemPoolGetAttribute", "cuMemPoolSetAccess", "cuMemAllocFromPoolAsync",
	// graph update
	"cuGraphMemAllocNodeGetParams", "cuGraphMemFreeNodeGetParams",
	"cuGraphKernelNodeGetParams_v2", "cuGraphMemcpyNodeGetParams", "cuGraphMemsetNodeGetParams", "cuFuncGetName", "cuKernelGetName", "cuGraphNodeSetParams",
	"cuGraphExecUpdate_v2", "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecMemcpyNodeSetParams",
	"cuGraphExecMemsetNodeSetParams", "cuGraphExecHostNodeSetParams", "cuGraphExecChildGraphNodeSetParams",
	"cuGraphExecEventRecordNodeSetEvent", "cuGraphExecEventWaitNodeSetEvent", "cuGraphNodeSetEnabled", "cuGraphNodeGetEnabled",
	"cuUserObjectCreate", "cuUserObjectRetain", "cuUserObjectRelease", "cuGraphRetainUserObject", "cuGraphReleaseUserObject",
	"cuGraphConditionalHandleCreate", "cuGraphAddNode_v2",
	"cuGraphInstantiateWithParams", "cuLinkCreate_v2", "cuLinkAddData_v2", "cuLinkAddFile_v2", "cuLinkComplete", "cuLinkDestroy",
}

// call calls the named driver function, which must be in driverSymbols.
// Only this package calls by name: everything else uses the typed methods,
// and the name is the Call of the Result a failure returns.
//
// uintptrescapes makes every pointer converted to uintptr in a call of call
// (out-parameters such as uintptr(unsafe.Pointer(&n)), and slices passed as
// uintptr(sliceptr(s))) live on the heap and stay alive for the call:
// without it a stack variable may move when the stack grows, and the driver
// writes the result to the old stack.
//
//go:uintptrescapes
func (d *Driver) call(name string, args ...uintptr) error {
	fault.calls.Add(1)
	if injected() {
		injectedAt(name)
		return &Result{Code: int(fault.code.Load()), Name: "CUDA_ERROR_INJECTED", Call: name + " (failure injected by a test)"}
	}
	f := d.fn[name]
	if f == 0 {
		return &Result{Code: 500, Name: "CUDA_ERROR_NOT_FOUND", Call: name + " (not exported by this driver)"}
	}
	var tn uint64
	t := trace.Load()
	if t != nil {
		tn = t.begin(name, args)
	}
	var r uintptr
	if len(args) <= 12 {
		// Every driver entry point but a few takes at most 12 words: the
		// launch path's lighter call, about half purego's cost
		// (BenchmarkFastCall), on each of the two calls (cuCtxSetCurrent
		// and the call itself) of every Device.Do.
		var a [12]uintptr
		copy(a[:], args)
		r = fastCall(f, a)
	} else {
		r, _, _ = purego.SyscallN(f, args...)
	}
	if t != nil {
		t.end(tn, r)
	}
	return d.check(name, uintptr(uint32(r))) // a CUresult is a C enum: the low 32 bits
}

func (d *Driver) check(call string, r uintptr) error {
	if r == 0 {
		return nil
	}
	var s *byte
	purego.SyscallN(d.fn["cuGetErrorName"], r, uintptr(unsafe.Pointer(&s)))
	return &Result{Code: int(r), Name: GoString(s), Call: call}
}

// Check is the error of a CUresult r that call returned outside the
// binding (a C loop a benchmark loads): nil for CUDA_SUCCESS, else a
// *Result with the driver's name for r.
func (d *Driver) Check(call string, r int) error { return d.check(call, uintptr(uint32(r))) }

// GoString copies a NUL-terminated C string.
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	var n int
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// CString returns a NUL-terminated copy of s in Go memory holding no Go
// pointers, which C may read during the call.
func CString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

// Attribute numbers of cuDeviceGetAttribute used here.
const (
	AttrMaxThreadsPerBlock   = 1
	AttrMaxBlockDimX         = 2
	AttrMaxBlockDimY         = 3
	AttrMaxBlockDimZ         = 4
	AttrMaxGridDimX          = 5
	AttrMaxGridDimY          = 6
	AttrMaxGridDimZ          = 7
	AttrMaxSharedPerBlock    = 8
	AttrWarpSize             = 10
	AttrMultiprocessorCount  = 16
	AttrComputeCapMajor      = 75
	AttrComputeCapMinor      = 76
	AttrMemoryPoolsSupported = 115
)

// Attribute returns a device attribute.
func (d *Driver) Attribute(attr int, dev int) (int, error) {
	var v int32
	err := d.call("cuDeviceGetAttribute", uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev))
	return int(v), err
}

// Version returns cuDriverGetVersion, as Load read it (the driver cannot
// change under a running process).
func (d *Driver) Version() int { return d.version }

// DeviceName returns the name of device ordinal dev.
func (d *Driver) DeviceName(dev int) (string, error) {
	buf := make([]byte, 256)
	if err := d.call("cuDeviceGetName", uintptr(unsafe.Pointer(&buf[0])), 256, uintptr(dev)); err != nil {
		return "", err
	}
	return GoString(&buf[0]), nil
}
