//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestLayouts pins the driver structs to their sizes in cuda.h (x86-64).
func TestLayouts(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"CUDA_KERNEL_NODE_PARAMS_v2", unsafe.Sizeof(KernelNodeParams{}), 72},
		{"CUDA_MEMSET_NODE_PARAMS", unsafe.Sizeof(MemsetNodeParams{}), 40},
		{"CUDA_MEMCPY3D", unsafe.Sizeof(Memcpy3D{}), 200},
		{"CUDA_MEM_ALLOC_NODE_PARAMS", unsafe.Sizeof(MemAllocNodeParams{}), 120},
		{"CUmemAccessDesc", unsafe.Sizeof(MemAccessDesc{}), 12},
		{"CUmemPoolProps", unsafe.Sizeof(MemPoolProps{}), 88},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, c.got, c.want)
		}
	}
	if off := unsafe.Offsetof(MemAllocNodeParams{}.AccessDescs); off != 88 {
		t.Errorf("accessDescs at %d, want 88", off)
	}
	if off := unsafe.Offsetof(KernelNodeParams{}.KernelParams); off != 40 {
		t.Errorf("kernelParams at %d, want 40", off)
	}
}
