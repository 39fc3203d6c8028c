package gpugraph

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/vmem"
)

// DevicePtr is an address in device memory. On the host backend it is a real
// virtual address of this process; read it from a Go kernel with Slice.
type DevicePtr uint64

// allocAlign is the alignment of Malloc, the same 256 bytes as cudaMalloc.
const allocAlign = 256

// Malloc allocates n bytes of device memory. Malloc(0) returns a zero pointer
// and no error, as cudaMalloc does.
func (d *Device) Malloc(n int) (DevicePtr, error) { return d.mainScope().Malloc(n) }

// Malloc allocates device memory, from this scope.
func (sc *Scope) Malloc(n int) (DevicePtr, error) {
	const op = "Device.Malloc"
	d := sc.dev
	if err := d.check(op); err != nil {
		return 0, err
	}
	if err := d.unsafeCall(op, sc, ErrStreamCaptureUnsupported); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, newErr(op, ErrInvalidValue, "negative size %d", n)
	}
	if n == 0 {
		return 0, nil
	}
	if d.cu != nil {
		p, err := d.cudaMalloc(n)
		if err == nil {
			d.mallocs.add(p, n)
		}
		return p, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	off, err := d.alloc.Alloc(uint64(n))
	if err != nil {
		return 0, newErr(op, ErrMemoryAllocation, "%d bytes: device address space exhausted", n)
	}
	size := uintptr(d.alloc.Rounded(uint64(n)))
	if err := d.commitLocked(uintptr(off), size); err != nil {
		d.alloc.Free(off)
		return 0, newErr(op, ErrMemoryAllocation, "%d bytes: %v", n, err)
	}
	p := DevicePtr(d.res.Addr() + uintptr(off))
	d.mallocs.add(p, n)
	return p, nil
}

// mallocTable counts the live allocations of Malloc, for MemoryStats.
type mallocTable struct {
	mu    sync.Mutex
	sizes map[DevicePtr]int
	bytes uint64
}

func (t *mallocTable) add(p DevicePtr, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sizes == nil {
		t.sizes = map[DevicePtr]int{}
	}
	t.sizes[p] = n
	t.bytes += uint64(n)
}

func (t *mallocTable) remove(p DevicePtr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.sizes[p]; ok {
		delete(t.sizes, p)
		t.bytes -= uint64(n)
	}
}

func (t *mallocTable) live() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

// Free waits for all work on the device, then frees an allocation made by
// Malloc, MallocAsync, or a graph (one live after its graph's launch).
// Free(0) does nothing, as cudaFree(NULL) does.
func (d *Device) Free(p DevicePtr) error { return d.mainScope().Free(p) }

// Free frees device memory, from this scope.
func (sc *Scope) Free(p DevicePtr) error {
	const op = "Device.Free"
	d := sc.dev
	if err := d.check(op); err != nil {
		return err
	}
	if err := d.unsafeCall(op, sc, ErrStreamCaptureUnsupported); err != nil {
		return err
	}
	if p == 0 {
		return nil
	}
	if d.cu != nil {
		err := d.cudaFree(p)
		if err == nil {
			d.mallocs.remove(p)
		}
		return err
	}
	if !d.res.Contains(uintptr(p), 1) {
		d.syncAll()
		if handled, err := d.freeGraphAlloc(op, p); handled {
			return err
		}
		if handled, err := d.poolFree(op, p); handled {
			return err
		}
		return newErr(op, ErrInvalidValue, "%#x is not device memory of this device", uint64(p))
	}
	d.syncAll()
	d.mu.Lock()
	defer d.mu.Unlock()
	off := uintptr(p) - d.res.Addr()
	size, ok := d.alloc.Free(uint64(off))
	if !ok {
		return newErr(op, ErrInvalidValue, "%#x is not the start of a live allocation", uint64(p))
	}
	d.decommitLocked(off, uintptr(size))
	d.mallocs.remove(p)
	return nil
}

// commitLocked makes every granule touched by [off, off+n) accessible.
func (d *Device) commitLocked(off, n uintptr) error {
	first, last := off/vmem.Granularity, (off+n-1)/vmem.Granularity
	for g := first; g <= last; g++ {
		if d.refs[g] == 0 {
			if err := d.res.Commit(g*vmem.Granularity, vmem.Granularity); err != nil {
				if g > first {
					d.decommitLocked(first*vmem.Granularity, (g-first)*vmem.Granularity)
				}
				return err
			}
		}
		d.refs[g]++
	}
	return nil
}

// decommitLocked drops one reference on every granule touched by
// [off, off+n), returning the pages of unreferenced granules to the system.
func (d *Device) decommitLocked(off, n uintptr) {
	first, last := off/vmem.Granularity, (off+n-1)/vmem.Granularity
	for g := first; g <= last; g++ {
		if d.refs[g]--; d.refs[g] == 0 {
			delete(d.refs, g)
			_ = d.res.Decommit(g*vmem.Granularity, vmem.Granularity)
		}
	}
}

// deviceBytes returns the device range [p, p+n) as a byte slice after
// checking that it lies inside one live allocation.
func (d *Device) deviceBytes(p DevicePtr, n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative size %d", n)
	}
	if !d.res.Contains(uintptr(p), uintptr(n)) {
		if b, handled, err := d.graphBytes(p, n); handled {
			return b, err
		}
		if b, handled, err := d.poolBytes(p, n); handled {
			return b, err
		}
		return nil, fmt.Errorf("[%#x, +%d) is not device memory of this device", uint64(p), n)
	}
	off := uint64(uintptr(p) - d.res.Addr())
	d.mu.Lock()
	start, size, ok := d.alloc.Find(off)
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%#x is not in a live allocation", uint64(p))
	}
	if off+uint64(n) > start+size {
		return nil, fmt.Errorf("[%#x, +%d) runs past the end of its allocation (%d bytes at %#x)",
			uint64(p), n, size, uint64(d.res.Addr())+start)
	}
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*byte)(d.res.Pointer(uintptr(off))), n), nil
}

// reservations lists the address ranges of all open host devices, so Slice
// can turn a DevicePtr into a pointer without knowing its device.
var reservations atomic.Pointer[[]*vmem.Reservation]

func registerReservation(r *vmem.Reservation) {
	for {
		old := reservations.Load()
		var next []*vmem.Reservation
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, r)
		if reservations.CompareAndSwap(old, &next) {
			return
		}
	}
}

func unregisterReservation(r *vmem.Reservation) {
	for {
		old := reservations.Load()
		var next []*vmem.Reservation
		for _, x := range *old {
			if x != r {
				next = append(next, x)
			}
		}
		if reservations.CompareAndSwap(old, &next) {
			return
		}
	}
}

// IllegalAddressError is what Slice panics with when given memory that is not
// device memory; a kernel that does so fails with ErrIllegalAddress.
type IllegalAddressError struct {
	Ptr  DevicePtr
	Size uintptr
}

func (e IllegalAddressError) Error() string {
	return fmt.Sprintf("illegal address: [%#x, +%d) is not device memory", uint64(e.Ptr), e.Size)
}

// Slice returns n elements of type T at device address p, for use inside Go
// kernel bodies and host functions on the host backend. Like a device memory
// access, it is unchecked against allocations for speed; an address outside
// every device's memory panics with IllegalAddressError, and memory that is
// not committed faults, either of which fails the kernel with
// ErrIllegalAddress.
func Slice[T any](p DevicePtr, n int) []T {
	if n == 0 {
		return nil
	}
	var zero T
	size := uintptr(n) * unsafe.Sizeof(zero)
	if rs := reservations.Load(); rs != nil && n > 0 {
		for _, r := range *rs {
			if r.Contains(uintptr(p), size) {
				return unsafe.Slice((*T)(r.Pointer(uintptr(p)-r.Addr())), n)
			}
		}
	}
	panic(IllegalAddressError{p, size})
}

// Bytes views a slice of plain values (numbers, or structs of them) as its
// bytes, for copies between host and device.
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(zero))
}
