package main

import (
	"errors"
	"fmt"
	"runtime"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
	"github.com/gpugraph/gpugraph/internal/train"
)

// cublasWorkspace is what cuBLAS gets to work in: given up front, so that
// GEMMs captured into a graph never allocate (NVIDIA recommends 32 MiB on
// Hopper).
const cublasWorkspace = 32 << 20

// pickGEMM chooses the matrix product of the training step: the package's
// own tiled kernel (nil: the model's default), or cuBLAS on the cuda
// backend, called on the stream's native handle, so that stream capture
// records it into the graph like any other work. "auto" takes cuBLAS when
// it can be loaded. precision (train.FP32, TF32 or BF16) only shapes the
// description: either GEMM serves every precision.
func pickGEMM(dev *gg.Device, name, precision string) (train.GEMM, string, func(), error) {
	if precision == "" {
		precision = train.FP32
	}
	kernel := func(why string) (train.GEMM, string, func(), error) {
		desc := "tiled kernel (internal/train)"
		if precision == train.TF32 || precision == train.BF16 {
			desc += ", " + precision + " operands converted as they are staged, FP32 FMAs (no tensor cores)"
		}
		return nil, desc + why, func() {}, nil
	}
	switch name {
	case "kernel":
		return kernel("")
	case "auto", "cublas":
	default:
		return nil, "", nil, usagef("unknown GEMM %q (auto, kernel, cublas)", name)
	}
	if dev.Properties().Backend != gg.BackendCUDA {
		if name == "cublas" {
			return nil, "", nil, usagef("--gemm cublas needs --backend cuda")
		}
		return kernel("")
	}
	lib, err := cublas.Load()
	if err != nil {
		if name == "cublas" {
			return nil, "", nil, err
		}
		return kernel(fmt.Sprintf("; cuBLAS not used: %v", err))
	}
	drv, err := driver.Load()
	if err != nil {
		return nil, "", nil, err
	}
	// A cuBLAS handle belongs to the device current when it is made, and
	// its calls want that device current: on a machine with several GPUs
	// each call runs with dev's context current on a locked thread.
	onDev := func(f func() error) error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := drv.SetCurrent(dev.NativeContext()); err != nil {
			return err
		}
		return f()
	}
	var h *cublas.Handle
	if err := onDev(func() error { var err error; h, err = lib.Create(); return err }); err != nil {
		return nil, "", nil, err
	}
	ws, err := dev.Malloc(cublasWorkspace)
	if err != nil {
		h.Destroy()
		return nil, "", nil, err
	}
	if err := h.SetWorkspace(uintptr(ws), cublasWorkspace); err != nil {
		h.Destroy()
		dev.Free(ws)
		return nil, "", nil, err
	}
	var stream uintptr // the stream the handle is set to
	gemm := func(s *gg.Stream, g train.GEMMArgs) error {
		if err := train.CheckGEMM(g); err != nil {
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
				if err := h.SetWorkspace(uintptr(ws), cublasWorkspace); err != nil {
					return err
				}
				stream = ns
			}
			a, b, c := uintptr(g.A), uintptr(g.B), uintptr(g.C)
			switch {
			case g.AType == train.BFloat16: // TF32 math is moot: bfloat16 values are TF32 values
				return h.GemmExRowMajor(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, a, cublas.R16BF, g.LDA, b, cublas.R16BF, g.LDB,
					g.Beta, c, cublas.R32F, g.LDC, cublas.Compute32F)
			case g.Math == train.MathTF32:
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
		train.FP32: "cublasSgemm, FP32",
		train.TF32: "cublasGemmEx, TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)",
		train.BF16: "cublasGemmEx, BF16 operands, FP32 sums (CUBLAS_COMPUTE_32F)",
	}[precision]
	return gemm, fmt.Sprintf("cuBLAS %d (%s), %s", ver, lib.Path, how), closeFn, nil
}
