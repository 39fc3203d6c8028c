package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/cuda"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// cudaImportExtSem imports a semaphore on the cuda backend, where external
// semaphores are imported from a graphics API's file descriptor and
// signalled and waited on by the driver in streams and graph nodes. The
// arguments of the cuda semaphore operations are checked by checkExtSems
// before they run.
func (d *Device) cudaImportExtSem(opName string, kind ExternalSemaphoreHandleType, fd int) (*ExternalSemaphore, error) {
	c := d.cuda
	s := &ExternalSemaphore{dev: d, kind: kind}
	err := d.cuCall(opName, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		var err error
		s.cu, err = c.drv.ImportExternalSemaphore(c.cm, driver.ExtSemHandleDesc{Type: int32(kind), FD: int32(fd)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *ExternalSemaphore) cudaDestroy(opName string) error {
	return s.dev.cuCall(opName, func() error { return s.dev.cuda.drv.DestroyExternalSemaphore(s.cu) })
}

// cuExtSems is the driver's form of the semaphores and values of a signal
// or wait.
func cuExtSems(sems []*ExternalSemaphore, values []uint64) driver.ExtSems {
	hs := make([]uintptr, len(sems))
	for i, s := range sems {
		hs[i] = s.cu
	}
	return driver.ExtSems{Sems: hs, Values: values}
}

// checkedExtSems checks the semaphores of a signal or wait node's
// parameters p and returns them in the driver's form, and whether they
// signal.
func (d *Device) checkedExtSems(p NodeParams) (driver.ExtSems, bool, *Code, string) {
	sems, values, signal, _ := extSemArgs(p)
	if code, msg := d.checkExtSems(sems, values, ErrInvalidValue); code != nil {
		return driver.ExtSems{}, false, code, msg
	}
	return cuExtSems(sems, values), signal, nil, ""
}

// cudaAddExtSemNode adds a signal or wait node; it runs in cudaNode, with
// the context current.
func (d *Device) cudaAddExtSemNode(g uintptr, deps []uintptr, p NodeParams) (uintptr, error) {
	es, signal, code, msg := d.checkedExtSems(p)
	if code != nil {
		return 0, newErr("", code, "%s", msg)
	}
	c := d.cuda
	c.cm.Lock()
	defer c.cm.Unlock()
	if signal {
		return c.drv.GraphAddExternalSemaphoresSignalNode(c.cm, g, deps, es)
	}
	return c.drv.GraphAddExternalSemaphoresWaitNode(c.cm, g, deps, es)
}

// cudaSetExtSemNode sets the parameters of a signal or wait node of a graph
// (cuGraphExternalSemaphores{Signal,Wait}NodeSetParams), in cudaNode.
func (d *Device) cudaSetExtSemNode(node uintptr, p NodeParams) error {
	es, signal, code, msg := d.checkedExtSems(p)
	if code != nil {
		return newErr("", code, "%s", msg)
	}
	c := d.cuda
	c.cm.Lock()
	defer c.cm.Unlock()
	if signal {
		return c.drv.GraphExternalSemaphoresSignalNodeSetParams(c.cm, node, es)
	}
	return c.drv.GraphExternalSemaphoresWaitNodeSetParams(c.cm, node, es)
}

// cudaSetExtSemExecParams sets the parameters of signal or wait node n in
// the executable graph e (cuGraphExecExternalSemaphores{Signal,Wait}NodeSetParams),
// for Exec.SetParams; check extSemUpdatable first.
func (e *Exec) cudaSetExtSemExecParams(opName string, n *Node, p NodeParams) error {
	d := e.dev
	es, signal, code, msg := d.checkedExtSems(p)
	if code != nil {
		return nodeErr(opName, n, code, "%s", msg)
	}
	c := d.cuda
	return d.cuCall(opName, func() error {
		c.cm.Lock()
		defer c.cm.Unlock()
		if signal {
			return c.drv.GraphExecExternalSemaphoresSignalNodeSetParams(c.cm, e.cu, n.cu, es)
		}
		return c.drv.GraphExecExternalSemaphoresWaitNodeSetParams(c.cm, e.cu, n.cu, es)
	})
}

// cudaExtSems issues a signal or wait into the native stream.
func (s *Stream) cudaExtSems(opName string, signal bool, sems []*ExternalSemaphore, values []uint64) error {
	c := s.dev.cuda
	es := cuExtSems(sems, values)
	c.cm.Lock()
	defer c.cm.Unlock()
	return cudaErr(opName, s.be.(*cuda.Stream).Call(func() error {
		if signal {
			return c.drv.SignalExternalSemaphoresAsync(c.cm, es, s.cu)
		}
		return c.drv.WaitExternalSemaphoresAsync(c.cm, es, s.cu)
	}))
}
