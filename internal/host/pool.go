package host

import (
	"fmt"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/vmem"
)

// PoolAlign is the alignment and size granularity of pool allocations: the
// driver spaces consecutive 1-byte cudaMallocAsync allocations 512 bytes
// apart.
const PoolAlign = 512

// Pool is the host backend's memory pool for stream-ordered allocation: a
// range of address space of its own, handed out first fit (lowest address
// first, as the driver does) in multiples of PoolAlign and committed in
// 2 MiB granules, counted in refs. A granule that no allocation touches any
// more stays committed (reserved) until a trim. A free is pending from
// FreeAsync until the freeing stream runs it: allocations in that stream
// take pending memory first. Streams are keys the caller chooses. Its
// methods are safe for concurrent use.
type Pool struct {
	res       *vmem.Reservation
	onRelease func() // called, under the pool's lock, when a destroyed pool is released

	mu        sync.Mutex
	free      []poolRange       // ranges nothing holds, sorted by offset, coalesced
	live      []*poolBlock      // allocations not yet freed at API level, sorted by offset
	pending   []*PendingFree    // ranges freed with FreeAsync whose free has not run
	refs      map[uintptr]int32 // committed granules: index -> live or pending ranges touching it (0: idle)
	idle      int               // granules with no reference: what a trim can release
	size      uint64            // bytes the ranges tile
	threshold uint64
	stats     backend.PoolStats
	destroyed bool         // Destroy was called; released once nothing is outstanding
	released  bool         // the reservation is gone
	peers     map[int]bool // other devices given read-write access (cudaMemPoolSetAccess)
}

// SetPeerAccess gives device dev read-write access to the pool's memory,
// or takes it away.
func (p *Pool) SetPeerAccess(dev int, rw bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !rw {
		delete(p.peers, dev)
		return
	}
	if p.peers == nil {
		p.peers = map[int]bool{}
	}
	p.peers[dev] = true
}

// PeerAccess reports whether device dev has access to the pool's memory.
func (p *Pool) PeerAccess(dev int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peers[dev]
}

type poolRange struct{ off, size uint64 }

// poolBlock is a live allocation: size bytes at offset off (both multiples
// of PoolAlign), of which req were asked for.
type poolBlock struct{ off, size, req uint64 }

// PendingFree is what is left of a range freed with FreeAsync in a stream:
// allocations in that stream take it from the front until the free runs
// and returns the rest to the pool.
type PendingFree struct {
	off, size uint64
	stream    any
	ran       chan struct{} // closed when the free has run
}

// NewPool reserves maxSize bytes of address space (less, down to 1 GiB,
// where the system refuses that much). onRelease, if not nil, is called
// when a destroyed pool's memory has gone back to the system.
func NewPool(maxSize uint64, onRelease func()) (*Pool, error) {
	res, err := vmem.Reserve(uintptr(maxSize), uintptr(min(maxSize, 1<<30)))
	if err != nil {
		return nil, err
	}
	p := &Pool{res: res, onRelease: onRelease, refs: map[uintptr]int32{}}
	p.size = min(maxSize, uint64(res.Size())) &^ (PoolAlign - 1)
	if p.size > 0 {
		p.free = []poolRange{{0, p.size}}
	}
	return p, nil
}

// Addr is the first address of the pool's range.
func (p *Pool) Addr() uintptr { return p.res.Addr() }

// Contains reports whether ptr is in the pool's address range.
func (p *Pool) Contains(ptr uint64) bool { return p.res.Contains(uintptr(ptr), 1) }

// Alloc allocates n > 0 bytes in stream's order: from memory whose free is
// pending in stream, else from the lowest free range that holds it, else
// from memory whose free is pending in another stream, calling wait (under
// the pool's lock, so that nothing else takes the range first) to make
// stream wait for that free: the order of reuse measured on the driver. If
// wait fails, nothing is allocated.
func (p *Pool) Alloc(n int, stream any, wait func(*PendingFree) error) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.destroyed:
		return 0, backend.Errorf(backend.ErrInvalidValue, "memory pool is destroyed")
	case p.released:
		return 0, backend.Errorf(backend.ErrContextIsDestroyed, "device is closed")
	}
	req := uint64(n)
	size := (req + PoolAlign - 1) &^ (PoolAlign - 1)
	var off uint64
	if pf := p.pendingForLocked(stream, size, true); pf != nil {
		off = p.takePendingLocked(pf, size)
	} else if o, ok := p.takeFreeLocked(size); ok {
		if err := p.commitLocked(uintptr(o), uintptr(size)); err != nil {
			p.putFreeLocked(o, size)
			return 0, backend.Errorf(backend.ErrMemoryAllocation, "%d bytes: %v", n, err)
		}
		off = o
	} else if pf := p.pendingForLocked(stream, size, false); pf != nil {
		if err := wait(pf); err != nil {
			return 0, err
		}
		off = p.takePendingLocked(pf, size)
	} else {
		return 0, backend.Errorf(backend.ErrMemoryAllocation, "%d bytes: memory pool exhausted", n)
	}
	p.insertLiveLocked(&poolBlock{off: off, size: size, req: req})
	p.stats.UsedCurrent += req
	p.stats.UsedHigh = max(p.stats.UsedHigh, p.stats.UsedCurrent)
	return uint64(p.res.Addr()) + off, nil
}

// Await holds back the calling stream until pf's free has run; it gives up
// when stop reports true (a failed device drops queued frees).
func (pf *PendingFree) Await(stop func() bool) {
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
			if stop() {
				return
			}
		}
	}
}

// FreeAsync ends, at API level, the live allocation that starts at ptr
// (ErrInvalidValue if there is none: an interior pointer, or a second
// free), and calls queue, under the pool's lock so that no allocation in
// stream takes the range before the free is queued, with the
// stream-ordered part of the free for stream to run. If queue fails, the
// allocation stays live.
func (p *Pool) FreeAsync(ptr uint64, stream any, queue func(run func()) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.takeLiveLocked(ptr)
	if err != nil {
		return err
	}
	pf := &PendingFree{off: b.off, size: b.size, stream: stream, ran: make(chan struct{})}
	p.pending = append(p.pending, pf)
	if err := queue(func() { p.freeRun(pf) }); err != nil {
		p.pending = p.pending[:len(p.pending)-1]
		p.insertLiveLocked(b)
		p.stats.UsedCurrent += b.req
		return err
	}
	return nil
}

// Free frees the live allocation that starts at ptr at once; the caller
// has synchronized the device.
func (p *Pool) Free(ptr uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.takeLiveLocked(ptr)
	if err != nil {
		return err
	}
	p.putFreeLocked(b.off, b.size)
	p.unrefLocked(uintptr(b.off), uintptr(b.size))
	p.releaseIfDoneLocked()
	return nil
}

// Bytes resolves [ptr, ptr+n) for copies and memsets: the range must lie
// inside the bytes asked for by one live allocation.
func (p *Pool) Bytes(ptr uint64, n int) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil, backend.Errorf(backend.ErrInvalidValue, "%#x: its memory pool has been released", ptr)
	}
	off := ptr - uint64(p.res.Addr())
	i := p.liveAtLocked(off)
	if i < 0 {
		return nil, backend.Errorf(backend.ErrInvalidValue, "%#x is not in a live stream-ordered allocation", ptr)
	}
	a := p.live[i]
	if off+uint64(n) > a.off+a.req {
		return nil, backend.Errorf(backend.ErrInvalidValue, "[%#x, +%d) runs past the end of its allocation (%d bytes at %#x)",
			ptr, n, a.req, uint64(p.res.Addr())+a.off)
	}
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*byte)(p.res.Pointer(uintptr(off))), n), nil
}

// Destroy marks the pool destroyed: nothing more can be allocated from it,
// and its memory goes back to the system once the last allocation is freed
// and the free has run. It reports false if the pool was destroyed before.
func (p *Pool) Destroy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return false
	}
	p.destroyed = true
	p.releaseIfDoneLocked()
	return true
}

// Destroyed reports whether Destroy was called.
func (p *Pool) Destroyed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.destroyed
}

// SetThreshold sets the reserved bytes a synchronization keeps (Trim); it
// reports false if the pool is destroyed.
func (p *Pool) SetThreshold(bytes uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return false
	}
	p.threshold = bytes
	return true
}

// Threshold returns the release threshold.
func (p *Pool) Threshold() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.threshold
}

// TrimTo decommits idle granules, highest address first, while at least
// keep bytes stay reserved; it reports false if the pool is destroyed.
func (p *Pool) TrimTo(keep uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return false
	}
	p.trimLocked(keep)
	return true
}

// Trim applies the release threshold, as a synchronization does.
func (p *Pool) Trim() {
	p.mu.Lock()
	p.trimLocked(p.threshold)
	p.mu.Unlock()
}

// Stats returns the pool's footprint.
func (p *Pool) Stats() backend.PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// ResetHigh resets the high-water marks to the current values.
func (p *Pool) ResetHigh() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.ReservedHigh = p.stats.ReservedCurrent
	p.stats.UsedHigh = p.stats.UsedCurrent
}

// Release gives the pool's memory back to the system at once (the device
// is closing); it reports false if it was released before.
func (p *Pool) Release() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return false
	}
	p.releaseLocked()
	return true
}

// pendingForLocked finds the pending range of lowest address with room for
// size bytes, among those freed in stream (same) or in other streams
// (!same).
func (p *Pool) pendingForLocked(stream any, size uint64, same bool) *PendingFree {
	var best *PendingFree
	for _, pf := range p.pending {
		if (pf.stream == stream) == same && pf.size >= size && (best == nil || pf.off < best.off) {
			best = pf
		}
	}
	return best
}

// takePendingLocked hands out the first size bytes of pf. Their granules
// pass from the pending range to the allocation without becoming idle, so a
// trim cannot decommit them in between.
func (p *Pool) takePendingLocked(pf *PendingFree, size uint64) uint64 {
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

func (p *Pool) dropPendingLocked(pf *PendingFree) {
	for i, x := range p.pending {
		if x == pf {
			p.pending = append(p.pending[:i], p.pending[i+1:]...)
			return
		}
	}
}

// takeFreeLocked takes size bytes from the lowest free range that holds
// them.
func (p *Pool) takeFreeLocked(size uint64) (uint64, bool) {
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
func (p *Pool) putFreeLocked(off, size uint64) {
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

func (p *Pool) insertLiveLocked(b *poolBlock) {
	i := sort.Search(len(p.live), func(k int) bool { return p.live[k].off > b.off })
	p.live = append(p.live, nil)
	copy(p.live[i+1:], p.live[i:])
	p.live[i] = b
}

// liveAtLocked returns the index of the live allocation whose requested
// bytes hold offset off, or -1.
func (p *Pool) liveAtLocked(off uint64) int {
	i := sort.Search(len(p.live), func(k int) bool { return p.live[k].off > off }) - 1
	if i < 0 || off >= p.live[i].off+p.live[i].req {
		return -1
	}
	return i
}

// takeLiveLocked ends, at API level, the live allocation that starts at ptr.
func (p *Pool) takeLiveLocked(ptr uint64) (*poolBlock, error) {
	if p.released {
		return nil, backend.Errorf(backend.ErrInvalidValue, "%#x: its memory pool has been released", ptr)
	}
	off := ptr - uint64(p.res.Addr())
	i := p.liveAtLocked(off)
	if i < 0 || p.live[i].off != off {
		return nil, backend.Errorf(backend.ErrInvalidValue, "%#x is not the start of a live stream-ordered allocation", ptr)
	}
	b := p.live[i]
	p.live = append(p.live[:i], p.live[i+1:]...)
	p.stats.UsedCurrent -= b.req
	return b, nil
}

// commitLocked makes every granule touched by [off, off+n) accessible and
// takes a reference on each.
func (p *Pool) commitLocked(off, n uintptr) error {
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
func (p *Pool) unrefLocked(off, n uintptr) {
	first, last := off/vmem.Granularity, (off+n-1)/vmem.Granularity
	for g := first; g <= last; g++ {
		if p.refs[g]--; p.refs[g] == 0 {
			p.idle++
		}
	}
}

// trimLocked decommits idle granules, highest address first, while at least
// keep bytes stay reserved.
func (p *Pool) trimLocked(keep uint64) {
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
func (p *Pool) freeRun(pf *PendingFree) {
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
func (p *Pool) releaseIfDoneLocked() {
	if p.destroyed && !p.released && len(p.live) == 0 && len(p.pending) == 0 {
		p.releaseLocked()
		if p.onRelease != nil {
			p.onRelease()
		}
	}
}

func (p *Pool) releaseLocked() {
	p.released = true
	_ = p.res.Release()
	p.refs, p.idle = nil, 0
	p.free, p.live, p.pending = nil, nil, nil
	p.stats.ReservedCurrent, p.stats.UsedCurrent = 0, 0
}

// Verify checks the pool's bookkeeping, for tests: every byte is exactly
// one of free, live or pending; each granule's reference count is the
// number of live and pending ranges touching it; used is what live
// allocations asked for.
func (p *Pool) Verify() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil
	}
	type rng struct {
		off, size uint64
		held      bool
	}
	var all []rng
	var used uint64
	for _, f := range p.free {
		all = append(all, rng{f.off, f.size, false})
	}
	for _, b := range p.live {
		all = append(all, rng{b.off, b.size, true})
		used += b.req
	}
	for _, pf := range p.pending {
		all = append(all, rng{pf.off, pf.size, true})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].off < all[j].off })
	refs := map[uintptr]int32{}
	at := uint64(0)
	for _, r := range all {
		if r.off != at || r.size == 0 {
			return fmt.Errorf("ranges do not tile the pool: range [%#x,+%#x) where %#x was expected", r.off, r.size, at)
		}
		at += r.size
		if r.held {
			for g := uintptr(r.off) / vmem.Granularity; g <= uintptr(r.off+r.size-1)/vmem.Granularity; g++ {
				refs[g]++
			}
		}
	}
	if at != p.size {
		return fmt.Errorf("ranges cover %#x bytes of %#x", at, p.size)
	}
	idle := 0
	for g, r := range p.refs {
		if r == 0 {
			idle++
		}
		if refs[g] != r {
			return fmt.Errorf("granule %d: %d references, want %d", g, r, refs[g])
		}
	}
	for g := range refs {
		if _, ok := p.refs[g]; !ok {
			return fmt.Errorf("granule %d is held but not committed", g)
		}
	}
	if idle != p.idle || uint64(len(p.refs))*vmem.Granularity != p.stats.ReservedCurrent || used != p.stats.UsedCurrent {
		return fmt.Errorf("idle %d (counted %d), reserved %d for %d granules, used %d (counted %d)",
			p.idle, idle, p.stats.ReservedCurrent, len(p.refs), p.stats.UsedCurrent, used)
	}
	return nil
}
