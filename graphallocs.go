package gpugraph

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// freedAllocs counts, over all devices, the recorded allocations that
// their graph frees: while there are none, instantiation skips the
// foreign-memset walk.
var freedAllocs atomic.Int64

// The address ranges of alloc nodes, by the graph that owns them, for the
// rule that a memset or memcpy node cannot address an allocation that
// another graph frees.

// allocRange is the range of one alloc node.
type allocRange struct {
	start, end uint64
	node       *Node
	top        *Graph // the graph the node's graph is embedded in, at the top
	freed      bool   // top has a free node of the allocation
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

// markFreed records that top-level graph top frees the allocation at p
// (a free node was added to it, or to a graph embedded in it).
func (r *allocRanges) markFreed(top *Graph, p uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].start >= p })
	for ; i < len(r.ranges) && r.ranges[i].start == p; i++ {
		if r.ranges[i].top == top && !r.ranges[i].freed {
			r.ranges[i].freed = true
			freedAllocs.Add(1)
		}
	}
}

// holds reports whether an alloc node of a live graph holds address p.
func (r *allocRanges) holds(p uint64) bool {
	return r.find(p, 1, func(allocRange) bool { return true }) != nil
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
		} else if a.freed {
			freedAllocs.Add(-1)
		}
	}
	clear(r.ranges[k:])
	r.ranges = r.ranges[:k]
}

// foreign returns the alloc node of a graph other than top, which that
// graph frees, whose range holds a byte of [p, p+n), or nil.
func (r *allocRanges) foreign(top *Graph, p uint64, n int) *Node {
	if p == 0 {
		return nil
	}
	return r.find(p, n, func(a allocRange) bool { return a.top != top && a.freed })
}

// find returns the alloc node of the first range, by descending start, that
// holds a byte of [p, p+n) and that keep accepts, or nil.
func (r *allocRanges) find(p uint64, n int, keep func(allocRange) bool) *Node {
	if n <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	end := p + uint64(n)
	// Ranges of one graph may overlap (reuse after a free): scan those
	// starting before end, down to the first that cannot reach p.
	i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].start >= end })
	for j := i - 1; j >= 0 && r.ranges[j].start+r.maxLen > p; j-- {
		if a := r.ranges[j]; a.end > p && keep(a) {
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

// checkForeignCopy applies, for a memset or memcpy node added to g or set
// on one of its nodes with the explicit API, the driver's rule: the node
// cannot set, copy to or copy from the address range of an alloc node of
// another graph that frees the allocation itself (cuGraphAddMemsetNode and
// cuGraphAddMemcpyNode refuse it with CUDA_ERROR_INVALID_VALUE), even if the
// node's graph is later embedded in the allocation's. An allocation its
// graph leaves live, or that a third graph frees, is open to every graph;
// the rule holds from the free node's addition on, whether or not the
// allocating graph was instantiated, launched or destroyed since (measured
// on an H100, driver 580: tools/probe/foreignmem.cu, docs/driver-foreignmem.txt).
// A memset's range is from the first byte set to the last.
func (g *Graph) checkForeignCopy(opName string, on *Device, p NodeParams) error {
	if m, ok := p.(MemsetParams); ok {
		return g.checkForeignMemset(opName, on, m)
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
					"a memcpy node cannot copy memory that another graph allocates and frees", side.name, uint64(side.ptr), c.Size, describeAlloc(a))
			}
		}
	}
	return nil
}

// checkForeignMemset is checkForeignCopy's rule for memset params m.
func (g *Graph) checkForeignMemset(opName string, on *Device, m MemsetParams) error {
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
				"a memset node cannot set memory that another graph allocates and frees", uint64(m.Dst), n, describeAlloc(a))
		}
	}
	return nil
}

// foreignMemsetLocked applies the rule again as g is instantiated, to the
// memset nodes of g and of the graphs embedded in it: the driver refuses to
// instantiate a graph whose memset node was added before the other graph's
// free node (cudaErrorInvalidValue; a memcpy node then instantiates,
// docs/driver-foreignmem.txt). g is locked.
func (g *Graph) foreignMemsetLocked(opName string) error {
	if freedAllocs.Load() == 0 {
		return nil
	}
	var err error
	g.walkNested(true, func(n *Node) bool {
		if m, ok := n.params.(MemsetParams); ok {
			if e := n.g.checkForeignMemset(opName, n.dev, m); e != nil {
				err = e.(*Error).at(opName, n)
				return false
			}
		}
		return true
	})
	return err
}

// describeAlloc names alloc node a for an error.
func describeAlloc(a *Node) string {
	return fmt.Sprintf("%v", a)
}
