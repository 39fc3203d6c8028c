//go:build !linux

package gpugraph

// BackendCUDA names the cuda backend in Open; it needs Linux.
const BackendCUDA = "cuda"

type cudaDev struct{ ctx uintptr }

func openCUDA() (*Device, error) {
	return nil, newErr("Open", ErrNoDevice, "the cuda backend needs Linux")
}

// Outside Linux no Device has a cudaDev, so none of these is called.

func (d *Device) cudaSynchronize() error { panic("unreachable") }

func (d *Device) cuCall(opName string, f func() error) error { panic("unreachable") }

func (d *Device) cudaMalloc(n int) (DevicePtr, error) { panic("unreachable") }

func (d *Device) cudaFree(p DevicePtr) error { panic("unreachable") }

func (d *Device) cudaMemcpySync(opName string, p *MemcpyParams) error { panic("unreachable") }

func (d *Device) cudaMemsetSync(opName string, p *MemsetParams) error { panic("unreachable") }

func (d *Device) cudaNewStream(s *Stream) error { panic("unreachable") }

func (d *Device) cudaNewEvent(e *Event) error { panic("unreachable") }

func (d *Device) cudaNewGraph(g *Graph) error { panic("unreachable") }

func (d *Device) cudaEdges(opName string, g *Graph, edges []Edge, add bool) error {
	panic("unreachable")
}

func (d *Device) cudaDestroyNode(opName string, n *Node) error { panic("unreachable") }

func (d *Device) cudaDestroyGraph(g *Graph) { panic("unreachable") }

func (d *Device) cudaInstantiate(opName string, e *Exec, g *Graph, p *InstantiateParams) error {
	panic("unreachable")
}

func (s *Stream) cudaLaunch(opName string, p *KernelParams) error { panic("unreachable") }

func (s *Stream) cudaMemcpy(opName string, p *MemcpyParams) error { panic("unreachable") }

func (s *Stream) cudaMemset(opName string, p *MemsetParams) error { panic("unreachable") }

func (s *Stream) cudaRecord(opName string, e *Event) error { panic("unreachable") }

func (s *Stream) cudaWait(opName string, e *Event) error { panic("unreachable") }

func (s *Stream) cudaSynchronize(opName string) error { panic("unreachable") }

func (s *Stream) cudaQuery(opName string) error { panic("unreachable") }

func (s *Stream) cudaDestroy(opName string) error { panic("unreachable") }

func (e *Event) cudaSynchronize(opName string) error { panic("unreachable") }

func (e *Event) cudaQuery(opName string) error { panic("unreachable") }

func (e *Event) cudaDestroy(opName string) error { panic("unreachable") }

func cudaElapsed(opName string, start, end *Event) (float32, error) { panic("unreachable") }

func (e *Exec) cudaLaunch(opName string, s *Stream) error { panic("unreachable") }

func (e *Exec) cudaUpload(opName string, s *Stream) error { panic("unreachable") }

func (e *Exec) cudaDestroy(opName string) error                          { panic("unreachable") }
func (d *Device) cudaAddNode(g *Graph, n *Node) error                    { panic("unreachable") }
func (s *Stream) cudaHostFunc(opName string, fn func()) error            { panic("unreachable") }
func (s *Stream) cudaBeginCapture(opName string, mode CaptureMode) error { panic("unreachable") }
func (s *Stream) cudaEndCapture(opName string) (*Graph, error)           { panic("unreachable") }
func (s *Stream) cudaCaptureInfo(opName string) (CaptureInfo, error)     { panic("unreachable") }
func (s *Stream) cudaMallocAsync(opName string, n int, pool *MemPool) (DevicePtr, error) {
	panic("unreachable")
}
func (s *Stream) cudaFreeAsync(opName string, p DevicePtr) error         { panic("unreachable") }
func (d *Device) cudaGraphMemStats(opName string) (GraphMemStats, error) { panic("unreachable") }
func (d *Device) cudaResetGraphMemHigh(opName string) error              { panic("unreachable") }
func (d *Device) cudaTrimGraphMem(opName string) error                   { panic("unreachable") }
func (s *Stream) cudaBeginCaptureToGraph(opName string, g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	panic("unreachable")
}
func (s *Stream) cudaUpdateCaptureDependencies(opName string, nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	panic("unreachable")
}
func (g *Graph) cudaClone(opName string) (*Graph, error)    { panic("unreachable") }
func (d *Device) cudaSetParams(n *Node, p NodeParams) error { panic("unreachable") }
func (d *Device) cudaDefaultPool() *MemPool                 { panic("unreachable") }
func (d *Device) cudaNewMemPool(opName string, props MemPoolProps) (*MemPool, error) {
	panic("unreachable")
}
func (p *MemPool) cudaDestroy(opName string) error                       { panic("unreachable") }
func (p *MemPool) cudaTrimTo(opName string, minBytesToKeep uint64) error { panic("unreachable") }
func (p *MemPool) cudaSetAttr(opName string, attr int, v uint64) error   { panic("unreachable") }
func (p *MemPool) cudaAttr(attr int) uint64                              { panic("unreachable") }
func (p *MemPool) cudaSetAccess(opName string, device int, flags AccessFlags) error {
	panic("unreachable")
}

func (e *Exec) cudaUpdate(opName string, g *Graph) (UpdateResultInfo, error) { panic("unreachable") }
func (e *Exec) cudaSetParams(opName string, n *Node, p NodeParams) error     { panic("unreachable") }
func (e *Exec) cudaSetEnabled(opName string, n *Node, on bool) error         { panic("unreachable") }
func (e *Exec) cudaEnabled(opName string, n *Node) (bool, error)             { panic("unreachable") }
