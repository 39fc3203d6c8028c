package host

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/alloc"
	"github.com/gpugraph/gpugraph/internal/vmem"
)

// Memory is a host device's memory for Malloc: a reserved range of address
// space whose 2 MiB granules are committed while an allocation touches them
// and returned to the system when none does, so a device address is a real
// address of this process and a freed range faults like unmapped GPU
// memory. Graph memory and memory pools have reservations of their own.
// Its methods are safe for concurrent use.
type Memory struct {
	res *vmem.Reservation

	mu    sync.Mutex
	alloc *alloc.Allocator
	refs  map[uintptr]int32 // committed granules: granule index -> live allocations touching it
}

// Align is the alignment of Malloc, the same 256 bytes as cudaMalloc.
const Align = 256

// NewMemory reserves size bytes of address space (less where the system
// refuses that much, down to min).
func NewMemory(size, min uintptr) (*Memory, error) {
	res, err := vmem.Reserve(size, min)
	if err != nil {
		return nil, err
	}
	return &Memory{res: res, alloc: alloc.New(uint64(res.Size()), Align), refs: map[uintptr]int32{}}, nil
}

// Size is the bytes of address space reserved.
func (m *Memory) Size() uint64 { return uint64(m.res.Size()) }

// Contains reports whether [p, p+n) lies inside m's address range, whether
// allocated or not.
func (m *Memory) Contains(p uint64, n int) bool { return m.res.Contains(uintptr(p), uintptr(n)) }

// Malloc allocates n > 0 bytes and commits the granules they touch. An error
// means there is no room: in the range, or in the system.
func (m *Memory) Malloc(n int) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	off, err := m.alloc.Alloc(uint64(n))
	if err != nil {
		return 0, fmt.Errorf("%d bytes: device address space exhausted", n)
	}
	size := uintptr(m.alloc.Rounded(uint64(n)))
	if err := m.commitLocked(uintptr(off), size); err != nil {
		m.alloc.Free(off)
		return 0, fmt.Errorf("%d bytes: %v", n, err)
	}
	return uint64(m.res.Addr()) + off, nil
}

// Free frees the allocation that starts at p, returning the pages no other
// allocation touches. It reports false if p is not the start of a live
// allocation.
func (m *Memory) Free(p uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	off := uintptr(p) - m.res.Addr()
	size, ok := m.alloc.Free(uint64(off))
	if !ok {
		return false
	}
	m.decommitLocked(off, uintptr(size))
	return true
}

// Bytes returns [p, p+n) as a byte slice after checking that it lies inside
// one live allocation; the range must be inside m (Contains).
func (m *Memory) Bytes(p uint64, n int) ([]byte, error) {
	off := p - uint64(m.res.Addr())
	m.mu.Lock()
	start, size, ok := m.alloc.Find(off)
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%#x is not in a live allocation", p)
	}
	if off+uint64(n) > start+size {
		return nil, fmt.Errorf("[%#x, +%d) runs past the end of its allocation (%d bytes at %#x)",
			p, n, size, uint64(m.res.Addr())+start)
	}
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*byte)(m.res.Pointer(uintptr(off))), n), nil
}

// Release returns the whole range to the system. m must not be used after.
func (m *Memory) Release() error { return m.res.Release() }

// commitLocked makes every granule touched by [off, off+n) accessible.
func (m *Memory) commitLocked(off, n uintptr) error {
	first, last := off/vmem.Granularity, (off+n-1)/vmem.Granularity
	for g := first; g <= last; g++ {
		if m.refs[g] == 0 {
			if err := m.res.Commit(g*vmem.Granularity, vmem.Granularity); err != nil {
				if g > first {
					m.decommitLocked(first*vmem.Granularity, (g-first)*vmem.Granularity)
				}
				return err
			}
		}
		m.refs[g]++
	}
	return nil
}

// decommitLocked drops one reference on every granule touched by
// [off, off+n), returning the pages of unreferenced granules to the system.
func (m *Memory) decommitLocked(off, n uintptr) {
	first, last := off/vmem.Granularity, (off+n-1)/vmem.Granularity
	for g := first; g <= last; g++ {
		if m.refs[g]--; m.refs[g] == 0 {
			delete(m.refs, g)
			_ = m.res.Decommit(g*vmem.Granularity, vmem.Granularity)
		}
	}
}

// Pointer returns a pointer to [p, p+n) of any host device's memory (Malloc,
// graph memory or a pool), or nil if the range is not inside one: what a Go
// kernel's Slice dereferences.
func Pointer(p uint64, n uintptr) unsafe.Pointer { return vmem.Find(uintptr(p), n) }
