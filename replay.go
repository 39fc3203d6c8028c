package gpugraph

import "errors"

// CapturedGraph is a function captured from a stream, ready to replay (see
// the Capture and replay section of the package documentation).
type CapturedGraph struct {
	s     *Stream
	graph *Graph
	exec  *Exec
}

// CaptureOptions tune Capture. The zero value captures once, with no
// warm-up, in CaptureModeGlobal.
type CaptureOptions struct {
	// Warmup is how many times fn runs on the stream, eagerly, before the
	// capture; the stream is synchronized after it.
	Warmup int
	// Mode is the capture mode (CaptureModeGlobal by default).
	Mode CaptureMode
}

// Capture runs fn opts.Warmup times on s, then captures one more call of
// fn into a graph and instantiates it. fn must issue its work on the stream
// it is given and must not synchronize it. If fn fails during the capture,
// the capture is ended and its error returned.
func Capture(s *Stream, fn func(s *Stream) error, opts CaptureOptions) (*CapturedGraph, error) {
	const opName = "Capture"
	if fn == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil function")
	}
	if opts.Warmup < 0 {
		return nil, newErr(opName, ErrInvalidValue, "negative warm-up count %d", opts.Warmup)
	}
	if err := s.check(opName); err != nil {
		return nil, err
	}
	for i := 0; i < opts.Warmup; i++ {
		if err := fn(s); err != nil {
			return nil, err
		}
	}
	if opts.Warmup > 0 {
		if err := s.Synchronize(); err != nil {
			return nil, err
		}
	}
	if err := s.BeginCapture(opts.Mode); err != nil {
		return nil, err
	}
	if err := fn(s); err != nil {
		if g, endErr := s.EndCapture(); endErr == nil {
			g.Destroy()
		}
		return nil, err
	}
	g, err := s.EndCapture()
	if err != nil {
		return nil, err
	}
	e, err := g.Instantiate(InstantiateAutoFreeOnLaunch)
	if err != nil {
		g.Destroy()
		return nil, err
	}
	return &CapturedGraph{s: s, graph: g, exec: e}, nil
}

// Replay launches the captured work once into the stream it was captured
// from. Like any launch it is asynchronous: synchronize the stream (or
// record an event) before reading the outputs on the host.
func (c *CapturedGraph) Replay() error {
	if c == nil || c.exec == nil {
		return newErr("CapturedGraph.Replay", ErrInvalidResourceHandle, "nil or destroyed captured graph")
	}
	return withOp("CapturedGraph.Replay", c.exec.Launch(c.s))
}

// Graph is the captured graph (for inspection: nodes, DOT output).
func (c *CapturedGraph) Graph() *Graph { return c.graph }

// Exec is the executable graph Replay launches (for Update, memory layout).
func (c *CapturedGraph) Exec() *Exec { return c.exec }

// Destroy releases the executable graph and the graph. Replays already
// queued still run; static outputs stay allocated until freed.
func (c *CapturedGraph) Destroy() error {
	if c == nil || c.exec == nil {
		return newErr("CapturedGraph.Destroy", ErrInvalidResourceHandle, "nil or destroyed captured graph")
	}
	err := errors.Join(c.exec.Destroy(), c.graph.Destroy())
	c.exec, c.graph = nil, nil
	return err
}

// MemoryStats are a device's memory statistics in PyTorch's terms: the
// default stream-ordered pool (Stream.MallocAsync, PyTorch's caching
// allocator), graph memory (alloc nodes), and memory from Malloc. Allocated
// counts bytes of live allocations, Reserved the bytes the allocator holds
// from the device (PyTorch's "cached"); the Peak fields are high-water marks
// since the device opened or ResetPeakMemory.
type MemoryStats struct {
	// Malloc is the bytes of live Malloc allocations (asked for: the
	// allocator's rounding is not counted), memory held outside both
	// allocators below; it counts as allocated and reserved.
	Malloc uint64

	Allocated, AllocatedPeak uint64 // default pool: memory_allocated, max_memory_allocated
	Reserved, ReservedPeak   uint64 // default pool: memory_reserved, max_memory_reserved

	GraphAllocated, GraphAllocatedPeak uint64 // graph memory in use by live graph allocations
	GraphReserved, GraphReservedPeak   uint64 // graph memory held (physical memory mapped)
}

// TotalAllocated is the memory in live allocations of every kind.
func (m MemoryStats) TotalAllocated() uint64 { return m.Malloc + m.Allocated + m.GraphAllocated }

// TotalReserved is the memory held: Malloc allocations and what both
// allocators reserve.
func (m MemoryStats) TotalReserved() uint64 { return m.Malloc + m.Reserved + m.GraphReserved }

// MemoryStats returns the device's memory statistics.
func (d *Device) MemoryStats() (MemoryStats, error) {
	if err := d.check("Device.MemoryStats"); err != nil {
		return MemoryStats{}, err
	}
	p := d.DefaultMemPool().Stats()
	g, err := d.GraphMemStats()
	if err != nil {
		return MemoryStats{}, withOp("Device.MemoryStats", err)
	}
	return MemoryStats{
		Malloc:    d.mallocs.live(),
		Allocated: p.UsedCurrent, AllocatedPeak: p.UsedHigh,
		Reserved: p.ReservedCurrent, ReservedPeak: p.ReservedHigh,
		GraphAllocated: g.UsedCurrent, GraphAllocatedPeak: g.UsedHigh,
		GraphReserved: g.ReservedCurrent, GraphReservedPeak: g.ReservedHigh,
	}, nil
}

// ResetPeakMemory resets the peaks of MemoryStats to the current values
// (torch.cuda.reset_peak_memory_stats).
func (d *Device) ResetPeakMemory() error {
	if err := d.check("Device.ResetPeakMemory"); err != nil {
		return err
	}
	d.DefaultMemPool().ResetHigh()
	return withOp("Device.ResetPeakMemory", d.ResetGraphMemHigh())
}
