package gpugraph

// NativeStream returns the driver's CUstream handle of s (cuda backend; 0 on
// host), for calling other CUDA libraries on the same stream.
func (s *Stream) NativeStream() uintptr { return s.cu }

// NativeEvent returns the driver's CUevent handle of e (0 on host).
func (e *Event) NativeEvent() uintptr { return e.cu }

// NativeGraph returns the driver's CUgraph handle of g (0 on host).
func (g *Graph) NativeGraph() uintptr { return g.cu }

// NativeContext returns the device's CUcontext (its primary context; 0 on
// host).
func (d *Device) NativeContext() uintptr {
	if d.cuda == nil {
		return 0
	}
	return d.cuda.Context()
}
