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
		if n.g.top() != e.src {
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
	if ms, isMemset := p.(MemsetParams); isMemset && n.captured && mo.MemoryOwner(uint64(ms.Dst)) == n.device().props.Ordinal {
		// A captured memset moves to the memory of the device whose
		// stream captured it (capturedMemsetHome).
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
//
// capturedMemsetHome: two exceptions, each from one two-GPU differential
// input on H100s (driver 580): a change that moves the destination to the
// memory of the capturing stream's device is taken (checkHolders lets it
// move there too), and so is any change to a memset on a graph
// allocation.
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
	if e.dev.allocs.holds(uint64(old.Dst)) || dev.allocs.holds(uint64(old.Dst)) {
		return nil // a graph allocation: the driver takes the change (a two-GPU differential input)
	}
	if nu, ok := p.(MemsetParams); ok && mo.MemoryOwner(uint64(nu.Dst)) == dev.props.Ordinal {
		return nil // moving home (capturedMemsetHome)
	}
	if o := mo.MemoryOwner(uint64(old.Dst)); o >= 0 && o != dev.props.Ordinal {
		return nodeErr(opName, n, ErrInvalidValue, "a memset captured in a stream of device %d on memory of device %d cannot change (cudaGraphExecMemsetNodeSetParams refuses it); add the memset to the graph instead of capturing it, or capture it in a stream of device %d",
			dev.props.Ordinal, o, o)
	}
	return nil
}

// checkGraphMemCopy refuses an update of memcpy node n to parameters p
// that the driver refuses with cudaErrorInvalidValue (H100, driver 580:
// tools/probe/condupdate.cu and freedset.cu, docs/driver-condupdate.txt
// and driver-freedset.txt):
//   - moving the source or the destination between graph memory (an
//     allocation of an alloc node) and other device memory, either way; a
//     memset node's destination may move;
//   - any change to a copy in a child graph or conditional body to or from
//     an allocation that the graph frees; the same copy in the top graph,
//     or when the graph leaves the allocation live, takes it.
func (e *Exec) checkGraphMemCopy(opName string, n *Node, p NodeParams) error {
	nu, ok := p.(MemcpyParams)
	if !ok {
		return nil
	}
	old, ok := n.params.(MemcpyParams)
	if !ok {
		return nil
	}
	d := n.device()
	if n.g.parent != nil {
		root := n.g.top()
		freedHere := func(a allocRange) bool { return a.top == root && a.freed }
		for _, side := range []struct {
			host bool
			p    DevicePtr
		}{{old.SrcHost != nil, old.Src}, {old.DstHost != nil, old.Dst}} {
			if side.host {
				continue
			}
			if a := d.allocs.find(uint64(side.p), max(old.Size, 1), freedHere); a != nil {
				return nodeErr(opName, n, ErrInvalidValue, "a memcpy node of an embedded graph on an allocation that the graph frees (%v) cannot change (cudaGraphExecMemcpyNodeSetParams refuses it); update it with Exec.Update, or copy in the top graph", a)
			}
		}
	}
	for _, side := range []struct {
		name            string
		oldHost, nuHost bool
		old, nu         DevicePtr
	}{{"source", old.SrcHost != nil, nu.SrcHost != nil, old.Src, nu.Src}, {"destination", old.DstHost != nil, nu.DstHost != nil, old.Dst, nu.Dst}} {
		if side.oldHost || side.nuHost || side.old == side.nu {
			continue
		}
		was, is := d.allocs.holds(uint64(side.old)), d.allocs.holds(uint64(side.nu))
		if was == is {
			continue
		}
		what := map[bool]string{true: "graph memory (an allocation of an alloc node)", false: "other device memory"}
		return nodeErr(opName, n, ErrInvalidValue, "the copy's %s would move from %s to %s: a memcpy node's source and destination stay in the kind of memory of the original (cudaGraphExecMemcpyNodeSetParams)", side.name, what[was], what[is])
	}
	return nil
}
