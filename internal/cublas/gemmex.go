package cublas

import "fmt"

// DataType is a cudaDataType (library_types.h): the element type of a
// matrix that GemmEx reads or writes.
type DataType int32

// The cudaDataType values GemmEx is used with here.
const (
	R32F  DataType = 0  // CUDA_R_32F: float
	R16F  DataType = 2  // CUDA_R_16F: half
	R16BF DataType = 14 // CUDA_R_16BF: bfloat16
)

func (t DataType) String() string {
	switch t {
	case R32F:
		return "CUDA_R_32F"
	case R16F:
		return "CUDA_R_16F"
	case R16BF:
		return "CUDA_R_16BF"
	}
	return fmt.Sprintf("cudaDataType(%d)", int32(t))
}

// ComputeType is a cublasComputeType_t: how GemmEx multiplies and sums.
// With the 32F types, alpha and beta are float32.
type ComputeType int32

// cublasComputeType_t values with float32 sums.
const (
	// Compute32F: float32 sums; 16-bit inputs may use tensor cores.
	Compute32F ComputeType = 68
	// Compute32FPedantic: float32 throughout, no reduced-precision shortcut.
	Compute32FPedantic ComputeType = 69
	// Compute32FFast16BF: float32 inputs may be rounded to bfloat16.
	Compute32FFast16BF ComputeType = 75
	// Compute32FFastTF32: float32 inputs may be rounded to TF32 and
	// multiplied on tensor cores (what PyTorch's allow_tf32 asks for).
	Compute32FFastTF32 ComputeType = 77
)

func (c ComputeType) String() string {
	switch c {
	case Compute32F:
		return "CUBLAS_COMPUTE_32F"
	case Compute32FPedantic:
		return "CUBLAS_COMPUTE_32F_PEDANTIC"
	case Compute32FFast16BF:
		return "CUBLAS_COMPUTE_32F_FAST_16BF"
	case Compute32FFastTF32:
		return "CUBLAS_COMPUTE_32F_FAST_TF32"
	}
	return fmt.Sprintf("cublasComputeType_t(%d)", int32(c))
}

// gemmDefaultAlgo is CUBLAS_GEMM_DEFAULT (-1): cuBLAS's heuristics choose;
// the other values are ignored on Ampere and later.
const gemmDefaultAlgo = -1
