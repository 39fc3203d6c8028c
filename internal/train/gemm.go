package train

import (
	"fmt"
	"sync"

	gg "github.com/gpugraph/gpugraph"
)

// GEMM computes C = alpha·op(A)·op(B) + beta·C on stream s, as g describes
// it. It only enqueues work.
type GEMM func(s *gg.Stream, g GEMMArgs) error

// GEMMArgs is one matrix product, in row-major storage:
//
//   - op(A) is m×k. With TransA false, A is stored as m rows of k elements,
//     row i starting at element i·LDA (LDA ≥ k); with TransA true, A is
//     stored as k rows of m elements (op(A) = Aᵀ), row p at p·LDA (LDA ≥ m).
//   - op(B) is k×n. With TransB false, B is k rows of n elements (LDB ≥ n);
//     with TransB true, B is n rows of k elements (op(B) = Bᵀ, LDB ≥ k).
//   - C is m rows of n elements, row i at i·LDC (LDC ≥ n).
//
// A and B hold AType and BType elements (Float32, the zero value, or
// BFloat16); the sums are float32, and so is C but where CType says
// BFloat16: only a FusedGEMM writes a bfloat16 C (the next layer's
// activation, or the gradient of the layer below, rounded to nearest even
// once the epilogue is applied); a GEMM (KernelGEMM, CuBLAS) refuses it
// with ErrNotSupported. Math says how products are
// formed: MathFP32 multiplies the operands as they are (a bfloat16 widens to
// float32 exactly), MathTF32 first rounds float32 operands to TF32
// (roundTF32), as tensor cores do. Leading dimensions count elements.
//
// When Beta is 0, C is not read (NaNs in it do not propagate), as in BLAS.
// M, N or K may be 0: with M or N 0 nothing happens; with K 0, C = Beta·C.
//
// A row-major C is a column-major Cᵀ, so a column-major BLAS computes it
// with the operands swapped: cublasSgemm(h, opB, opA, n, m, k, &alpha, B,
// ldb, A, lda, &beta, C, ldc), where opX is CUBLAS_OP_T when transX (and
// likewise cublasGemmEx, which takes the element types).
//
// A step uses three forms: Y = X·Wᵀ (forward), dX = dY·W (gradient of the
// input) and dW = dYᵀ·X (gradient of the weights).
type GEMMArgs struct {
	TransA, TransB bool
	M, N, K        int
	Alpha          float32
	A              gg.DevicePtr
	LDA            int
	B              gg.DevicePtr
	LDB            int
	Beta           float32
	C              gg.DevicePtr
	LDC            int
	AType, BType   Elem
	CType          Elem
	Math           Math
}

// Elem is the element type of a GEMM operand.
type Elem uint8

// The element types.
const (
	Float32  Elem = iota // IEEE binary32
	BFloat16             // bfloat16: the upper 16 bits of a float32
)

// Size is the bytes of one element.
func (e Elem) Size() int {
	if e == BFloat16 {
		return 2
	}
	return 4
}

func (e Elem) String() string {
	switch e {
	case Float32:
		return "f32"
	case BFloat16:
		return "bf16"
	}
	return fmt.Sprintf("Elem(%d)", uint8(e))
}

// Math is how a GEMM multiplies.
type Math uint8

// The GEMM math modes.
const (
	MathFP32 Math = iota // the operands' values, products and sums in float32
	MathTF32             // float32 operands rounded to TF32 first; sums in float32
)

func (m Math) String() string {
	switch m {
	case MathFP32:
		return "fp32"
	case MathTF32:
		return "tf32"
	}
	return fmt.Sprintf("Math(%d)", uint8(m))
}

// Tile of C computed by one block of the GEMM kernel, and the slice of k
// staged at a time.
const (
	tileM = 64
	tileN = 64
	cudaK = 16 // k per shared-memory stage on CUDA
	goK   = 64 // k per packed panel in the Go body
)

// gemmThreads is the GEMM kernel's block size: 16×16 threads, each
// computing 4×4 elements of the 64×64 tile.
const gemmThreads = 256

// CheckGEMM validates a GEMM's arguments; its error wraps
// gpugraph.ErrInvalidValue. Replacements of KernelGEMM may call it.
func CheckGEMM(g GEMMArgs) error {
	bad := func(format string, args ...any) error {
		return &gg.Error{Op: "train.GEMM", Code: gg.ErrInvalidValue, Detail: fmt.Sprintf(format, args...)}
	}
	const maxDim = 1<<31 - 1
	m, n, k := g.M, g.N, g.K
	if m < 0 || n < 0 || k < 0 || m > maxDim || n > maxDim || k > maxDim {
		return bad("sizes m %d, n %d, k %d outside [0, %d]", m, n, k, maxDim)
	}
	aCols, bCols := k, n // elements of a stored row
	if g.TransA {
		aCols = m
	}
	if g.TransB {
		bCols = k
	}
	switch {
	case g.AType > BFloat16 || g.BType > BFloat16 || g.CType > BFloat16:
		return bad("element types %v, %v and %v: want f32 or bf16", g.AType, g.BType, g.CType)
	case g.Math > MathTF32:
		return bad("math %v: want fp32 or tf32", g.Math)
	case g.LDA < max(1, aCols) || g.LDA > maxDim:
		return bad("lda %d < %d", g.LDA, max(1, aCols))
	case g.LDB < max(1, bCols) || g.LDB > maxDim:
		return bad("ldb %d < %d", g.LDB, max(1, bCols))
	case g.LDC < max(1, n) || g.LDC > maxDim:
		return bad("ldc %d < %d", g.LDC, max(1, n))
	case m > 0 && n > 0 && g.C == 0:
		return bad("nil C")
	case m > 0 && n > 0 && k > 0 && (g.A == 0 || g.B == 0):
		return bad("nil A or B")
	case g.A%gg.DevicePtr(g.AType.Size()) != 0 || g.B%gg.DevicePtr(g.BType.Size()) != 0 || g.C%gg.DevicePtr(g.CType.Size()) != 0:
		return bad("A, B or C not aligned to its elements")
	}
	return nil
}

// KernelGEMM is the default GEMM: this package's shared-memory tiled
// kernel, one block of 256 threads per 64×64 tile of C, each thread
// computing 4×4 elements of it; one launch per call. It converts its
// operands (bfloat16 to float32, float32 to TF32) as it stages them, so
// every element type and math mode costs about the same: it uses no
// tensor cores.
func KernelGEMM(s *gg.Stream, g GEMMArgs) error {
	if err := CheckGEMM(g); err != nil {
		return err
	}
	if err := floatC("train.KernelGEMM", g); err != nil {
		return err
	}
	if g.M == 0 || g.N == 0 {
		return nil
	}
	grid := gg.Dim2((g.N+tileN-1)/tileN, (g.M+tileM-1)/tileM)
	return s.Launch(gemmKernel, grid, gg.Dim1(gemmThreads),
		b2i(g.TransA), b2i(g.TransB), g.M, g.N, g.K, g.Alpha, g.A, g.LDA, g.B, g.LDB, g.Beta, g.C, g.LDC,
		b2i(g.AType == BFloat16), b2i(g.BType == BFloat16), b2i(g.Math == MathTF32))
}

// floatC refuses a bfloat16 C (ErrNotSupported) for the GEMMs that write
// float32 only.
func floatC(op string, g GEMMArgs) error {
	if g.CType != Float32 {
		return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: fmt.Sprintf("C of %v: this GEMM writes f32 only", g.CType)}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gemmKernel computes one 64×64 tile of C per block (blockIdx.x: tile
// column, blockIdx.y: tile row). Arguments: transA, transB, m, n, k, alpha,
// A, lda, B, ldb, beta, C, ldc with GEMMArgs' meaning, then aBF16, bBF16
// (the operand is bfloat16, else float32) and tf32 (round float32 operands
// to TF32).
//
// CUDA: 256 threads (16×16); k advances 16 at a time through shared memory:
// each stage the block loads a 64×16 panel of op(A) and a 16×64 panel of
// op(B), each thread 4 elements of each, converted to float32 (and rounded
// to TF32) as they are staged, zero outside the matrices (so any size
// works) and in the order that makes consecutive threads read consecutive
// addresses whatever the transposition; both panels are stored k-major
// (As[p][i], Bs[p][j]) with a 4-float pad. Thread (tx, ty) owns rows
// ty+16·r and columns tx+16·c (r, c < 4) of the tile: per k it reads four
// values of As (two distinct rows per warp: broadcasts) and four of Bs (32
// consecutive floats per warp: no bank conflict), 16 FMAs into registers;
// the final stores are coalesced along rows.
//
// Go: the block packs 64-wide panels of k (op(A) by rows, op(B) by columns,
// zero padded, converted as on CUDA), then forms dot products four rows by
// two columns at a time in registers; each element sums its k terms in
// order, so results do not depend on how blocks are scheduled.
var gemmKernel = &gg.Kernel{
	Name: "train_sgemm",
	Params: []gg.ParamType{gg.Int32, gg.Int32, gg.Int32, gg.Int32, gg.Int32, gg.Float32,
		gg.Pointer, gg.Int32, gg.Pointer, gg.Int32, gg.Float32, gg.Pointer, gg.Int32,
		gg.Int32, gg.Int32, gg.Int32},
	Go:   gemmGo,
	CUDA: precCUDA + gemmCUDA,
}

const gemmCUDA = `
#define TM 64
#define TN 64
#define TK 16
// gemm_ld reads element i of an operand as float32: bfloat16 widened, or
// float32 rounded to TF32 when tf32 is set (a bfloat16 is already one).
static __device__ __forceinline__ float gemm_ld(const void* __restrict__ X, size_t i, int bf16, int tf32) {
    if (bf16) return bf16_to_f32(((const bf16_t*)X)[i]);
    const float v = ((const float*)X)[i];
    return tf32 ? round_tf32(v) : v;
}
extern "C" __global__ void __launch_bounds__(256)
train_sgemm(int transA, int transB, int m, int n, int k, float alpha,
            const void* __restrict__ A, int lda, const void* __restrict__ B, int ldb,
            float beta, float* __restrict__ C, int ldc, int aBF16, int bBF16, int tf32) {
    __shared__ float As[TK][TM + 4];
    __shared__ float Bs[TK][TN + 4];
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
    float acc[4][4];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;

    for (int k0 = 0; k0 < k; k0 += TK) {
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int e = tid + 256 * r; // 0..1023: one element of each panel
            int i, j, p;
            float v = 0.0f;
            if (transA) { // A is k x m: consecutive threads walk m
                p = e / TM; i = e % TM;
                if (m0 + i < m && k0 + p < k) v = gemm_ld(A, (size_t)(k0 + p) * lda + (m0 + i), aBF16, tf32);
            } else {      // A is m x k: consecutive threads walk k
                i = e / TK; p = e % TK;
                if (m0 + i < m && k0 + p < k) v = gemm_ld(A, (size_t)(m0 + i) * lda + (k0 + p), aBF16, tf32);
            }
            As[p][i] = v;
            v = 0.0f;
            if (transB) { // B is n x k: consecutive threads walk k
                j = e / TK; p = e % TK;
                if (n0 + j < n && k0 + p < k) v = gemm_ld(B, (size_t)(n0 + j) * ldb + (k0 + p), bBF16, tf32);
            } else {      // B is k x n: consecutive threads walk n
                p = e / TN; j = e % TN;
                if (n0 + j < n && k0 + p < k) v = gemm_ld(B, (size_t)(k0 + p) * ldb + (n0 + j), bBF16, tf32);
            }
            Bs[p][j] = v;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < TK; p++) {
            float a[4], b[4];
#pragma unroll
            for (int r = 0; r < 4; r++) a[r] = As[p][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < 4; c++) b[c] = Bs[p][tx + 16 * c];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) acc[r][c] += a[r] * b[c];
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int row = m0 + ty + 16 * r;
        if (row >= m) continue;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int col = n0 + tx + 16 * c;
            if (col >= n) continue;
            float* out = C + (size_t)row * ldc + col;
            *out = beta == 0.0f ? alpha * acc[r][c] : alpha * acc[r][c] + beta * *out;
        }
    }
}
`

// extent is the number of elements spanned by a row-major matrix of rows
// rows of cols elements, rows ld apart.
func extent(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// operand is a GEMM operand as stored, float32 (f) or bfloat16 (h), read
// as float32: bfloat16 widened, float32 rounded to TF32 when tf32 is set.
type operand struct {
	f    []float32
	h    []uint16
	tf32 bool
}

// at returns element i as the kernel multiplies it.
func (o *operand) at(i int) float32 {
	if o.h != nil {
		return fromBF16(o.h[i])
	}
	if o.tf32 {
		return roundTF32(o.f[i])
	}
	return o.f[i]
}

// load sets dst[j] to element off+j·stride, converted as at does.
func (o *operand) load(dst []float32, off, stride int) {
	switch {
	case o.h != nil:
		for j := range dst {
			dst[j] = fromBF16(o.h[off+j*stride])
		}
	case o.tf32:
		for j := range dst {
			dst[j] = roundTF32(o.f[off+j*stride])
		}
	case stride == 1:
		copy(dst, o.f[off:])
	default:
		for j := range dst {
			dst[j] = o.f[off+j*stride]
		}
	}
}

// plain reports whether the kernel reads the operand as it is stored.
func (o *operand) plain() bool { return o.h == nil && !o.tf32 }

func gemmGo(blk gg.Block, a gg.Args) {
	transA, transB := a.Int32(0) != 0, a.Int32(1) != 0
	m, n, k := a.Int(2), a.Int(3), a.Int(4)
	alpha, beta := a.Float32(5), a.Float32(10)
	lda, ldb, ldc := a.Int(7), a.Int(9), a.Int(12)
	m0, n0 := blk.Idx.Y*tileM, blk.Idx.X*tileN
	if m0 >= m || n0 >= n {
		return
	}
	mb, nb := min(tileM, m-m0), min(tileN, n-n0)
	C := gg.Slice[float32](a.Ptr(11), extent(m, n, ldc))
	var A, B operand
	if k > 0 {
		A, B = gemmOperands(a, transA, transB, m, n, k, lda, ldb)
	}
	if haveFMA {
		sc := gemmScratchPool.Get().(*gemmScratch)
		defer gemmScratchPool.Put(sc)
		clear(sc.acc[:])
		if k > 0 {
			if A.plain() && B.plain() {
				gemmGoFMA(sc, A.f, B.f, transA, transB, k, lda, ldb, m0, n0, mb, nb)
			} else {
				gemmGoFMAConv(sc, &A, &B, transA, transB, k, lda, ldb, m0, n0, mb, nb)
			}
		}
		storeTile(C, sc.acc[:], alpha, beta, ldc, m0, n0, mb, nb)
		return
	}
	var acc [tileM * tileN]float32
	if k > 0 {
		gemmTile(&acc, &A, &B, transA, transB, m0, n0, mb, nb, k, lda, ldb)
	}
	storeTile(C, acc[:], alpha, beta, ldc, m0, n0, mb, nb)
}

// gemmTile adds op(A)[m0:m0+mb, :]·op(B)[:, n0:n0+nb] to acc (row stride
// tileN), a panel of goK values of k at a time.
func gemmTile(acc *[tileM * tileN]float32, A, B *operand, transA, transB bool, m0, n0, mb, nb, k, lda, ldb int) {
	// ap holds op(A) rows, bp op(B) columns, each goK long; rows and
	// columns past mb and nb up to the register block stay zero.
	var ap, bp [tileM * goK]float32
	mr, nr := (mb+3)&^3, (nb+1)&^1
	for k0 := 0; k0 < k; k0 += goK {
		kb := min(goK, k-k0)
		for i := range mb {
			if transA { // A is k×m
				A.load(ap[i*goK:][:kb], k0*lda+m0+i, lda)
			} else {
				A.load(ap[i*goK:][:kb], (m0+i)*lda+k0, 1)
			}
		}
		for j := range nb {
			if transB { // B is n×k
				B.load(bp[j*goK:][:kb], (n0+j)*ldb+k0, 1)
			} else {
				B.load(bp[j*goK:][:kb], k0*ldb+n0+j, ldb)
			}
		}
		gemmPanel(acc, &ap, &bp, mr, nr, kb)
	}
}

// gemmPanel adds the products of one packed panel to acc, rows of ap by
// columns of bp, four rows by two columns at a time. It touches only the
// block's private arrays, so it is left out of race instrumentation (which
// slows these loops twentyfold); the reads and writes of device memory
// around it stay instrumented.
//
//go:norace
func gemmPanel(acc *[tileM * tileN]float32, ap, bp *[tileM * goK]float32, mr, nr, kb int) {
	for i := 0; i < mr; i += 4 {
		a0 := ap[i*goK:][:kb]
		a1 := ap[(i+1)*goK:][:kb]
		a2 := ap[(i+2)*goK:][:kb]
		a3 := ap[(i+3)*goK:][:kb]
		for j := 0; j < nr; j += 2 {
			b0 := bp[j*goK:][:kb]
			b1 := bp[(j+1)*goK:][:kb]
			var s00, s01, s10, s11, s20, s21, s30, s31 float32
			for p, x0 := range a0 {
				y0, y1 := b0[p], b1[p]
				x1, x2, x3 := a1[p], a2[p], a3[p]
				s00 += x0 * y0
				s01 += x0 * y1
				s10 += x1 * y0
				s11 += x1 * y1
				s20 += x2 * y0
				s21 += x2 * y1
				s30 += x3 * y0
				s31 += x3 * y1
			}
			c := acc[i*tileN+j:]
			c[0] += s00
			c[1] += s01
			c[tileN] += s10
			c[tileN+1] += s11
			c[2*tileN] += s20
			c[2*tileN+1] += s21
			c[3*tileN] += s30
			c[3*tileN+1] += s31
		}
	}
}

// The vector path (AVX2 and FMA, gemm_amd64.s): a micro-kernel keeps a 6×16
// block of sums in twelve vector registers and reads six rows of op(A) and
// sixteen columns of op(B) where they lie in memory, fmaK values of k at a
// time (so that what it reads stays in cache across the tile's 6×16
// blocks). Only what cannot be read in place is packed, k-major and zero
// padded: sixteen columns of op(B) when B is transposed (they are not
// consecutive in memory), and the tile's last rows or columns when they do
// not fill a micro-kernel's block. Operands that must be converted
// (bfloat16, TF32) are converted whole into the tile's panels instead
// (gemmGoFMAConv), which the micro-kernel then reads the same way.
const (
	fmaMR   = 6
	fmaNR   = 16
	fmaK    = 256
	fmaRows = (tileM + fmaMR - 1) / fmaMR * fmaMR // 66: the tile's rows, padded
)

// gemmScratch is one block's packed panels and sums.
type gemmScratch struct {
	ap  [fmaMR * fmaK]float32
	bp  [fmaNR * fmaK]float32
	acc [fmaRows * tileN]float32
	// The converted path's panels: the tile's rows of op(A), fmaK apart,
	// and its columns of op(B), k-major, tileN apart.
	ca [fmaRows * fmaK]float32
	cb [fmaK * tileN]float32
}

var gemmScratchPool = sync.Pool{New: func() any { return new(gemmScratch) }}

// storeTile writes C = alpha·acc + beta·C for the mb×nb tile of C at (m0,
// n0), acc holding the tile's rows tileN apart; beta 0 does not read C
// (it may hold NaNs), as BLAS.
func storeTile(C, acc []float32, alpha, beta float32, ldc, m0, n0, mb, nb int) {
	for i := range mb {
		row := C[(m0+i)*ldc+n0:][:nb]
		ar := acc[i*tileN:][:nb]
		if beta == 0 {
			for j := range row {
				row[j] = alpha * ar[j]
			}
		} else {
			for j := range row {
				row[j] = alpha*ar[j] + beta*row[j]
			}
		}
	}
}

// gemmOperands returns the A and B operands of a GEMM launch (arguments 6
// and 8, their element types arguments 13 and 14, TF32 argument 15), each
// as long as op(X)'s storage spans.
func gemmOperands(a gg.Args, transA, transB bool, m, n, k, lda, ldb int) (A, B operand) {
	tf32 := a.Int32(15) != 0
	view := func(arg, bf16 int, rows, cols, ld int) operand {
		n := extent(rows, cols, ld)
		if a.Int32(bf16) != 0 {
			return operand{h: gg.Slice[uint16](a.Ptr(arg), n)}
		}
		return operand{f: gg.Slice[float32](a.Ptr(arg), n), tf32: tf32}
	}
	if transA {
		A = view(6, 13, k, m, lda)
	} else {
		A = view(6, 13, m, k, lda)
	}
	if transB {
		B = view(8, 14, n, k, ldb)
	} else {
		B = view(8, 14, k, n, ldb)
	}
	return A, B
}

// gemmGoFMA is gemmGo's body on the vector path for float32 operands read
// as they are: it adds the tile's product to sc.acc. Every element of C sums
// its k products in order within each fmaK panel and the panels in order,
// so results do not depend on how blocks are scheduled.
func gemmGoFMA(sc *gemmScratch, A, B []float32, transA, transB bool, k, lda, ldb, m0, n0, mb, nb int) {
	acc := &sc.acc
	// Element (i, p) of op(A) is at i·rsA + p·ksA.
	rsA, ksA := lda, 1
	if transA {
		rsA, ksA = 1, lda
	}
	mp, np := (mb+fmaMR-1)/fmaMR, (nb+fmaNR-1)/fmaNR // micro-kernel blocks
	full := mb / fmaMR                               // of which whole in op(A)'s rows
	for k0 := 0; k0 < k; k0 += fmaK {
		kb := min(fmaK, k-k0)
		if full < mp {
			packA(&sc.ap, A, rsA, ksA, m0+full*fmaMR, mb-full*fmaMR, k0, kb)
		}
		for jp := range np {
			j0 := jp * fmaNR
			bq, ksB := &sc.bp[0], fmaNR
			if !transB && j0+fmaNR <= nb {
				bq, ksB = &B[k0*ldb+n0+j0], ldb
			} else {
				packB(&sc.bp, B, transB, ldb, n0+j0, min(fmaNR, nb-j0), k0, kb)
			}
			for ip := range full {
				i := m0 + ip*fmaMR
				sgemm6x16(kb, &A[i*rsA+k0*ksA], rsA, ksA, bq, ksB, &acc[ip*fmaMR*tileN+j0], tileN)
			}
			if full < mp {
				sgemm6x16(kb, &sc.ap[0], 1, fmaMR, bq, ksB, &acc[full*fmaMR*tileN+j0], tileN)
			}
		}
	}
}

// gemmGoFMAConv is gemmGoFMA for operands that are converted as they are
// read: each fmaK panel of the tile's rows of op(A) and columns of op(B)
// is converted into sc.ca and sc.cb (zero padded to whole micro-kernel
// blocks), and the micro-kernel reads those. The sums run in the same
// order as gemmGoFMA's, so float32 operands give the same bits either way.
func gemmGoFMAConv(sc *gemmScratch, A, B *operand, transA, transB bool, k, lda, ldb, m0, n0, mb, nb int) {
	acc := &sc.acc
	rsA, ksA := lda, 1
	if transA {
		rsA, ksA = 1, lda
	}
	mp, np := (mb+fmaMR-1)/fmaMR, (nb+fmaNR-1)/fmaNR
	rows, cols := mp*fmaMR, np*fmaNR
	for k0 := 0; k0 < k; k0 += fmaK {
		kb := min(fmaK, k-k0)
		for i := range rows {
			row := sc.ca[i*fmaK:][:kb]
			if i < mb {
				A.load(row, (m0+i)*rsA+k0*ksA, ksA)
			} else {
				clear(row)
			}
		}
		for p := range kb {
			col := sc.cb[p*tileN:][:cols]
			if transB { // B is n×k: op(B)[p][j] at j·ldb + p
				B.load(col[:nb], n0*ldb+k0+p, ldb)
			} else {
				B.load(col[:nb], (k0+p)*ldb+n0, 1)
			}
			clear(col[nb:])
		}
		for jp := range np {
			for ip := range mp {
				sgemm6x16(kb, &sc.ca[ip*fmaMR*fmaK], fmaK, 1, &sc.cb[jp*fmaNR], tileN, &acc[ip*fmaMR*tileN+jp*fmaNR], tileN)
			}
		}
	}
}

// packA packs rows i0..i0+rows (rows < fmaMR) of op(A), k values
// k0..k0+kb, k-major: element (i, p) at p·fmaMR + i-i0; the rows up to
// fmaMR are zero.
func packA(ap *[fmaMR * fmaK]float32, A []float32, rsA, ksA, i0, rows, k0, kb int) {
	for p := range kb {
		dst := ap[p*fmaMR:][:fmaMR]
		for r := range fmaMR {
			if r < rows {
				dst[r] = A[(i0+r)*rsA+(k0+p)*ksA]
			} else {
				dst[r] = 0
			}
		}
	}
}

// packB packs columns j0..j0+cols (cols ≤ fmaNR) of op(B), k values
// k0..k0+kb, k-major: element (p, j) at p·fmaNR + j-j0; the columns up to
// fmaNR are zero.
func packB(bp *[fmaNR * fmaK]float32, B []float32, transB bool, ldb, j0, cols, k0, kb int) {
	if cols < fmaNR {
		clear(bp[:kb*fmaNR])
	}
	if transB { // B is n×k: row j of B holds op(B)[:, j]
		for c := range cols {
			src := B[(j0+c)*ldb+k0:][:kb]
			for p, v := range src {
				bp[p*fmaNR+c] = v
			}
		}
		return
	}
	for p := range kb {
		copy(bp[p*fmaNR:][:cols], B[(k0+p)*ldb+j0:][:cols])
	}
}
