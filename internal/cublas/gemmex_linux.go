//go:build linux

package cublas

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// cublasGemmEx is looked up in a Lib the first time a handle of it calls
// GemmEx (and the answer kept), so that Load and its list of entry points
// stay as they are; a library without it fails that call, not Load.
var gemmExSyms sync.Map // *Lib → gemmExSym

type gemmExSym struct {
	fn  uintptr
	err error
}

func (l *Lib) gemmExFn() (uintptr, error) {
	if v, ok := gemmExSyms.Load(l); ok {
		s := v.(gemmExSym)
		return s.fn, s.err
	}
	var s gemmExSym
	s.fn, s.err = purego.Dlsym(l.lib, "cublasGemmEx")
	if s.err != nil {
		s.err = &Error{Call: "cublasGemmEx", Status: StatusNotSupported, Detail: fmt.Sprintf("%s lacks it: %v", l.Path, s.err)}
	}
	v, _ := gemmExSyms.LoadOrStore(l, s)
	s = v.(gemmExSym)
	return s.fn, s.err
}

// GemmEx computes C = alpha·op(A)·op(B) + beta·C (cublasGemmEx) with
// cuBLAS's column-major meaning, like Sgemm, for A, B and C of the given
// element types and the given compute type; alpha and beta are float32, so
// the compute type must be one of the 32F ones. Which combinations cuBLAS
// accepts is its to say (CUBLAS_STATUS_NOT_SUPPORTED otherwise): A and B
// CUDA_R_16BF with C CUDA_R_32F and Compute32F is bfloat16 mixed
// precision; all CUDA_R_32F with Compute32FFastTF32 is TF32. cuBLAS picks
// the algorithm (CUBLAS_GEMM_DEFAULT). The call is asynchronous on the
// handle's stream.
func (h *Handle) GemmEx(transA, transB bool, m, n, k int, alpha float32, a uintptr, aType DataType, lda int,
	b uintptr, bType DataType, ldb int, beta float32, c uintptr, cType DataType, ldc int, compute ComputeType) error {
	return h.gemmEx(gemm{transA, transB, m, n, k, a, lda, b, ldb}, aType, bType, alpha, beta, c, cType, ldc, compute)
}

// GemmExRowMajor is GemmEx for row-major matrices, with SgemmRowMajor's
// meaning of the sizes and leading dimensions: GemmEx on the transposed
// problem (A and B, and their types, swapped).
func (h *Handle) GemmExRowMajor(transA, transB bool, m, n, k int, alpha float32, a uintptr, aType DataType, lda int,
	b uintptr, bType DataType, ldb int, beta float32, c uintptr, cType DataType, ldc int, compute ComputeType) error {
	return h.gemmEx(gemm{transA, transB, m, n, k, a, lda, b, ldb}.colMajor(), bType, aType, alpha, beta, c, cType, ldc, compute)
}

func (h *Handle) gemmEx(g gemm, aType, bType DataType, alpha, beta float32, c uintptr, cType DataType, ldc int, compute ComputeType) error {
	const call = "cublasGemmEx"
	if err := fitInt32(call, "m, n, k, lda, ldb, ldc", g.m, g.n, g.k, g.lda, g.ldb, ldc); err != nil {
		return err
	}
	h.lock()
	defer h.unlock()
	if err := h.live(call); err != nil {
		return err
	}
	fn, err := h.lib.gemmExFn()
	if err != nil {
		return err
	}
	h.scal[0], h.scal[1] = alpha, beta
	algo := int32(gemmDefaultAlgo)
	// C enum and int arguments: the callee reads the low 32 bits.
	r, _, _ := purego.SyscallN(fn, h.h, op(g.transA), op(g.transB),
		uintptr(g.m), uintptr(g.n), uintptr(g.k),
		uintptr(unsafe.Pointer(&h.scal[0])), g.a, uintptr(uint32(aType)), uintptr(g.lda),
		g.b, uintptr(uint32(bType)), uintptr(g.ldb),
		uintptr(unsafe.Pointer(&h.scal[1])), c, uintptr(uint32(cType)), uintptr(ldc),
		uintptr(uint32(compute)), uintptr(uint32(algo)))
	return check(call, r)
}
