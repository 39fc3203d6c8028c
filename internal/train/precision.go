package train

import "math"

// The precisions Config.Precision names.
const (
	// FP32: every GEMM multiplies float32 values exactly and sums in
	// float32 (the default; "" means FP32).
	FP32 = "fp32"
	// TF32: the GEMMs round their float32 inputs to TF32 (10 mantissa
	// bits, roundTF32) and accumulate and write float32, as tensor cores
	// do with PyTorch's allow_tf32; everything else is FP32.
	TF32 = "tf32"
	// BF16: mixed precision as PyTorch's autocast does it: FP32 master
	// weights and optimizer state; a bfloat16 copy of the weights (the
	// shadow, written by the optimizer) and bfloat16 activations and
	// activation gradients are the GEMMs' operands; the GEMMs, the loss
	// and the bias gradients accumulate in FP32.
	BF16 = "bf16"
)

// Precisions lists the precisions, the default first.
var Precisions = []string{FP32, TF32, BF16}

// precision is c.Precision with "" read as FP32.
func (c Config) precision() string {
	if c.Precision == "" {
		return FP32
	}
	return c.Precision
}

func (c Config) bf16() bool { return c.Precision == BF16 }

// roundTF32 rounds x to TF32 (float32's 8 exponent bits and the top 10 of
// its 23 mantissa bits; the 13 low bits become zero) to nearest, ties to
// even, as cuBLAS's TF32 tensor-core GEMMs round their float32 inputs:
// tools/probe/tf32round.cu on an H100 (cuBLAS 130100, driver 580,
// 2026-11-26) matched nearest-even on 20 of 20 inputs for both
// cublasSgemm under CUBLAS_TF32_TENSOR_OP_MATH and cublasGemmEx with
// CUBLAS_COMPUTE_32F_FAST_TF32, against 17 for ties-away and 10 for
// truncation (a one-term product, k = 1, is computed without TF32 at all).
// Infinities stay, NaN stays NaN (quiet), and a finite value past TF32's
// largest rounds to infinity. Denormals round like any other value.
// round_tf32 in precCUDA is its CUDA twin: change both together
// (TestCUDABodiesOnCPU and TestCUDAPrecision check that they agree bit
// for bit).
func roundTF32(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 == 0x7f800000 { // Inf or NaN
		if u&0x007fffff != 0 {
			return math.Float32frombits((u | 0x00400000) &^ 0x1fff)
		}
		return x
	}
	return math.Float32frombits((u + 0xfff + (u>>13)&1) &^ 0x1fff)
}

// toBF16 rounds x to bfloat16 (float32's upper 16 bits) to nearest, ties
// to even, as CUDA's __float2bfloat16_rn: NaN becomes the canonical NaN
// 0x7fff, values past bfloat16's largest finite one round to infinity,
// denormals round like any other value (no flush to zero).
func toBF16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return 0x7fff
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// fromBF16 widens a bfloat16 to float32, exactly.
func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// precCUDA is the CUDA twin of roundTF32, toBF16 and fromBF16, prepended to
// every kernel that converts (guarded, so several kernels' sources can
// share one file, as in the CPU emulator). bfloat16 values are unsigned
// shorts: no header is needed, and NVRTC and g++ read the same code.
const precCUDA = `
#ifndef TRAIN_PREC_CUH
#define TRAIN_PREC_CUH
typedef unsigned short bf16_t;
static __device__ __forceinline__ float round_tf32(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return (u & 0x007fffffu) ? __uint_as_float((u | 0x00400000u) & ~0x1fffu) : x;
    return __uint_as_float((u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu);
}
static __device__ __forceinline__ bf16_t f32_to_bf16(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)0x7fff;
    return (bf16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static __device__ __forceinline__ float bf16_to_f32(bf16_t h) { return __uint_as_float((unsigned)h << 16); }
#endif
`
