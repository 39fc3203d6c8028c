package cuda

import (
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

var _ backend.HostMemory = (*Device)(nil)

// hostFlags make pinned memory pinned for every context of the process
// (its devices' primary contexts) and mapped into the devices' address
// space, as the runtime's cudaMallocHost and cudaHostRegister with
// cudaHostAllocPortable | cudaHostAllocMapped.
const hostFlags = driver.MemHostPortable | driver.MemHostDeviceMap

// MallocHost is cuMemHostAlloc.
func (d *Device) MallocHost(n int) ([]byte, error) {
	var p unsafe.Pointer
	err := d.Do(func() error { var err error; p, err = d.drv.MemHostAlloc(n, hostFlags); return err })
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeHost is cuMemFreeHost of b, a whole allocation of MallocHost.
func (d *Device) FreeHost(b []byte) error {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return d.Do(func() error { return d.drv.MemFreeHost(p) })
}

// HostRegister is cuMemHostRegister.
func (d *Device) HostRegister(b []byte) error {
	return d.Do(func() error { return d.drv.MemHostRegister(b, hostFlags) })
}

// HostUnregister is cuMemHostUnregister of b, a whole registration.
func (d *Device) HostUnregister(b []byte) error {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return d.Do(func() error { return d.drv.MemHostUnregister(p) })
}
