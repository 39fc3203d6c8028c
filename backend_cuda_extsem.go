package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// cudaImportExtSem imports a semaphore on the cuda backend, where external
// semaphores are imported from a graphics API's file descriptor and
// signalled and waited on by the driver in streams and graph nodes. The
// arguments of the cuda semaphore operations are checked by checkExtSems
// before they run.
func (d *Device) cudaImportExtSem(opName string, kind ExternalSemaphoreHandleType, fd int) (*ExternalSemaphore, error) {
	be, err := d.cuda.ImportExternalSemaphoreFD(int(kind), fd)
	if err != nil {
		return nil, cudaErr(opName, err)
	}
	return &ExternalSemaphore{dev: d, kind: kind, be: be, cu: be.(backend.Native).Native()}, nil
}

func (s *ExternalSemaphore) cudaDestroy(opName string) error { return cudaErr(opName, s.be.Destroy()) }

// backendSems is the backend's semaphores of sems.
func backendSems(sems []*ExternalSemaphore) []backend.ExternalSemaphore {
	bs := make([]backend.ExternalSemaphore, len(sems))
	for i, s := range sems {
		bs[i] = s.be
	}
	return bs
}

// cuExtSems is the driver's form of the semaphores and values of a signal
// or wait.
func cuExtSems(sems []*ExternalSemaphore, values []uint64) driver.ExtSems {
	return cuda.ExtSems(backendSems(sems), values)
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
	if signal {
		return cudaErr(opName, s.dev.cuda.SignalExternalSemaphores(s.be, backendSems(sems), values))
	}
	return cudaErr(opName, s.dev.cuda.WaitExternalSemaphores(s.be, backendSems(sems), values))
}
