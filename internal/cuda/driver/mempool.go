package driver

import "unsafe"

// Memory pools (CUmemoryPool), stream-ordered allocation and the graph
// allocator's attributes.

// DeviceGetDefaultMemPool returns a device's default pool.
func (d *Driver) DeviceGetDefaultMemPool(dev int) (uintptr, error) {
	var p uintptr
	err := d.call("cuDeviceGetDefaultMemPool", uintptr(unsafe.Pointer(&p)), uintptr(dev))
	return p, err
}

// MemPoolCreate creates a pool with props, laid out in m (held locked).
func (d *Driver) MemPoolCreate(m *CMem, props MemPoolProps) (uintptr, error) {
	var p uintptr
	err := d.call("cuMemPoolCreate", uintptr(unsafe.Pointer(&p)), uintptr(unsafe.Pointer(put(m, &props))))
	return p, err
}

func (d *Driver) MemPoolDestroy(pool uintptr) error { return d.call("cuMemPoolDestroy", pool) }

func (d *Driver) MemPoolTrimTo(pool uintptr, minBytesToKeep uint64) error {
	return d.call("cuMemPoolTrimTo", pool, uintptr(minBytesToKeep))
}

// MemPoolSetAttribute sets a CUmemPool_attribute whose value is a
// cuuint64_t (the release threshold, the high watermarks).
func (d *Driver) MemPoolSetAttribute(pool uintptr, attr int, v uint64) error {
	return d.call("cuMemPoolSetAttribute", pool, uintptr(attr), uintptr(unsafe.Pointer(&v)))
}

// MemPoolGetAttribute reads a cuuint64_t CUmemPool_attribute.
func (d *Driver) MemPoolGetAttribute(pool uintptr, attr int) (uint64, error) {
	var v uint64
	err := d.call("cuMemPoolGetAttribute", pool, uintptr(attr), uintptr(unsafe.Pointer(&v)))
	return v, err
}

// MemPoolSetAccess sets how devices may access the pool's memory; the
// descriptors are laid out in m (held locked).
func (d *Driver) MemPoolSetAccess(m *CMem, pool uintptr, descs []MemAccessDesc) error {
	return d.call("cuMemPoolSetAccess", pool, putSlice(m, descs), uintptr(len(descs)))
}

// MemAllocFromPoolAsync allocates n bytes from pool in stream order.
func (d *Driver) MemAllocFromPoolAsync(n int, pool, stream uintptr) (uint64, error) {
	var p uint64
	err := d.call("cuMemAllocFromPoolAsync", uintptr(unsafe.Pointer(&p)), uintptr(n), pool, stream)
	return p, err
}

func (d *Driver) MemFreeAsync(p uint64, stream uintptr) error {
	return d.call("cuMemFreeAsync", uintptr(p), stream)
}

// DeviceGetGraphMemAttribute reads a CUgraphMem_attribute (all are
// cuuint64_t).
func (d *Driver) DeviceGetGraphMemAttribute(dev, attr int) (uint64, error) {
	var v uint64
	err := d.call("cuDeviceGetGraphMemAttribute", uintptr(dev), uintptr(attr), uintptr(unsafe.Pointer(&v)))
	return v, err
}

// DeviceSetGraphMemAttribute sets a CUgraphMem_attribute (the high
// watermarks, to 0 only).
func (d *Driver) DeviceSetGraphMemAttribute(dev, attr int, v uint64) error {
	return d.call("cuDeviceSetGraphMemAttribute", uintptr(dev), uintptr(attr), uintptr(unsafe.Pointer(&v)))
}

func (d *Driver) DeviceGraphMemTrim(dev int) error {
	return d.call("cuDeviceGraphMemTrim", uintptr(dev))
}
