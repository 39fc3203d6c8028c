//go:build linux

package vmem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reserve reserves size bytes (rounded up to Granularity) of address space
// with no access and no backing store. It tries smaller sizes, halving down
// to min, where the system refuses a large reservation.
func Reserve(size, min uintptr) (*Reservation, error) {
	size = roundUp(size, Granularity)
	for {
		// Over-reserve by one granule so the start can be aligned to it.
		p, err := unix.MmapPtr(-1, 0, nil, size+Granularity, unix.PROT_NONE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			if size/2 >= min && size/2 >= Granularity {
				size = roundUp(size/2, Granularity)
				continue
			}
			return nil, fmt.Errorf("vmem: reserve %d bytes: %w", size, err)
		}
		start := uintptr(p)
		aligned := roundUp(start, Granularity)
		head := aligned - start
		if head > 0 {
			_ = unix.MunmapPtr(p, head)
		}
		if tail := Granularity - head; tail > 0 {
			_ = unix.MunmapPtr(unsafe.Add(p, head+size), tail)
		}
		r := &Reservation{base: unsafe.Add(p, head), addr: aligned, size: size}
		register(r)
		return r, nil
	}
}

// Commit makes [off, off+n) readable and writable; pages are backed lazily by
// zeroed memory on first touch.
func (r *Reservation) Commit(off, n uintptr) error {
	return unix.Mprotect(unsafe.Slice((*byte)(r.Pointer(off)), n), unix.PROT_READ|unix.PROT_WRITE)
}

// Decommit returns the pages of [off, off+n) to the system and makes the range
// inaccessible again.
func (r *Reservation) Decommit(off, n uintptr) error {
	b := unsafe.Slice((*byte)(r.Pointer(off)), n)
	if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
		return err
	}
	return unix.Mprotect(b, unix.PROT_NONE)
}

// Release unmaps the whole reservation. The reservation must not be used after.
func (r *Reservation) Release() error {
	if r.base == nil {
		return nil
	}
	unregister(r)
	err := unix.MunmapPtr(r.base, r.size)
	r.base = nil
	return err
}

func roundUp(x, to uintptr) uintptr { return (x + to - 1) / to * to }
