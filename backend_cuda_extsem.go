//go:build linux

package gpugraph

import (
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/cuda"
)

// cudaImportExtSem imports a semaphore on the cuda backend, where external
// semaphores are imported from a graphics API's file descriptor and
// signalled and waited on by the driver in streams and graph nodes. The
// arguments of the cuda semaphore operations are checked by checkExtSems
// before they run.
func (d *Device) cudaImportExtSem(op string, kind ExternalSemaphoreHandleType, fd int) (*ExternalSemaphore, error) {
	c := d.cu
	s := &ExternalSemaphore{dev: d, kind: kind}
	err := d.cuCall(op, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		desc := (*cuda.ExtSemHandleDesc)(cmemZeroed(c.cm, unsafe.Sizeof(cuda.ExtSemHandleDesc{})))
		desc.Type, desc.FD = int32(kind), int32(fd)
		return c.drv.Call("cuImportExternalSemaphore", uintptr(unsafe.Pointer(&s.cu)), uintptr(unsafe.Pointer(desc)))
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *ExternalSemaphore) cudaDestroy(op string) error {
	return s.dev.cuCall(op, func() error { return s.dev.cu.drv.Call("cuDestroyExternalSemaphore", s.cu) })
}

// cmemZeroed returns n zeroed bytes of the arena: the driver's structs have
// reserved fields that must be zero.
func cmemZeroed(m *cuda.CMem, n uintptr) unsafe.Pointer {
	p := m.Alloc(int(n))
	clear(unsafe.Slice((*byte)(p), n))
	return p
}

// extSemArrays lays out the handle and parameter arrays of a signal or wait
// in the arena, which the caller holds locked.
func (c *cudaDev) extSemArrays(sems []*ExternalSemaphore, values []uint64) (handles, params uintptr) {
	n := len(sems)
	hs := unsafe.Slice((*uintptr)(cmemZeroed(c.cm, uintptr(n)*8)), n)
	ps := unsafe.Slice((*cuda.ExtSemParams)(cmemZeroed(c.cm, uintptr(n)*unsafe.Sizeof(cuda.ExtSemParams{}))), n)
	for i, s := range sems {
		hs[i] = s.cu
		ps[i].Value = values[i]
	}
	return uintptr(unsafe.Pointer(&hs[0])), uintptr(unsafe.Pointer(&ps[0]))
}

// extSemNodeParams lays out CUDA_EXT_SEM_{SIGNAL,WAIT}_NODE_PARAMS for p in
// the arena, which the caller holds locked, and names the signal or wait
// variant of a driver call.
func (c *cudaDev) extSemNodeParams(p NodeParams) (params uintptr, kind string) {
	sems, values, signal, _ := extSemArgs(p)
	np := (*cuda.ExtSemNodeParams)(cmemZeroed(c.cm, unsafe.Sizeof(cuda.ExtSemNodeParams{})))
	np.ExtSemArray, np.ParamsArray = c.extSemArrays(sems, values)
	np.NumExtSems = uint32(len(sems))
	kind = "Wait"
	if signal {
		kind = "Signal"
	}
	return uintptr(unsafe.Pointer(np)), kind
}

// cudaAddExtSemNode adds a signal or wait node; it runs in cudaNode, with
// the context current.
func (d *Device) cudaAddExtSemNode(g uintptr, deps []uintptr, p NodeParams) (uintptr, error) {
	sems, values, _, _ := extSemArgs(p)
	if code, msg := d.checkExtSems(sems, values, ErrInvalidValue); code != nil {
		return 0, newErr("", code, "%s", msg)
	}
	c := d.cu
	c.cm.Lock()
	defer c.cm.Unlock()
	np, kind := c.extSemNodeParams(p)
	var h uintptr
	err := c.drv.Call("cuGraphAddExternalSemaphores"+kind+"Node", uintptr(unsafe.Pointer(&h)), g, cudaDeps(deps), uintptr(len(deps)), np)
	return h, err
}

// cudaSetExtSemNode sets the parameters of a signal or wait node of a graph
// (cuGraphExternalSemaphores{Signal,Wait}NodeSetParams), in cudaNode.
func (d *Device) cudaSetExtSemNode(node uintptr, p NodeParams) error {
	sems, values, _, _ := extSemArgs(p)
	if code, msg := d.checkExtSems(sems, values, ErrInvalidValue); code != nil {
		return newErr("", code, "%s", msg)
	}
	c := d.cu
	c.cm.Lock()
	defer c.cm.Unlock()
	np, kind := c.extSemNodeParams(p)
	return c.drv.Call("cuGraphExternalSemaphores"+kind+"NodeSetParams", node, np)
}

// cudaSetExtSemExecParams sets the parameters of signal or wait node n in
// the executable graph e (cuGraphExecExternalSemaphores{Signal,Wait}NodeSetParams),
// for Exec.SetParams; check extSemUpdatable first.
func (e *Exec) cudaSetExtSemExecParams(op string, n *Node, p NodeParams) error {
	d := e.dev
	sems, values, _, _ := extSemArgs(p)
	if code, msg := d.checkExtSems(sems, values, ErrInvalidValue); code != nil {
		return nodeErr(op, n, code, "%s", msg)
	}
	c := d.cu
	return d.cuCall(op, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		np, kind := c.extSemNodeParams(p)
		return c.drv.Call("cuGraphExecExternalSemaphores"+kind+"NodeSetParams", e.cu, n.cu, np)
	})
}

// cudaExtSems issues a signal or wait into the native stream.
func (s *Stream) cudaExtSems(op string, signal bool, sems []*ExternalSemaphore, values []uint64) error {
	c := s.dev.cu
	name := "cuWaitExternalSemaphoresAsync"
	if signal {
		name = "cuSignalExternalSemaphoresAsync"
	}
	c.cm.Lock()
	defer c.cm.Unlock()
	hs, ps := c.extSemArrays(sems, values)
	return s.streamCall(op, name, hs, ps, uintptr(len(sems)), s.cu)
}
