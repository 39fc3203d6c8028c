package main

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/train"
)

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
	gemm, desc, closeFn, err := train.CuBLAS(dev, precision)
	if err != nil {
		if name == "cublas" {
			return nil, "", nil, err
		}
		return kernel(fmt.Sprintf("; cuBLAS not used: %v", err))
	}
	return gemm, desc, closeFn, nil
}
