// Package alloc hands out address ranges of a fixed space: first fit over a
// sorted free list with coalescing, plus a table of live allocations that
// answers which allocation holds an address. It knows nothing about pages;
// the caller commits memory for the ranges it gets.
package alloc

import (
	"errors"
	"sort"
)

// ErrNoSpace means no free range is large enough.
var ErrNoSpace = errors.New("alloc: out of address space")

type span struct{ off, size, req uint64 } // req: bytes asked for (live spans)

// Allocator manages offsets in [0, size). It is not safe for concurrent use.
type Allocator struct {
	align uint64
	free  []span // sorted by off, never adjacent (coalesced)
	live  []span // sorted by off
}

// New returns an allocator for [0, size) whose ranges start at multiples of
// align (a power of two) and whose sizes are rounded up to align.
func New(size, align uint64) *Allocator {
	return &Allocator{align: align, free: []span{{off: 0, size: size / align * align}}}
}

// Rounded is the size a request of n bytes occupies.
func (a *Allocator) Rounded(n uint64) uint64 { return (n + a.align - 1) &^ (a.align - 1) }

// Alloc reserves n bytes (n > 0) and returns the offset of the range.
func (a *Allocator) Alloc(n uint64) (uint64, error) {
	req := n
	n = a.Rounded(n)
	for i := range a.free {
		f := &a.free[i]
		if f.size < n {
			continue
		}
		off := f.off
		f.off += n
		f.size -= n
		if f.size == 0 {
			a.free = append(a.free[:i], a.free[i+1:]...)
		}
		j := sort.Search(len(a.live), func(k int) bool { return a.live[k].off > off })
		a.live = append(a.live, span{})
		copy(a.live[j+1:], a.live[j:])
		a.live[j] = span{off, n, req}
		return off, nil
	}
	return 0, ErrNoSpace
}

// Free releases the allocation that starts at off and returns its size. It
// reports false, changing nothing, when no allocation starts there.
func (a *Allocator) Free(off uint64) (uint64, bool) {
	j := sort.Search(len(a.live), func(k int) bool { return a.live[k].off >= off })
	if j == len(a.live) || a.live[j].off != off {
		return 0, false
	}
	n := a.live[j].size
	a.live = append(a.live[:j], a.live[j+1:]...)
	i := sort.Search(len(a.free), func(k int) bool { return a.free[k].off > off })
	a.free = append(a.free, span{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = span{off: off, size: n}
	// Coalesce with the following, then the preceding, neighbour.
	if i+1 < len(a.free) && a.free[i].off+a.free[i].size == a.free[i+1].off {
		a.free[i].size += a.free[i+1].size
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if i > 0 && a.free[i-1].off+a.free[i-1].size == a.free[i].off {
		a.free[i-1].size += a.free[i].size
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	return n, true
}

// Find returns the live allocation containing off: its start and the size
// that was asked for (an address in the rounding padding is not found).
func (a *Allocator) Find(off uint64) (start, size uint64, ok bool) {
	j := sort.Search(len(a.live), func(k int) bool { return a.live[k].off > off })
	if j == 0 {
		return 0, 0, false
	}
	s := a.live[j-1]
	if off >= s.off+s.req {
		return 0, 0, false
	}
	return s.off, s.req, true
}

// Live is the number of live allocations.
func (a *Allocator) Live() int { return len(a.live) }
