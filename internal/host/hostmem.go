package host

import "github.com/gpugraph/gpugraph/internal/backend"

var _ backend.HostMemory = (*Device)(nil)

// MallocHost allocates n bytes of host memory that the host backend treats
// as pinned: mapped outside the Go heap and, where the system permits,
// locked in RAM (mlock), as page-locked memory is.
func (d *Device) MallocHost(n int) ([]byte, error) {
	b, err := mapHost(n)
	if err != nil {
		return nil, backend.Errorf(backend.ErrMemoryAllocation, "%d bytes of pinned host memory: %v", n, err)
	}
	return b, nil
}

// FreeHost unmaps memory of MallocHost.
func (d *Device) FreeHost(b []byte) error {
	if err := unmapHost(b); err != nil {
		return backend.Errorf(backend.ErrInvalidValue, "freeing pinned host memory: %v", err)
	}
	return nil
}

// HostRegister locks b in RAM where the system permits; the memory counts
// as pinned either way.
func (d *Device) HostRegister(b []byte) error {
	lockHost(b)
	return nil
}

// HostUnregister undoes HostRegister.
func (d *Device) HostUnregister(b []byte) error {
	unlockHost(b)
	return nil
}
