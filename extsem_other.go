//go:build !linux

package gpugraph

// Outside Linux no Device has a cudaDev, so none of these is called.

func (d *Device) cudaImportExtSem(opName string, kind ExternalSemaphoreHandleType, fd int) (*ExternalSemaphore, error) {
	panic("unreachable")
}
func (s *ExternalSemaphore) cudaDestroy(opName string) error { panic("unreachable") }
func (s *Stream) cudaExtSems(opName string, signal bool, sems []*ExternalSemaphore, values []uint64) error {
	panic("unreachable")
}
func (e *Exec) cudaSetExtSemExecParams(opName string, n *Node, p NodeParams) error {
	panic("unreachable")
}
