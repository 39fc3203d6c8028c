package cublas

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestStatusNames(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want string
	}{
		{StatusSuccess, "CUBLAS_STATUS_SUCCESS"},
		{StatusNotInitialized, "CUBLAS_STATUS_NOT_INITIALIZED"},
		{StatusAllocFailed, "CUBLAS_STATUS_ALLOC_FAILED"},
		{StatusInvalidValue, "CUBLAS_STATUS_INVALID_VALUE"},
		{StatusArchMismatch, "CUBLAS_STATUS_ARCH_MISMATCH"},
		{StatusMappingError, "CUBLAS_STATUS_MAPPING_ERROR"},
		{StatusExecutionFailed, "CUBLAS_STATUS_EXECUTION_FAILED"},
		{StatusInternalError, "CUBLAS_STATUS_INTERNAL_ERROR"},
		{StatusNotSupported, "CUBLAS_STATUS_NOT_SUPPORTED"},
		{StatusLicenseError, "CUBLAS_STATUS_LICENSE_ERROR"},
		{Status(42), "CUBLAS_STATUS_UNKNOWN_42"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("Status(%d) = %q, want %q", int32(tc.s), got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	if err := check("cublasSgemm_v2", 0); err != nil {
		t.Fatalf("status 0: %v", err)
	}
	// Only the low 32 bits of the return register are the enum.
	if err := check("cublasSgemm_v2", 0xdead_beef_0000_0000); err != nil {
		t.Fatalf("garbage upper half: %v", err)
	}
	err := check("cublasSgemm_v2", 7)
	if !errors.Is(err, StatusInvalidValue) || errors.Is(err, StatusNotSupported) {
		t.Fatalf("errors.Is on %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Call != "cublasSgemm_v2" || e.Status != StatusInvalidValue {
		t.Fatalf("errors.As on %v: %+v", err, e)
	}
	if got, want := err.Error(), "cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestFitInt32(t *testing.T) {
	if err := fitInt32("c", "m", 0, -1, math.MaxInt32, math.MinInt32); err != nil {
		t.Fatal(err)
	}
	err := fitInt32("cublasSgemm_v2", "m, n, k", 1, math.MaxInt32+1)
	if !errors.Is(err, StatusInvalidValue) || !strings.Contains(err.Error(), "2147483648") {
		t.Fatalf("got %v", err)
	}
}

func TestColMajorMapping(t *testing.T) {
	const a, b = 0xA000, 0xB000
	for _, tc := range []struct {
		name string
		in   gemm
		want gemm
	}{
		{"NN", gemm{false, false, 2, 3, 4, a, 4, b, 3}, gemm{false, false, 3, 2, 4, b, 3, a, 4}},
		{"TN", gemm{true, false, 2, 3, 4, a, 2, b, 3}, gemm{false, true, 3, 2, 4, b, 3, a, 2}},
		{"NT", gemm{false, true, 2, 3, 4, a, 4, b, 4}, gemm{true, false, 3, 2, 4, b, 4, a, 4}},
		{"TT", gemm{true, true, 2, 3, 4, a, 5, b, 6}, gemm{true, true, 3, 2, 4, b, 6, a, 5}},
	} {
		if got := tc.in.colMajor(); got != tc.want {
			t.Errorf("%s: colMajor(%+v) = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
		if back := tc.in.colMajor().colMajor(); back != tc.in {
			t.Errorf("%s: the mapping is not an involution: %+v", tc.name, back)
		}
	}
}

// colMajorRef is cuBLAS's SGEMM as documented, on Go slices: element (i,j)
// of a column-major matrix is x[i+j*ld]. ptrs maps the uintptr "device
// pointers" of g to slices.
func colMajorRef(g gemm, alpha, beta float64, ptrs map[uintptr][]float64, c []float64, ldc int) {
	at := func(trans bool, x []float64, ld, i, j int) float64 { // op(X)(i,j)
		if trans {
			return x[j+i*ld]
		}
		return x[i+j*ld]
	}
	A, B := ptrs[g.a], ptrs[g.b]
	for j := 0; j < g.n; j++ {
		for i := 0; i < g.m; i++ {
			var s float64
			for l := 0; l < g.k; l++ {
				s += at(g.transA, A, g.lda, i, l) * at(g.transB, B, g.ldb, l, j)
			}
			c[i+j*ldc] = alpha*s + beta*c[i+j*ldc]
		}
	}
}

// TestRowMajorSemantics runs the mapped call through a column-major
// reference and compares with the row-major product computed directly,
// for every transpose combination, with padded leading dimensions.
func TestRowMajorSemantics(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const m, n, k, pad = 3, 5, 4, 2
	const alpha, beta = 1.5, -0.5
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			// Stored shapes, row-major: A is m×k (k×m when transposed).
			ar, ac := m, k
			if ta {
				ar, ac = k, m
			}
			br, bc := k, n
			if tb {
				br, bc = n, k
			}
			lda, ldb, ldc := ac+pad, bc+pad, n+pad
			A, B := make([]float64, ar*lda), make([]float64, br*ldb)
			C := make([]float64, m*ldc)
			for _, x := range [][]float64{A, B, C} {
				for i := range x {
					x[i] = float64(r.IntN(7) - 3)
				}
			}
			want := append([]float64(nil), C...)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var s float64
					for l := 0; l < k; l++ {
						av := A[i*lda+l]
						if ta {
							av = A[l*lda+i]
						}
						bv := B[l*ldb+j]
						if tb {
							bv = B[j*ldb+l]
						}
						s += av * bv
					}
					want[i*ldc+j] = alpha*s + beta*want[i*ldc+j]
				}
			}
			g := gemm{ta, tb, m, n, k, 1, lda, 2, ldb}.colMajor()
			colMajorRef(g, alpha, beta, map[uintptr][]float64{1: A, 2: B}, C, ldc)
			for i := range C {
				if C[i] != want[i] {
					t.Fatalf("transA=%v transB=%v: C[%d] = %v, want %v", ta, tb, i, C[i], want[i])
				}
			}
		}
	}
}

// TestRowMajorLeadingDims checks that cuBLAS's leading-dimension rules,
// applied to the mapped call, are exactly the row-major rules: an invalid
// row-major call is refused by cuBLAS, a valid one is not.
func TestRowMajorLeadingDims(t *testing.T) {
	// cuBLAS: lda ≥ max(1, transa==N ? m : k), ldb ≥ max(1, transb==N ? k : n), ldc ≥ max(1, m).
	cublasOK := func(g gemm, ldc int) bool {
		ra, rb := g.m, g.k
		if g.transA {
			ra = g.k
		}
		if g.transB {
			rb = g.n
		}
		return g.lda >= max(1, ra) && g.ldb >= max(1, rb) && ldc >= max(1, g.m)
	}
	// Row-major: ld ≥ the number of columns as stored.
	rowOK := func(g gemm, ldc int) bool {
		ca, cb := g.k, g.n
		if g.transA {
			ca = g.m
		}
		if g.transB {
			cb = g.k
		}
		return g.lda >= max(1, ca) && g.ldb >= max(1, cb) && ldc >= max(1, g.n)
	}
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			for m := 0; m <= 3; m++ {
				for n := 0; n <= 3; n++ {
					for k := 0; k <= 3; k++ {
						for lda := 0; lda <= 4; lda++ {
							for ldb := 0; ldb <= 4; ldb++ {
								for ldc := 0; ldc <= 4; ldc++ {
									g := gemm{ta, tb, m, n, k, 1, lda, 2, ldb}
									if got, want := cublasOK(g.colMajor(), ldc), rowOK(g, ldc); got != want {
										t.Fatalf("%+v ldc=%d: cuBLAS accepts %v, row-major rule %v", g, ldc, got, want)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}
