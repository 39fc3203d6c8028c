package train

import (
	"errors"
	"fmt"
	"runtime"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// cublasWorkspace is what cuBLAS gets to work in: given up front, so that
// GEMMs captured into a graph never allocate (NVIDIA recommends 32 MiB on
// Hopper).
const cublasWorkspace = 32 << 20

// cublasWorkspaceFor is the workspace CuBLAS gives its handle for a
// precision. Measured on an H100 (2026-11-26, 5 alternated runs,
// docs/training.md): with 4 or 8 MiB instead of 32, the reference model's
// step took 8 % longer in FP32 and 5 % in TF32, and in BF16 the same or
// 1 % less (the large model's BF16 step level too). So BF16 keeps 4 MiB and
// the 28 MiB it saves.
func cublasWorkspaceFor(precision string) int {
	if precision == BF16 {
		return 4 << 20
	}
	return cublasWorkspace
}

// CuBLAS returns a GEMM that calls cuBLAS on dev, a device of the cuda
// backend, on the stream's native handle, so that stream capture records
// it into the graph like any other work: cublasSgemm for FP32 operands,
// cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 for MathTF32 and with
// bfloat16 operands for BFloat16. It also returns a description of the
// path precision (FP32, TF32 or BF16; "" is FP32) takes, for banners, and
// the function that frees the handle and its workspace. Without cuBLAS
// (another backend, no library) it returns the error.
func CuBLAS(dev *gg.Device, precision string) (GEMM, string, func(), error) {
	if precision == "" {
		precision = FP32
	}
	if dev.Properties().Backend != gg.BackendCUDA {
		return nil, "", nil, &gg.Error{Op: "train.CuBLAS", Code: gg.ErrNotSupported, Detail: "cuBLAS needs the cuda backend"}
	}
	lib, err := cublas.Load()
	if err != nil {
		return nil, "", nil, err
	}
	drv, err := driver.Load()
	if err != nil {
		return nil, "", nil, err
	}
	onDev := func(f func() error) error { return onDevice(drv, dev, f) }
	var h *cublas.Handle
	if err := onDev(func() error { var err error; h, err = lib.Create(); return err }); err != nil {
		return nil, "", nil, err
	}
	wsBytes := cublasWorkspaceFor(precision)
	ws, err := dev.Malloc(wsBytes)
	if err != nil {
		h.Destroy()
		return nil, "", nil, err
	}
	if err := h.SetWorkspace(uintptr(ws), wsBytes); err != nil {
		h.Destroy()
		dev.Free(ws)
		return nil, "", nil, err
	}
	var stream uintptr // the stream the handle is set to
	gemm := func(s *gg.Stream, g GEMMArgs) error {
		if err := CheckGEMM(g); err != nil {
			return err
		}
		if err := floatC("cuBLAS GEMM", g); err != nil {
			return err
		}
		if g.AType != g.BType {
			return &gg.Error{Op: "cuBLAS GEMM", Code: gg.ErrNotSupported,
				Detail: fmt.Sprintf("operands of two element types (%v and %v): cublasGemmEx wants one", g.AType, g.BType)}
		}
		return onDev(func() error {
			if ns := s.NativeStream(); ns != stream {
				// Setting the stream resets the workspace: give ours again.
				if err := h.SetStream(ns); err != nil {
					return err
				}
				if err := h.SetWorkspace(uintptr(ws), wsBytes); err != nil {
					return err
				}
				stream = ns
			}
			a, b, c := uintptr(g.A), uintptr(g.B), uintptr(g.C)
			switch {
			case g.AType == BFloat16: // TF32 math is moot: bfloat16 values are TF32 values
				return h.GemmExRowMajor(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, a, cublas.R16BF, g.LDA, b, cublas.R16BF, g.LDB,
					g.Beta, c, cublas.R32F, g.LDC, cublas.Compute32F)
			case g.Math == MathTF32:
				return h.GemmExRowMajor(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, a, cublas.R32F, g.LDA, b, cublas.R32F, g.LDB,
					g.Beta, c, cublas.R32F, g.LDC, cublas.Compute32FFastTF32)
			}
			// The handle's default math mode: FP32 (no TF32 unless the
			// environment sets NVIDIA_TF32_OVERRIDE).
			return h.SgemmRowMajor(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, a, g.LDA, b, g.LDB, g.Beta, c, g.LDC)
		})
	}
	ver, _ := h.Version()
	closeFn := func() { _ = errors.Join(h.Destroy(), dev.Free(ws)) }
	how := map[string]string{
		FP32: "cublasSgemm, FP32",
		TF32: "cublasGemmEx, TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)",
		BF16: "cublasGemmEx, BF16 operands, FP32 sums (CUBLAS_COMPUTE_32F)",
	}[precision]
	return gemm, fmt.Sprintf("cuBLAS %d (%s), %s", ver, lib.Path, how), closeFn, nil
}

// onDevice runs f with dev's context current, on a locked thread. A cuBLAS
// or cuBLASLt handle belongs to the device current when it is made, and
// its calls want that device current: on a machine with several GPUs each
// call runs so.
func onDevice(drv *driver.Driver, dev *gg.Device, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := drv.SetCurrent(dev.NativeContext()); err != nil {
		return err
	}
	return f()
}
