package host

import (
	"cmp"
	"slices"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Whole-graph update of an executable graph with memory nodes, as the
// driver does it (docs/driver-memnodes.txt, "update"):
//
//   - Alloc and free nodes of the new graph pair with the executable
//     graph's like any node, whatever their sizes. After the update the
//     executable graph allocates the new graph's allocations, at the new
//     graph's addresses, and it is the new graph's executable graph: the
//     new graph cannot be instantiated again while it lives, the old one
//     can (memExecs moves). An update back to the old graph is the same.
//   - A memset node on an allocation of the new graph that the new graph
//     frees, in the graph, a child graph or a conditional body, refuses
//     the whole update, UpdateError; the driver checks it with the node's
//     own parameters, node by node in its check order (firstRefusal).
//     A memcpy node into such an allocation does not, nor a memset on an
//     allocation the new graph does not free, nor any node when the new
//     graph is the executable graph's own (the driver updates a graph's
//     executable graph from that graph).
//   - Not measured, chosen here: a new graph that has an executable graph
//     already refuses the update with UpdateErrorNotSupported, naming no
//     node; an allocation the executable graph's last launch left live (a
//     graph with no free node for it) stays the executable graph's: its
//     next launch frees it under AutoFreeOnLaunch, and is refused while it
//     is live otherwise, as for its own allocations.
//
// The executable graph's binding moves to the new graph's address space at
// the call; launches already queued keep the old binding (their plans name
// it), which is released once they are done, as Destroy releases it.

// memChange is a paired alloc or free node: the op of the executable graph
// it replaces, the new graph's node, and the op made of it.
type memChange struct {
	op int32
	n  *Node
	o  op
}

// memsetRefusal returns, for an update of e to g, a graph other than e's
// own, the check of each candidate node: a memset node on an allocation of
// g that g frees refuses the update (result Error). The driver judges it
// node by node with the nodes' own parameters, in the order the update
// pairs them (breadth first from the sinks), so the first failure either
// way is the one named: H100, driver 580, whole-graph differential inputs.
// nil when g has no such memset.
func (e *Exec) memsetRefusal(g *Graph) func(*Node) (backend.UpdateInfo, string) {
	gm := g.d.GraphMemIfAny()
	if gm == nil || g == e.graph {
		return nil
	}
	g.mu.Lock()
	va := g.va
	g.mu.Unlock()
	if va == nil {
		return nil
	}
	refused := map[*Node]bool{}
	memsetsOnFreed(gm, g, va, refused)
	if len(refused) == 0 {
		return nil
	}
	return func(n *Node) (backend.UpdateInfo, string) {
		if !refused[n] {
			return backend.UpdateInfo{}, ""
		}
		return backend.UpdateInfo{Result: updateError, ErrorNode: n.tag},
			"a memset node on an allocation that the new graph frees cannot be updated"
	}
}

// memsetsOnFreed adds to m the memset nodes of g, and of its child graphs
// and conditional bodies, on an allocation of address space va that its
// graph frees (a body's too: two-GPU whole-graph differential inputs).
func memsetsOnFreed(gm *GraphMem, g *Graph, va *GraphVA, m map[*Node]bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.nodes {
		switch n.typ {
		case backend.NodeMemset:
			if gm.freedInGraph(va, n.op.Memset.Dst) {
				m[n] = true
			}
		case backend.NodeChildGraph:
			memsetsOnFreed(gm, n.child, va, m)
		case backend.NodeConditional:
			for _, b := range n.cond.bodies {
				memsetsOnFreed(gm, b, va, m)
			}
		}
	}
}

// freedInGraph reports whether p is in an allocation of address space v
// that a free node of its graph frees.
func (gm *GraphMem) freedInGraph(v *GraphVA, p uint64) bool {
	if !gm.Contains(p) {
		return false
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	off := uintptr(p) - gm.va.Addr()
	for _, a := range v.allocs {
		if a.freedBy != nil && off >= a.off && off < a.off+uintptr(a.Size) {
			return true
		}
	}
	return false
}

// memUpdate is an update's change to e's graph memory, prepared before the
// ops are installed and committed after (nil: none).
type memUpdate struct {
	e         *Exec
	g         *Graph
	va        *GraphVA
	persist   []*GraphAlloc
	frees     []*GraphAlloc
	freeNodes []any
	reserved  bool // g.memExecs counts e
}

// prepareMemUpdate makes the ops of the paired alloc and free nodes and
// what e's graph memory becomes, as instantiation does (flatten), and
// takes g's one executable graph for e. It fails if g has one already. e.umu
// and e.imu are held.
func (e *Exec) prepareMemUpdate(g *Graph, mems []memChange) (*memUpdate, backend.UpdateInfo, string) {
	slices.SortFunc(mems, func(a, b memChange) int { return cmp.Compare(a.op, b.op) }) // instantiation's order
	m := &memUpdate{e: e, g: g}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g != e.graph {
		if g.memExecs > 0 {
			return nil, backend.UpdateInfo{Result: updateNotSupported},
				"the new graph has an executable graph already, and a graph with memory nodes can have one at a time"
		}
		g.memExecs++
		m.reserved = true
	}
	m.va = g.va
	for i := range mems {
		c := &mems[i]
		n := c.n
		c.o = op{kind: opAlloc, galloc: n.alloc}
		if n.typ == backend.NodeMemFree {
			c.o.kind = opFree
			if n.alloc.va != g.va {
				c.o.seq = seqForeignFree
				m.frees = append(m.frees, n.alloc)
				m.freeNodes = append(m.freeNodes, n.tag)
			}
		} else if n.alloc.freedBy == nil {
			m.persist = append(m.persist, n.alloc)
		}
	}
	return m, backend.UpdateInfo{}, ""
}

// abandon undoes prepareMemUpdate after a failed install.
func (m *memUpdate) abandon() {
	if m == nil || !m.reserved {
		return
	}
	m.g.mu.Lock()
	m.g.memExecs--
	m.g.mu.Unlock()
}

// commit makes g e's graph once its ops are installed: e's binding moves to
// g's address space, and the old one is released once the launches issued
// with it are done. e.umu and e.imu are held.
func (m *memUpdate) commit() {
	if m == nil || !m.reserved { // g is e's graph already: its ops are the same
		return
	}
	e := m.e
	gm := e.dev.GraphMemIfAny()
	old := e.bind
	nb := gm.Rebind(old, m.va, m.persist)
	e.mu.Lock()
	og := e.graph
	e.graph, e.bind, e.persist, e.frees, e.freeNodes = m.g, nb, m.persist, m.frees, m.freeNodes
	e.mu.Unlock()
	og.mu.Lock()
	og.memExecs-- // it may be instantiated again now, as with the driver
	og.mu.Unlock()
	e.AfterLaunches(func() { gm.Release(old) })
}

// Rebind returns the binding that replaces old when an update gives its
// executable graph the graph with address space v, whose allocations
// persist it does not free. old is detached now, as Forget does; the
// caller releases it once the launches planned with it are done.
// Allocations that the executable graph's launches left outstanding are
// not carried over: as on the driver (UpdateMemNodesLeftLive, measured on
// an H200), they stay live, the user's to free, and the next launch
// neither frees them under AutoFreeOnLaunch nor is refused by them.
func (gm *GraphMem) Rebind(old *Binding, v *GraphVA, persist []*GraphAlloc) *Binding {
	b := gm.NewBinding(v, persist)
	gm.Forget(old)
	return b
}

// lastAllocs are the allocations that b's next launch frees under
// AutoFreeOnLaunch and that refuse it otherwise while outstanding: those
// its graph does not free. gm.mu is held.
func (b *Binding) lastAllocs() []*GraphAlloc { return b.persist }
