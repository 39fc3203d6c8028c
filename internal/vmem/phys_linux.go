//go:build linux

package vmem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Phys is physical memory in Granularity-sized chunks: the pages of a memfd
// file. A chunk is mapped into reservations with MapChunk, possibly at
// several addresses at once (that is how graph allocations of different
// graphs alias the same memory), and returned to the system with Release.
type Phys struct {
	fd     int
	chunks int // the file is chunks*Granularity bytes long
}

// NewPhys creates an empty physical pool.
func NewPhys(name string) (*Phys, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("vmem: memfd_create: %w", err)
	}
	return &Phys{fd: fd}, nil
}

// Grow makes chunk indexes [0, n) exist.
func (p *Phys) Grow(n int) error {
	if n <= p.chunks {
		return nil
	}
	if err := unix.Ftruncate(p.fd, int64(n)*Granularity); err != nil {
		return fmt.Errorf("vmem: grow physical pool to %d chunks: %w", n, err)
	}
	p.chunks = n
	return nil
}

// Release returns the pages of chunk c to the system; its contents are lost
// and read as zero when it is used again.
func (p *Phys) Release(c int) error {
	return unix.Fallocate(p.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(c)*Granularity, Granularity)
}

// Close closes the pool's file; mappings stay valid until unmapped.
func (p *Phys) Close() error { return unix.Close(p.fd) }

// MapChunk maps physical chunk c of p at offset off (a multiple of
// Granularity) of r, readable and writable, or inaccessible if !access.
// It replaces whatever was mapped there.
func (r *Reservation) MapChunk(off uintptr, p *Phys, c int, access bool) error {
	prot := unix.PROT_NONE
	if access {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	_, err := unix.MmapPtr(p.fd, int64(c)*Granularity, r.Pointer(off), Granularity, prot, unix.MAP_SHARED|unix.MAP_FIXED)
	return err
}

// UnmapChunk puts an inaccessible, unbacked reservation back at off.
func (r *Reservation) UnmapChunk(off uintptr) error {
	_, err := unix.MmapPtr(-1, 0, r.Pointer(off), Granularity, unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE|unix.MAP_FIXED)
	return err
}

// Protect sets the access of [off, off+n) (page-aligned) without changing
// what is mapped there.
func (r *Reservation) Protect(off, n uintptr, access bool) error {
	prot := unix.PROT_NONE
	if access {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	return unix.Mprotect(unsafe.Slice((*byte)(r.Pointer(off)), n), prot)
}
