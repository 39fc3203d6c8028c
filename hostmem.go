package gpugraph

import (
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Pinned (page-locked) host memory: MallocHost and FreeHost
// (cudaMallocHost, cudaFreeHost), HostRegister and HostUnregister
// (cudaHostRegister, cudaHostUnregister). This file keeps, per backend, the
// ranges that are pinned; lowerCopy asks it which side of a copy is.

// hostRange is one range of pinned host memory.
type hostRange struct {
	b     []byte  // the whole range; holding it keeps registered Go memory alive
	dev   *Device // the device that pinned it, which releases it at Close
	alloc bool    // MallocHost's; otherwise HostRegister's
}

func (r *hostRange) start() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(r.b))) }
func (r *hostRange) end() uintptr   { return r.start() + uintptr(len(r.b)) }

// hostRanges are the pinned ranges of the process, by backend name, each
// list sorted by start; ranges never overlap.
var hostRanges struct {
	mu     sync.RWMutex
	n      atomic.Int64 // ranges of all backends: copies skip the lookup when there are none
	ranges map[string][]hostRange
}

// pinned reports whether all of b is pinned host memory of d's backend.
// An empty b is pinned where its address is.
func (d *Device) pinned(b []byte) bool {
	if hostRanges.n.Load() == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p == 0 {
		return false
	}
	hostRanges.mu.RLock()
	defer hostRanges.mu.RUnlock()
	rs := hostRanges.ranges[d.props.Backend]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].start() > p }) - 1
	return i >= 0 && p+uintptr(len(b)) <= rs[i].end() && p < rs[i].end()
}

// pageableCopy reports whether a host side of p is pageable memory.
func (d *Device) pageableCopy(p *MemcpyParams) bool {
	return (p.SrcHost != nil && !d.pinned(p.SrcHost[:min(p.Size, len(p.SrcHost))])) ||
		(p.DstHost != nil && !d.pinned(p.DstHost[:min(p.Size, len(p.DstHost))]))
}

// findHostRangeLocked returns the index of the range of backend name that
// starts at p, or -1.
func findHostRangeLocked(name string, p uintptr) int {
	rs := hostRanges.ranges[name]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].start() >= p })
	if i < len(rs) && rs[i].start() == p {
		return i
	}
	return -1
}

// overlapsLocked reports whether [p, p+n) meets a pinned range of backend
// name.
func overlapsLocked(name string, p, n uintptr) bool {
	rs := hostRanges.ranges[name]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].start() >= p+n })
	return i > 0 && rs[i-1].end() > p
}

func addHostRangeLocked(name string, r hostRange) {
	if hostRanges.ranges == nil {
		hostRanges.ranges = map[string][]hostRange{}
	}
	rs := hostRanges.ranges[name]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].start() > r.start() })
	rs = append(rs, hostRange{})
	copy(rs[i+1:], rs[i:])
	rs[i] = r
	hostRanges.ranges[name] = rs
	hostRanges.n.Add(1)
}

func removeHostRangeLocked(name string, i int) {
	rs := hostRanges.ranges[name]
	copy(rs[i:], rs[i+1:])
	rs[len(rs)-1] = hostRange{}
	hostRanges.ranges[name] = rs[:len(rs)-1]
	hostRanges.n.Add(-1)
}

// hostMemory is d's backend's pinned host memory, or an error for opName.
func (d *Device) hostMemory(opName string) (backend.HostMemory, error) {
	if err := d.check(opName); err != nil {
		return nil, err
	}
	if err := d.unsafeCall(opName, d.mainScope(), ErrStreamCaptureUnsupported); err != nil {
		return nil, err
	}
	hm, ok := d.be.(backend.HostMemory)
	if !ok {
		return nil, newErr(opName, ErrNotSupported, "the %s backend has no pinned host memory", d.props.Backend)
	}
	return hm, nil
}

// MallocHost allocates n bytes of pinned (page-locked) host memory
// (cudaMallocHost) and returns it as a byte slice, outside the Go heap.
// Copies between it and the device run asynchronously in streams and
// overlap other work, and a graph's memcpy node reads it when the node runs
// (see MemcpyParams); copies of any other host memory do not. Pinned
// memory is scarce: the system cannot page it out. Free it with FreeHost;
// Close frees what is left. On the host backend it is memory mapped apart
// from the Go heap and locked in RAM where the system permits it.
//
// MallocHost(0) returns nil and no error; a negative n is ErrInvalidValue.
func (d *Device) MallocHost(n int) ([]byte, error) {
	const opName = "Device.MallocHost"
	hm, err := d.hostMemory(opName)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, newErr(opName, ErrInvalidValue, "negative size %d", n)
	}
	if n == 0 {
		return nil, nil
	}
	b, err := hm.MallocHost(n)
	if err != nil {
		return nil, backendErr(opName, err)
	}
	hostRanges.mu.Lock()
	addHostRangeLocked(d.props.Backend, hostRange{b: b, dev: d, alloc: true})
	hostRanges.mu.Unlock()
	return b, nil
}

// FreeHost waits for all work on the device, then frees memory that
// MallocHost returned (cudaFreeHost); b must start where that memory
// starts. Any device of the same backend may free it. The memory must not
// be used afterwards: on the host backend it is unmapped. FreeHost(nil)
// does nothing; memory that MallocHost did not return is ErrInvalidValue.
func (d *Device) FreeHost(b []byte) error {
	const opName = "Device.FreeHost"
	hm, err := d.hostMemory(opName)
	if err != nil {
		return err
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p == 0 {
		return nil
	}
	r, err := d.takeHostRange(opName, p, true)
	if err != nil {
		return err
	}
	// Queued copies may still use it: the driver's cudaFreeHost waits too.
	if err := d.releaseHostRange(opName, hm, r); err != nil {
		return err
	}
	return nil
}

// HostRegister pins b, existing host memory, as pinned memory
// (cudaHostRegister): copies with it then run as with MallocHost's memory.
// gpugraph keeps a reference to b until HostUnregister, so the garbage
// collector does not free it; Go's collector does not move heap memory, and
// the slice a caller hands over always lives in the heap. Do not register
// memory that something else may unmap or reuse while it is registered.
// Close unregisters what its device registered.
//
// An empty b is ErrInvalidValue; memory of which any byte is pinned already
// (registered, or from MallocHost) is ErrHostMemoryAlreadyRegistered.
func (d *Device) HostRegister(b []byte) error {
	const opName = "Device.HostRegister"
	hm, err := d.hostMemory(opName)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return newErr(opName, ErrInvalidValue, "empty host slice")
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hostRanges.mu.Lock()
	defer hostRanges.mu.Unlock()
	if overlapsLocked(d.props.Backend, p, uintptr(len(b))) {
		return newErr(opName, ErrHostMemoryAlreadyRegistered, "[%#x, +%d) is pinned already, in part or whole", p, len(b))
	}
	if err := hm.HostRegister(b); err != nil {
		return backendErr(opName, err)
	}
	addHostRangeLocked(d.props.Backend, hostRange{b: b, dev: d})
	return nil
}

// HostUnregister unpins memory that HostRegister pinned
// (cudaHostUnregister); b must start where the registered memory starts.
// Memory that is not registered is ErrHostMemoryNotRegistered.
func (d *Device) HostUnregister(b []byte) error {
	const opName = "Device.HostUnregister"
	hm, err := d.hostMemory(opName)
	if err != nil {
		return err
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p == 0 {
		return newErr(opName, ErrInvalidValue, "empty host slice")
	}
	r, err := d.takeHostRange(opName, p, false)
	if err != nil {
		return err
	}
	return d.releaseHostRange(opName, hm, r)
}

// takeHostRange removes the range of d's backend that starts at p and was
// pinned by MallocHost (alloc) or HostRegister, and returns it.
func (d *Device) takeHostRange(opName string, p uintptr, alloc bool) (hostRange, error) {
	hostRanges.mu.Lock()
	defer hostRanges.mu.Unlock()
	name := d.props.Backend
	i := findHostRangeLocked(name, p)
	switch {
	case i >= 0 && hostRanges.ranges[name][i].alloc == alloc:
		r := hostRanges.ranges[name][i]
		removeHostRangeLocked(name, i)
		return r, nil
	case alloc && i >= 0:
		return hostRange{}, newErr(opName, ErrInvalidValue, "%#x is registered host memory: unregister it with HostUnregister", p)
	case alloc:
		return hostRange{}, newErr(opName, ErrInvalidValue, "%#x is not the start of memory from MallocHost", p)
	case i >= 0:
		return hostRange{}, newErr(opName, ErrHostMemoryNotRegistered, "%#x is memory from MallocHost: free it with FreeHost", p)
	}
	return hostRange{}, newErr(opName, ErrHostMemoryNotRegistered, "%#x is not the start of memory that HostRegister registered", p)
}

// releaseHostRange waits for the devices that may copy r, then frees or
// unregisters it. On failure r is pinned again.
func (d *Device) releaseHostRange(opName string, hm backend.HostMemory, r hostRange) error {
	for _, x := range []*Device{d, r.dev} {
		if x != nil && !x.closed.Load() {
			x.wait(opName, x.be.Synchronize)
		}
	}
	var err error
	if r.alloc {
		err = hm.FreeHost(r.b)
	} else {
		err = hm.HostUnregister(r.b)
	}
	if err != nil {
		hostRanges.mu.Lock()
		addHostRangeLocked(d.props.Backend, r)
		hostRanges.mu.Unlock()
		return backendErr(opName, err)
	}
	return nil
}

// releaseHostMemory frees and unregisters, at Close, the pinned memory d
// pinned; d's work is done.
func (d *Device) releaseHostMemory() {
	hm, ok := d.be.(backend.HostMemory)
	if !ok || hostRanges.n.Load() == 0 {
		return
	}
	hostRanges.mu.Lock()
	var mine []hostRange
	name := d.props.Backend
	for i := 0; i < len(hostRanges.ranges[name]); {
		if r := hostRanges.ranges[name][i]; r.dev == d {
			mine = append(mine, r)
			removeHostRangeLocked(name, i)
			continue
		}
		i++
	}
	hostRanges.mu.Unlock()
	for _, r := range mine {
		if r.alloc {
			_ = hm.FreeHost(r.b)
		} else {
			_ = hm.HostUnregister(r.b)
		}
	}
}
