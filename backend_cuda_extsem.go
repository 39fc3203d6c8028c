package gpugraph

import "github.com/gpugraph/gpugraph/internal/backend"

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
	return &ExternalSemaphore{dev: d, kind: kind, be: be}, nil
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

// cudaSetExtSemExecParams sets the parameters of signal or wait node n in
// the executable graph e (cuGraphExecExternalSemaphores{Signal,Wait}NodeSetParams),
// for Exec.SetParams; check extSemUpdatable first.
func (e *Exec) cudaSetExtSemExecParams(opName string, n *Node, p NodeParams) error {
	op, code, msg := e.dev.cudaOp(p)
	if code != nil {
		return nodeErr(opName, n, code, "%s", msg)
	}
	return cudaErr(opName, e.be.SetParams(n.be, &op))
}

// cudaExtSems issues a signal or wait into the native stream.
func (s *Stream) cudaExtSems(opName string, signal bool, sems []*ExternalSemaphore, values []uint64) error {
	if signal {
		return cudaErr(opName, s.dev.cuda.SignalExternalSemaphores(s.be, backendSems(sems), values))
	}
	return cudaErr(opName, s.dev.cuda.WaitExternalSemaphores(s.be, backendSems(sems), values))
}
