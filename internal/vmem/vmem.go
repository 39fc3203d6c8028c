// Package vmem reserves a range of virtual address space and commits and
// decommits pages inside it. It is the host backend's device memory: device
// pointers are real addresses inside a reservation, so Go kernels read and
// write them directly, and touching an uncommitted page faults, as on a GPU.
package vmem

import (
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Granularity is the commit granularity, the same 2 MiB as CUDA's virtual
// memory manager uses for device memory mappings.
const Granularity = 2 << 20

// ErrNotSupported is returned where the platform has no implementation.
var ErrNotSupported = errors.New("the host backend's device memory (reserved address space backed by memfd pages) is implemented on Linux only, not on " + runtime.GOOS + "/" + runtime.GOARCH)

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

// live lists the reservations not yet released, so Find can turn an address
// into a pointer without knowing whose memory it is (a Go kernel reads any
// device's memory by address, as a GPU kernel dereferences a pointer).
var live atomic.Pointer[[]*Reservation]

func register(r *Reservation) {
	for {
		old := live.Load()
		var next []*Reservation
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, r)
		if live.CompareAndSwap(old, &next) {
			return
		}
	}
}

func unregister(r *Reservation) {
	for {
		old := live.Load()
		if old == nil {
			return
		}
		next := make([]*Reservation, 0, len(*old))
		for _, x := range *old {
			if x != r {
				next = append(next, x)
			}
		}
		if live.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Find returns a pointer to [addr, addr+n) if the range lies inside one
// live reservation, and nil otherwise. Whether the pages are committed is
// not checked: touching an uncommitted one faults.
func Find(addr, n uintptr) unsafe.Pointer {
	if rs := live.Load(); rs != nil {
		for _, r := range *rs {
			if r.Contains(addr, n) {
				return r.Pointer(addr - r.addr)
			}
		}
	}
	return nil
}
