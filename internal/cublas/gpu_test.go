//go:build linux

package cublas_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// gpu is a cuda device, a stream and a cuBLAS handle on it with its own
// workspace.
type gpu struct {
	d *gg.Device
	s *gg.Stream
	h *cublas.Handle
}

// openCUDA opens the cuda backend, with its context current on this
// goroutine's thread, locked for the test (cuBLAS and cuBLASLt bind a
// handle to the device current on the calling thread), or skips: these
// tests run on the GPU machine.
func openCUDA(t *testing.T) *gg.Device {
	t.Helper()
	d, err := gg.Open("cuda")
	if errors.Is(err, gg.ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	drv, err := driver.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.SetCurrent(d.NativeContext()); err != nil {
		t.Fatal(err)
	}
	return d
}

// loaded returns lib, skips the test when the library is missing, or
// fails it on another error.
func loaded[L any](t *testing.T, lib L, err error) L {
	t.Helper()
	if errors.Is(err, cublas.ErrNoCUBLAS) {
		t.Skipf("no %T: %v", lib, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// stored returns the row-major stored shapes of a GEMM's operands: A is
// m×k (k×m when transposed), B k×n (n×k when transposed).
func stored(m, n, k int, transA, transB bool) (ar, ac, br, bc int) {
	ar, ac, br, bc = m, k, k, n
	if transA {
		ar, ac = k, m
	}
	if transB {
		br, bc = n, k
	}
	return ar, ac, br, bc
}

// workspace allocates a library workspace of n bytes, freed when the test
// ends.
func workspace(t *testing.T, d *gg.Device, n int) gg.DevicePtr {
	t.Helper()
	ws, err := d.Malloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Free(ws) })
	return ws
}

// destroyed fails the test on err, else destroys h when the test ends,
// failing it if that fails.
func destroyed(t *testing.T, h interface{ Destroy() error }, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Destroy(); err != nil {
			t.Error(err)
		}
	})
}

// setupGPU opens the cuda backend and cuBLAS, or skips.
func setupGPU(t *testing.T) *gpu {
	t.Helper()
	d := openCUDA(t)
	lib, err := cublas.Load()
	lib = loaded(t, lib, err)
	ws := workspace(t, d, cublas.WorkspaceHopper)
	h, err := lib.Create()
	destroyed(t, h, err) // before ws is freed: cleanups run last-in first-out
	v, err := h.Version()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: cuBLAS %d on %s", lib.Path, v, d.Properties().Name)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	ok(t, h.SetStream(s.NativeStream()))
	ok(t, h.SetWorkspace(uintptr(ws), cublas.WorkspaceHopper)) // after SetStream, which resets it
	// Plain FP32 (no TF32 tensor cores), so the comparison can be tight.
	ok(t, h.SetMathMode(cublas.MathPedantic))
	return &gpu{d, s, h}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (g *gpu) upload(t *testing.T, x []float32) gg.DevicePtr {
	t.Helper()
	p, err := g.d.Malloc(4 * len(x))
	ok(t, err)
	t.Cleanup(func() { g.d.Free(p) })
	ok(t, g.d.Memcpy(gg.HtoD(p, gg.Bytes(x))))
	return p
}

func (g *gpu) download(t *testing.T, p gg.DevicePtr, n int) []float32 {
	t.Helper()
	ok(t, g.s.Synchronize())
	out := make([]float32, n)
	ok(t, g.d.Memcpy(gg.DtoH(gg.Bytes(out), p)))
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	return x
}

// rowMajorRef computes alpha·op(A)·op(B) + beta·C in float64 over
// row-major storage; elements of C outside the m×n block are kept.
func rowMajorRef(ta, tb bool, m, n, k int, alpha float64, A []float32, lda int, B []float32, ldb int, beta float64, C []float32, ldc int) []float64 {
	out := make([]float64, len(C))
	for i := range C {
		out[i] = float64(C[i])
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				var av, bv float32
				if ta {
					av = A[l*lda+i]
				} else {
					av = A[i*lda+l]
				}
				if tb {
					bv = B[j*ldb+l]
				} else {
					bv = B[l*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*ldc+j] = alpha*s + beta*out[i*ldc+j]
		}
	}
	return out
}

func compare(t *testing.T, what string, got []float32, want []float64, k int) {
	t.Helper()
	// FP32 accumulation of k products of values in [-1, 1].
	tol := 1e-5 * float64(k+4)
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: C[%d] = %v, want %v (|diff| %.3g > %.3g)", what, i, got[i], want[i], d, tol)
		}
	}
}

func TestGPUSgemmRowMajor(t *testing.T) {
	g := setupGPU(t)
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k, pad = 67, 45, 131, 3 // odd sizes, padded rows
	const alpha, beta = 1.25, -0.5
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			ar, ac, br, bc := stored(m, n, k, ta, tb)
			lda, ldb, ldc := ac+pad, bc+pad, n+pad
			A, B, C := randSlice(r, ar*lda), randSlice(r, br*ldb), randSlice(r, m*ldc)
			a, b, c := g.upload(t, A), g.upload(t, B), g.upload(t, C)
			ok(t, g.h.SgemmRowMajor(ta, tb, m, n, k, alpha, uintptr(a), lda, uintptr(b), ldb, beta, uintptr(c), ldc))
			want := rowMajorRef(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
			compare(t, map[[2]bool]string{{false, false}: "NN", {true, false}: "TN", {false, true}: "NT", {true, true}: "TT"}[[2]bool{ta, tb}],
				g.download(t, c, len(C)), want, k)
		}
	}
}

func TestGPUSgemmInvalidValue(t *testing.T) {
	g := setupGPU(t)
	// Row-major A untransposed is m×k: lda < k is cuBLAS's INVALID_VALUE
	// on the mapped call.
	err := g.h.SgemmRowMajor(false, false, 4, 4, 8, 1, 0, 7, 0, 4, 0, 0, 4)
	if !errors.Is(err, cublas.StatusInvalidValue) {
		t.Fatalf("got %v, want CUBLAS_STATUS_INVALID_VALUE", err)
	}
}

// TestGPUSgemmCapture captures a cuBLAS call made on the native handle of
// a capturing gpugraph stream: the call lands in the driver's graph as
// kernel nodes, nothing runs until the graph is launched, and each launch
// runs it again (beta = 1 accumulates).
func TestGPUSgemmCapture(t *testing.T) {
	g := setupGPU(t)
	r := rand.New(rand.NewPCG(5, 6))
	const m, n, k = 96, 80, 112
	A, B := randSlice(r, m*k), randSlice(r, k*n) // column-major, ld = rows
	zero := make([]float32, m*n)
	a, b, c := g.upload(t, A), g.upload(t, B), g.upload(t, zero)
	// Warm up outside capture, as libraries want (modules load lazily).
	ok(t, g.h.Sgemm(false, false, m, n, k, 1, uintptr(a), m, uintptr(b), k, 0, uintptr(c), m))
	ok(t, g.s.Synchronize())
	ok(t, g.d.Memcpy(gg.HtoD(c, gg.Bytes(zero))))

	ok(t, g.s.BeginCapture(gg.CaptureModeGlobal))
	if err := g.h.Sgemm(false, false, m, n, k, 1, uintptr(a), m, uintptr(b), k, 1, uintptr(c), m); err != nil {
		g.s.EndCapture()
		t.Fatal(err)
	}
	graph, err := g.s.EndCapture()
	ok(t, err)
	nodes, err := graph.Nodes()
	ok(t, err)
	kernels := 0
	for _, nd := range nodes {
		if nd.Type() == gg.NodeKernel {
			kernels++
		}
		if nd.Type() == gg.NodeMemAlloc {
			t.Errorf("captured a memory alloc node: cuBLAS allocated during capture despite SetWorkspace")
		}
	}
	t.Logf("captured %d nodes, %d kernels", len(nodes), kernels)
	if kernels == 0 {
		t.Fatalf("no kernel node captured (%d nodes)", len(nodes))
	}
	if got := g.download(t, c, m*n); !allZero(got) {
		t.Fatal("the captured call ran during capture")
	}
	e, err := graph.Instantiate(0)
	ok(t, err)
	defer e.Destroy()
	// Later values in the scalar page must not change the captured call:
	// host-mode scalars are read at capture.
	scratch := g.upload(t, []float32{0})
	ok(t, g.h.Sgemm(false, false, 1, 1, 1, 99, uintptr(a), 1, uintptr(b), 1, 99, uintptr(scratch), 1))
	const launches = 2
	for range launches {
		ok(t, e.Launch(g.s))
	}
	got := g.download(t, c, m*n)
	want := make([]float64, m*n)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float64
			for l := 0; l < k; l++ {
				s += float64(A[i+l*m]) * float64(B[l+j*k])
			}
			want[i+j*m] = launches * s
		}
	}
	compare(t, "captured", got, want, 2*k)
}

func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}
