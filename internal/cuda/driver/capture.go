package driver

import "unsafe"

// Stream capture. The driver ties a capture to the thread that begins it
// (in the global and thread-local modes): the caller keeps one OS thread
// for a capture's begin and end.

// StreamBeginCapture begins capturing stream into a new graph, in the
// CUstreamCaptureMode mode.
func (d *Driver) StreamBeginCapture(stream uintptr, mode int) error {
	return d.call("cuStreamBeginCapture_v2", stream, uintptr(mode))
}

// StreamBeginCaptureToGraph begins capturing stream into g, after deps
// (with data, or default edges for a nil data).
func (d *Driver) StreamBeginCaptureToGraph(stream, g uintptr, deps []uintptr, data []GraphEdgeData, mode int) error {
	return d.call("cuStreamBeginCaptureToGraph", stream, g, uintptr(sliceptr(deps)), uintptr(sliceptr(data)), uintptr(len(deps)), uintptr(mode))
}

// StreamEndCapture ends a capture and returns its graph.
func (d *Driver) StreamEndCapture(stream uintptr) (uintptr, error) {
	var g uintptr
	err := d.call("cuStreamEndCapture", stream, uintptr(unsafe.Pointer(&g)))
	return g, err
}

// StreamUpdateCaptureDependencies sets (flags 1) or adds to (flags 0) the
// dependencies of the next captured node.
func (d *Driver) StreamUpdateCaptureDependencies(stream uintptr, deps []uintptr, data []GraphEdgeData, flags uint32) error {
	return d.call("cuStreamUpdateCaptureDependencies_v2", stream, uintptr(sliceptr(deps)), uintptr(sliceptr(data)), uintptr(len(deps)), uintptr(flags))
}

// CaptureInfo is what cuStreamGetCaptureInfo_v3 reports, its arrays copied
// from the driver's.
type CaptureInfo struct {
	Status int // CUstreamCaptureStatus: NONE 0, ACTIVE 1, INVALIDATED 2
	ID     uint64
	Graph  uintptr         // the graph being captured (while active)
	Deps   []uintptr       // the dependencies of the next captured node
	Data   []GraphEdgeData // their edges' data; nil when all default
}

// StreamGetCaptureInfo reports a stream's capture.
func (d *Driver) StreamGetCaptureInfo(stream uintptr) (CaptureInfo, error) {
	var (
		st    int32
		id    uint64
		graph uintptr
		deps  uintptr // const CUgraphNode*, owned by the driver
		data  uintptr // const CUgraphEdgeData*, owned by the driver
		n     uintptr
	)
	err := d.call("cuStreamGetCaptureInfo_v3", stream, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&id)),
		uintptr(unsafe.Pointer(&graph)), uintptr(unsafe.Pointer(&deps)), uintptr(unsafe.Pointer(&data)), uintptr(unsafe.Pointer(&n)))
	if err != nil {
		return CaptureInfo{}, err
	}
	info := CaptureInfo{Status: int(st), ID: id, Graph: graph}
	if st == 1 && n > 0 { // the arrays are set while the capture is active
		info.Deps, info.Data = cArray[uintptr](deps, n), cArray[GraphEdgeData](data, n)
	}
	return info, nil
}
