//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestLayouts pins the driver structs to their sizes and field offsets in
// cuda.h (CUDA 13.0, x86-64).
func TestLayouts(t *testing.T) {
	var (
		k  KernelNodeParams
		ms MemsetNodeParams
		mc memcpy3D
		ma memAllocNodeParams
		pp MemPoolProps
		h  HostNodeParams
		u  UpdateResultInfo
		ed GraphEdgeData
		ip GraphInstantiateParams
		gn graphNodeParams
	)
	cn := gn.conditional()
	checkLayouts(t, []layoutCase{
		{"sizeof CUDA_KERNEL_NODE_PARAMS_v2", unsafe.Sizeof(k), 72},
		{"offsetof gridDimX", unsafe.Offsetof(k.GridX), 8},
		{"offsetof blockDimX", unsafe.Offsetof(k.BlockX), 20},
		{"offsetof sharedMemBytes", unsafe.Offsetof(k.SharedMemBytes), 32},
		{"offsetof kernelParams", unsafe.Offsetof(k.KernelParams), 40},
		{"offsetof extra", unsafe.Offsetof(k.Extra), 48},
		{"offsetof kern", unsafe.Offsetof(k.Kern), 56},
		{"offsetof ctx", unsafe.Offsetof(k.Ctx), 64},

		{"sizeof CUDA_MEMSET_NODE_PARAMS", unsafe.Sizeof(ms), 40},
		{"offsetof value", unsafe.Offsetof(ms.Value), 16},
		{"offsetof elementSize", unsafe.Offsetof(ms.ElementSize), 20},
		{"offsetof width", unsafe.Offsetof(ms.Width), 24},

		{"sizeof CUDA_MEMCPY3D", unsafe.Sizeof(mc), 200},
		{"offsetof srcMemoryType", unsafe.Offsetof(mc.SrcMemoryType), 32},
		{"offsetof srcHost", unsafe.Offsetof(mc.SrcHost), 40},
		{"offsetof srcDevice", unsafe.Offsetof(mc.SrcDevice), 48},
		{"offsetof dstXInBytes", unsafe.Offsetof(mc.DstXInBytes), 88},
		{"offsetof dstMemoryType", unsafe.Offsetof(mc.DstMemoryType), 120},
		{"offsetof dstHost", unsafe.Offsetof(mc.DstHost), 128},
		{"offsetof dstDevice", unsafe.Offsetof(mc.DstDevice), 136},
		{"offsetof WidthInBytes", unsafe.Offsetof(mc.WidthInBytes), 176},

		{"sizeof CUDA_MEM_ALLOC_NODE_PARAMS", unsafe.Sizeof(ma), 120},
		{"offsetof accessDescs", unsafe.Offsetof(ma.AccessDescs), 88},
		{"offsetof bytesize", unsafe.Offsetof(ma.Bytesize), 104},
		{"offsetof dptr", unsafe.Offsetof(ma.Dptr), 112},
		{"sizeof CUmemAccessDesc", unsafe.Sizeof(MemAccessDesc{}), 12},
		{"sizeof CUmemPoolProps", unsafe.Sizeof(pp), 88},
		{"offsetof win32SecurityAttributes", unsafe.Offsetof(pp.Win32Security), 16},
		{"offsetof maxSize", unsafe.Offsetof(pp.MaxSize), 24},
		{"offsetof usage", unsafe.Offsetof(pp.Usage), 32},

		{"sizeof CUDA_HOST_NODE_PARAMS", unsafe.Sizeof(h), 16},
		{"offsetof userData", unsafe.Offsetof(h.UserData), 8},

		{"sizeof CUgraphExecUpdateResultInfo", unsafe.Sizeof(u), 24},
		{"offsetof errorNode", unsafe.Offsetof(u.ErrorNode), 8},
		{"offsetof errorFromNode", unsafe.Offsetof(u.ErrorFromNode), 16},

		{"sizeof CUgraphEdgeData", unsafe.Sizeof(ed), 8},
		{"offsetof to_port", unsafe.Offsetof(ed.ToPort), 1},
		{"offsetof type", unsafe.Offsetof(ed.Type), 2},

		{"sizeof CUDA_GRAPH_INSTANTIATE_PARAMS", unsafe.Sizeof(ip), 32},
		{"offsetof hUploadStream", unsafe.Offsetof(ip.UploadStream), 8},
		{"offsetof hErrNode_out", unsafe.Offsetof(ip.ErrNode), 16},
		{"offsetof result_out", unsafe.Offsetof(ip.Result), 24},

		{"sizeof CUgraphNodeParams", unsafe.Sizeof(gn), 256},
		{"sizeof its union", unsafe.Sizeof(gn.Union), 232},
		{"offsetof conditional", uintptr(unsafe.Pointer(cn)) - uintptr(unsafe.Pointer(&gn)), 16},
		{"sizeof CUDA_CONDITIONAL_NODE_PARAMS", unsafe.Sizeof(*cn), 32},
		{"offsetof handle", unsafe.Offsetof(cn.Handle), 0},
		{"offsetof type (conditional)", unsafe.Offsetof(cn.Type), 8},
		{"offsetof size", unsafe.Offsetof(cn.Size), 12},
		{"offsetof phGraph_out", unsafe.Offsetof(cn.PhGraphOut), 16},
		{"offsetof ctx (conditional)", unsafe.Offsetof(cn.Ctx), 24},

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

// layoutCase is the size or a field offset of a driver struct: got in Go,
// want in cuda.h.
type layoutCase struct {
	name      string
	got, want uintptr
}

func checkLayouts(t *testing.T, cases []layoutCase) {
	t.Helper()
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}
