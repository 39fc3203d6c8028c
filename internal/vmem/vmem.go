// Package vmem reserves a range of virtual address space and commits and
// decommits pages inside it. It is the host backend's device memory: device
// pointers are real addresses inside a reservation, so Go kernels read and
// write them directly, and touching an uncommitted page faults, as on a GPU.
package vmem

import (
	"errors"
	"unsafe"
)

// Granularity is the commit granularity, the same 2 MiB as CUDA's virtual
// memory manager uses for device memory mappings.
const Granularity = 2 << 20

// ErrNotSupported is returned where the platform has no implementation.
var ErrNotSupported = errors.New("vmem: virtual memory reservation not supported on this platform")

// Reservation is a contiguous range of reserved address space.
type Reservation struct {
	base unsafe.Pointer
	addr uintptr
	size uintptr
}

// Addr is the first address of the range.
func (r *Reservation) Addr() uintptr { return r.addr }

// Size is the length of the range in bytes.
func (r *Reservation) Size() uintptr { return r.size }

// Pointer returns the address at offset off as a pointer. The caller keeps
// off inside the range.
func (r *Reservation) Pointer(off uintptr) unsafe.Pointer { return unsafe.Add(r.base, off) }

// Contains reports whether [addr, addr+n) lies inside the reservation.
func (r *Reservation) Contains(addr, n uintptr) bool {
	return addr >= r.addr && n <= r.size && addr-r.addr <= r.size-n
}
