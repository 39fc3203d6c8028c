//go:build !linux

package gpugraph

// Outside Linux no Device has a cudaDev, so none of these is called.

func (d *Device) cudaImportExtSem(op string, kind ExternalSemaphoreHandleType, fd int) (*ExternalSemaphore, error) {
	panic("unreachable")
}
func (s *ExternalSemaphore) cudaDestroy(op string) error { panic("unreachable") }
func (s *Stream) cudaExtSems(op string, signal bool, sems []*ExternalSemaphore, values []uint64) error {
	panic("unreachable")
}
func (e *Exec) cudaSetExtSemExecParams(op string, n *Node, p NodeParams) error { panic("unreachable") }
