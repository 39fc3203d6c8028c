// Package cublas binds the few cuBLAS entry points gpugraph's examples need
// (handle, stream, workspace, math mode, SGEMM, and GemmEx for TF32 and
// bfloat16 products), loaded at run time with
// purego so the module keeps building with CGO_ENABLED=0 and needs no CUDA
// toolkit to compile.
//
// As in package internal/cuda/driver, every call goes through purego.SyscallN on
// a function pointer looked up once at Load. Handles and device pointers
// are uintptrs; a stream is the driver's CUstream (gpugraph's
// Stream.NativeStream), which is the runtime's cudaStream_t.
//
// cuBLAS is column-major. Sgemm and GemmEx have cuBLAS's column-major
// meaning; SgemmRowMajor and GemmExRowMajor take row-major matrices and map
// the call onto them.
//
// A handle is bound to the device current when it is created (cuBLAS uses
// the runtime API, which on a thread with no current context uses device
// 0's primary context, the one gpugraph's cuda backend uses). On a machine
// with several GPUs, make the device's context current (cuCtxSetCurrent on
// Device.NativeContext) on a locked OS thread before Create and before
// calls.
//
// For work captured into a CUDA graph, give the handle its own workspace
// (SetWorkspace) before capture: cuBLAS then never allocates during
// capture, and a graph holds no cuBLAS-owned memory.
package cublas

import (
	"errors"
	"fmt"
	"math"
)

// ErrNoCUBLAS is returned (wrapped, with the names tried) by Load when no
// libcublas can be loaded.
var ErrNoCUBLAS = errors.New("cublas: libcublas not found")

// Status is a cublasStatus_t.
type Status int32

// cublasStatus_t values (cublas_api.h).
const (
	StatusSuccess         Status = 0
	StatusNotInitialized  Status = 1
	StatusAllocFailed     Status = 3
	StatusInvalidValue    Status = 7
	StatusArchMismatch    Status = 8
	StatusMappingError    Status = 11
	StatusExecutionFailed Status = 13
	StatusInternalError   Status = 14
	StatusNotSupported    Status = 15
	StatusLicenseError    Status = 16
)

var statusNames = map[Status]string{
	StatusSuccess:         "CUBLAS_STATUS_SUCCESS",
	StatusNotInitialized:  "CUBLAS_STATUS_NOT_INITIALIZED",
	StatusAllocFailed:     "CUBLAS_STATUS_ALLOC_FAILED",
	StatusInvalidValue:    "CUBLAS_STATUS_INVALID_VALUE",
	StatusArchMismatch:    "CUBLAS_STATUS_ARCH_MISMATCH",
	StatusMappingError:    "CUBLAS_STATUS_MAPPING_ERROR",
	StatusExecutionFailed: "CUBLAS_STATUS_EXECUTION_FAILED",
	StatusInternalError:   "CUBLAS_STATUS_INTERNAL_ERROR",
	StatusNotSupported:    "CUBLAS_STATUS_NOT_SUPPORTED",
	StatusLicenseError:    "CUBLAS_STATUS_LICENSE_ERROR",
}

// String returns cuBLAS's name of s.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("CUBLAS_STATUS_UNKNOWN_%d", int32(s))
}

// Error is a cuBLAS call that did not return CUBLAS_STATUS_SUCCESS.
type Error struct {
	Call   string // the cuBLAS entry point, e.g. "cublasSgemm_v2"
	Status Status
	Detail string // set when the check was ours, not cuBLAS's
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Status, int32(e.Status))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes errors.Is(err, cublas.StatusInvalidValue) work.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }

// check turns a raw return value into an error. cublasStatus_t is a C
// enum (32 bits): the upper half of the return register is not defined.
func check(call string, r uintptr) error {
	if s := Status(int32(uint32(r))); s != StatusSuccess {
		return &Error{Call: call, Status: s}
	}
	return nil
}

// Math is a cublasMath_t, set with Handle.SetMathMode.
type Math int32

// cublasMath_t values.
const (
	// MathDefault: FP32 routines compute in FP32.
	MathDefault Math = 0
	// MathPedantic: the matching _PEDANTIC compute type, no reduced-precision shortcuts.
	MathPedantic Math = 2
	// MathTF32: FP32 routines may use TF32 tensor cores (10-bit mantissa inputs).
	MathTF32 Math = 3
	// MathDisallowReducedPrecisionReduction is a flag to OR into a mode.
	MathDisallowReducedPrecisionReduction Math = 16
)

// Workspace sizes the cuBLAS documentation recommends for SetWorkspace
// (cublasSetWorkspace): 32 MiB on Hopper (compute capability 9.x) and
// later, 4 MiB on earlier GPUs.
const (
	WorkspaceHopper  = 32 << 20
	WorkspaceDefault = 4 << 20
)

// gemm holds the arguments of a GEMM that the row-major mapping changes.
type gemm struct {
	transA, transB bool
	m, n, k        int
	a              uintptr
	lda            int
	b              uintptr
	ldb            int
}

// colMajor maps a row-major GEMM C(m×n) = op(A)·op(B) onto cuBLAS's
// column-major one. A row-major matrix with leading dimension ld is, read
// column-major with the same ld, its transpose; so the row-major C is the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap A and B (with their transposes and
// leading dimensions) and swap m and n. C and ldc are unchanged, and the
// leading-dimension rules cuBLAS checks (lda ≥ rows of A as stored) become
// exactly the row-major ones (ld ≥ columns as stored).
func (g gemm) colMajor() gemm {
	return gemm{
		transA: g.transB, transB: g.transA,
		m: g.n, n: g.m, k: g.k,
		a: g.b, lda: g.ldb,
		b: g.a, ldb: g.lda,
	}
}

// op is a cublasOperation_t: CUBLAS_OP_N = 0, CUBLAS_OP_T = 1.
func op(trans bool) uintptr {
	if trans {
		return 1
	}
	return 0
}

// fitInt32 rejects sizes that a C int cannot hold (cuBLAS would see them
// truncated); negative values go to cuBLAS, which reports them.
func fitInt32(call string, names string, vs ...int) error {
	for _, v := range vs {
		if v > math.MaxInt32 || v < math.MinInt32 {
			return &Error{Call: call, Status: StatusInvalidValue, Detail: fmt.Sprintf("%s: %d does not fit a C int", names, v)}
		}
	}
	return nil
}
