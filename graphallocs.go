package gpugraph

import (
	"fmt"
	"sort"
	"sync"
)

// The address ranges of alloc nodes, by the graph that owns them, for the
// rule that a memcpy node cannot address another graph's allocation.

// allocRange is the range of one alloc node.
type allocRange struct {
	start, end uint64
	node       *Node
	top        *Graph // the graph the node's graph is embedded in, at the top
}

// allocRanges are the alloc node ranges of a device's live graphs, by
// start address.
type allocRanges struct {
	mu     sync.Mutex
	ranges []allocRange
	maxLen uint64 // the longest range's length, which bounds a lookup's scan
}

// add records alloc node n's range [p, p+size).
func (r *allocRanges) add(n *Node, p DevicePtr, size int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := allocRange{start: uint64(p), end: uint64(p) + uint64(size), node: n, top: n.g.top()}
	i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].start > a.start })
	r.ranges = append(r.ranges, allocRange{})
	copy(r.ranges[i+1:], r.ranges[i:])
	r.ranges[i] = a
	r.maxLen = max(r.maxLen, a.end-a.start)
}

// dropGraph forgets the ranges of the alloc nodes of top-level graph g.
func (r *allocRanges) dropGraph(g *Graph) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := 0
	for _, a := range r.ranges {
		if a.top != g {
			r.ranges[k] = a
			k++
		}
	}
	clear(r.ranges[k:])
	r.ranges = r.ranges[:k]
}

// foreign returns the alloc node of a graph other than top whose range
// holds a byte of [p, p+n), or nil.
func (r *allocRanges) foreign(top *Graph, p uint64, n int) *Node {
	if n <= 0 || p == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	end := p + uint64(n)
	// Ranges of one graph may overlap (reuse after a free): scan those
	// starting before end, down to the first that cannot reach p.
	i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].start >= end })
	for j := i - 1; j >= 0 && r.ranges[j].start+r.maxLen > p; j-- {
		if a := r.ranges[j]; a.end > p && a.top != top {
			return a.node
		}
	}
	return nil
}

// top is the graph g is embedded in at the top: g itself unless g is a
// child graph node's graph or a conditional body.
func (g *Graph) top() *Graph {
	for g.parent != nil {
		g = g.parent.g
	}
	return g
}

// checkForeignCopy applies, for a memcpy node added to g or set on one of
// its nodes with the explicit API, the driver's rule: the node cannot copy
// to or from the address range of an alloc node of another graph
// (cuGraphAddMemcpyNode refuses it with CUDA_ERROR_INVALID_VALUE), even if
// the copy's graph is later embedded in the allocation's.
//
// Memset nodes follow the same rule (measured: cuGraphAddMemsetNode on
// another graph's allocation, tools/probe/memupdate.cu cases 3 and 7, and
// a differential input on an H100): the range checked is from the first
// byte set to the last.
func (g *Graph) checkForeignCopy(opName string, on *Device, p NodeParams) error {
	if m, ok := p.(MemsetParams); ok {
		n := m.Width * m.ElementSize
		if m.Height > 1 {
			n += (m.Height - 1) * m.Pitch
		}
		if n <= 0 {
			return nil
		}
		for _, d := range []*Device{g.dev, on} {
			if d == nil {
				continue
			}
			if a := d.allocs.foreign(g.top(), uint64(m.Dst), n); a != nil {
				return newErr(opName, ErrInvalidValue, "the destination [%#x, +%d) is memory of %s of another graph: "+
					"a memset node can set graph memory only of its own graph's alloc nodes", uint64(m.Dst), n, describeAlloc(a))
			}
		}
		return nil
	}
	c, ok := p.(MemcpyParams)
	if !ok || c.Size <= 0 {
		return nil
	}
	top := g.top()
	for _, side := range []struct {
		name string
		ptr  DevicePtr
		host []byte
	}{{"destination", c.Dst, c.DstHost}, {"source", c.Src, c.SrcHost}} {
		if side.host != nil {
			continue
		}
		for _, d := range []*Device{g.dev, on} {
			if d == nil {
				continue
			}
			if a := d.allocs.foreign(top, uint64(side.ptr), c.Size); a != nil {
				return newErr(opName, ErrInvalidValue, "the %s [%#x, +%d) is memory of %s of another graph: "+
					"a memcpy node can copy graph memory only of its own graph's alloc nodes", side.name, uint64(side.ptr), c.Size, describeAlloc(a))
			}
		}
	}
	return nil
}

// describeAlloc names alloc node a for an error.
func describeAlloc(a *Node) string {
	return fmt.Sprintf("%v", a)
}
