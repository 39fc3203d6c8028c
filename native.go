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

// NativeExec returns the driver's CUgraphExec handle of e (0 on host), for
// launching it from other code (cuGraphLaunch) on a stream of e's device.
func (e *Exec) NativeExec() uintptr { return native(e.be) }

// NativeFunction returns the driver's CUfunction that the device launches
// for k (cuModuleGetFunction of k's compiled module), compiling and loading
// k first if no launch has; on the host backend, which has no driver, it
// fails with ErrNotSupported. The handle lives as long as the device.
func (d *Device) NativeFunction(k *Kernel) (uintptr, error) {
	const opName = "Device.NativeFunction"
	if err := d.check(opName); err != nil {
		return 0, err
	}
	if k == nil {
		return 0, newErr(opName, ErrInvalidValue, "nil kernel")
	}
	f, ok := d.be.(interface {
		Function(*backend.Kernel) (uintptr, error)
	})
	if !ok {
		return 0, newErr(opName, ErrNotSupported, "the %s backend has no driver functions", d.Properties().Backend)
	}
	bk := lowerKernel(k)
	h, err := f.Function(&bk)
	return h, backendErr(opName, err)
}
