package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/host"
)

// MemAllocParams describe an allocation node (cudaMemAllocNodeParams).
type MemAllocParams struct {
	Size     int             // bytes, at least 1
	Location int             // the resident device's ordinal
	Access   []MemAccessDesc // other devices that may access the memory
	// Ptr is the allocation's address, assigned when the node is created
	// and fixed for the node's life; ignored when adding a node.
	Ptr DevicePtr
}

// MemAccessDesc grants a device read-write access to an allocation, as
// cudaMemAccessDesc with cudaMemAccessFlagsProtReadWrite (the only access
// alloc nodes support).
type MemAccessDesc struct{ Device int }

// MemFreeParams describe a free node: Ptr is a graph allocation's address.
type MemFreeParams struct{ Ptr DevicePtr }

func (MemAllocParams) NodeType() NodeType { return NodeMemAlloc }
func (MemFreeParams) NodeType() NodeType  { return NodeMemFree }

// GraphMemStats report the device's graph memory
// (cudaDeviceGetGraphMemAttribute): Used is physical memory that graphs
// map (the memory of the streams they were launched or uploaded into, live
// graph allocations, and freed ones until the next TrimGraphMem), Reserved
// is what the device holds for graphs (equal to Used on the host backend,
// as the driver reports them); High values are high-water marks. They
// change when a launch, upload, free or trim is called, not when queued
// work runs.
type GraphMemStats struct {
	UsedCurrent, UsedHigh         uint64
	ReservedCurrent, ReservedHigh uint64
}

// GraphMemStats reports the device's graph memory footprint.
func (d *Device) GraphMemStats() (GraphMemStats, error) {
	if err := d.check("Device.GraphMemStats"); err != nil {
		return GraphMemStats{}, err
	}
	gm, ok := d.be.(backend.GraphMemory)
	if !ok {
		return GraphMemStats{}, nil
	}
	st, err := gm.GraphMemStats()
	return GraphMemStats(st), backendErr("Device.GraphMemStats", err)
}

// ResetGraphMemHigh sets the high-water marks to the current values
// (cudaDeviceSetGraphMemAttribute of the High attributes to 0).
func (d *Device) ResetGraphMemHigh() error {
	if err := d.check("Device.ResetGraphMemHigh"); err != nil {
		return err
	}
	if gm, ok := d.be.(backend.GraphMemory); ok {
		return backendErr("Device.ResetGraphMemHigh", gm.ResetGraphMemHigh())
	}
	return nil
}

// TrimGraphMem returns graph memory that is not in use to the system
// (cudaDeviceGraphMemTrim): the memory of freed graph allocations, and
// stream memory that no graph running or queued when it is called maps (a
// graph uploaded and not yet launched counts as queued). Live allocations
// keep theirs. Graphs it unmaps are mapped again when next launched.
func (d *Device) TrimGraphMem() error {
	if err := d.check("Device.TrimGraphMem"); err != nil {
		return err
	}
	if gm, ok := d.be.(backend.GraphMemory); ok {
		return backendErr("Device.TrimGraphMem", gm.TrimGraphMem())
	}
	return nil
}

// GraphMemNodesSupported reports whether the device supports graph memory
// nodes: a driver of CUDA 11.4 or later with memory pools, as the CUDA
// guide's graph memory chapter checks.
func (d *Device) GraphMemNodesSupported() bool {
	p := d.props
	return p.DriverVersion >= 11040 && p.MemoryPoolsSupported
}

// checkMemParams validates the parameters of a memory node that need no
// graph state.
func (d *Device) checkMemParams(opName string, p NodeParams) error {
	switch p := p.(type) {
	case MemAllocParams:
		if p.Size <= 0 {
			return newErr(opName, ErrInvalidValue, "allocation of %d bytes", p.Size)
		}
		n, err := DeviceCount(d.props.Backend)
		if err != nil {
			return withOp(opName, err)
		}
		switch {
		case p.Location < 0 || p.Location >= n:
			return newErr(opName, ErrInvalidDevice, "device %d does not exist", p.Location)
		case p.Location != d.props.Ordinal:
			return newErr(opName, ErrNotSupported, "an allocation resident on device %d in a graph of device %d: "+
				"a graph's allocations are its device's (graphs of several devices are not supported yet)", p.Location, d.props.Ordinal)
		}
		for _, a := range p.Access {
			if a.Device < 0 || a.Device >= n {
				return newErr(opName, ErrInvalidDevice, "access for device %d, which does not exist", a.Device)
			}
		}
		if uint64(p.Size) > host.GraphVASize/2 {
			return newErr(opName, ErrMemoryAllocation, "allocation of %d bytes", p.Size)
		}
	case MemFreeParams:
		if p.Ptr == 0 {
			return newErr(opName, ErrInvalidValue, "free of a null pointer")
		}
	}
	return nil
}

// FreeAsync frees memory in stream order (cudaFreeAsync): a graph allocation
// that is live after its graph's launch, or memory from MallocAsync. Work
// queued in s before the free may still use the memory; nothing after it
// may. A graph allocation's memory stays in the used graph memory
// (GraphMemStats) until the next TrimGraphMem.
func (s *Stream) FreeAsync(p DevicePtr) error {
	const opName = "Stream.FreeAsync"
	if err := s.usable(opName); err != nil {
		return err
	}
	if p == 0 {
		return nil // cudaFreeAsync(NULL) succeeds
	}
	if s.capturing.Load() {
		if _, captured, err := s.captureNode(opName, MemFreeParams{p}); captured {
			return err
		}
	}
	f, ok := s.dev.be.(freeAsyncer)
	if !ok {
		return newErr(opName, ErrNotSupported, "the backend has no stream-ordered allocation")
	}
	return backendErr(opName, s.issue(opName, func() error {
		w := s.nativeWorkBegin()
		err := f.FreeAsync(s.be, uint64(p))
		w.end(s, err)
		return err
	}))
}

// freeAsyncer is implemented by devices with stream-ordered frees
// (cudaFreeAsync): of pool memory, and of graph allocations.
type freeAsyncer interface {
	FreeAsync(s backend.Stream, p uint64) error
}
