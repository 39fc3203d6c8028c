//go:build !linux

package cublas

// GemmEx fails outside Linux.
func (h *Handle) GemmEx(transA, transB bool, m, n, k int, alpha float32, a uintptr, aType DataType, lda int,
	b uintptr, bType DataType, ldb int, beta float32, c uintptr, cType DataType, ldc int, compute ComputeType) error {
	return unsupported("cublasGemmEx")
}

// GemmExRowMajor fails outside Linux.
func (h *Handle) GemmExRowMajor(transA, transB bool, m, n, k int, alpha float32, a uintptr, aType DataType, lda int,
	b uintptr, bType DataType, ldb int, beta float32, c uintptr, cType DataType, ldc int, compute ComputeType) error {
	return unsupported("cublasGemmEx")
}
