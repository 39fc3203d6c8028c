package driver

import "unsafe"

// External semaphores: the driver calls and struct layouts of cuda.h
// (CUDA 13.0), checked in layout_test.go. Every struct a call reads
// is laid out in a CMem arena the caller holds locked.

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

// extSemParams is CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS and, with the same
// layout, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS (144 bytes): params.fence.value
// first, then NvSciSync and keyed-mutex fields gpugraph leaves zero, in a
// 72-byte params struct; flags and reserved words follow.
type extSemParams struct {
	Value    uint64   // params.fence.value
	_        [64]byte // params.nvSciSync, params.keyedMutex, params.reserved
	Flags    uint32
	Reserved [16]uint32
}

// extSemNodeParams is CUDA_EXT_SEM_SIGNAL_NODE_PARAMS and
// CUDA_EXT_SEM_WAIT_NODE_PARAMS (v1 and v2 alike): the semaphore handle
// array, the parameter array and their length.
type extSemNodeParams struct {
	ExtSemArray uintptr // const CUexternalSemaphore*
	ParamsArray uintptr // const CUDA_EXTERNAL_SEMAPHORE_{SIGNAL,WAIT}_PARAMS*
	NumExtSems  uint32
}

// ExtSems are the semaphores of a signal or wait and the fence value of
// each: the parameters of the stream calls and of the signal and wait
// nodes. Sems and Values have the same, non-zero, length.
type ExtSems struct {
	Sems   []uintptr // CUexternalSemaphore
	Values []uint64
}

// arrays lays out the handle and parameter arrays in m.
func (s *ExtSems) arrays(m *CMem) (handles, params uintptr) {
	n := len(s.Sems)
	ps := unsafe.Slice((*extSemParams)(m.zeroed(uintptr(n)*unsafe.Sizeof(extSemParams{}))), n)
	for i := range ps {
		ps[i].Value = s.Values[i]
	}
	return putSlice(m, s.Sems), uintptr(unsafe.Pointer(&ps[0]))
}

// nodeParams lays out CUDA_EXT_SEM_{SIGNAL,WAIT}_NODE_PARAMS in m.
func (s *ExtSems) nodeParams(m *CMem) uintptr {
	var p extSemNodeParams
	p.ExtSemArray, p.ParamsArray = s.arrays(m)
	p.NumExtSems = uint32(len(s.Sems))
	return uintptr(unsafe.Pointer(put(m, &p)))
}

// ImportExternalSemaphore imports a semaphore; desc is laid out in m.
func (d *Driver) ImportExternalSemaphore(m *CMem, desc ExtSemHandleDesc) (uintptr, error) {
	var s uintptr
	err := d.call("cuImportExternalSemaphore", uintptr(unsafe.Pointer(&s)), uintptr(unsafe.Pointer(put(m, &desc))))
	return s, err
}

func (d *Driver) DestroyExternalSemaphore(sem uintptr) error {
	return d.call("cuDestroyExternalSemaphore", sem)
}

func (d *Driver) SignalExternalSemaphoresAsync(m *CMem, s ExtSems, stream uintptr) error {
	return d.extSemsAsync("cuSignalExternalSemaphoresAsync", m, &s, stream)
}

func (d *Driver) WaitExternalSemaphoresAsync(m *CMem, s ExtSems, stream uintptr) error {
	return d.extSemsAsync("cuWaitExternalSemaphoresAsync", m, &s, stream)
}

func (d *Driver) extSemsAsync(name string, m *CMem, s *ExtSems, stream uintptr) error {
	hs, ps := s.arrays(m)
	return d.call(name, hs, ps, uintptr(len(s.Sems)), stream)
}

func (d *Driver) GraphAddExternalSemaphoresSignalNode(m *CMem, g uintptr, deps []uintptr, s ExtSems) (uintptr, error) {
	return d.addNode("cuGraphAddExternalSemaphoresSignalNode", g, deps, s.nodeParams(m))
}

func (d *Driver) GraphAddExternalSemaphoresWaitNode(m *CMem, g uintptr, deps []uintptr, s ExtSems) (uintptr, error) {
	return d.addNode("cuGraphAddExternalSemaphoresWaitNode", g, deps, s.nodeParams(m))
}

func (d *Driver) GraphExternalSemaphoresSignalNodeSetParams(m *CMem, node uintptr, s ExtSems) error {
	return d.call("cuGraphExternalSemaphoresSignalNodeSetParams", node, s.nodeParams(m))
}

func (d *Driver) GraphExternalSemaphoresWaitNodeSetParams(m *CMem, node uintptr, s ExtSems) error {
	return d.call("cuGraphExternalSemaphoresWaitNodeSetParams", node, s.nodeParams(m))
}

func (d *Driver) GraphExecExternalSemaphoresSignalNodeSetParams(m *CMem, exec, node uintptr, s ExtSems) error {
	return d.call("cuGraphExecExternalSemaphoresSignalNodeSetParams", exec, node, s.nodeParams(m))
}

func (d *Driver) GraphExecExternalSemaphoresWaitNodeSetParams(m *CMem, exec, node uintptr, s ExtSems) error {
	return d.call("cuGraphExecExternalSemaphoresWaitNodeSetParams", exec, node, s.nodeParams(m))
}
