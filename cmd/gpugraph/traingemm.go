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
// it can be loaded.
func pickGEMM(dev *gg.Device, name string) (train.GEMM, string, func(), error) {
	kernel := func(why string) (train.GEMM, string, func(), error) {
		return nil, "tiled kernel (internal/train)" + why, func() {}, nil
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
		if g.AType != train.Float32 || g.BType != train.Float32 || g.Math != train.MathFP32 {
			return &gg.Error{Op: "cuBLAS GEMM", Code: gg.ErrNotSupported, Detail: fmt.Sprintf("%v×%v operands, %v math", g.AType, g.BType, g.Math)}
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
			return h.SgemmRowMajor(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, uintptr(g.A), g.LDA, uintptr(g.B), g.LDB, g.Beta, uintptr(g.C), g.LDC)
		})
	}
	ver, _ := h.Version()
	closeFn := func() { _ = errors.Join(h.Destroy(), dev.Free(ws)) }
	return gemm, fmt.Sprintf("cuBLAS %d (%s), FP32", ver, lib.Path), closeFn, nil
}
