package train

import (
	"errors"
	"fmt"

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
		return launchBiasAct(s, g.C, g.C, bias, false, g.M, g.N, relu, false)
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
	lt, err := newLtSetup(dev, "train.CuBLASLt")
	if err != nil {
		return nil, "", nil, err
	}
	gemm := func(s *gg.Stream, g GEMMArgs, bias gg.DevicePtr, relu bool) error {
		if err := CheckGEMM(g); err != nil {
			return err
		}
		if g.AType != Float32 || g.BType != Float32 || g.CType != Float32 || g.Math != MathFP32 {
			return &gg.Error{Op: "cuBLASLt GEMM", Code: gg.ErrNotSupported,
				Detail: fmt.Sprintf("%v × %v operands, C %v, math %v: this epilogue GEMM takes FP32 only", g.AType, g.BType, g.CType, g.Math)}
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
		return lt.matmul(s, g, ep, bias, 0)
	}
	return gemm, fmt.Sprintf("cuBLASLt %d (%s), bias and ReLU in the GEMM's epilogue, FP32", lt.lib.Version(), lt.lib.Path), lt.close, nil
}

// ltSetup is what CuBLASLt and CuBLASLtStep share: the library, a handle
// made with dev's context current, and the workspace.
type ltSetup struct {
	dev *gg.Device
	lib *cublas.LtLib
	drv *driver.Driver
	h   *cublas.LtHandle
	ws  gg.DevicePtr
}

func newLtSetup(dev *gg.Device, op string) (*ltSetup, error) {
	if dev.Properties().Backend != gg.BackendCUDA {
		return nil, &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: "cuBLASLt needs the cuda backend"}
	}
	lib, err := cublas.LoadLt()
	if err != nil {
		return nil, err
	}
	drv, err := driver.Load()
	if err != nil {
		return nil, err
	}
	lt := &ltSetup{dev: dev, lib: lib, drv: drv}
	if err := lt.onDev(func() error { var err error; lt.h, err = lib.Create(); return err }); err != nil {
		return nil, err
	}
	if lt.ws, err = dev.Malloc(cublasWorkspace); err != nil {
		lt.h.Destroy()
		return nil, err
	}
	return lt, nil
}

// onDev runs f with dev's context current, on a locked thread (onDevice).
func (lt *ltSetup) onDev(f func() error) error { return onDevice(lt.drv, lt.dev, f) }

// matmul runs g with epilogue ep (bias and aux as it takes them) on s's
// native stream, through the handle's plan for the shape (made at the
// first call of each shape: cuBLASLt's heuristic is slow). A and B are of
// g.AType (B must match), C and D of g.CType, and the bias or bias
// gradient of C's type; the compute type is CUBLAS_COMPUTE_32F, or
// CUBLAS_COMPUTE_32F_FAST_TF32 for float32 operands with MathTF32
// (bfloat16 values are TF32 values: the math is moot for them, as in
// CuBLAS). The mask's row stride is LtAuxLD(N).
func (lt *ltSetup) matmul(s *gg.Stream, g GEMMArgs, ep cublas.Epilogue, bias, aux gg.DevicePtr) error {
	compute := cublas.Compute32F
	if g.Math == MathTF32 && g.AType == Float32 {
		compute = cublas.Compute32FFastTF32
	}
	m := cublas.LtMatmul{TransA: g.TransA, TransB: g.TransB, M: g.M, N: g.N, K: g.K, LDA: g.LDA, LDB: g.LDB, LDC: g.LDC,
		ABType: ltType(g.AType), CDType: ltType(g.CType), Compute: compute, Epilogue: ep, MaxWorkspace: cublasWorkspace}
	if ep.UsesBias() {
		m.BiasType = m.CDType
	}
	if ep.UsesAux() {
		m.AuxLD = cublas.LtAuxLD(g.N)
	}
	args := cublas.LtArgs{Alpha: g.Alpha, Beta: g.Beta, A: uintptr(g.A), B: uintptr(g.B), D: uintptr(g.C), Bias: uintptr(bias), Aux: uintptr(aux)}
	if g.Beta != 0 {
		args.C = uintptr(g.C)
	}
	return lt.onDev(func() error {
		p, err := lt.h.Plan(m)
		if err != nil {
			return err
		}
		return p.Matmul(args, s.NativeStream(), uintptr(lt.ws), cublasWorkspace)
	})
}

func (lt *ltSetup) close() { _ = errors.Join(lt.h.Destroy(), lt.dev.Free(lt.ws)) }

// ltType is cuBLASLt's name of an element type.
func ltType(e Elem) cublas.DataType {
	if e == BFloat16 {
		return cublas.R16BF
	}
	return cublas.R32F
}

// CuBLASLtStep returns the FusedGEMM of cuBLASLt on dev, a device of the
// cuda backend, for a step in precision FP32 ("" too), TF32
// (CUBLAS_COMPUTE_32F_FAST_TF32 for GEMMs whose Math is MathTF32) or BF16
// (bfloat16 A and B, CUBLAS_COMPUTE_32F; D bfloat16 or float32 as g.CType
// says, with a bias of D's type). Each call is one cublasLtMatmul on the
// stream's native handle, so stream capture records it:
//
//	Forward         RELU_AUX_BIAS (with relu: the mask is cuBLASLt's
//	                bitmask, rows of LtAuxLD(cols) bits), or BIAS
//	BackwardReLU    DRELU_BGRAD, reading that mask (K ≥ 2 only); DRELU
//	                without a bias gradient
//	WeightGradBias  BGRADB (TransA only)
//
// the call sequence internal/cublas's TestGPULtTrainingStep checks (the
// types of the BF16 step, bfloat16 and float32 D each with every epilogue,
// TestGPULtEpilogues). It also returns a description for banners and the
// function that frees the handle, its plans and its workspace. Model.GEMM
// still computes the FP32 and TF32 steps' other dW GEMMs.
func CuBLASLtStep(dev *gg.Device, precision string) (FusedGEMM, string, func(), error) {
	const op = "train.CuBLASLtStep"
	how := map[string]string{"": "FP32", FP32: "FP32", TF32: "TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)",
		BF16: "BF16 operands, FP32 sums (CUBLAS_COMPUTE_32F), bf16 activations and their gradients from the epilogues"}[precision]
	if how == "" {
		return nil, "", nil, &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: fmt.Sprintf("precision %q: want %q, %q or %q", precision, FP32, TF32, BF16)}
	}
	lt, err := newLtSetup(dev, op)
	if err != nil {
		return nil, "", nil, err
	}
	return ltStep{lt}, fmt.Sprintf("cuBLASLt %d (%s), bias, ReLU and their gradients in the GEMMs' epilogues, %s", lt.lib.Version(), lt.lib.Path, how), lt.close, nil
}

// ltStep is CuBLASLtStep's FusedGEMM.
type ltStep struct{ lt *ltSetup }

func (f ltStep) Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error {
	const op = "cuBLASLt Forward"
	if err := checkFused(op, g, false); err != nil || g.M == 0 || g.N == 0 {
		return err
	}
	if bias == 0 || relu && aux == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil bias or mask"}
	}
	if !relu {
		return f.lt.matmul(s, g, cublas.EpilogueBias, bias, 0)
	}
	return f.lt.matmul(s, g, cublas.EpilogueReluAuxBias, bias, aux)
}

func (f ltStep) BackwardReLU(s *gg.Stream, g GEMMArgs, aux, dbias gg.DevicePtr) error {
	const op = "cuBLASLt BackwardReLU"
	if err := checkFused(op, g, dbias != 0); err != nil || g.M == 0 || g.N == 0 {
		return err
	}
	if aux == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil mask"}
	}
	if dbias == 0 {
		return f.lt.matmul(s, g, cublas.EpilogueDRelu, 0, aux)
	}
	return f.lt.matmul(s, g, cublas.EpilogueDReluBGrad, dbias, aux)
}

func (f ltStep) WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error {
	const op = "cuBLASLt WeightGradBias"
	if err := checkFused(op, g, true); err != nil || g.M == 0 || g.N == 0 {
		return err
	}
	if dbias == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil bias gradient"}
	}
	return f.lt.matmul(s, g, cublas.EpilogueBGradB, dbias, 0)
}

// AuxBytes is cuBLASLt's mask of a rows×cols output: rows of LtAuxLD(cols)
// bits.
func (ltStep) AuxBytes(rows, cols int) int { return rows * cublas.LtAuxLD(cols) / 8 }
