//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestExtSemLayouts pins the external semaphore structs to cuda.h (x86-64).
func TestExtSemLayouts(t *testing.T) {
	checkLayouts(t, []layoutCase{
		{"sizeof CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC", unsafe.Sizeof(ExtSemHandleDesc{}), 96},
		{"offsetof handle.fd", unsafe.Offsetof(ExtSemHandleDesc{}.FD), 8},
		{"offsetof flags (handle desc)", unsafe.Offsetof(ExtSemHandleDesc{}.Flags), 24},
		{"sizeof CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS", unsafe.Sizeof(extSemParams{}), 144},
		{"offsetof params.fence.value", unsafe.Offsetof(extSemParams{}.Value), 0},
		{"offsetof flags (signal params)", unsafe.Offsetof(extSemParams{}.Flags), 72},
		{"sizeof CUDA_EXT_SEM_SIGNAL_NODE_PARAMS", unsafe.Sizeof(extSemNodeParams{}), 24},
		{"offsetof numExtSems", unsafe.Offsetof(extSemNodeParams{}.NumExtSems), 16},
	})
}
