package driver

import "unsafe"

// GraphEdgeData is CUgraphEdgeData: ports and type as unsigned chars, then
// five reserved bytes that must be zero. A nil []GraphEdgeData passes NULL,
// which the driver takes for default data on every edge.
type GraphEdgeData struct {
	FromPort uint8
	ToPort   uint8
	Type     uint8
	_        [5]uint8
}

// GraphAddDependencies adds the edges from[i] -> to[i], with data[i] if
// data is not nil.
func (d *Driver) GraphAddDependencies(g uintptr, from, to []uintptr, data []GraphEdgeData) error {
	return d.call("cuGraphAddDependencies_v2", g, uintptr(sliceptr(from)), uintptr(sliceptr(to)), uintptr(sliceptr(data)), uintptr(len(from)))
}

// GraphRemoveDependencies removes the edges from[i] -> to[i], which have
// data[i] if data is not nil.
func (d *Driver) GraphRemoveDependencies(g uintptr, from, to []uintptr, data []GraphEdgeData) error {
	return d.call("cuGraphRemoveDependencies_v2", g, uintptr(sliceptr(from)), uintptr(sliceptr(to)), uintptr(sliceptr(data)), uintptr(len(from)))
}

// GraphNodeGetDependencies returns a node's dependencies and the data of
// their edges (asking without the data fails with CUDA_ERROR_LOSSY_QUERY
// when some is not default).
func (d *Driver) GraphNodeGetDependencies(node uintptr) ([]uintptr, []GraphEdgeData, error) {
	var k uintptr
	if err := d.call("cuGraphNodeGetDependencies_v2", node, 0, 0, uintptr(unsafe.Pointer(&k))); err != nil || k == 0 {
		return nil, nil, err
	}
	deps := make([]uintptr, k)
	data := make([]GraphEdgeData, k)
	err := d.call("cuGraphNodeGetDependencies_v2", node, uintptr(sliceptr(deps)), uintptr(sliceptr(data)), uintptr(unsafe.Pointer(&k)))
	return deps[:k], data[:k], err
}

// cArray copies n elements of a driver-owned C array at p, or returns nil
// for NULL.
func cArray[T any](p uintptr, n uintptr) []T {
	if p == 0 {
		return nil
	}
	src := *(**T)(unsafe.Pointer(&p)) // p is a C pointer
	out := make([]T, n)
	copy(out, unsafe.Slice(src, n))
	return out
}
