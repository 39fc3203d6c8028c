//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestGraphNodeLayouts pins CUgraphNodeParams and CUDA_CONDITIONAL_NODE_PARAMS
// to cuda.h (CUDA 13.0, x86-64).
func TestGraphNodeLayouts(t *testing.T) {
	var p graphNodeParams
	c := p.conditional()
	checkLayouts(t, []layoutCase{
		{"sizeof(CUgraphNodeParams)", unsafe.Sizeof(p), 256},
		{"offsetof(CUgraphNodeParams, conditional)", uintptr(unsafe.Pointer(c)) - uintptr(unsafe.Pointer(&p)), 16},
		{"sizeof(CUDA_CONDITIONAL_NODE_PARAMS)", unsafe.Sizeof(*c), 32},
		{"offsetof(handle)", unsafe.Offsetof(c.Handle), 0},
		{"offsetof(type)", unsafe.Offsetof(c.Type), 8},
		{"offsetof(size)", unsafe.Offsetof(c.Size), 12},
		{"offsetof(phGraph_out)", unsafe.Offsetof(c.PhGraphOut), 16},
		{"offsetof(ctx)", unsafe.Offsetof(c.Ctx), 24},
		{"sizeof(union)", unsafe.Sizeof(p.Union), 232},
	})
}
