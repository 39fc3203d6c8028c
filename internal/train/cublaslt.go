package train

import (
	"errors"
	"fmt"
	"runtime"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// EpilogueGEMM computes one linear layer of a forward pass:
// C = act(alpha·op(A)·op(B) + beta·C + bias), bias (N float32) added to
// every row of C, act ReLU when relu is set, the identity otherwise. One
// call replaces a GEMM and the bias+ReLU kernel after it: cuBLASLt does
// both in the GEMM's epilogue (CuBLASLt), as PyTorch's addmm does the
// bias.
type EpilogueGEMM func(s *gg.Stream, g GEMMArgs, bias gg.DevicePtr, relu bool) error

// epilogueOf is the EpilogueGEMM made of gemm and the package's bias+ReLU
// kernel: what Forward does without a fused one.
func epilogueOf(gemm GEMM) EpilogueGEMM {
	return func(s *gg.Stream, g GEMMArgs, bias gg.DevicePtr, relu bool) error {
		if err := gemm(s, g); err != nil {
			return err
		}
		return launchBiasAct(s, g.C, g.C, bias, g.M, g.N, relu, false)
	}
}

// CuBLASLt returns an EpilogueGEMM that calls cuBLASLt on dev, a device of
// the cuda backend, with the BIAS or RELU_BIAS epilogue, FP32 operands and
// FP32 compute, on the stream's native handle (so stream capture records
// it). A plan per shape is made at its first call (cuBLASLt's heuristic is
// slow: capture each shape once before timing). It also returns a
// description for banners and the function that frees the handle, its
// plans and its workspace.
func CuBLASLt(dev *gg.Device) (EpilogueGEMM, string, func(), error) {
	if dev.Properties().Backend != gg.BackendCUDA {
		return nil, "", nil, &gg.Error{Op: "train.CuBLASLt", Code: gg.ErrNotSupported, Detail: "cuBLASLt needs the cuda backend"}
	}
	lib, err := cublas.LoadLt()
	if err != nil {
		return nil, "", nil, err
	}
	drv, err := driver.Load()
	if err != nil {
		return nil, "", nil, err
	}
	// As for cuBLAS (CuBLAS): the handle and its calls want dev's context
	// current, on a locked thread.
	onDev := func(f func() error) error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := drv.SetCurrent(dev.NativeContext()); err != nil {
			return err
		}
		return f()
	}
	var h *cublas.LtHandle
	if err := onDev(func() error { var err error; h, err = lib.Create(); return err }); err != nil {
		return nil, "", nil, err
	}
	ws, err := dev.Malloc(cublasWorkspace)
	if err != nil {
		h.Destroy()
		return nil, "", nil, err
	}
	gemm := func(s *gg.Stream, g GEMMArgs, bias gg.DevicePtr, relu bool) error {
		if err := CheckGEMM(g); err != nil {
			return err
		}
		if g.AType != Float32 || g.BType != Float32 || g.Math != MathFP32 {
			return &gg.Error{Op: "cuBLASLt GEMM", Code: gg.ErrNotSupported,
				Detail: fmt.Sprintf("%v × %v operands, math %v: this epilogue GEMM takes FP32 only", g.AType, g.BType, g.Math)}
		}
		if g.M == 0 || g.N == 0 {
			return nil
		}
		if bias == 0 {
			return &gg.Error{Op: "cuBLASLt GEMM", Code: gg.ErrInvalidValue, Detail: "nil bias"}
		}
		ep := cublas.EpilogueBias
		if relu {
			ep = cublas.EpilogueReluBias
		}
		m := cublas.LtMatmul{TransA: g.TransA, TransB: g.TransB, M: g.M, N: g.N, K: g.K, LDA: g.LDA, LDB: g.LDB, LDC: g.LDC,
			ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F,
			Epilogue: ep, BiasType: cublas.R32F, MaxWorkspace: cublasWorkspace}
		args := cublas.LtArgs{Alpha: g.Alpha, Beta: g.Beta, A: uintptr(g.A), B: uintptr(g.B), D: uintptr(g.C), Bias: uintptr(bias)}
		if g.Beta != 0 {
			args.C = uintptr(g.C)
		}
		return onDev(func() error {
			p, err := h.Plan(m)
			if err != nil {
				return err
			}
			return p.Matmul(args, s.NativeStream(), uintptr(ws), cublasWorkspace)
		})
	}
	closeFn := func() { _ = errors.Join(h.Destroy(), dev.Free(ws)) }
	return gemm, fmt.Sprintf("cuBLASLt %d (%s), bias and ReLU in the GEMM's epilogue, FP32", lib.Version(), lib.Path), closeFn, nil
}
