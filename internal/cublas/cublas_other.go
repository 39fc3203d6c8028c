//go:build !linux

package cublas

import "fmt"

// Lib is a loaded libcublas; only Linux has one.
type Lib struct{ Path string }

// Handle is a cublasHandle_t; only Linux has one.
type Handle struct{}

// Load fails outside Linux.
func Load() (*Lib, error) { return nil, fmt.Errorf("%w: cuBLAS is bound on Linux only", ErrNoCUBLAS) }

func unsupported(call string) error {
	return &Error{Call: call, Status: StatusNotInitialized, Detail: "cuBLAS is bound on Linux only"}
}

// Create fails outside Linux.
func (l *Lib) Create() (*Handle, error) { return nil, unsupported("cublasCreate_v2") }

// Destroy fails outside Linux.
func (h *Handle) Destroy() error { return unsupported("cublasDestroy_v2") }

// SetStream fails outside Linux.
func (h *Handle) SetStream(stream uintptr) error { return unsupported("cublasSetStream_v2") }

// SetWorkspace fails outside Linux.
func (h *Handle) SetWorkspace(ptr uintptr, bytes int) error {
	return unsupported("cublasSetWorkspace_v2")
}

// SetMathMode fails outside Linux.
func (h *Handle) SetMathMode(mode Math) error { return unsupported("cublasSetMathMode") }

// Version fails outside Linux.
func (h *Handle) Version() (int, error) { return 0, unsupported("cublasGetVersion_v2") }

// Sgemm fails outside Linux.
func (h *Handle) Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	return unsupported("cublasSgemm_v2")
}

// SgemmRowMajor fails outside Linux.
func (h *Handle) SgemmRowMajor(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	return unsupported("cublasSgemm_v2")
}
