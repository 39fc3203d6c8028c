package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/backend"
)

// The devices that hold an executable graph's memset and memcpy memory.
//
// An update of an executable graph's memset node keeps its destination in
// memory of the device that held the original destination, and an update
// of a memcpy node keeps each side's, but for a copy's destination, which
// may move to another device's memory with peer access: the rule is
// backend.CheckMemoryMove (internal/backend/holders.go), measured on two
// H100s, driver 580 (docs/driver-multidev.txt). cudaGraphExecMemsetNodeSetParams
// says "the destination memory must be allocated from the same context as
// the original destination memory", cudaGraphExecMemcpyNodeSetParams says
// so of the source and destination. Host memory (a side of a copy that is
// a host slice, pinned or not) is a holder of its own. Here the rule is
// applied to per-node updates, for both backends: the backend only says
// which device holds an address (backend.MemoryOwners) and which peer
// access is enabled (backend.Peers). Whole-graph updates are the
// backend's: the host backend applies the same rule, the driver its own.

// execHolders is what an executable graph knows, from its instantiation, of
// the memory of its memset and memcpy nodes: with one device of the
// backend open then, every device address was that device's (sole); with
// more, each node's holders, at any depth (nodes).
type execHolders struct {
	sole  bool
	nodes map[*Node]backend.Holders
}

// holdersOf are the holders of the memory of memset or memcpy params p,
// the device memory's found by dev; ok is false for other params (a node
// the driver made, NativeNodeParams, among them).
func holdersOf(p NodeParams, dev func(DevicePtr) int) (h backend.Holders, ok bool) {
	side := func(d DevicePtr, host []byte) int {
		if host != nil {
			return backend.HeldByHost
		}
		return dev(d)
	}
	switch p := p.(type) {
	case MemsetParams:
		return backend.Holders{Dst: dev(p.Dst), Src: backend.HeldByNone}, true
	case MemcpyParams:
		return backend.Holders{Dst: side(p.Dst, p.DstHost), Src: side(p.Src, p.SrcHost)}, true
	}
	return backend.Holders{}, false
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
	m := map[*Node]backend.Holders{}
	g.walkNested(true, func(n *Node) bool {
		if h, ok := holdersOf(n.params, dev); ok {
			m[n] = h
		}
		return true
	})
	return execHolders{nodes: m}
}

// checkHolders refuses an update of memset or memcpy node n of e to
// parameters p whose memory would move to another holder (another device,
// or the host for a device side, and the reverse) than held the memory of
// n at e's instantiation, where backend.CheckMemoryMove says it may not.
func (e *Exec) checkHolders(opName string, n *Node, p NodeParams) error {
	mo, ok := e.dev.be.(backend.MemoryOwners)
	if !ok {
		return nil
	}
	var old backend.Holders
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
	var peer func(from, to int) bool
	if ps, ok := e.dev.be.(backend.Peers); ok {
		peer = ps.PeerAccessEnabled
	}
	mv := backend.CheckMemoryMove(n.typ == NodeMemcpy, old, nu, peer)
	if mv == nil {
		return nil
	}
	call := "cudaGraphExecMemsetNodeSetParams"
	if n.typ == NodeMemcpy {
		call = "cudaGraphExecMemcpyNodeSetParams"
	}
	return nodeErr(opName, n, ErrInvalidValue, "%s (%s)", mv, call)
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
	dev := n.device()
	if o := mo.MemoryOwner(uint64(old.Dst)); o >= 0 && o != dev.props.Ordinal {
		return nodeErr(opName, n, ErrInvalidValue, "a memset captured in a stream of device %d on memory of device %d cannot change (cudaGraphExecMemsetNodeSetParams refuses it); add the memset to the graph instead of capturing it, or capture it in a stream of device %d",
			dev.props.Ordinal, o, o)
	}
	return nil
}

// checkGraphMemSource refuses an update of memcpy node n that moves its
// source between graph memory (an allocation of an alloc node) and other
// device memory: the driver refuses moving the source from a graph
// allocation to cudaMalloc memory with cudaErrorInvalidValue, in a plain
// graph and in a conditional body alike, while it moves the destination,
// and a memset's, either way (H100, driver 580: tools/probe/condupdate.cu,
// docs/driver-condupdate.txt). The reverse move is refused too, untested.
func (e *Exec) checkGraphMemSource(opName string, n *Node, p NodeParams) error {
	nu, ok := p.(MemcpyParams)
	if !ok || nu.SrcHost != nil {
		return nil
	}
	old, ok := n.params.(MemcpyParams)
	if !ok || old.SrcHost != nil || old.Src == nu.Src {
		return nil
	}
	d := n.device()
	was, is := d.allocs.holds(uint64(old.Src)), d.allocs.holds(uint64(nu.Src))
	if was == is {
		return nil
	}
	what := map[bool]string{true: "graph memory (an allocation of an alloc node)", false: "other device memory"}
	return nodeErr(opName, n, ErrInvalidValue, "the copy's source would move from %s to %s: a memcpy node's source stays in the kind of memory of the original (cudaGraphExecMemcpyNodeSetParams)", what[was], what[is])
}
