//go:build !linux

package cublas

import "fmt"

// LtLib is a loaded libcublasLt; only Linux has one.
type LtLib struct{ Path string }

// LtHandle is a cublasLtHandle_t; only Linux has one.
type LtHandle struct{}

// LtPlan is a cuBLASLt matmul plan; only Linux has one.
type LtPlan struct{}

// LoadLt fails outside Linux.
func LoadLt() (*LtLib, error) {
	return nil, fmt.Errorf("%w: cuBLASLt is bound on Linux only", ErrNoCUBLAS)
}

// Version is 0 outside Linux.
func (l *LtLib) Version() int { return 0 }

// Create fails outside Linux.
func (l *LtLib) Create() (*LtHandle, error) { return nil, unsupported("cublasLtCreate") }

// Destroy fails outside Linux.
func (h *LtHandle) Destroy() error { return unsupported("cublasLtDestroy") }

// Plan fails outside Linux.
func (h *LtHandle) Plan(m LtMatmul) (*LtPlan, error) {
	return nil, unsupported("cublasLtMatmulAlgoGetHeuristic")
}

// Matmul fails outside Linux.
func (h *LtHandle) Matmul(m LtMatmul, args LtArgs, stream, workspace uintptr, workspaceBytes int) error {
	return unsupported("cublasLtMatmul")
}

// Desc is the zero LtMatmul outside Linux.
func (p *LtPlan) Desc() LtMatmul { return LtMatmul{} }

// Workspace is 0 outside Linux.
func (p *LtPlan) Workspace() int { return 0 }

// Matmul fails outside Linux.
func (p *LtPlan) Matmul(args LtArgs, stream, workspace uintptr, workspaceBytes int) error {
	return unsupported("cublasLtMatmul")
}
