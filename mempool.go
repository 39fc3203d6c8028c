package gpugraph

import (
	"fmt"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/host"
)

// defaultPoolSize is the address space a pool reserves when MemPoolProps
// does not cap it. It is only address space: memory is committed on use.
const defaultPoolSize = 64 << 30

// MemPoolProps describe a memory pool at creation (cudaMemPoolProps).
type MemPoolProps struct {
	Location int    // ordinal of the device the memory lives on; the host backend has only 0
	MaxSize  uint64 // the most bytes the pool may hand out at once; 0 means the default (64 GiB)
}

// AccessFlags say how a device may access memory (cudaMemAccessFlags), with
// CUDA's values.
type AccessFlags int

const (
	AccessNone      AccessFlags = 0 // no access
	AccessRead      AccessFlags = 1 // read only
	AccessReadWrite AccessFlags = 3 // read and write
)

func (f AccessFlags) String() string {
	switch f {
	case AccessNone:
		return "none"
	case AccessRead:
		return "read"
	case AccessReadWrite:
		return "readwrite"
	}
	return fmt.Sprintf("AccessFlags(%d)", int(f))
}

// MemPoolStats is a pool's footprint (cudaMemPoolAttrReservedMemCurrent and
// its siblings). Reserved counts the memory the pool holds, in 2 MiB
// granules. Used counts the bytes asked for by allocations not yet freed, as
// the driver does (a 1-byte allocation uses 1 byte); it changes when
// MallocAsync and FreeAsync are called, not when the stream reaches them.
type MemPoolStats struct {
	ReservedCurrent, ReservedHigh uint64
	UsedCurrent, UsedHigh         uint64
}

// MemPool is a pool of device memory for stream-ordered allocation
// (cudaMemPool_t). Each device has a default pool, which Stream.MallocAsync
// allocates from; more can be created with Device.NewMemPool and allocated
// from with Stream.MallocFromPoolAsync. How a pool reuses memory is in the
// Stream-ordered allocation section of the package documentation. Methods
// are safe for concurrent use.
type MemPool struct {
	be        backend.MemPool // the cuda backend's pool; nil on host
	dev       *Device
	props     MemPoolProps
	isDefault bool
	h         *host.Pool // the host backend's pool; nil if no address space could be reserved
	closed    bool       // the default pool of a closed device: it has no memory
}

// DefaultMemPool returns the device's default pool
// (cudaDeviceGetDefaultMemPool), creating it on first use. It cannot be
// destroyed.
func (d *Device) DefaultMemPool() *MemPool {
	if d == nil {
		return nil
	}
	if d.cuda != nil {
		return d.cudaDefaultPool()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		// Close has released the pools, or is about to: this one has no
		// memory, and every use fails on the closed device.
		return &MemPool{dev: d, isDefault: true, closed: true}
	}
	if d.defPool == nil {
		p, err := newPool(d, MemPoolProps{})
		if err != nil {
			p = &MemPool{dev: d} // no address space: allocations fail with ErrMemoryAllocation
		}
		p.isDefault = true
		d.defPool = p
	}
	return d.defPool
}

// NewMemPool creates a memory pool (cudaMemPoolCreate). Location must be 0,
// the only device of the host backend: the driver answers an ordinal with no
// device with cudaErrorInvalidValue.
func (d *Device) NewMemPool(props MemPoolProps) (*MemPool, error) {
	const opName = "Device.NewMemPool"
	if err := d.check(opName); err != nil {
		return nil, err
	}
	if d.cuda != nil {
		return d.cudaNewMemPool(opName, props)
	}
	if props.Location != 0 {
		return nil, newErr(opName, ErrInvalidValue, "location %d: no such device", props.Location)
	}
	p, err := newPool(d, props)
	if err != nil {
		return nil, newErr(opName, ErrMemoryAllocation, "%v", err)
	}
	if d.closed.Load() {
		p.h.Release()
		return nil, newErr(opName, ErrContextIsDestroyed, "device is closed")
	}
	return p, nil
}

// newPool makes a host-backend pool, listed by the host device for
// address lookups. Its memory is address space of its own, 64 GiB unless
// props caps it, committed on use.
func newPool(d *Device, props MemPoolProps) (*MemPool, error) {
	size := props.MaxSize
	if size == 0 {
		size = defaultPoolSize
	}
	h, err := d.host.NewPool(size)
	if err != nil {
		return nil, err
	}
	return &MemPool{dev: d, props: props, h: h}, nil
}

// check validates the pool handle and its device for op.
func (p *MemPool) check(opName string) error {
	if p == nil {
		return newErr(opName, ErrInvalidValue, "nil memory pool")
	}
	return p.dev.check(opName)
}

// Destroy destroys the pool (cudaMemPoolDestroy). Allocations not yet freed
// stay valid, and the pool's memory goes back to the system once the last of
// them is freed and the free has run. Nothing can be allocated from the pool
// afterwards. The default pool cannot be destroyed.
func (p *MemPool) Destroy() error {
	const opName = "MemPool.Destroy"
	if err := p.check(opName); err != nil {
		return err
	}
	if p.isDefault {
		return newErr(opName, ErrInvalidValue, "the default memory pool cannot be destroyed")
	}
	if p.be != nil {
		return backendErr(opName, p.be.Destroy())
	}
	if p.h == nil {
		return nil // it never had memory
	}
	if !p.h.Destroy() {
		return newErr(opName, ErrInvalidValue, "memory pool already destroyed")
	}
	return nil
}

// SetReleaseThreshold sets how many reserved bytes the pool keeps at a
// synchronization (cudaMemPoolAttrReleaseThreshold): when Synchronize of a
// stream, an event or the device returns, idle memory above it goes back to
// the system.
func (p *MemPool) SetReleaseThreshold(bytes uint64) error {
	const opName = "MemPool.SetReleaseThreshold"
	if err := p.check(opName); err != nil {
		return err
	}
	if p.be != nil {
		return backendErr(opName, p.be.SetReleaseThreshold(bytes))
	}
	if p.h != nil && !p.h.SetThreshold(bytes) {
		return newErr(opName, ErrInvalidValue, "memory pool is destroyed")
	}
	return nil
}

// ReleaseThreshold returns the release threshold: 0 by default, as in CUDA,
// so a pool gives back all the memory it does not use at every
// synchronization.
func (p *MemPool) ReleaseThreshold() uint64 {
	if p == nil {
		return 0
	}
	if p.be != nil {
		v, _ := p.be.ReleaseThreshold()
		return v
	}
	if p.h == nil {
		return 0
	}
	return p.h.Threshold()
}

// TrimTo returns idle memory to the system, keeping at least minBytesToKeep
// reserved (cudaMemPoolTrimTo). Memory of allocations not yet freed, and of
// frees that have not run yet, is never released.
func (p *MemPool) TrimTo(minBytesToKeep uint64) error {
	const opName = "MemPool.TrimTo"
	if err := p.check(opName); err != nil {
		return err
	}
	if p.be != nil {
		return backendErr(opName, p.be.TrimTo(minBytesToKeep))
	}
	if p.h != nil && !p.h.TrimTo(minBytesToKeep) {
		return newErr(opName, ErrInvalidValue, "memory pool is destroyed")
	}
	return nil
}

// Stats returns the pool's footprint.
func (p *MemPool) Stats() MemPoolStats {
	if p == nil {
		return MemPoolStats{}
	}
	if p.be != nil {
		st, _ := p.be.Stats()
		return MemPoolStats(st)
	}
	if p.h == nil {
		return MemPoolStats{}
	}
	return MemPoolStats(p.h.Stats())
}

// ResetHigh resets the high-water marks to the current values (what setting
// cudaMemPoolAttrReservedMemHigh and cudaMemPoolAttrUsedMemHigh to 0 does).
func (p *MemPool) ResetHigh() {
	if p == nil {
		return
	}
	if p.be != nil {
		p.be.ResetHigh()
		return
	}
	if p.h != nil {
		p.h.ResetHigh()
	}
}

// SetAccess sets how device may access the pool's memory
// (cudaMemPoolSetAccess). As with the driver: the resident device always has
// read-write access, and revoking it fails with ErrInvalidDevice; read-only
// access fails with ErrNotSupported; a device that does not exist fails with
// ErrInvalidDevice.
func (p *MemPool) SetAccess(device int, flags AccessFlags) error {
	const opName = "MemPool.SetAccess"
	if err := p.check(opName); err != nil {
		return err
	}
	switch flags {
	case AccessNone, AccessRead, AccessReadWrite:
	default:
		return newErr(opName, ErrInvalidValue, "unknown access flags %d", int(flags))
	}
	if p.be != nil {
		return backendErr(opName, p.be.SetAccess(device, int(flags)))
	}
	if device != p.props.Location {
		return newErr(opName, ErrInvalidDevice, "device %d: no such device (the host backend has only device 0)", device)
	}
	switch {
	case p.h != nil && p.h.Destroyed():
		return newErr(opName, ErrInvalidValue, "memory pool is destroyed")
	case flags == AccessRead:
		return newErr(opName, ErrNotSupported, "memory pools do not support read-only access")
	case flags == AccessNone:
		return newErr(opName, ErrInvalidDevice, "device %d is the pool's resident device: its access cannot be revoked", device)
	}
	return nil
}

// Access returns how device may access the pool's memory
// (cudaMemPoolGetAccess): read-write for the resident device, none for any
// other.
func (p *MemPool) Access(device int) AccessFlags {
	if p == nil || device != p.props.Location {
		return AccessNone
	}
	return AccessReadWrite
}

// MallocAsync allocates n bytes from the device's default pool in stream
// order (cudaMallocAsync). The address is returned at once; the memory may be
// used by work ordered after this call: later work in s, or in streams that
// wait for s. MallocAsync(0) returns a zero pointer and no error, as the
// driver does.
func (s *Stream) MallocAsync(n int) (DevicePtr, error) {
	const opName = "Stream.MallocAsync"
	if err := s.usable(opName); err != nil {
		return 0, err
	}
	return s.mallocFromPool(opName, n, s.dev.DefaultMemPool())
}

// MallocFromPoolAsync allocates n bytes from pool p in stream order
// (cudaMallocFromPoolAsync). p must be a pool of the stream's device.
func (s *Stream) MallocFromPoolAsync(n int, p *MemPool) (DevicePtr, error) {
	const opName = "Stream.MallocFromPoolAsync"
	if err := s.usable(opName); err != nil {
		return 0, err
	}
	return s.mallocFromPool(opName, n, p)
}

// mallocFromPool allocates n bytes from p in stream order. On the host
// backend the range comes from memory whose free is pending in s, else from
// the lowest free range that holds it, else from memory whose free is
// pending in another stream, s then waiting for that free (awaitFree): the
// order of reuse measured on the driver.
func (s *Stream) mallocFromPool(opName string, n int, p *MemPool) (DevicePtr, error) {
	if s.dev.cuda != nil {
		switch {
		case p == nil || p.dev != s.dev:
			return 0, newErr(opName, ErrInvalidValue, "nil memory pool, or a pool of another device")
		case n < 0:
			return 0, newErr(opName, ErrInvalidValue, "negative size %d", n)
		case n == 0:
			return 0, nil
		}
		return s.cudaMallocAsync(opName, n, p)
	}
	if e := s.dev.sticky.Load(); e != nil {
		return 0, withOp(opName, e)
	}
	if s.capturing.Load() && n > 0 && p != nil && p.dev == s.dev {
		// Captured, it becomes an alloc node: its address is the graph
		// allocation's, usable by the rest of the captured work.
		node, captured, err := s.captureNode(opName, MemAllocParams{Size: n, Location: p.props.Location})
		if captured {
			if err != nil {
				return 0, err
			}
			return node.params.(MemAllocParams).Ptr, nil
		}
	}
	switch {
	case p == nil:
		return 0, newErr(opName, ErrInvalidValue, "nil memory pool")
	case p.dev != s.dev:
		return 0, newErr(opName, ErrInvalidValue, "memory pool of another device")
	case n < 0:
		return 0, newErr(opName, ErrInvalidValue, "negative size %d", n)
	case n == 0:
		return 0, nil
	}
	switch {
	case p.closed:
		return 0, newErr(opName, ErrContextIsDestroyed, "device is closed")
	case p.h == nil:
		return 0, newErr(opName, ErrMemoryAllocation, "%d bytes: the pool could not reserve address space", n)
	}
	hs := s.be.(*host.Stream) // pools of the host backend serve its streams
	ptr, err := p.h.Alloc(n, hs, func(pf *host.PendingFree) error {
		// Nothing left but memory whose free is pending in another
		// stream: take it, and make s wait for that free, as the driver
		// does. A failed device drops queued frees: give up then.
		stop := func() bool { return s.dev.sticky.Load() != nil || s.dev.closed.Load() }
		return hs.Call(func() { pf.Await(stop) })
	})
	if err != nil {
		return 0, fromBackend(opName, err)
	}
	return DevicePtr(ptr), nil
}
