package gpugraph

import (
	"fmt"

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
// (cudaDeviceGetGraphMemAttribute): Used is physical memory currently
// associated with graphs or live graph allocations, Reserved is that plus
// memory cached for reuse; High values are high-water marks.
type GraphMemStats struct {
	UsedCurrent, UsedHigh         uint64
	ReservedCurrent, ReservedHigh uint64
}

// graphAlloc is one alloc node's allocation: its address range and
// lifetimes, kept by the host backend's graph memory (host.GraphMem).
type graphAlloc = host.GraphAlloc

// graphMemory returns the device's graph memory, creating it on first use.
func (d *Device) graphMemory() (*host.GraphMem, error) {
	return d.host.GraphMem()
}

// place assigns the address range of a new alloc node n of g (g is
// locked). The rule is DESIGN.md §3's: the range may overlap no allocation
// of g still possibly live when n runs, that is, none but those whose free
// node is an ancestor of n.
func place(gm *host.GraphMem, g *Graph, n *Node, size int) (*graphAlloc, error) {
	anc := ancestors(n)
	reusable := func(a *graphAlloc) bool {
		f, _ := a.FreedBy.(*Node)
		return f != nil && anc[f]
	}
	return gm.Place(&g.va, size, reusable, n, fmt.Sprintf("%v of graph %d", n, g.id))
}

// ancestors returns the set of nodes n transitively depends on.
func ancestors(n *Node) map[*Node]bool {
	seen := map[*Node]bool{}
	stack := append([]*Node(nil), n.deps...)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, x.deps...)
	}
	return seen
}

// GraphMemStats reports the device's graph memory footprint.
func (d *Device) GraphMemStats() (GraphMemStats, error) {
	if err := d.check("Device.GraphMemStats"); err != nil {
		return GraphMemStats{}, err
	}
	if d.cuda != nil {
		return d.cudaGraphMemStats("Device.GraphMemStats")
	}
	return GraphMemStats(d.gmIfAny().Stats()), nil
}

// ResetGraphMemHigh sets the high-water marks to the current values
// (cudaDeviceSetGraphMemAttribute of the High attributes to 0).
func (d *Device) ResetGraphMemHigh() error {
	if err := d.check("Device.ResetGraphMemHigh"); err != nil {
		return err
	}
	if d.cuda != nil {
		return d.cudaResetGraphMemHigh("Device.ResetGraphMemHigh")
	}
	d.gmIfAny().ResetHigh()
	return nil
}

// TrimGraphMem returns graph memory that is not in use to the system
// (cudaDeviceGraphMemTrim): memory cached for reuse, and the memory of
// streams whose graphs are neither running nor queued. Live allocations
// keep theirs. Graphs it unmaps are mapped again when next launched.
func (d *Device) TrimGraphMem() error {
	if err := d.check("Device.TrimGraphMem"); err != nil {
		return err
	}
	if d.cuda != nil {
		return d.cudaTrimGraphMem("Device.TrimGraphMem")
	}
	d.gmIfAny().Trim()
	return nil
}

// GraphMemNodesSupported reports whether the device supports graph memory
// nodes: a driver of CUDA 11.4 or later with memory pools, as seed 001 §2
// checks.
func (d *Device) GraphMemNodesSupported() bool {
	p := d.props
	return p.DriverVersion >= 11040 && p.MemoryPoolsSupported
}

func (d *Device) gmIfAny() *host.GraphMem {
	return d.host.GraphMemIfAny()
}

// graphBytes returns [p, p+n) as bytes if it lies inside one graph
// allocation, or handled=false if p is not graph memory.
func (d *Device) graphBytes(p DevicePtr, n int) ([]byte, bool, error) {
	return d.gmIfAny().Bytes(uint64(p), n)
}

// checkMemParams validates the parameters of a memory node that need no
// graph state.
func (d *Device) checkMemParams(opName string, p NodeParams) error {
	switch p := p.(type) {
	case MemAllocParams:
		if p.Size <= 0 {
			return newErr(opName, ErrInvalidValue, "allocation of %d bytes", p.Size)
		}
		if p.Location != 0 {
			return newErr(opName, ErrInvalidDevice, "device %d does not exist", p.Location)
		}
		for _, a := range p.Access {
			if a.Device != 0 {
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

// addMemNode gives a new alloc node its address, or checks what a new free
// node frees. g is locked; n is not yet in the graph.
func addMemNode(gm *host.GraphMem, opName string, g *Graph, n *Node) error {
	switch p := n.params.(type) {
	case MemAllocParams:
		a, err := place(gm, g, n, p.Size)
		if err != nil {
			return newErr(opName, ErrMemoryAllocation, "no address space for %d bytes: %v", p.Size, err)
		}
		n.alloc = a
		p.Ptr = DevicePtr(gm.Ptr(a))
		p.Access = append([]MemAccessDesc(nil), p.Access...)
		n.params = p
	case MemFreeParams:
		a, why := gm.FreeTarget(g.va, uint64(p.Ptr))
		if a == nil {
			return newErr(opName, ErrInvalidValue, "%s", why)
		}
		if a.VA() == g.va {
			a.FreedBy = n
		}
		n.alloc = a
	}
	return nil
}

// issueLaunch applies a launch of e to allocation state at call time, under
// the launching stream's lock: it refuses a relaunch while an allocation of
// the previous launch is outstanding (unless e frees them on launch), and a
// free node for an allocation that is not outstanding.
func issueLaunch(gm *host.GraphMem, opName string, e *Exec) error {
	if n, why := gm.IssueLaunch(e.bind.Persist(), e.frees, e.freeNodes, e.autoFree); n != nil {
		return nodeErr(opName, n.(*Node), ErrInvalidValue, "%s", why)
	}
	return nil
}

// FreeAsync frees memory in stream order (cudaFreeAsync): a graph allocation
// that is live after its graph's launch, or memory from MallocAsync. Work
// queued in s before the free may still use the memory; nothing after it
// may.
func (s *Stream) FreeAsync(p DevicePtr) error {
	const opName = "Stream.FreeAsync"
	if err := s.usable(opName); err != nil {
		return err
	}
	if p == 0 {
		return nil // cudaFreeAsync(NULL) succeeds
	}
	if s.be != nil {
		return s.cudaFreeAsync(opName, p)
	}
	if s.capturing.Load() {
		if _, captured, err := s.captureNode(opName, MemFreeParams{p}); captured {
			return err
		}
	}
	if gm := s.dev.gmIfAny(); gm.Contains(uint64(p)) {
		var a *graphAlloc
		return s.enqueue(opName, op{kind: opCall, host: func() { gm.Freed(a, true) }}, func() (uint64, error) {
			var err error
			if a, _, err = gm.TakeOutstanding(uint64(p)); err != nil {
				return 0, newErr(opName, ErrInvalidValue, "%v", err)
			}
			return 0, nil
		})
	}
	if handled, err := s.dev.poolFreeAsync(opName, p, s); handled {
		return err
	}
	return newErr(opName, ErrInvalidValue, "%#x was not allocated by MallocAsync or by a graph", uint64(p))
}

// freeGraphAlloc frees a graph allocation synchronously (the caller has synchronized
// the device), reporting handled=false if p is not graph memory.
func (d *Device) freeGraphAlloc(opName string, p DevicePtr) (bool, error) {
	handled, err := d.gmIfAny().Free(uint64(p))
	if err != nil {
		return true, newErr(opName, ErrInvalidValue, "%v", err)
	}
	return handled, nil
}
