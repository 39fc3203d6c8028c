//go:build linux

package driver

// External semaphores: the driver calls and struct layouts of cuda.h
// (CUDA 13.0), checked in extsem_layout_test.go.

func init() {
	driverSymbols = append(driverSymbols,
		"cuImportExternalSemaphore", "cuDestroyExternalSemaphore",
		"cuSignalExternalSemaphoresAsync", "cuWaitExternalSemaphoresAsync",
		"cuGraphAddExternalSemaphoresSignalNode", "cuGraphAddExternalSemaphoresWaitNode",
		"cuGraphExternalSemaphoresSignalNodeSetParams", "cuGraphExternalSemaphoresWaitNodeSetParams",
		"cuGraphExecExternalSemaphoresSignalNodeSetParams", "cuGraphExecExternalSemaphoresWaitNodeSetParams",
	)
}

// ExtSemHandleDesc is CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC (96 bytes): the
// handle type, a union of an int fd, two Win32 pointers and an NvSciSync
// object (8-aligned, at offset 8), flags and reserved words.
type ExtSemHandleDesc struct {
	Type     int32 // CUexternalSemaphoreHandleType
	_        int32
	FD       int32 // handle.fd
	_        int32
	_        uintptr // the rest of handle.win32
	Flags    uint32
	Reserved [16]uint32
}

// ExtSemParams is CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS and, with the same
// layout, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS (144 bytes): params.fence.value
// first, then NvSciSync and keyed-mutex fields gpugraph leaves zero, in a
// 72-byte params struct; flags and reserved words follow.
type ExtSemParams struct {
	Value    uint64   // params.fence.value
	_        [64]byte // params.nvSciSync, params.keyedMutex, params.reserved
	Flags    uint32
	Reserved [16]uint32
}

// ExtSemNodeParams is CUDA_EXT_SEM_SIGNAL_NODE_PARAMS and
// CUDA_EXT_SEM_WAIT_NODE_PARAMS (v1 and v2 alike): the semaphore handle
// array, the parameter array and their length.
type ExtSemNodeParams struct {
	ExtSemArray uintptr // const CUexternalSemaphore*
	ParamsArray uintptr // const CUDA_EXTERNAL_SEMAPHORE_{SIGNAL,WAIT}_PARAMS*
	NumExtSems  uint32
}
