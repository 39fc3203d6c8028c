package train

import (
	"fmt"
	"sync"

	gg "github.com/gpugraph/gpugraph"
)

// GEMM computes C = alpha·op(A)·op(B) + beta·C on stream s, in row-major
// storage:
//
//   - op(A) is m×k. With transA false, A is stored as m rows of k elements,
//     row i starting at element i·lda (lda ≥ k); with transA true, A is
//     stored as k rows of m elements (op(A) = Aᵀ), row p at p·lda (lda ≥ m).
//   - op(B) is k×n. With transB false, B is k rows of n elements (ldb ≥ n);
//     with transB true, B is n rows of k elements (op(B) = Bᵀ, ldb ≥ k).
//   - C is m rows of n elements, row i at i·ldc (ldc ≥ n).
//
// All are float32 device arrays. When beta is 0, C is not read (NaNs in it
// do not propagate), as in BLAS. m, n or k may be 0: with m or n 0 nothing
// happens; with k 0, C = beta·C.
//
// A row-major C is a column-major Cᵀ, so a column-major BLAS computes it
// with the operands swapped: cublasSgemm(h, opB, opA, n, m, k, &alpha, B,
// ldb, A, lda, &beta, C, ldc), where opX is CUBLAS_OP_T when transX.
//
// A step uses three forms: Y = X·Wᵀ (forward), dX = dY·W (gradient of the
// input) and dW = dYᵀ·X (gradient of the weights).
type GEMM func(s *gg.Stream, transA, transB bool, m, n, k int, alpha float32, a gg.DevicePtr, lda int, b gg.DevicePtr, ldb int, beta float32, c gg.DevicePtr, ldc int) error

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

// CheckGEMM validates GEMM arguments; its error wraps
// gpugraph.ErrInvalidValue. Replacements of KernelGEMM may call it.
func CheckGEMM(transA, transB bool, m, n, k int, a gg.DevicePtr, lda int, b gg.DevicePtr, ldb int, c gg.DevicePtr, ldc int) error {
	bad := func(format string, args ...any) error {
		return &gg.Error{Op: "train.GEMM", Code: gg.ErrInvalidValue, Detail: fmt.Sprintf(format, args...)}
	}
	const maxDim = 1<<31 - 1
	if m < 0 || n < 0 || k < 0 || m > maxDim || n > maxDim || k > maxDim {
		return bad("sizes m %d, n %d, k %d outside [0, %d]", m, n, k, maxDim)
	}
	aCols, bCols := k, n // elements of a stored row
	if transA {
		aCols = m
	}
	if transB {
		bCols = k
	}
	switch {
	case lda < max(1, aCols) || lda > maxDim:
		return bad("lda %d < %d", lda, max(1, aCols))
	case ldb < max(1, bCols) || ldb > maxDim:
		return bad("ldb %d < %d", ldb, max(1, bCols))
	case ldc < max(1, n) || ldc > maxDim:
		return bad("ldc %d < %d", ldc, max(1, n))
	case m > 0 && n > 0 && c == 0:
		return bad("nil C")
	case m > 0 && n > 0 && k > 0 && (a == 0 || b == 0):
		return bad("nil A or B")
	}
	return nil
}

// KernelGEMM is the default GEMM: this package's shared-memory tiled
// kernel, one block of 256 threads per 64×64 tile of C, each thread
// computing 4×4 elements of it; one launch per call.
func KernelGEMM(s *gg.Stream, transA, transB bool, m, n, k int, alpha float32, a gg.DevicePtr, lda int, b gg.DevicePtr, ldb int, beta float32, c gg.DevicePtr, ldc int) error {
	if err := CheckGEMM(transA, transB, m, n, k, a, lda, b, ldb, c, ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	grid := gg.Dim2((n+tileN-1)/tileN, (m+tileM-1)/tileM)
	return s.Launch(gemmKernel, grid, gg.Dim1(gemmThreads),
		b2i(transA), b2i(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gemmKernel computes one 64×64 tile of C per block (blockIdx.x: tile
// column, blockIdx.y: tile row). Arguments: transA, transB, m, n, k, alpha,
// A, lda, B, ldb, beta, C, ldc, with GEMM's meaning.
//
// CUDA: 256 threads (16×16); k advances 16 at a time through shared memory:
// each stage the block loads a 64×16 panel of op(A) and a 16×64 panel of
// op(B), each thread 4 elements of each, zero outside the matrices (so any
// size works) and in the order that makes consecutive threads read
// consecutive addresses whatever the transposition; both panels are stored
// k-major (As[p][i], Bs[p][j]) with a 4-float pad. Thread (tx, ty) owns
// rows ty+16·r and columns tx+16·c (r, c < 4) of the tile: per k it reads
// four values of As (two distinct rows per warp: broadcasts) and four of Bs
// (32 consecutive floats per warp: no bank conflict), 16 FMAs into
// registers; the final stores are coalesced along rows.
//
// Go: the block packs 64-wide panels of k (op(A) by rows, op(B) by columns,
// zero padded), then forms dot products four rows by two columns at a time
// in registers; each element sums its k terms in order, so results do not
// depend on how blocks are scheduled.
var gemmKernel = &gg.Kernel{
	Name: "train_sgemm",
	Params: []gg.ParamType{gg.Int32, gg.Int32, gg.Int32, gg.Int32, gg.Int32, gg.Float32,
		gg.Pointer, gg.Int32, gg.Pointer, gg.Int32, gg.Float32, gg.Pointer, gg.Int32},
	Go:   gemmGo,
	CUDA: gemmCUDA,
}

const gemmCUDA = `
#define TM 64
#define TN 64
#define TK 16
extern "C" __global__ void __launch_bounds__(256)
train_sgemm(int transA, int transB, int m, int n, int k, float alpha,
            const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
            float beta, float* __restrict__ C, int ldc) {
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
                if (m0 + i < m && k0 + p < k) v = A[(size_t)(k0 + p) * lda + (m0 + i)];
            } else {      // A is m x k: consecutive threads walk k
                i = e / TK; p = e % TK;
                if (m0 + i < m && k0 + p < k) v = A[(size_t)(m0 + i) * lda + (k0 + p)];
            }
            As[p][i] = v;
            v = 0.0f;
            if (transB) { // B is n x k: consecutive threads walk k
                j = e / TK; p = e % TK;
                if (n0 + j < n && k0 + p < k) v = B[(size_t)(n0 + j) * ldb + (k0 + p)];
            } else {      // B is k x n: consecutive threads walk n
                p = e / TN; j = e % TN;
                if (n0 + j < n && k0 + p < k) v = B[(size_t)(k0 + p) * ldb + (n0 + j)];
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
	if haveFMA {
		gemmGoFMA(a, transA, transB, m, n, k, alpha, beta, lda, ldb, ldc, m0, n0, mb, nb)
		return
	}
	var acc [tileM * tileN]float32
	if k > 0 {
		A, B := gemmOperands(a, transA, transB, m, n, k, lda, ldb)
		gemmTile(&acc, A, B, transA, transB, m0, n0, mb, nb, k, lda, ldb)
	}
	storeTile(gg.Slice[float32](a.Ptr(11), extent(m, n, ldc)), acc[:], alpha, beta, ldc, m0, n0, mb, nb)
}

// gemmTile adds op(A)[m0:m0+mb, :]·op(B)[:, n0:n0+nb] to acc (row stride
// tileN), a panel of goK values of k at a time.
func gemmTile(acc *[tileM * tileN]float32, A, B []float32, transA, transB bool, m0, n0, mb, nb, k, lda, ldb int) {
	// ap holds op(A) rows, bp op(B) columns, each goK long; rows and
	// columns past mb and nb up to the register block stay zero.
	var ap, bp [tileM * goK]float32
	mr, nr := (mb+3)&^3, (nb+1)&^1
	for k0 := 0; k0 < k; k0 += goK {
		kb := min(goK, k-k0)
		if transA { // A is k×m
			for p := range kb {
				src := A[(k0+p)*lda+m0:][:mb]
				for i, v := range src {
					ap[i*goK+p] = v
				}
			}
		} else {
			for i := range mb {
				copy(ap[i*goK:][:kb], A[(m0+i)*lda+k0:][:kb])
			}
		}
		if transB { // B is n×k
			for j := range nb {
				copy(bp[j*goK:][:kb], B[(n0+j)*ldb+k0:][:kb])
			}
		} else {
			for p := range kb {
				src := B[(k0+p)*ldb+n0:][:nb]
				for j, v := range src {
					bp[j*goK+p] = v
				}
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
// not fill a micro-kernel's block.
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
// and 8), each as long as op(X)'s storage spans.
func gemmOperands(a gg.Args, transA, transB bool, m, n, k, lda, ldb int) (A, B []float32) {
	if transA {
		A = gg.Slice[float32](a.Ptr(6), extent(k, m, lda))
	} else {
		A = gg.Slice[float32](a.Ptr(6), extent(m, k, lda))
	}
	if transB {
		B = gg.Slice[float32](a.Ptr(8), extent(n, k, ldb))
	} else {
		B = gg.Slice[float32](a.Ptr(8), extent(k, n, ldb))
	}
	return A, B
}

// gemmGoFMA is gemmGo's body on the vector path. Every element of C sums
// its k products in order within each fmaK panel and the panels in order,
// so results do not depend on how blocks are scheduled.
func gemmGoFMA(a gg.Args, transA, transB bool, m, n, k int, alpha, beta float32, lda, ldb, ldc, m0, n0, mb, nb int) {
	sc := gemmScratchPool.Get().(*gemmScratch)
	defer gemmScratchPool.Put(sc)
	acc := &sc.acc
	clear(acc[:])
	if k > 0 {
		A, B := gemmOperands(a, transA, transB, m, n, k, lda, ldb)
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
	storeTile(gg.Slice[float32](a.Ptr(11), extent(m, n, ldc)), acc[:], alpha, beta, ldc, m0, n0, mb, nb)
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
