package gpugraph

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
)

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
	closed    bool // the default pool of a closed device: it has no memory

	accessMu sync.Mutex
	access   map[int]AccessFlags // other devices' access, as SetAccess left it
}

// DefaultMemPool returns the device's default pool
// (cudaDeviceGetDefaultMemPool), creating it on first use. It cannot be
// destroyed.
func (d *Device) DefaultMemPool() *MemPool {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		// Close has released the pools, or is about to: this one has no
		// memory, and every use fails on the closed device.
		return &MemPool{dev: d, isDefault: true, closed: true, props: MemPoolProps{Location: d.props.Ordinal}}
	}
	if d.defPool == nil {
		d.defPool = &MemPool{dev: d, isDefault: true, props: MemPoolProps{Location: d.props.Ordinal}}
		if ps, ok := d.be.(backend.Pools); ok {
			// Without it (the driver's refused, or no address space),
			// allocations fail with ErrMemoryAllocation.
			d.defPool.be, _ = ps.DefaultMemPool()
		}
	}
	return d.defPool
}

// NewMemPool creates a memory pool (cudaMemPoolCreate). Location must be a
// device (0 on the host backend): the driver answers an ordinal with no
// device with cudaErrorInvalidValue.
func (d *Device) NewMemPool(props MemPoolProps) (*MemPool, error) {
	const opName = "Device.NewMemPool"
	if err := d.check(opName); err != nil {
		return nil, err
	}
	ps, ok := d.be.(backend.Pools)
	if !ok {
		return nil, newErr(opName, ErrNotSupported, "the backend has no memory pools")
	}
	be, err := ps.NewMemPool(props.Location, props.MaxSize)
	if err != nil {
		return nil, backendErr(opName, err)
	}
	return &MemPool{dev: d, props: props, be: be}, nil
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
	if p.be == nil {
		return nil // it never had memory
	}
	return backendErr(opName, p.be.Destroy())
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
	if p.be == nil {
		return nil
	}
	return backendErr(opName, p.be.SetReleaseThreshold(bytes))
}

// ReleaseThreshold returns the release threshold: 0 by default, as in CUDA,
// so a pool gives back all the memory it does not use at every
// synchronization.
func (p *MemPool) ReleaseThreshold() uint64 {
	if p == nil {
		return 0
	}
	if p.be == nil {
		return 0
	}
	v, _ := p.be.ReleaseThreshold()
	return v
}

// TrimTo returns idle memory to the system, keeping at least minBytesToKeep
// reserved (cudaMemPoolTrimTo). Memory of allocations not yet freed, and of
// frees that have not run yet, is never released.
func (p *MemPool) TrimTo(minBytesToKeep uint64) error {
	const opName = "MemPool.TrimTo"
	if err := p.check(opName); err != nil {
		return err
	}
	if p.be == nil {
		return nil
	}
	return backendErr(opName, p.be.TrimTo(minBytesToKeep))
}

// Stats returns the pool's footprint.
func (p *MemPool) Stats() MemPoolStats {
	if p == nil {
		return MemPoolStats{}
	}
	if p.be == nil {
		return MemPoolStats{}
	}
	st, _ := p.be.Stats()
	return MemPoolStats(st)
}

// ResetHigh resets the high-water marks to the current values (what setting
// cudaMemPoolAttrReservedMemHigh and cudaMemPoolAttrUsedMemHigh to 0 does).
func (p *MemPool) ResetHigh() {
	if p == nil {
		return
	}
	if p.be != nil {
		p.be.ResetHigh()
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
	if n, _ := DeviceCount(p.dev.props.Backend); device < 0 || device >= n {
		return newErr(opName, ErrInvalidDevice, "device %d: no such device (the backend has %d)", device, n)
	}
	if p.be == nil {
		return newErr(opName, ErrMemoryAllocation, "the pool has no memory")
	}
	if err := p.be.SetAccess(device, int(flags)); err != nil {
		return backendErr(opName, err)
	}
	if device != p.props.Location {
		p.accessMu.Lock()
		if p.access == nil {
			p.access = map[int]AccessFlags{}
		}
		p.access[device] = flags
		p.accessMu.Unlock()
	}
	return nil
}

// Access returns how device may access the pool's memory
// (cudaMemPoolGetAccess): read-write for the resident device, for any other
// what SetAccess gave it (none by default).
func (p *MemPool) Access(device int) AccessFlags {
	switch {
	case p == nil:
		return AccessNone
	case device == p.props.Location:
		return AccessReadWrite
	}
	p.accessMu.Lock()
	defer p.accessMu.Unlock()
	return p.access[device]
}

// accessDescs are the devices other than the resident one that have
// read-write access now: what an alloc node captured from the pool gets
// (the CUDA guide, peer access with stream capture: later changes to the pool do not change it).
func (p *MemPool) accessDescs() []MemAccessDesc {
	p.accessMu.Lock()
	defer p.accessMu.Unlock()
	var descs []MemAccessDesc
	for dev, f := range p.access {
		if f == AccessReadWrite {
			descs = append(descs, MemAccessDesc{Device: dev})
		}
	}
	slices.SortFunc(descs, func(a, b MemAccessDesc) int { return a.Device - b.Device })
	return descs
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
	if s.capturing.Load() && n > 0 && p != nil && p.dev == s.dev {
		// Captured, it becomes an alloc node: its address is the graph
		// allocation's, usable by the rest of the captured work.
		node, captured, err := s.captureNode(opName, MemAllocParams{Size: n, Location: p.props.Location, Access: p.accessDescs()})
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
	case p.closed:
		return 0, newErr(opName, ErrContextIsDestroyed, "device is closed")
	case p.be == nil:
		return 0, newErr(opName, ErrMemoryAllocation, "%d bytes: the device's pool has no memory", n)
	}
	var ptr uint64
	err := s.issue(opName, func() error {
		w := s.nativeWorkBegin()
		var err error
		ptr, err = s.dev.be.(backend.Pools).MallocAsync(s.be, n, p.be)
		w.end(s, err)
		return err
	})
	if err != nil {
		return 0, backendErr(opName, err)
	}
	return DevicePtr(ptr), nil
}
