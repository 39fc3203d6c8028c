package main

import (
	"fmt"
	"slices"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/train"
)

// gemmNames are train's --gemm choices (pickGEMM, pickFused).
var gemmNames = []string{"auto", "kernel", "cublas", "cublaslt"}

// checkGEMMName refuses a --gemm that is not one of gemmNames.
func checkGEMMName(name string) error {
	if !slices.Contains(gemmNames, name) {
		return usagef("unknown --gemm %q (want auto, kernel, cublas or cublaslt)", name)
	}
	return nil
}

// pickGEMM chooses the matrix product of the training step: the package's
// own tiled kernel (nil: the model's default), or cuBLAS on the cuda
// backend, called on the stream's native handle, so that stream capture
// records it into the graph like any other work. "auto" takes cuBLAS when
// it can be loaded. precision (train.FP32, TF32 or BF16) only shapes the
// description: either GEMM serves every precision. "cublaslt" is the fused
// step (pickFused), whose remaining plain GEMMs are cuBLAS's.
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
	case "auto", "cublas", "cublaslt":
	default:
		return nil, "", nil, usagef("unknown GEMM %q (auto, kernel, cublas, cublaslt)", name)
	}
	if dev.Properties().Backend != gg.BackendCUDA {
		if name != "auto" {
			return nil, "", nil, usagef("--gemm %s needs --backend cuda", name)
		}
		return kernel("")
	}
	gemm, desc, closeFn, err := train.CuBLAS(dev, precision)
	if err != nil {
		if name != "auto" {
			return nil, "", nil, err
		}
		return kernel(fmt.Sprintf("; cuBLAS not used: %v", err))
	}
	return gemm, desc, closeFn, nil
}

// pickFused returns the fused step's GEMM library for --gemm cublaslt
// (train.CuBLASLtStep: bias, ReLU and their gradients in cuBLASLt's
// epilogues, in every precision), and nil for the other names: the
// unfused step.
func pickFused(dev *gg.Device, name, precision string) (train.FusedGEMM, string, func(), error) {
	if name != "cublaslt" {
		return nil, "", func() {}, nil
	}
	if dev.Properties().Backend != gg.BackendCUDA {
		return nil, "", nil, usagef("--gemm cublaslt needs --backend cuda")
	}
	f, desc, closeFn, err := train.CuBLASLtStep(dev, precision)
	if err != nil {
		return nil, "", nil, err
	}
	return f, "fused step: " + desc, closeFn, nil
}
