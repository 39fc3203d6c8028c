//go:build linux

package cublas_test

import (
	"math"
	"math/rand/v2"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
)

// bf16 rounds x to bfloat16, to nearest even (NaN aside, which these tests
// do not use), and returns the bits and the value.
func bf16(x float32) (uint16, float32) {
	u := math.Float32bits(x)
	h := uint16((u + 0x7fff + (u>>16)&1) >> 16)
	return h, math.Float32frombits(uint32(h) << 16)
}

// uploadBF16 rounds x to bfloat16, uploads the bits and returns the
// rounded values.
func (g *gpu) uploadBF16(t *testing.T, x []float32) (gg.DevicePtr, []float32) {
	t.Helper()
	h, v := make([]uint16, len(x)), make([]float32, len(x))
	for i := range x {
		h[i], v[i] = bf16(x[i])
	}
	p, err := g.d.Malloc(2 * len(h))
	ok(t, err)
	t.Cleanup(func() { g.d.Free(p) })
	ok(t, g.d.Memcpy(gg.HtoD(p, gg.Bytes(h))))
	return p, v
}

// TestGPUGemmExRowMajor checks the two mixed-precision forms the training
// step uses, every transposition, odd sizes and padded rows: bfloat16 A
// and B into a float32 C (the products of bfloat16 values are exact in
// float32, so only the float32 sums differ from a float64 reference), and
// float32 operands with TF32 compute (inputs rounded to 10 mantissa bits
// in one of the ways tools/probe/tf32round.cu tells apart: the tolerance
// allows any).
func TestGPUGemmExRowMajor(t *testing.T) {
	g := setupGPU(t)
	r := rand.New(rand.NewPCG(7, 8))
	const m, n, k, pad = 67, 45, 131, 3
	const alpha, beta = 1.25, -0.5
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			ar, ac, br, bc := stored(m, n, k, ta, tb)
			lda, ldb, ldc := ac+pad, bc+pad, n+pad
			name := map[[2]bool]string{{false, false}: "NN", {true, false}: "TN", {false, true}: "NT", {true, true}: "TT"}[[2]bool{ta, tb}]

			// bfloat16 × bfloat16 → float32.
			a, A := g.uploadBF16(t, randSlice(r, ar*lda))
			b, B := g.uploadBF16(t, randSlice(r, br*ldb))
			C := randSlice(r, m*ldc)
			c := g.upload(t, C)
			ok(t, g.h.GemmExRowMajor(ta, tb, m, n, k, alpha, uintptr(a), cublas.R16BF, lda, uintptr(b), cublas.R16BF, ldb,
				beta, uintptr(c), cublas.R32F, ldc, cublas.Compute32F))
			compare(t, "bf16 "+name, g.download(t, c, len(C)), rowMajorRef(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc), k)

			// float32 with TF32 compute: each product is off by at most
			// 2·2^-10 relative (either rounding of either input), and the
			// inputs are in [-1, 1].
			A, B = randSlice(r, ar*lda), randSlice(r, br*ldb)
			a, b, c = g.upload(t, A), g.upload(t, B), g.upload(t, C)
			ok(t, g.h.GemmExRowMajor(ta, tb, m, n, k, alpha, uintptr(a), cublas.R32F, lda, uintptr(b), cublas.R32F, ldb,
				beta, uintptr(c), cublas.R32F, ldc, cublas.Compute32FFastTF32))
			got, want := g.download(t, c, len(C)), rowMajorRef(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
			tol := alpha*float64(k)*2*math.Ldexp(1, -10) + 1e-5*float64(k+4)
			for i := range got {
				if d := math.Abs(float64(got[i]) - want[i]); d > tol || math.IsNaN(float64(got[i])) {
					t.Fatalf("tf32 %s: C[%d] = %v, want %v (|diff| %.3g > %.3g)", name, i, got[i], want[i], d, tol)
				}
			}
		}
	}
}

// A combination cuBLAS's table does not list (float32 A with bfloat16 B)
// comes back as cuBLAS's answer, whatever it is, not a crash; the log
// says which.
func TestGPUGemmExUnlisted(t *testing.T) {
	g := setupGPU(t)
	p := g.upload(t, make([]float32, 64))
	err := g.h.GemmExRowMajor(false, false, 4, 4, 4, 1, uintptr(p), cublas.R32F, 4, uintptr(p), cublas.R16BF, 4, 0, uintptr(p), cublas.R32F, 4, cublas.Compute32F)
	ok(t, g.s.Synchronize())
	t.Logf("f32 × bf16: %v", err)
}
