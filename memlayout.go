package gpugraph

import "github.com/gpugraph/gpugraph/internal/vmem"

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
	if e.be != nil {
		return e.cudaMemLayout(opName, l)
	}
	step := make([]int, len(e.ops)) // op -> index in l.Nodes
	seen := map[*Node]bool{}
	for i, n := range e.nodes {
		if seen[n] { // the exit op of a child graph node
			step[i] = step[e.opOf[n]]
			continue
		}
		seen[n] = true
		step[i] = len(l.Nodes)
		l.Nodes = append(l.Nodes, n)
	}
	var as []*graphAlloc
	byAlloc := map[*graphAlloc]int{}
	for i := range e.ops {
		o := &e.ops[i]
		switch o.kind {
		case opAlloc:
			byAlloc[o.galloc] = len(l.Allocs)
			as = append(as, o.galloc)
			l.Allocs = append(l.Allocs, MemLayoutAlloc{Alloc: e.nodes[i], Size: uint64(o.galloc.Size), Start: step[i], End: len(l.Nodes)})
		case opFree:
			if k, ok := byAlloc[o.galloc]; ok {
				l.Allocs[k].Free, l.Allocs[k].End = e.nodes[i], step[i]
			}
		}
	}
	if len(l.Allocs) == 0 {
		return l, nil
	}
	ptrs, offs, phys := e.dev.host.GraphMemIfAny().Layout(e.bind, as)
	for k := range as {
		m := &l.Allocs[k]
		m.Ptr, m.Offset, m.Phys = DevicePtr(ptrs[k]), offs[k], phys[k]
	}
	return l, nil
}

// cudaMemLayout is MemLayout on the cuda backend, read from the graph e was
// instantiated from (as it is now): addresses and order, no physical chunks.
func (e *Exec) cudaMemLayout(opName string, l MemLayout) (MemLayout, error) {
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
