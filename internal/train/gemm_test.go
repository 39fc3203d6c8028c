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
	aType, bType   Elem
	math           Math
}

func (c gemmCase) String() string {
	s := fmt.Sprintf("tA=%v,tB=%v,%dx%dx%d,pad%d,a%g,b%g", c.transA, c.transB, c.m, c.n, c.k, c.pad, c.alpha, c.beta)
	if c.aType != Float32 || c.bType != Float32 || c.math != MathFP32 {
		s += fmt.Sprintf(",%v×%v,%v", c.aType, c.bType, c.math)
	}
	return s
}

// args returns the case's GEMMArgs for operands at a, b and c.
func (c gemmCase) args(a, b, cp gg.DevicePtr, lda, ldb, ldc int) GEMMArgs {
	return GEMMArgs{TransA: c.transA, TransB: c.transB, M: c.m, N: c.n, K: c.k, Alpha: c.alpha,
		A: a, LDA: lda, B: b, LDB: ldb, Beta: c.beta, C: cp, LDC: ldc, AType: c.aType, BType: c.bType, Math: c.math}
}

// stored is an operand's values as the GEMM multiplies them (bfloat16
// widened, TF32 rounded), and what to upload for it.
func stored(v []float32, e Elem, m Math) (values []float32, upload any) {
	out := make([]float32, len(v))
	if e == BFloat16 {
		h := make([]uint16, len(v))
		for i, x := range v {
			h[i] = toBF16(x)
			out[i] = fromBF16(h[i])
		}
		return out, h
	}
	for i, x := range v {
		out[i] = x
		if m == MathTF32 {
			out[i] = roundTF32(x)
		}
	}
	return out, v
}

// uploadAny uploads a []float32 or []uint16.
func uploadAny(t testing.TB, s *gg.Stream, v any) gg.DevicePtr {
	t.Helper()
	switch v := v.(type) {
	case []uint16:
		p, err := s.MallocAsync(2 * max(1, len(v)))
		ok(t, err)
		if len(v) > 0 {
			ok(t, s.Memcpy(gg.HtoD(p, gg.Bytes(v))))
		}
		return p
	case []float32:
		return upload(t, s, v)
	}
	t.Fatalf("upload of %T", v)
	return 0
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
	// Every element type and math on the awkward sizes.
	for _, ty := range [][3]uint8{{1, 1, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}} {
		for _, tr := range [][2]bool{{false, true}, {true, false}, {false, false}, {true, true}} {
			for i, sz := range [][3]int{{17, 33, 65}, {130, 70, 200}, {3, 129, 5}} {
				c := gemmCase{transA: tr[0], transB: tr[1], m: sz[0], n: sz[1], k: sz[2], alpha: 1,
					aType: Elem(ty[0]), bType: Elem(ty[1]), math: Math(ty[2])}
				if i == 1 {
					c.pad, c.alpha, c.beta = 3, 0.5, 2
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
	ha, ua := stored(randVec(r, ar*lda), c.aType, c.math)
	hb, ub := stored(randVec(r, br*ldb), c.bType, c.math)
	hc := randVec(r, c.m*ldc)
	if c.beta == 0 {
		for i := range hc { // beta 0 must not read C
			hc[i] = float32(math.NaN())
		}
	}
	a, b, cp := uploadAny(t, s, ua), uploadAny(t, s, ub), upload(t, s, hc)
	ok(t, gemm(s, c.args(a, b, cp, lda, ldb, ldc)))
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
		at, bt         Elem
		math           Math
		ct             Elem
	}{
		{"negative m", false, false, -1, 2, 2, p, 2, p, 2, p, 2, 0, 0, 0, 0},
		{"lda < k", false, false, 2, 2, 3, p, 2, p, 2, p, 2, 0, 0, 0, 0},
		{"lda < m (transA)", true, false, 3, 2, 2, p, 2, p, 2, p, 2, 0, 0, 0, 0},
		{"ldb < n", false, false, 2, 3, 2, p, 2, p, 2, p, 3, 0, 0, 0, 0},
		{"ldb < k (transB)", false, true, 2, 2, 3, p, 3, p, 2, p, 2, 0, 0, 0, 0},
		{"ldc < n", false, false, 2, 3, 2, p, 2, p, 3, p, 2, 0, 0, 0, 0},
		{"nil A", false, false, 2, 2, 2, 0, 2, p, 2, p, 2, 0, 0, 0, 0},
		{"nil C", false, false, 2, 2, 2, p, 2, p, 2, 0, 2, 0, 0, 0, 0},
		{"unknown element type", false, false, 2, 2, 2, p, 2, p, 2, p, 2, 2, 0, 0, 0},
		{"unknown math", false, false, 2, 2, 2, p, 2, p, 2, p, 2, 0, 0, 2, 0},
		{"misaligned float32 A", false, false, 2, 2, 2, p + 2, 2, p, 2, p, 2, 0, 0, 0, 0},
		{"misaligned bfloat16 B", false, false, 2, 2, 2, p, 2, p + 1, 2, p, 2, 0, 1, 0, 0},
		{"misaligned C", false, false, 2, 2, 2, p, 2, p, 2, p + 2, 2, 1, 1, 0, 0},
		{"misaligned bfloat16 C", false, false, 2, 2, 2, p, 2, p, 2, p + 1, 2, 0, 0, 0, 1},
		{"unknown C type", false, false, 2, 2, 2, p, 2, p, 2, p, 2, 0, 0, 0, 2},
	}
	for _, c := range cases {
		err := KernelGEMM(s, GEMMArgs{TransA: c.transA, TransB: c.transB, M: c.m, N: c.n, K: c.k, Alpha: 1,
			A: c.a, LDA: c.lda, B: c.b, LDB: c.ldb, C: c.c, LDC: c.ldc, AType: c.at, BType: c.bt, CType: c.ct, Math: c.math})
		var e *gg.Error
		if !errors.Is(err, gg.ErrInvalidValue) || !errors.As(err, &e) || e.Op == "" {
			t.Errorf("%s: got %v, want an *Error wrapping ErrInvalidValue", c.name, err)
		}
	}
	// A bfloat16 C is a FusedGEMM's: the GEMM refuses it.
	err := KernelGEMM(s, GEMMArgs{M: 2, N: 2, K: 2, Alpha: 1, A: p, LDA: 2, B: p, LDB: 2, C: p, LDC: 2, CType: BFloat16})
	var ge *gg.Error
	if !errors.Is(err, gg.ErrNotSupported) || !errors.As(err, &ge) {
		t.Errorf("bfloat16 C: got %v, want an *Error wrapping ErrNotSupported", err)
	}
	// Empty products are no-ops, even with nil pointers.
	ok(t, KernelGEMM(s, GEMMArgs{M: 0, N: 5, K: 5, Alpha: 1, LDA: 5, LDB: 5, LDC: 5}))
	ok(t, s.Synchronize())
}

func BenchmarkGEMM(b *testing.B) {
	_, s := openHost(b)
	for _, sz := range [][3]int{{128, 256, 256}, {512, 1024, 1024}} {
		for _, tr := range [][2]bool{{false, true}, {false, false}, {true, false}} {
			for _, math := range []Math{MathFP32, MathTF32} {
				m, n, k := sz[0], sz[1], sz[2]
				if tr[0] { // dW = dYᵀ·X: m and k swap roles
					m, k = k, m
				}
				b.Run(fmt.Sprintf("%dx%dx%d/tA=%v,tB=%v/%v", m, n, k, tr[0], tr[1], math), func(b *testing.B) {
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
						ok(b, KernelGEMM(s, GEMMArgs{TransA: tr[0], TransB: tr[1], M: m, N: n, K: k, Alpha: 1, A: a, LDA: lda, B: bb, LDB: ldb, C: c, LDC: n, Math: math}))
					}
					ok(b, s.Synchronize())
					b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// roundingInputs are float32 values whose low mantissa bits exercise TF32
// and bfloat16 rounding: ties, just below and above them, carries, a
// denormal, and the largest float.
var roundingInputs = []uint32{
	0x3f800000, 0x3f800fff, 0x3f801000, 0x3f801001, 0x3f803000, 0xbf801000, 0x3fffffff,
	0x3f808000, 0x3f818000, 0x3f807fff, 0x00001000, 0x00018000, 0x7f7fffff, 0x40490fdb,
}

// checkRounding runs C = A·1 (k = 1) with gemm on s for every element type
// and math, and checks each C against the rounding the GEMM promises, bit
// for bit: the products of a k = 1 GEMM are its converted inputs.
func checkRounding(t *testing.T, s *gg.Stream, gemm GEMM) {
	n := len(roundingInputs)
	x := make([]float32, n)
	for i, u := range roundingInputs {
		x[i] = math.Float32frombits(u)
	}
	for _, c := range []struct {
		ty   Elem
		math Math
		want func(float32) float32
	}{
		{Float32, MathFP32, func(v float32) float32 { return v }},
		{Float32, MathTF32, roundTF32},
		{BFloat16, MathFP32, func(v float32) float32 { return fromBF16(toBF16(v)) }},
		{BFloat16, MathTF32, func(v float32) float32 { return fromBF16(toBF16(v)) }},
	} {
		_, ua := stored(x, c.ty, MathFP32) // the GEMM rounds to TF32, not the upload
		_, ub := stored([]float32{1}, c.ty, MathFP32)
		a, b, cp := uploadAny(t, s, ua), uploadAny(t, s, ub), upload(t, s, make([]float32, n))
		// op(A) is n×1, op(B) 1×1: C is a column.
		ok(t, gemm(s, GEMMArgs{M: n, N: 1, K: 1, Alpha: 1, A: a, LDA: 1, B: b, LDB: 1, C: cp, LDC: 1, AType: c.ty, BType: c.ty, Math: c.math}))
		got := download(t, s, cp, n)
		for i, v := range x {
			if w := c.want(v); math.Float32bits(got[i]) != math.Float32bits(w) {
				t.Errorf("%v, %v: %#08x·1 = %#08x, want %#08x", c.ty, c.math, math.Float32bits(v), math.Float32bits(got[i]), math.Float32bits(w))
			}
		}
		for _, p := range []gg.DevicePtr{a, b, cp} {
			ok(t, s.FreeAsync(p))
		}
	}
}

func TestGEMMRounding(t *testing.T) {
	_, s := openHost(t)
	checkRounding(t, s, KernelGEMM)
}
