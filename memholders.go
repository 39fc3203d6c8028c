package gpugraph

import (
	"fmt"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// The devices that hold an executable graph's memset and memcpy memory.
//
// An update of an executable graph's memset node keeps its destination in
// memory of the device that held the original destination, and an update
// of a memcpy node keeps each side's: cudaGraphExecMemsetNodeSetParams
// says "the destination memory must be allocated from the same context as
// the original destination memory", cudaGraphExecMemcpyNodeSetParams says
// so of the source and destination. The driver refuses such an update with
// cudaErrorInvalidValue (measured on two H200s, driver 580: a memset node's
// destination moved to the other GPU's memory; conformance scenario
// ExecSetParamsAcrossDevices). Host memory (a side of a copy that is a host
// slice) is a holder of its own. The rule lives here, for both backends:
// the backend only says which device holds an address
// (backend.MemoryOwners).

// Holders of memory other than a device.
const (
	heldByNone = -1 // no open device's memory (freed since)
	heldByHost = -2 // host memory
)

// memHolders are the holders of a memset's destination (src heldByNone) or
// a copy's two sides.
type memHolders struct{ dst, src int }

// execHolders is what an executable graph knows, from its instantiation, of
// the memory of its memset and memcpy nodes: with one device of the
// backend open then, every device address was that device's (sole); with
// more, each node's holders, at any depth (nodes).
type execHolders struct {
	sole  bool
	nodes map[*Node]memHolders
}

// holdersOf are the holders of the memory of memset or memcpy params p,
// the device memory's found by dev; ok is false for other params (a node
// the driver made, NativeNodeParams, among them).
func holdersOf(p NodeParams, dev func(DevicePtr) int) (h memHolders, ok bool) {
	side := func(d DevicePtr, host []byte) int {
		if host != nil {
			return heldByHost
		}
		return dev(d)
	}
	switch p := p.(type) {
	case MemsetParams:
		return memHolders{dst: dev(p.Dst), src: heldByNone}, true
	case MemcpyParams:
		return memHolders{dst: side(p.Dst, p.DstHost), src: side(p.Src, p.SrcHost)}, true
	}
	return memHolders{}, false
}

// memHoldersLocked records, as g is instantiated, the holders of the memory
// of its memset and memcpy nodes and of those of the graphs embedded in it
// (child graphs, conditional bodies). g is locked.
func (g *Graph) memHoldersLocked() execHolders {
	mo, ok := g.dev.be.(backend.MemoryOwners)
	if !ok {
		return execHolders{}
	}
	if mo.OpenDevices() < 2 {
		return execHolders{sole: true}
	}
	dev := func(p DevicePtr) int { return mo.MemoryOwner(uint64(p)) }
	m := map[*Node]memHolders{}
	var walk func(g *Graph)
	walk = func(g *Graph) {
		for _, n := range g.nodes {
			if h, ok := holdersOf(n.params, dev); ok {
				m[n] = h
			}
			var nested []*Graph
			if n.child != nil {
				nested = append(nested, n.child)
			}
			if n.conds != nil {
				nested = append(nested, n.conds.bodies...)
			}
			for _, c := range nested {
				c.mu.Lock()
				walk(c)
				c.mu.Unlock()
			}
		}
	}
	walk(g)
	return execHolders{nodes: m}
}

// checkHolders refuses an update of memset or memcpy node n of e to
// parameters p whose memory another device (or the host, for a device
// side, and the reverse) holds than held the memory of n at e's
// instantiation.
func (e *Exec) checkHolders(opName string, n *Node, p NodeParams) error {
	mo, ok := e.dev.be.(backend.MemoryOwners)
	if !ok {
		return nil
	}
	var old memHolders
	switch {
	case e.holders.sole:
		// One device open at the instantiation: the device memory of
		// n's parameters was its own, if n is a node of e.
		if n.rootGraph() != e.src {
			return nil // the backend says it is not
		}
		sole := e.dev.props.Ordinal
		if old, ok = holdersOf(n.params, func(DevicePtr) int { return sole }); !ok {
			return nil
		}
	case e.holders.nodes != nil:
		if old, ok = e.holders.nodes[n]; !ok {
			return nil
		}
	default:
		return nil
	}
	nu, ok := holdersOf(p, func(d DevicePtr) int { return mo.MemoryOwner(uint64(d)) })
	if !ok {
		return nil
	}
	what, call := "destination", "cudaGraphExecMemsetNodeSetParams"
	if n.typ == NodeMemcpy {
		what, call = "copy's destination", "cudaGraphExecMemcpyNodeSetParams"
	}
	for _, side := range []struct {
		what     string
		old, new int
	}{{what, old.dst, nu.dst}, {"copy's source", old.src, nu.src}} {
		if side.old == heldByNone || side.new == heldByNone || side.old == side.new {
			continue
		}
		return nodeErr(opName, n, ErrInvalidValue, "the %s would move from %s to %s: an executable graph's node keeps its memory on the device of the original (%s)",
			side.what, holderName(side.old), holderName(side.new), call)
	}
	return nil
}

// holderName names a holder of memory in errors.
func holderName(h int) string {
	if h == heldByHost {
		return "host memory"
	}
	return fmt.Sprintf("memory of device %d", h)
}

// rootGraph is the top graph that n's graph is, or is embedded in.
func (n *Node) rootGraph() *Graph {
	g := n.g
	for g.parent != nil {
		g = g.parent.g
	}
	return g
}

// checkCapturedPeerMemset refuses an update of memset node n, made by a
// stream capture on memory of another device than the capturing stream's
// (with peer access), to parameters p other than its own: the driver
// refuses every change to such a node, of value or shape, with
// cudaErrorInvalidValue, with either device's context, though it takes
// the same changes to a memset node added to a graph on that memory
// (measured on two H100s, driver 580: tools/probe/multidev.cu,
// capturedMemsets and memsetShapes; docs/driver-multidev.txt). On the cuda
// backend the node's parameters are the driver's (NativeNodeParams) and the
// driver answers itself.
func (e *Exec) checkCapturedPeerMemset(opName string, n *Node, p NodeParams) error {
	if !n.captured || n.typ != NodeMemset {
		return nil
	}
	old, ok := n.params.(MemsetParams)
	if !ok || old == p {
		return nil
	}
	mo, ok := e.dev.be.(backend.MemoryOwners)
	if !ok || mo.OpenDevices() < 2 {
		return nil
	}
	dev := n.dev
	if dev == nil {
		dev = n.g.dev
	}
	if o := mo.MemoryOwner(uint64(old.Dst)); o >= 0 && o != dev.props.Ordinal {
		return nodeErr(opName, n, ErrInvalidValue, "a memset captured in a stream of device %d on memory of device %d cannot change (cudaGraphExecMemsetNodeSetParams refuses it); add the memset to the graph instead of capturing it, or capture it in a stream of device %d",
			dev.props.Ordinal, o, o)
	}
	return nil
}
