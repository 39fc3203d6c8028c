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

func (d *Device) cuCall(op string, f func() error) error { panic("unreachable") }

func (d *Device) cudaMalloc(n int) (DevicePtr, error) { panic("unreachable") }

func (d *Device) cudaFree(p DevicePtr) error { panic("unreachable") }

func (d *Device) cudaMemcpySync(op string, p *MemcpyParams) error { panic("unreachable") }

func (d *Device) cudaMemsetSync(op string, p *MemsetParams) error { panic("unreachable") }

func (d *Device) cudaNewStream(s *Stream) error { panic("unreachable") }

func (d *Device) cudaNewEvent(e *Event) error { panic("unreachable") }

func (d *Device) cudaNewGraph(g *Graph) error { panic("unreachable") }

func (d *Device) cudaEdges(op string, g *Graph, edges []Edge, add bool) error { panic("unreachable") }

func (d *Device) cudaDestroyNode(op string, n *Node) error { panic("unreachable") }

func (d *Device) cudaDestroyGraph(g *Graph) { panic("unreachable") }

func (d *Device) cudaInstantiate(op string, e *Exec, g *Graph, p *InstantiateParams) error {
	panic("unreachable")
}

func (s *Stream) cudaLaunch(op string, p *KernelParams) error { panic("unreachable") }

func (s *Stream) cudaMemcpy(op string, p *MemcpyParams) error { panic("unreachable") }

func (s *Stream) cudaMemset(op string, p *MemsetParams) error { panic("unreachable") }

func (s *Stream) cudaRecord(op string, e *Event) error { panic("unreachable") }

func (s *Stream) cudaWait(op string, e *Event) error { panic("unreachable") }

func (s *Stream) cudaSynchronize(op string) error { panic("unreachable") }

func (s *Stream) cudaQuery(op string) error { panic("unreachable") }

func (s *Stream) cudaDestroy(op string) error { panic("unreachable") }

func (e *Event) cudaSynchronize(op string) error { panic("unreachable") }

func (e *Event) cudaQuery(op string) error { panic("unreachable") }

func (e *Event) cudaDestroy(op string) error { panic("unreachable") }

func cudaElapsed(op string, start, end *Event) (float32, error) { panic("unreachable") }

func (e *Exec) cudaLaunch(op string, s *Stream) error { panic("unreachable") }

func (e *Exec) cudaUpload(op string, s *Stream) error { panic("unreachable") }

func (e *Exec) cudaDestroy(op string) error                          { panic("unreachable") }
func (d *Device) cudaAddNode(g *Graph, n *Node) error                { panic("unreachable") }
func (s *Stream) cudaHostFunc(op string, fn func()) error            { panic("unreachable") }
func (s *Stream) cudaBeginCapture(op string, mode CaptureMode) error { panic("unreachable") }
func (s *Stream) cudaEndCapture(op string) (*Graph, error)           { panic("unreachable") }
func (s *Stream) cudaCaptureInfo(op string) (CaptureInfo, error)     { panic("unreachable") }
func (s *Stream) cudaMallocAsync(op string, n int, pool *MemPool) (DevicePtr, error) {
	panic("unreachable")
}
func (s *Stream) cudaFreeAsync(op string, p DevicePtr) error         { panic("unreachable") }
func (d *Device) cudaGraphMemStats(op string) (GraphMemStats, error) { panic("unreachable") }
func (d *Device) cudaResetGraphMemHigh(op string) error              { panic("unreachable") }
func (d *Device) cudaTrimGraphMem(op string) error                   { panic("unreachable") }
func (s *Stream) cudaBeginCaptureToGraph(op string, g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	panic("unreachable")
}
func (s *Stream) cudaUpdateCaptureDependencies(op string, nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	panic("unreachable")
}
func (g *Graph) cudaClone(op string) (*Graph, error)        { panic("unreachable") }
func (d *Device) cudaSetParams(n *Node, p NodeParams) error { panic("unreachable") }
func (d *Device) cudaDefaultPool() *MemPool                 { panic("unreachable") }
func (d *Device) cudaNewMemPool(op string, props MemPoolProps) (*MemPool, error) {
	panic("unreachable")
}
func (p *MemPool) cudaDestroy(op string) error                                  { panic("unreachable") }
func (p *MemPool) cudaTrimTo(op string, minBytesToKeep uint64) error            { panic("unreachable") }
func (p *MemPool) cudaSetAttr(op string, attr int, v uint64) error              { panic("unreachable") }
func (p *MemPool) cudaAttr(attr int) uint64                                     { panic("unreachable") }
func (p *MemPool) cudaSetAccess(op string, device int, flags AccessFlags) error { panic("unreachable") }

func (e *Exec) cudaUpdate(op string, g *Graph) (UpdateResultInfo, error) { panic("unreachable") }
func (e *Exec) cudaSetParams(op string, n *Node, p NodeParams) error     { panic("unreachable") }
func (e *Exec) cudaSetEnabled(op string, n *Node, on bool) error         { panic("unreachable") }
func (e *Exec) cudaEnabled(op string, n *Node) (bool, error)             { panic("unreachable") }
