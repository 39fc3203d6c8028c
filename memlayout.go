package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/host"
	"github.com/gpugraph/gpugraph/internal/vmem"
)

// MemLayout is where the allocations of an executable graph live, in the
// order the graph runs: which virtual range each allocation holds, from
// which node to which, and (on the host backend) which physical memory backs
// it. Allocations that reuse an address, or share physical chunks, are the
// graph's memory reuse made visible (`gpugraph train --timeline` draws it).
type MemLayout struct {
	Nodes      []*Node // an execution order of the graph's nodes, child graphs inlined
	Allocs     []MemLayoutAlloc
	ChunkBytes uint64 // the granularity of physical mapping
}

// MemLayoutAlloc is one graph allocation of a MemLayout.
type MemLayoutAlloc struct {
	Alloc, Free  *Node // Free is nil when the graph does not free it
	Ptr          DevicePtr
	Offset, Size uint64 // Offset: from the lowest address of the graph's allocations
	Start, End   int    // indexes in Nodes of the alloc and free nodes; End = len(Nodes) if not freed
	// Phys is the physical chunk mapped under each chunk the allocation's
	// range overlaps (chunk Offset/ChunkBytes + i for Phys[i]), on the host
	// backend once the graph was launched or uploaded; nil otherwise (the
	// driver does not say).
	Phys []int
}

// MemLayout returns the layout of e's graph allocations.
func (e *Exec) MemLayout() (MemLayout, error) {
	const opName = "Exec.MemLayout"
	if err := e.check(opName); err != nil {
		return MemLayout{}, err
	}
	l := MemLayout{ChunkBytes: vmem.Granularity}
	lo, ok := e.be.(layouter)
	if !ok {
		return e.nativeMemLayout(opName, l)
	}
	order, allocs := lo.Layout()
	l.Nodes = make([]*Node, len(order))
	for i, t := range order {
		l.Nodes[i] = t.(*Node)
	}
	for _, a := range allocs {
		m := MemLayoutAlloc{Alloc: a.Alloc.(*Node), Ptr: DevicePtr(a.Ptr), Offset: a.Offset, Size: uint64(a.Size),
			Start: a.Start, End: a.End, Phys: a.Phys}
		m.Free, _ = a.Free.(*Node)
		l.Allocs = append(l.Allocs, m)
	}
	return l, nil
}

// layouter is implemented by executable graphs whose backend maps their
// memory itself (host): where each allocation lives.
type layouter interface {
	Layout() (order []any, allocs []host.LayoutAlloc)
}

// nativeMemLayout is MemLayout on the cuda backend, read from the graph e was
// instantiated from (as it is now): addresses and order, no physical chunks.
func (e *Exec) nativeMemLayout(opName string, l MemLayout) (MemLayout, error) {
	g := e.src
	if g == nil {
		return l, newErr(opName, ErrInvalidValue, "the graph the executable graph was instantiated from is not known")
	}
	if err := g.lock(opName); err != nil {
		return l, err
	}
	defer g.mu.Unlock()
	order, _ := topoOrder(g.nodes)
	l.Nodes = order
	byPtr := map[DevicePtr]int{}
	base := ^DevicePtr(0)
	for i, n := range order {
		switch p := n.params.(type) {
		case MemAllocParams:
			byPtr[p.Ptr] = len(l.Allocs)
			l.Allocs = append(l.Allocs, MemLayoutAlloc{Alloc: n, Ptr: p.Ptr, Size: uint64(p.Size), Start: i, End: len(order)})
			base = min(base, p.Ptr)
		case MemFreeParams:
			if k, ok := byPtr[p.Ptr]; ok {
				l.Allocs[k].Free, l.Allocs[k].End = n, i
			}
		}
	}
	for i := range l.Allocs {
		l.Allocs[i].Offset = uint64(l.Allocs[i].Ptr - base)
	}
	return l, nil
}
