package gpugraph

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/host"
)

// DevicePtr is an address in device memory. On the host backend it is a real
// virtual address of this process; read it from a Go kernel with Slice.
type DevicePtr uint64

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
	p, err := d.be.Malloc(n)
	if err != nil {
		return 0, backendErr(op, err)
	}
	d.mallocs.add(DevicePtr(p), n)
	return DevicePtr(p), nil
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
	if err := d.be.Free(uint64(p)); err != nil {
		return backendErr(op, err)
	}
	d.mallocs.remove(p)
	return nil
}

// IllegalAddressError is what Slice panics with when given memory that is not
// device memory; a kernel that does so fails with ErrIllegalAddress.
type IllegalAddressError struct {
	Ptr  DevicePtr
	Size uintptr
}

// IllegalAddress marks the error for the host backend, which fails the
// kernel with ErrIllegalAddress.
func (IllegalAddressError) IllegalAddress() {}

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
	if n > 0 {
		if ptr := host.Pointer(uint64(p), size); ptr != nil {
			return unsafe.Slice((*T)(ptr), n)
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
