package gpugraph

import (
	"fmt"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/vmem"
)

// poolAlign is the alignment and size granularity of pool allocations: the
// driver spaces consecutive 1-byte cudaMallocAsync allocations 512 bytes
// apart.
const poolAlign = 512

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
	cu        uintptr // the native CUmemoryPool on the cuda backend
	dev       *Device
	props     MemPoolProps
	isDefault bool
	res       *vmem.Reservation // nil if no address space could be reserved

	mu        sync.Mutex
	free      []poolRange       // ranges nothing holds, sorted by offset, coalesced
	live      []*poolBlock      // allocations not yet freed at API level, sorted by offset
	pending   []*pendingFree    // ranges freed with FreeAsync whose free has not run
	refs      map[uintptr]int32 // committed granules: index -> live or pending ranges touching it (0: idle)
	idle      int               // granules with no reference: what a trim can release
	threshold uint64
	stats     MemPoolStats
	destroyed bool // Destroy was called; released once nothing is outstanding
	released  bool // the reservation is gone
}

type poolRange struct{ off, size uint64 }

// poolBlock is a live allocation: size bytes at offset off (both multiples
// of poolAlign), of which req were asked for.
type poolBlock struct{ off, size, req uint64 }

// pendingFree is what is left of a range freed with FreeAsync in stream:
// allocations in that stream take it from the front until the free runs and
// returns the rest to the pool.
type pendingFree struct {
	off, size uint64
	stream    *Stream
	ran       chan struct{} // closed when the free has run
}

// devicePools lists the pools of each open device: lookups by address need
// every pool of a device.
var devicePools struct {
	sync.Mutex
	m map[*Device]*poolSet
}

type poolSet struct {
	def *MemPool
	all []*MemPool // pools still holding their reservation
}

// poolSetLocked returns d's pool set, creating it.
func poolSetLocked(d *Device) *poolSet {
	ps := devicePools.m[d]
	if ps == nil {
		if devicePools.m == nil {
			devicePools.m = map[*Device]*poolSet{}
		}
		ps = &poolSet{}
		devicePools.m[d] = ps
	}
	return ps
}

// poolsOf returns a snapshot of d's pools.
func poolsOf(d *Device) []*MemPool {
	devicePools.Lock()
	defer devicePools.Unlock()
	if ps := devicePools.m[d]; ps != nil {
		return append([]*MemPool(nil), ps.all...)
	}
	return nil
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
	devicePools.Lock()
	defer devicePools.Unlock()
	if d.closed.Load() {
		// Close has released the pools, or is about to: this one has no
		// memory, and every use fails on the closed device.
		return &MemPool{dev: d, isDefault: true, released: true}
	}
	ps := poolSetLocked(d)
	if ps.def == nil {
		p, err := newPool(d, MemPoolProps{})
		if err != nil {
			p = &MemPool{dev: d} // no address space: allocations fail with ErrMemoryAllocation
		} else {
			ps.all = append(ps.all, p)
		}
		p.isDefault = true
		ps.def = p
	}
	return ps.def
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
	devicePools.Lock()
	defer devicePools.Unlock()
	if d.closed.Load() {
		p.releaseRes()
		return nil, newErr(opName, ErrContextIsDestroyed, "device is closed")
	}
	ps := poolSetLocked(d)
	ps.all = append(ps.all, p)
	return p, nil
}

// newPool reserves a pool's address space; the caller lists the pool. A
// host-backend pool hands out a range of address space of its own, first
// fit, and commits it in 2 MiB granules (vmem.Granularity), counted in
// refs: a granule that no allocation touches any more stays committed
// until trimLocked releases it.
func newPool(d *Device, props MemPoolProps) (*MemPool, error) {
	size := props.MaxSize
	if size == 0 {
		size = defaultPoolSize
	}
	// Where the system refuses that much address space, settle for less,
	// down to 1 GiB.
	res, err := vmem.Reserve(uintptr(size), uintptr(min(size, 1<<30)))
	if err != nil {
		return nil, err
	}
	p := &MemPool{dev: d, props: props, res: res, refs: map[uintptr]int32{}}
	if n := min(size, uint64(res.Size())) &^ (poolAlign - 1); n > 0 {
		p.free = []poolRange{{0, n}}
	}
	return p, nil
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
	if p.cu != 0 {
		return p.cudaDestroy(opName)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return newErr(opName, ErrInvalidValue, "memory pool already destroyed")
	}
	p.destroyed = true
	p.releaseIfDoneLocked()
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
	if p.cu != 0 {
		return p.cudaSetAttr(opName, poolAttrReleaseThreshold, bytes)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return newErr(opName, ErrInvalidValue, "memory pool is destroyed")
	}
	p.threshold = bytes
	return nil
}

// ReleaseThreshold returns the release threshold: 0 by default, as in CUDA,
// so a pool gives back all the memory it does not use at every
// synchronization.
func (p *MemPool) ReleaseThreshold() uint64 {
	if p == nil {
		return 0
	}
	if p.cu != 0 {
		return p.cudaAttr(poolAttrReleaseThreshold)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.threshold
}

// TrimTo returns idle memory to the system, keeping at least minBytesToKeep
// reserved (cudaMemPoolTrimTo). Memory of allocations not yet freed, and of
// frees that have not run yet, is never released.
func (p *MemPool) TrimTo(minBytesToKeep uint64) error {
	const opName = "MemPool.TrimTo"
	if err := p.check(opName); err != nil {
		return err
	}
	if p.cu != 0 {
		return p.cudaTrimTo(opName, minBytesToKeep)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return newErr(opName, ErrInvalidValue, "memory pool is destroyed")
	}
	p.trimLocked(minBytesToKeep)
	return nil
}

// Stats returns the pool's footprint.
func (p *MemPool) Stats() MemPoolStats {
	if p == nil {
		return MemPoolStats{}
	}
	if p.cu != 0 {
		return MemPoolStats{ReservedCurrent: p.cudaAttr(poolAttrReservedCurrent), ReservedHigh: p.cudaAttr(poolAttrReservedHigh),
			UsedCurrent: p.cudaAttr(poolAttrUsedCurrent), UsedHigh: p.cudaAttr(poolAttrUsedHigh)}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// ResetHigh resets the high-water marks to the current values (what setting
// cudaMemPoolAttrReservedMemHigh and cudaMemPoolAttrUsedMemHigh to 0 does).
func (p *MemPool) ResetHigh() {
	if p == nil {
		return
	}
	if p.cu != 0 {
		p.cudaSetAttr("MemPool.ResetHigh", poolAttrReservedHigh, 0)
		p.cudaSetAttr("MemPool.ResetHigh", poolAttrUsedHigh, 0)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.ReservedHigh = p.stats.ReservedCurrent
	p.stats.UsedHigh = p.stats.UsedCurrent
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
	if p.cu != 0 {
		return p.cudaSetAccess(opName, device, flags)
	}
	if device != p.props.Location {
		return newErr(opName, ErrInvalidDevice, "device %d: no such device (the host backend has only device 0)", device)
	}
	p.mu.Lock()
	dead := p.destroyed
	p.mu.Unlock()
	switch {
	case dead:
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
	if s.cu != 0 {
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
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.destroyed:
		return 0, newErr(opName, ErrInvalidValue, "memory pool is destroyed")
	case p.released:
		return 0, newErr(opName, ErrContextIsDestroyed, "device is closed")
	case p.res == nil:
		return 0, newErr(opName, ErrMemoryAllocation, "%d bytes: the pool could not reserve address space", n)
	}
	req := uint64(n)
	size := (req + poolAlign - 1) &^ (poolAlign - 1)
	var off uint64
	if pf := p.pendingForLocked(s, size, true); pf != nil {
		off = p.takePendingLocked(pf, size)
	} else if o, ok := p.takeFreeLocked(size); ok {
		if err := p.commitLocked(uintptr(o), uintptr(size)); err != nil {
			p.putFreeLocked(o, size)
			return 0, newErr(opName, ErrMemoryAllocation, "%d bytes: %v", n, err)
		}
		off = o
	} else if pf := p.pendingForLocked(s, size, false); pf != nil {
		// Nothing left but memory whose free is pending in another
		// stream: take it, and make s wait for that free, as the driver
		// does.
		if err := s.enqueue(opName, op{kind: opCall, host: func() { p.awaitFree(pf) }}, nil); err != nil {
			return 0, err
		}
		off = p.takePendingLocked(pf, size)
	} else {
		return 0, newErr(opName, ErrMemoryAllocation, "%d bytes: memory pool exhausted", n)
	}
	p.insertLiveLocked(&poolBlock{off: off, size: size, req: req})
	p.stats.UsedCurrent += req
	p.stats.UsedHigh = max(p.stats.UsedHigh, p.stats.UsedCurrent)
	return DevicePtr(p.res.Addr() + uintptr(off)), nil
}

// pendingForLocked finds the pending range of lowest address with room for
// size bytes, among those freed in s (same) or in other streams (!same).
func (p *MemPool) pendingForLocked(s *Stream, size uint64, same bool) *pendingFree {
	var best *pendingFree
	for _, pf := range p.pending {
		if (pf.stream == s) == same && pf.size >= size && (best == nil || pf.off < best.off) {
			best = pf
		}
	}
	return best
}

// takePendingLocked hands out the first size bytes of pf. Their granules
// pass from the pending range to the allocation without becoming idle, so a
// trim cannot decommit them in between.
func (p *MemPool) takePendingLocked(pf *pendingFree, size uint64) uint64 {
	off := pf.off
	_ = p.commitLocked(uintptr(off), uintptr(size)) // committed already: this only takes references
	p.unrefLocked(uintptr(pf.off), uintptr(pf.size))
	pf.off += size
	pf.size -= size
	if pf.size > 0 {
		_ = p.commitLocked(uintptr(pf.off), uintptr(pf.size))
	} else {
		p.dropPendingLocked(pf)
	}
	return off
}

func (p *MemPool) dropPendingLocked(pf *pendingFree) {
	for i, x := range p.pending {
		if x == pf {
			p.pending = append(p.pending[:i], p.pending[i+1:]...)
			return
		}
	}
}

// awaitFree runs in a stream that took memory whose free is pending in
// another stream, and holds back the rest of the stream until that free has
// run. A failed device drops queued frees, so it gives up then.
func (p *MemPool) awaitFree(pf *pendingFree) {
	select {
	case <-pf.ran:
		return
	default:
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-pf.ran:
			return
		case <-t.C:
			if p.dev.sticky.Load() != nil || p.dev.closed.Load() {
				return
			}
		}
	}
}

// takeFreeLocked takes size bytes from the lowest free range that holds
// them.
func (p *MemPool) takeFreeLocked(size uint64) (uint64, bool) {
	for i := range p.free {
		f := &p.free[i]
		if f.size < size {
			continue
		}
		off := f.off
		f.off += size
		f.size -= size
		if f.size == 0 {
			p.free = append(p.free[:i], p.free[i+1:]...)
		}
		return off, true
	}
	return 0, false
}

// putFreeLocked returns [off, off+size) to the free ranges, coalescing it
// with its neighbours.
func (p *MemPool) putFreeLocked(off, size uint64) {
	i := sort.Search(len(p.free), func(k int) bool { return p.free[k].off > off })
	p.free = append(p.free, poolRange{})
	copy(p.free[i+1:], p.free[i:])
	p.free[i] = poolRange{off, size}
	if i+1 < len(p.free) && off+size == p.free[i+1].off {
		p.free[i].size += p.free[i+1].size
		p.free = append(p.free[:i+1], p.free[i+2:]...)
	}
	if i > 0 && p.free[i-1].off+p.free[i-1].size == off {
		p.free[i-1].size += p.free[i].size
		p.free = append(p.free[:i], p.free[i+1:]...)
	}
}

func (p *MemPool) insertLiveLocked(b *poolBlock) {
	i := sort.Search(len(p.live), func(k int) bool { return p.live[k].off > b.off })
	p.live = append(p.live, nil)
	copy(p.live[i+1:], p.live[i:])
	p.live[i] = b
}

// liveAtLocked returns the index of the live allocation whose requested
// bytes hold offset off, or -1.
func (p *MemPool) liveAtLocked(off uint64) int {
	i := sort.Search(len(p.live), func(k int) bool { return p.live[k].off > off }) - 1
	if i < 0 || off >= p.live[i].off+p.live[i].req {
		return -1
	}
	return i
}

// commitLocked makes every granule touched by [off, off+n) accessible and
// takes a reference on each.
func (p *MemPool) commitLocked(off, n uintptr) error {
	first, last := off/vmem.Granularity, (off+n-1)/vmem.Granularity
	for g := first; g <= last; g++ {
		r, ok := p.refs[g]
		if !ok {
			if err := p.res.Commit(g*vmem.Granularity, vmem.Granularity); err != nil {
				if g > first {
					p.unrefLocked(first*vmem.Granularity, (g-first)*vmem.Granularity)
				}
				return err
			}
			p.stats.ReservedCurrent += vmem.Granularity
			p.stats.ReservedHigh = max(p.stats.ReservedHigh, p.stats.ReservedCurrent)
		} else if r == 0 {
			p.idle--
		}
		p.refs[g] = r + 1
	}
	return nil
}

// unrefLocked drops one reference on every granule touched by [off, off+n).
// Granules left idle stay committed until a trim.
func (p *MemPool) unrefLocked(off, n uintptr) {
	first, last := off/vmem.Granularity, (off+n-1)/vmem.Granularity
	for g := first; g <= last; g++ {
		if p.refs[g]--; p.refs[g] == 0 {
			p.idle++
		}
	}
}

// trimLocked decommits idle granules, highest address first, while at least
// keep bytes stay reserved.
func (p *MemPool) trimLocked(keep uint64) {
	if p.released || p.idle == 0 || p.stats.ReservedCurrent <= keep {
		return
	}
	var idle []uintptr
	for g, r := range p.refs {
		if r == 0 {
			idle = append(idle, g)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i] > idle[j] })
	n := 0
	for n < len(idle) && p.stats.ReservedCurrent-vmem.Granularity >= keep {
		delete(p.refs, idle[n])
		p.idle--
		p.stats.ReservedCurrent -= vmem.Granularity
		n++
	}
	// One call per run of adjacent granules.
	for i := 0; i < n; {
		j := i + 1
		for j < n && idle[j] == idle[j-1]-1 {
			j++
		}
		_ = p.res.Decommit(idle[j-1]*vmem.Granularity, uintptr(j-i)*vmem.Granularity)
		i = j
	}
}

// freeRun is the stream-ordered part of a FreeAsync: what allocations in the
// freeing stream have not taken of the range goes back to the pool, for any
// stream to reuse.
func (p *MemPool) freeRun(pf *pendingFree) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer close(pf.ran)
	if p.released {
		return
	}
	if pf.size > 0 {
		p.dropPendingLocked(pf)
		p.putFreeLocked(pf.off, pf.size)
		p.unrefLocked(uintptr(pf.off), uintptr(pf.size))
		pf.size = 0
	}
	p.releaseIfDoneLocked()
}

// releaseIfDoneLocked releases a destroyed pool once nothing is outstanding.
func (p *MemPool) releaseIfDoneLocked() {
	if p.destroyed && len(p.live) == 0 && len(p.pending) == 0 {
		p.releaseLocked()
	}
}

// releaseLocked gives the pool's address space back to the system and
// drops the pool from its device's list.
func (p *MemPool) releaseLocked() {
	if p.released {
		return
	}
	p.releaseRes()
	devicePools.Lock()
	if ps := devicePools.m[p.dev]; ps != nil {
		for i, x := range ps.all {
			if x == p {
				ps.all = append(ps.all[:i], ps.all[i+1:]...)
				break
			}
		}
	}
	devicePools.Unlock()
}

func (p *MemPool) releaseRes() {
	p.released = true
	if p.res != nil {
		_ = p.res.Release()
	}
	p.refs, p.idle = nil, 0
	p.free, p.live, p.pending = nil, nil, nil
	p.stats.ReservedCurrent, p.stats.UsedCurrent = 0, 0
}

// poolAt returns the pool of d whose address range holds ptr, or nil. The
// caller locks the pool and checks that it has not been released since.
func (d *Device) poolAt(ptr DevicePtr) *MemPool {
	devicePools.Lock()
	defer devicePools.Unlock()
	if ps := devicePools.m[d]; ps != nil {
		for _, p := range ps.all {
			if p.res.Contains(uintptr(ptr), 1) {
				return p
			}
		}
	}
	return nil
}

// takeLiveLocked ends, at API level, the live allocation that starts at ptr.
func (p *MemPool) takeLiveLocked(opName string, ptr DevicePtr) (*poolBlock, error) {
	if p.released {
		return nil, newErr(opName, ErrInvalidValue, "%#x: its memory pool has been released", uint64(ptr))
	}
	off := uint64(uintptr(ptr) - p.res.Addr())
	i := p.liveAtLocked(off)
	if i < 0 || p.live[i].off != off {
		return nil, newErr(opName, ErrInvalidValue, "%#x is not the start of a live stream-ordered allocation", uint64(ptr))
	}
	b := p.live[i]
	p.live = append(p.live[:i], p.live[i+1:]...)
	p.stats.UsedCurrent -= b.req
	return b, nil
}

// poolFreeAsync is the pool side of Stream.FreeAsync. handled is false, and
// nothing happens, if ptr is in none of d's pools. Otherwise the allocation
// that starts at ptr ends at API level now (ErrInvalidValue if there is
// none: an interior pointer, or a second free) and its memory goes back to
// the pool when s reaches the free.
func (d *Device) poolFreeAsync(opName string, ptr DevicePtr, s *Stream) (handled bool, err error) {
	p := d.poolAt(ptr)
	if p == nil {
		return false, nil
	}
	if err := s.usable(opName); err != nil {
		return true, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.takeLiveLocked(opName, ptr)
	if err != nil {
		return true, err
	}
	pf := &pendingFree{off: b.off, size: b.size, stream: s, ran: make(chan struct{})}
	p.pending = append(p.pending, pf)
	// Queued under the pool's lock, so that no allocation in s takes the
	// range before the free is in s's queue. Stream workers run ops without
	// their stream's lock, so freeRun cannot deadlock with this.
	if err := s.enqueue(opName, op{kind: opCall, host: func() { p.freeRun(pf) }}, nil); err != nil {
		p.pending = p.pending[:len(p.pending)-1]
		p.insertLiveLocked(b)
		p.stats.UsedCurrent += b.req
		return true, err
	}
	return true, nil
}

// poolFree is the pool side of Device.Free: like poolFreeAsync, but the
// memory goes back to the pool at once. The caller has synchronized the
// device.
func (d *Device) poolFree(opName string, ptr DevicePtr) (handled bool, err error) {
	p := d.poolAt(ptr)
	if p == nil {
		return false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.takeLiveLocked(opName, ptr)
	if err != nil {
		return true, err
	}
	p.putFreeLocked(b.off, b.size)
	p.unrefLocked(uintptr(b.off), uintptr(b.size))
	p.releaseIfDoneLocked()
	return true, nil
}

// poolBytes resolves [ptr, ptr+n) for memcpy and memset. handled is false if
// ptr is in none of d's pools; otherwise the range must lie inside the bytes
// asked for by one live allocation.
func (d *Device) poolBytes(ptr DevicePtr, n int) (b []byte, handled bool, err error) {
	p := d.poolAt(ptr)
	if p == nil {
		return nil, false, nil
	}
	if n < 0 {
		return nil, true, fmt.Errorf("negative size %d", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil, true, fmt.Errorf("%#x: its memory pool has been released", uint64(ptr))
	}
	off := uint64(uintptr(ptr) - p.res.Addr())
	i := p.liveAtLocked(off)
	if i < 0 {
		return nil, true, fmt.Errorf("%#x is not in a live stream-ordered allocation", uint64(ptr))
	}
	a := p.live[i]
	if off+uint64(n) > a.off+a.req {
		return nil, true, fmt.Errorf("[%#x, +%d) runs past the end of its allocation (%d bytes at %#x)",
			uint64(ptr), n, a.req, uint64(p.res.Addr())+a.off)
	}
	if n == 0 {
		return nil, true, nil
	}
	return unsafe.Slice((*byte)(p.res.Pointer(uintptr(off))), n), true, nil
}

// poolsAfterSync applies every pool's release threshold. The caller runs it
// when Synchronize of a stream, an event or the device has waited, the points
// at which the driver releases pool memory (Query is not one). Frees that
// have run by then have returned their ranges, so the granules they leave
// idle can go.
func (d *Device) poolsAfterSync() {
	for _, p := range poolsOf(d) {
		p.mu.Lock()
		p.trimLocked(p.threshold)
		p.mu.Unlock()
	}
}

// closePools releases the memory of all of d's pools. The caller runs it
// from Device.Close, once the device is marked closed and its work is done.
func (d *Device) closePools() {
	devicePools.Lock()
	ps := devicePools.m[d]
	delete(devicePools.m, d)
	devicePools.Unlock()
	if ps == nil {
		return
	}
	for _, p := range ps.all {
		p.mu.Lock()
		p.releaseRes()
		p.mu.Unlock()
	}
}
