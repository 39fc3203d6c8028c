package host

import "github.com/gpugraph/gpugraph/internal/backend"

// defaultPoolSize is the address space a pool reserves when no maximum
// size is asked for: 64 GiB, committed on use.
const defaultPoolSize = 64 << 30

// MemPool is a Pool as a backend.MemPool: a pool resident on device 0, the
// only device of the host backend. P is nil for a default pool that could
// not reserve address space: allocations from it fail.
type MemPool struct {
	P   *Pool
	Loc int // the resident device
}

var (
	_ backend.MemPool = (*MemPool)(nil)
	_ backend.Pools   = (*Device)(nil)
)

// Destroy destroys the pool; its memory goes back once every allocation is
// freed and the free has run.
func (m *MemPool) Destroy() error {
	if m.P != nil && !m.P.Destroy() {
		return backend.Errorf(backend.ErrInvalidValue, "memory pool already destroyed")
	}
	return nil
}

// TrimTo releases idle memory above minBytesToKeep.
func (m *MemPool) TrimTo(minBytesToKeep uint64) error {
	if m.P != nil && !m.P.TrimTo(minBytesToKeep) {
		return backend.Errorf(backend.ErrInvalidValue, "memory pool is destroyed")
	}
	return nil
}

// SetReleaseThreshold sets how much idle memory a synchronization keeps.
func (m *MemPool) SetReleaseThreshold(bytes uint64) error {
	if m.P != nil && !m.P.SetThreshold(bytes) {
		return backend.Errorf(backend.ErrInvalidValue, "memory pool is destroyed")
	}
	return nil
}

// ReleaseThreshold is the release threshold.
func (m *MemPool) ReleaseThreshold() (uint64, error) {
	if m.P == nil {
		return 0, nil
	}
	return m.P.Threshold(), nil
}

// Stats is the pool's footprint.
func (m *MemPool) Stats() (backend.PoolStats, error) {
	if m.P == nil {
		return backend.PoolStats{}, nil
	}
	return m.P.Stats(), nil
}

// ResetHigh resets the high-water marks.
func (m *MemPool) ResetHigh() error {
	if m.P != nil {
		m.P.ResetHigh()
	}
	return nil
}

// SetAccess sets device's access: as with the driver, the resident device
// always has read-write access (revoking it fails with ErrInvalidDevice),
// read-only access is not supported, and device 0 is the only one.
func (m *MemPool) SetAccess(device int, flags int) error {
	switch n := DeviceCount(); {
	case device < 0 || device >= n:
		return backend.Errorf(backend.ErrInvalidDevice, "device %d: no such device (the host backend has %d)", device, n)
	case m.P != nil && m.P.Destroyed():
		return backend.Errorf(backend.ErrInvalidValue, "memory pool is destroyed")
	case flags == 1:
		return backend.Errorf(backend.ErrNotSupported, "memory pools do not support read-only access")
	case flags == 0 && device == m.Loc:
		return backend.Errorf(backend.ErrInvalidDevice, "device %d is the pool's resident device: its access cannot be revoked", device)
	}
	if device != m.Loc && m.P != nil {
		m.P.SetPeerAccess(device, flags == 3)
	}
	return nil
}

// DefaultMemPool is the device's default pool, created on first use
// (without memory if no address space could be reserved).
func (d *Device) DefaultMemPool() (backend.MemPool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.defPool == nil {
		p, err := d.newPool(defaultPoolSize)
		if err != nil {
			p = nil // no address space: allocations fail with ErrMemoryAllocation
		}
		d.defPool = &MemPool{p, d.cfg.Ordinal}
	}
	return d.defPool, nil
}

// NewMemPool creates a pool of at most maxSize bytes (0: 64 GiB) resident
// on device location, which must be 0: the driver answers an ordinal with
// no device with cudaErrorInvalidValue.
func (d *Device) NewMemPool(location int, maxSize uint64) (backend.MemPool, error) {
	if location != d.cfg.Ordinal {
		if location < 0 || location >= DeviceCount() {
			return nil, backend.Errorf(backend.ErrInvalidValue, "location %d: no such device", location)
		}
		return nil, backend.Errorf(backend.ErrNotSupported, "a pool resident on device %d: create it from that device", location)
	}
	if maxSize == 0 {
		maxSize = defaultPoolSize
	}
	p, err := d.newPool(maxSize)
	if err != nil {
		return nil, backend.Errorf(backend.ErrMemoryAllocation, "%v", err)
	}
	if d.closed.Load() {
		p.Release()
		return nil, backend.Errorf(backend.ErrContextIsDestroyed, "device is closed")
	}
	return &MemPool{p, location}, nil
}

// MallocAsync allocates n > 0 bytes from mp in s's order: from memory whose
// free is pending in s, else the lowest free range that holds it, else
// memory whose free is pending in another stream, s then waiting for that
// free: the order of reuse measured on the driver.
func (d *Device) MallocAsync(bs backend.Stream, n int, mp backend.MemPool) (uint64, error) {
	s, p := bs.(*Stream), mp.(*MemPool).P
	if p == nil {
		return 0, backend.Errorf(backend.ErrMemoryAllocation, "%d bytes: the pool could not reserve address space", n)
	}
	return p.Alloc(n, s, func(pf *PendingFree) error {
		// Nothing left but memory whose free is pending in another
		// stream: take it, and make s wait for that free, as the driver
		// does. A failed device drops queued frees: give up then.
		stop := func() bool { return d.cfg.Failed() || d.closed.Load() }
		return s.Call(func() { pf.Await(stop) })
	})
}
