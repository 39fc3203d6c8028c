//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestInstantiateParamsLayout pins CUDA_GRAPH_INSTANTIATE_PARAMS to cuda.h
// (x86-64): flags, hUploadStream, hErrNode_out, result_out.
func TestInstantiateParamsLayout(t *testing.T) {
	var p GraphInstantiateParams
	checkLayouts(t, []layoutCase{
		{"sizeof CUDA_GRAPH_INSTANTIATE_PARAMS", unsafe.Sizeof(p), 32},
		{"hUploadStream", unsafe.Offsetof(p.UploadStream), 8},
		{"hErrNode_out", unsafe.Offsetof(p.ErrNode), 16},
		{"result_out", unsafe.Offsetof(p.Result), 24},
	})
}
