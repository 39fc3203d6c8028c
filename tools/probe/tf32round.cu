// tf32round.cu asks cuBLAS which rounding its TF32 tensor-core GEMMs apply to
// float32 inputs: truncation (drop the 13 low mantissa bits), round to
// nearest even, or round to nearest with ties away from zero (PTX's
// cvt.rna.tf32.f32). internal/train's roundTF32 (and round_tf32, its CUDA
// twin in precCUDA) implements ties away; this probe decides whether that
// matches cuBLAS, so that the package's own GEMM and cuBLAS round alike.
//
// Each product C = A·B has B's first row 1 and every other row 0, so each
// element of C is one element of A as the GEMM converted it (zero times a
// TF32 value is exactly zero, and so are the sums of zeros). A holds values
// whose low mantissa bits tell the three roundings apart. Four GEMMs:
// cublasSgemm under CUBLAS_TF32_TENSOR_OP_MATH with k = 1 (the plainest
// form; cuBLAS may run a small one without tensor cores, which shows as
// "exact") and with a shape big enough for tensor cores (m 4096, n 128, k
// 64), and cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 in both shapes.
// It also checks the package's bfloat16 rounding (f32_to_bf16) against
// __float2bfloat16_rn on the device, bit for bit.
//
//	nvcc -O2 -o tf32round tf32round.cu -lcublas && ./tf32round
//
// Output: one line per value (the input's bits, what each GEMM returned,
// and the three candidate roundings), then per GEMM how many values each
// candidate matches, and the bfloat16 check.
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>

#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %d %s: %s\n", __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)
#define BLAS(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { printf("FATAL %d %s: status %d\n", __LINE__, #call, (int)s_); return 1; } } while (0)

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float val(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t trunc_tf32(uint32_t u) { return u & ~0x1fffu; }
static uint32_t rne_tf32(uint32_t u) { return (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu; }
static uint32_t rna_tf32(uint32_t u) { return (u + 0x1000u) & ~0x1fffu; }

// The package's f32_to_bf16 (internal/train/precision.go, precCUDA).
__device__ unsigned short f32_to_bf16(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__global__ void bf16_both(const float* x, unsigned short* ours, unsigned short* cuda, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        ours[i] = f32_to_bf16(x[i]);
        cuda[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
    }
}

int main() {
    // Values whose low 13 bits tell the roundings apart: below half, a tie
    // on an even and on an odd TF32 value, above half, negatives, carries
    // into the exponent, a denormal, the largest float.
    const uint32_t in[] = {
        0x3f800000, 0x3f800001, 0x3f800fff, 0x3f801000, 0x3f801001, 0x3f803000, 0x3f802fff, 0x3f803001,
        0xbf801000, 0xbf803000, 0xbf801001, 0x3fffffff, 0x3ffff000, 0x40490fdb, 0x00001000, 0x00003000,
        0x7f7fffff, 0x3eaaaaab, 0xc0400001, 0x3f7fffff,
    };
    const int nv = sizeof in / sizeof in[0];

    cublasHandle_t h;
    BLAS(cublasCreate(&h));
    int ver = 0;
    BLAS(cublasGetVersion(h, &ver));
    cudaDeviceProp prop;
    CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("device %s (sm_%d%d), cuBLAS %d\n", prop.name, prop.major, prop.minor, ver);

    struct Shape { int m, n, k; const char* name; };
    const Shape shapes[] = {{nv, 1, 1, "k=1"}, {4096, 128, 64, "4096x128x64"}};
    // results[g][i]: GEMM g's C for value i (g: sgemm k=1, sgemm big, gemmEx k=1, gemmEx big).
    std::vector<std::vector<uint32_t>> results(4, std::vector<uint32_t>(nv));
    const char* gemmNames[4] = {"Sgemm TF32_TENSOR_OP_MATH k=1", "Sgemm TF32_TENSOR_OP_MATH 4096x128x64",
                                "GemmEx 32F_FAST_TF32 k=1", "GemmEx 32F_FAST_TF32 4096x128x64"};
    for (int s = 0; s < 2; s++) {
        const Shape sh = shapes[s];
        // Column-major: A is m×k (lda m), B k×n (ldb k), C m×n (ldc m).
        std::vector<float> A((size_t)sh.m * sh.k), B((size_t)sh.k * sh.n, 0.0f);
        for (int i = 0; i < sh.m; i++)
            for (int p = 0; p < sh.k; p++)
                A[i + (size_t)p * sh.m] = p == 0 ? val(in[i % nv]) : 1.0f + 0.001f * (float)((i + p) % 97);
        for (int j = 0; j < sh.n; j++) B[(size_t)j * sh.k] = 1.0f;
        float *dA, *dB, *dC;
        CUDA(cudaMalloc(&dA, A.size() * 4));
        CUDA(cudaMalloc(&dB, B.size() * 4));
        CUDA(cudaMalloc(&dC, (size_t)sh.m * sh.n * 4));
        CUDA(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
        CUDA(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
        const float one = 1.0f, zero = 0.0f;
        std::vector<float> C((size_t)sh.m * sh.n);
        for (int api = 0; api < 2; api++) {
            CUDA(cudaMemset(dC, 0xff, (size_t)sh.m * sh.n * 4));
            if (api == 0) {
                BLAS(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
                BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, sh.m, sh.n, sh.k, &one, dA, sh.m, dB, sh.k, &zero, dC, sh.m));
                BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
            } else {
                BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, sh.m, sh.n, sh.k, &one, dA, CUDA_R_32F, sh.m, dB, CUDA_R_32F, sh.k,
                                  &zero, dC, CUDA_R_32F, sh.m, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
            }
            CUDA(cudaDeviceSynchronize());
            CUDA(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
            int g = api * 2 + s;
            for (int i = 0; i < nv; i++) results[g][i] = bits(C[i]); // column 0, rows 0..nv-1
            // Every row repeating value i must agree (tensor cores in all tiles).
            int disagree = 0;
            for (int i = 0; i < sh.m; i++)
                for (int j = 0; j < sh.n; j++)
                    if (bits(C[i + (size_t)j * sh.m]) != results[g][i % nv]) disagree++;
            if (disagree) printf("note: %s: %d elements differ from the first copy of their value\n", gemmNames[g], disagree);
        }
        cudaFree(dA); cudaFree(dB); cudaFree(dC);
    }

    printf("\n%-10s %-10s %-10s %-10s %-10s | %-10s %-10s %-10s\n", "input", "Sgemm k=1", "Sgemm big", "GemmEx k=1", "GemmEx big",
           "trunc", "rne", "rna");
    for (int i = 0; i < nv; i++)
        printf("0x%08x 0x%08x 0x%08x 0x%08x 0x%08x | 0x%08x 0x%08x 0x%08x\n", in[i], results[0][i], results[1][i], results[2][i],
               results[3][i], trunc_tf32(in[i]), rne_tf32(in[i]), rna_tf32(in[i]));
    printf("\n");
    for (int g = 0; g < 4; g++) {
        int exact = 0, tr = 0, ne = 0, na = 0;
        for (int i = 0; i < nv; i++) {
            uint32_t r = results[g][i];
            exact += r == in[i];
            tr += r == trunc_tf32(in[i]);
            ne += r == rne_tf32(in[i]);
            na += r == rna_tf32(in[i]);
        }
        printf("%-40s matches: exact (no TF32) %2d/%d  trunc %2d/%d  rne %2d/%d  rna %2d/%d\n", gemmNames[g], exact, nv, tr, nv, ne, nv, na, nv);
    }

    // The package's bfloat16 rounding against CUDA's, on the device.
    const int nb = 1 << 20;
    std::vector<float> x(nb);
    uint32_t state = 12345;
    for (int i = 0; i < nb; i++) {
        state = state * 1664525u + 1013904223u;
        x[i] = i < nv ? val(in[i]) : val(state ^ (state >> 7));
    }
    float* dx;
    unsigned short *dOurs, *dCuda;
    CUDA(cudaMalloc(&dx, nb * 4));
    CUDA(cudaMalloc(&dOurs, nb * 2));
    CUDA(cudaMalloc(&dCuda, nb * 2));
    CUDA(cudaMemcpy(dx, x.data(), nb * 4, cudaMemcpyHostToDevice));
    bf16_both<<<(nb + 255) / 256, 256>>>(dx, dOurs, dCuda, nb);
    CUDA(cudaDeviceSynchronize());
    std::vector<unsigned short> ours(nb), cuda(nb);
    CUDA(cudaMemcpy(ours.data(), dOurs, nb * 2, cudaMemcpyDeviceToHost));
    CUDA(cudaMemcpy(cuda.data(), dCuda, nb * 2, cudaMemcpyDeviceToHost));
    int diff = 0, nanDiff = 0;
    for (int i = 0; i < nb; i++) {
        if (ours[i] == cuda[i]) continue;
        bool nan = (bits(x[i]) & 0x7fffffffu) > 0x7f800000u;
        if (nan) nanDiff++;
        else if (diff++ < 5) printf("bf16 of 0x%08x: ours 0x%04x, __float2bfloat16_rn 0x%04x\n", bits(x[i]), ours[i], cuda[i]);
    }
    printf("\nbf16 rounding, %d values: %d differ from __float2bfloat16_rn (NaNs: %d differ only in the NaN's bits)\n", nb, diff, nanDiff);
    cublasDestroy(h);
    return 0;
}
