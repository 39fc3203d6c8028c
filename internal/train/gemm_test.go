package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	pad            int // extra elements per stored row of A, B and C
	alpha, beta    float32
}

func (c gemmCase) String() string {
	return fmt.Sprintf("tA=%v,tB=%v,%dx%dx%d,pad%d,a%g,b%g", c.transA, c.transB, c.m, c.n, c.k, c.pad, c.alpha, c.beta)
}

// layout returns the stored rows and leading dimension of op(X) of
// rows×cols, stored transposed when trans.
func layout(trans bool, rows, cols, pad int) (storedRows, ld int) {
	if trans {
		return cols, max(1, rows+pad)
	}
	return rows, max(1, cols+pad)
}

// gemmCases lists every transposition with awkward sizes.
func gemmCases() []gemmCase {
	var cs []gemmCase
	sizes := [][3]int{{1, 1, 1}, {17, 33, 65}, {130, 70, 200}, {64, 64, 64}, {3, 129, 5}, {65, 1, 63}, {5, 7, 0}, {0, 4, 3}}
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			for i, sz := range sizes {
				c := gemmCase{transA: tA, transB: tB, m: sz[0], n: sz[1], k: sz[2], alpha: 1}
				switch i % 3 {
				case 1:
					c.pad, c.alpha, c.beta = 3, 0.5, 2
				case 2:
					c.pad, c.alpha, c.beta = 1, -1.5, 0
				}
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// runGEMMCase runs one case with gemm on s and checks it against a float64
// reference; tol scales the allowed error per term.
func runGEMMCase(t *testing.T, s *gg.Stream, gemm GEMM, c gemmCase, tol float64) {
	r := rand.New(rand.NewPCG(uint64(c.m*1000+c.n), uint64(c.k)))
	ar, lda := layout(c.transA, c.m, c.k, c.pad)
	br, ldb := layout(c.transB, c.k, c.n, c.pad)
	ldc := max(1, c.n+c.pad)
	ha, hb, hc := randVec(r, ar*lda), randVec(r, br*ldb), randVec(r, c.m*ldc)
	if c.beta == 0 {
		for i := range hc { // beta 0 must not read C
			hc[i] = float32(math.NaN())
		}
	}
	a, b, cp := upload(t, s, ha), upload(t, s, hb), upload(t, s, hc)
	ok(t, gemm(s, c.transA, c.transB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, cp, ldc))
	got := download(t, s, cp, len(hc))
	for _, p := range []gg.DevicePtr{a, b, cp} {
		ok(t, s.FreeAsync(p))
	}
	opA := func(i, p int) float64 {
		if c.transA {
			return float64(ha[p*lda+i])
		}
		return float64(ha[i*lda+p])
	}
	opB := func(p, j int) float64 {
		if c.transB {
			return float64(hb[j*ldb+p])
		}
		return float64(hb[p*ldb+j])
	}
	bad := 0
	for i := range c.m {
		for j := range ldc {
			idx := i*ldc + j
			if j >= c.n { // padding: untouched
				if !same(got[idx], hc[idx]) {
					t.Fatalf("%v: padding C[%d][%d] changed: %v -> %v", c, i, j, hc[idx], got[idx])
				}
				continue
			}
			want, mag := 0.0, 0.0
			for p := range c.k {
				v := float64(c.alpha) * opA(i, p) * opB(p, j)
				want += v
				mag += math.Abs(v)
			}
			if c.beta != 0 {
				want += float64(c.beta) * float64(hc[idx])
				mag += math.Abs(float64(c.beta) * float64(hc[idx]))
			}
			if d := math.Abs(float64(got[idx]) - want); !(d <= tol*float64(c.k+2)*mag+1e-30) {
				if bad++; bad < 5 {
					t.Errorf("%v: C[%d][%d] = %v, want %v (diff %g, magnitude %g)", c, i, j, got[idx], want, d, mag)
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%v: %d wrong elements", c, bad)
	}
}

func same(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

func TestGEMM(t *testing.T) {
	_, s := openHost(t)
	for _, c := range gemmCases() {
		t.Run(c.String(), func(t *testing.T) { runGEMMCase(t, s, KernelGEMM, c, 1.2e-7) })
	}
}

func TestGEMMRejects(t *testing.T) {
	_, s := openHost(t)
	p := upload(t, s, make([]float32, 64))
	cases := []struct {
		name           string
		transA, transB bool
		m, n, k        int
		a              gg.DevicePtr
		lda            int
		b              gg.DevicePtr
		ldb            int
		c              gg.DevicePtr
		ldc            int
	}{
		{"negative m", false, false, -1, 2, 2, p, 2, p, 2, p, 2},
		{"lda < k", false, false, 2, 2, 3, p, 2, p, 2, p, 2},
		{"lda < m (transA)", true, false, 3, 2, 2, p, 2, p, 2, p, 2},
		{"ldb < n", false, false, 2, 3, 2, p, 2, p, 2, p, 3},
		{"ldb < k (transB)", false, true, 2, 2, 3, p, 3, p, 2, p, 2},
		{"ldc < n", false, false, 2, 3, 2, p, 2, p, 3, p, 2},
		{"nil A", false, false, 2, 2, 2, 0, 2, p, 2, p, 2},
		{"nil C", false, false, 2, 2, 2, p, 2, p, 2, 0, 2},
	}
	for _, c := range cases {
		err := KernelGEMM(s, c.transA, c.transB, c.m, c.n, c.k, 1, c.a, c.lda, c.b, c.ldb, 0, c.c, c.ldc)
		var e *gg.Error
		if !errors.Is(err, gg.ErrInvalidValue) || !errors.As(err, &e) || e.Op == "" {
			t.Errorf("%s: got %v, want an *Error wrapping ErrInvalidValue", c.name, err)
		}
	}
	// Empty products are no-ops, even with nil pointers.
	ok(t, KernelGEMM(s, false, false, 0, 5, 5, 1, 0, 5, 0, 5, 0, 0, 5))
	ok(t, s.Synchronize())
}

func BenchmarkGEMM(b *testing.B) {
	_, s := openHost(b)
	for _, sz := range [][3]int{{128, 256, 256}, {512, 1024, 1024}} {
		for _, tr := range [][2]bool{{false, true}, {false, false}, {true, false}} {
			m, n, k := sz[0], sz[1], sz[2]
			if tr[0] { // dW = dYᵀ·X: m and k swap roles
				m, k = k, m
			}
			b.Run(fmt.Sprintf("%dx%dx%d/tA=%v,tB=%v", m, n, k, tr[0], tr[1]), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				a := upload(b, s, randVec(r, m*k))
				bb := upload(b, s, randVec(r, k*n))
				c := upload(b, s, make([]float32, m*n))
				lda, ldb := k, n
				if tr[0] {
					lda = m
				}
				if tr[1] {
					ldb = k
				}
				b.ResetTimer()
				for range b.N {
					ok(b, KernelGEMM(s, tr[0], tr[1], m, n, k, 1, a, lda, bb, ldb, 0, c, n))
				}
				ok(b, s.Synchronize())
				b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
