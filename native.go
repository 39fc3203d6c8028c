package gpugraph

import "github.com/gpugraph/gpugraph/internal/backend"

// native is the driver handle of a backend object, 0 for one without
// (any object of the host backend).
func native(x any) uintptr {
	if n, ok := x.(backend.Native); ok {
		return n.Native()
	}
	return 0
}

// NativeStream returns the driver's CUstream handle of s (cuda backend; 0 on
// host), for calling other CUDA libraries on the same stream.
func (s *Stream) NativeStream() uintptr { return native(s.be) }

// NativeEvent returns the driver's CUevent handle of e (0 on host).
func (e *Event) NativeEvent() uintptr { return native(e.be) }

// NativeGraph returns the driver's CUgraph handle of g (0 on host).
func (g *Graph) NativeGraph() uintptr { return native(g.be) }

// NativeContext returns the device's CUcontext (its primary context; 0 on
// host).
func (d *Device) NativeContext() uintptr {
	if c, ok := d.be.(interface{ Context() uintptr }); ok {
		return c.Context()
	}
	return 0
}
