package host

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Update results, numbered as cudaGraphExecUpdateResult.
const (
	updateSuccess           = 0
	updateError             = 1
	updateTopologyChanged   = 2
	updateNodeTypeChanged   = 3
	updateParametersChanged = 5
	updateNotSupported      = 6
)

var updateResultNames = [...]string{"success", "error", "topology changed", "node type changed",
	"function changed", "parameters changed", "not supported", "unsupported function change",
	"attributes changed"}

// topo is the shape of a graph as update pairing sees it: its nodes in
// pairing order (the sinks in the order they became sinks, then the
// dependencies of each node in the order of its incoming edges, breadth
// first), the pairing indexes of every node's dependencies, and the same
// for the graphs embedded in child graph nodes.
type topo struct {
	nodes  []*Node
	types  []backend.NodeType // parallel to nodes: their types, so that pairing reads no node
	ops    []backend.Op       // parallel to nodes: the new graph's, when updating (nil in an instantiated shape)
	depOff []int32            // deps of nodes[i] are deps[depOff[i]:depOff[i+1]]
	deps   []int32
	data   []backend.EdgeData // parallel to deps, when the graph has edge data
	sinks  int
	child  []*topo // parallel to nodes; set for child graph nodes
	op     []int32 // parallel to nodes: each node's op in exec (old topology only)
	exec   *Exec   // the Exec whose ops op indexes: the instantiated one, or a conditional body's
}

// buildTopo computes the pairing order of g as instantiated: its shape,
// without the nodes' ops (which pairing reads from the new graph only).
// g must be locked.
func buildTopo(g *Graph) *topo { return buildTopoInto(g, &topo{}, nil, false) }

// newTopo computes the pairing order of g as the new graph of an update,
// with a copy of every node's op taken under g's lock. g must be locked.
func newTopo(g *Graph) *topo { return buildTopoInto(g, &topo{}, nil, true) }

// buildTopoInto is buildTopo (or newTopo, withOps) reusing the slices of t
// and the index buffer *idxBuf (if not nil), so that an update loop does
// not allocate them anew.
func buildTopoInto(g *Graph, t *topo, idxBuf *[]int32, withOps bool) *topo {
	var idx []int32 // node id -> pairing index + 1
	if idxBuf != nil {
		idx = slices.Grow((*idxBuf)[:0], g.nextID)[:g.nextID]
		clear(idx)
		*idxBuf = idx
	} else {
		idx = make([]int32, g.nextID)
	}
	t.nodes, t.deps, t.data, t.op = slices.Grow(t.nodes[:0], len(g.nodes)), t.deps[:0], t.data[:0], nil
	for _, n := range g.nodes {
		if len(n.outs) == 0 {
			t.nodes = append(t.nodes, n)
		}
	}
	slices.SortFunc(t.nodes, func(a, b *Node) int { return cmp.Compare(a.sink, b.sink) })
	t.sinks = len(t.nodes)
	for i, n := range t.nodes {
		idx[n.id] = int32(i + 1)
	}
	t.depOff = append(slices.Grow(t.depOff[:0], len(g.nodes)+1), 0)
	for i := 0; i < len(t.nodes); i++ {
		n := t.nodes[i]
		for _, d := range n.deps {
			if idx[d.id] == 0 {
				t.nodes = append(t.nodes, d)
				idx[d.id] = int32(len(t.nodes))
			}
			t.deps = append(t.deps, idx[d.id]-1)
			if len(g.edata) > 0 { // edge data is part of the topology
				for len(t.data) < len(t.deps)-1 {
					t.data = append(t.data, backend.EdgeData{})
				}
				t.data = append(t.data, g.edgeDataLocked(d, n))
			}
		}
		t.depOff = append(t.depOff, int32(len(t.deps)))
	}
	t.types = slices.Grow(t.types[:0], len(t.nodes))[:len(t.nodes)]
	if withOps {
		t.ops = slices.Grow(t.ops[:0], len(t.nodes))[:len(t.nodes)]
	} else {
		t.ops = nil
	}
	t.child = slices.Grow(t.child[:0], len(t.nodes))[:len(t.nodes)]
	for i, n := range t.nodes {
		t.types[i] = n.typ
		if withOps {
			t.ops[i] = n.op
		}
		t.child[i] = nil
		if n.typ == backend.NodeChildGraph {
			n.child.mu.Lock()
			t.child[i] = buildTopoInto(n.child, &topo{}, nil, withOps)
			n.child.mu.Unlock()
		}
	}
	return t
}

// pairing maps the nodes of a new topology onto an old one.
type pairing struct {
	info backend.UpdateInfo
	// pairs lists (old, new) topologies matched node for node, the top
	// graph first, then embedded graphs.
	pairs [][2]*topo
	// cands lists every paired node with parameters: the old node (which
	// names the op), the new node and its op.
	cands []paramChange
	conds [][2]*Node  // paired conditional nodes (old, new)
	mems  []memChange // paired alloc and free nodes (memupdate.go)
}

type paramChange struct {
	x    *Exec       // the Exec the op is in: the instantiated one, or a conditional body's
	op   int32       // the op of the node of the instantiated graph
	p    *backend.Op // the new op (in the new topology's ops, which outlive the install)
	from *Node       // of the graph the parameters come from
}

// pair matches nu against old as CUDA does: node counts must agree, then
// nodes pair up from the sinks through each node's dependencies in edge
// order. It reports the first mismatch.
func (pr *pairing) pair(old, nu *topo) bool {
	fail := func(r int, n, from *Node) bool {
		pr.info = backend.UpdateInfo{Result: r}
		if n != nil {
			pr.info.ErrorNode = n.tag
		}
		if from != nil {
			pr.info.ErrFrom = from.tag
		}
		return false
	}
	if len(old.nodes) != len(nu.nodes) {
		return fail(updateTopologyChanged, nil, nil)
	}
	if nu.sinks > old.sinks { // the driver names the first sink (H100, CUDA 13.0)
		return fail(updateTopologyChanged, nu.nodes[0], nil)
	}
	// Both orders are breadth first from the sinks, so equal topologies
	// give equal dependency index lists; the first difference is the edge
	// at fault.
	for i := range nu.nodes {
		od := old.deps[old.depOff[i]:old.depOff[i+1]]
		nd := nu.deps[nu.depOff[i]:nu.depOff[i+1]]
		if len(od) != len(nd) {
			return fail(updateTopologyChanged, nu.nodes[i], nil)
		}
		for j := range nd {
			if nd[j] != od[j] || old.edgeData(i, j) != nu.edgeData(i, j) {
				return fail(updateTopologyChanged, nu.nodes[i], nu.nodes[nd[j]])
			}
		}
	}
	if nu.sinks != old.sinks {
		return fail(updateTopologyChanged, nil, nil)
	}
	pr.pairs = append(pr.pairs, [2]*topo{old, nu})
	// Node by node from the flat type lists: the common case (a node of a
	// type with parameters) reads neither graph's nodes.
	for i, typ := range nu.types {
		if typ != old.types[i] {
			return fail(updateNodeTypeChanged, nu.nodes[i], nil)
		}
		switch typ {
		case backend.NodeChildGraph:
			if !pr.pair(old.child[i], nu.child[i]) {
				return false
			}
			continue
		case backend.NodeMemAlloc, backend.NodeMemFree:
			// They pair like any node, whatever their sizes: the
			// executable graph then allocates the new graph's
			// allocations (memupdate.go).
			pr.mems = append(pr.mems, memChange{op: old.op[i], n: nu.nodes[i]})
			continue
		case backend.NodeConditional:
			n, o := nu.nodes[i], old.nodes[i]
			// The node's parameters cannot change; its handle's default
			// and flags are updated.
			if !condUpdatable(o, n) {
				return fail(updateParametersChanged, n, nil)
			}
			pr.conds = append(pr.conds, [2]*Node{o, n})
			// The nodes of its bodies pair like those of a child graph.
			co := old.exec.ops[old.op[i]].cond
			if len(n.cond.bodies) != len(co.bodies) {
				return fail(updateParametersChanged, n, nil)
			}
			for b, body := range n.cond.bodies {
				body.mu.Lock()
				nt := newTopo(body)
				body.mu.Unlock()
				if !pr.pair(co.bodies[b].topo, nt) {
					return false
				}
			}
			continue
		}
		pr.cands = append(pr.cands, paramChange{old.exec, old.op[i], &nu.ops[i], nu.nodes[i]})
	}
	return true
}

// updatable applies CUDA's limits on what an update may change in one
// node, for whole-graph and per-node updates: a copy keeps its direction, a
// 2D memset its shape, a semaphore node its kind and number of semaphores.
func updatable(old, nu *backend.Op) (int, string) {
	switch old.Type {
	case backend.NodeMemcpy:
		if ok, nk := backend.CopyKind(old.Memcpy.DstHost != nil, old.Memcpy.SrcHost != nil), backend.CopyKind(nu.Memcpy.DstHost != nil, nu.Memcpy.SrcHost != nil); ok != nk {
			return updateParametersChanged, fmt.Sprintf("the copy's kind cannot change (%s to %s)", ok, nk)
		}
	case backend.NodeMemset:
		o, n := &old.Memset, &nu.Memset
		if (o.Height > 1 || n.Height > 1) &&
			(o.ElementSize != n.ElementSize || o.Width != n.Width || o.Height != n.Height || o.Pitch != n.Pitch) {
			return updateParametersChanged, "only the address and value of a 2D memset can change"
		}
	case backend.NodeExtSemSignal, backend.NodeExtSemWait:
		switch {
		case old.Type != nu.Type:
			return updateParametersChanged, "a signal node and a wait node"
		case len(old.Sems) != len(nu.Sems):
			return updateParametersChanged, fmt.Sprintf("the number of semaphores cannot change (%d to %d)", len(old.Sems), len(nu.Sems))
		}
	}
	return updateSuccess, ""
}

// updateFailure is the error of a failed whole-graph update: why (the
// caller names the result).
func updateFailure(info backend.UpdateInfo, why string) *backend.Error {
	err := backend.Errorf(backend.ErrGraphExecUpdateFailure, "%s", why)
	err.Node = info.ErrorNode
	return err
}

// Update updates e with the ops of g, a graph of the same topology. Nodes
// pair up deterministically: the sinks of both graphs in the order they
// became sinks, then every paired node's dependencies in the order its
// incoming edges were added, so graphs built by the same sequence of API
// calls (or captures) pair node for node. Alloc and free nodes pair too:
// e then allocates g's allocations and is g's executable graph
// (memupdate.go). On failure nothing changes.
func (e *Exec) Update(bg backend.Graph) (backend.UpdateInfo, error) {
	g := bg.(*Graph)
	// One update at a time: the scratch topology and candidate list are
	// reused from one update to the next.
	e.umu.Lock()
	defer e.umu.Unlock()
	if e.scratch == nil {
		e.scratch = &updateScratch{}
	}
	sc := e.scratch
	g.mu.Lock()
	nu := buildTopoInto(g, &sc.topo, &sc.idx, true)
	g.mu.Unlock()
	pr := &sc.pr
	defer sc.reset()
	paired := pr.pair(e.topo, nu)
	if !paired && pr.info.Result == updateTopologyChanged {
		return pr.info, updateFailure(pr.info, "")
	}
	if !paired {
		return pr.info, updateFailure(pr.info, "")
	}
	var mu *memUpdate
	if len(pr.mems) > 0 {
		// Launches take the op table and issue with the binding under imu:
		// each sees both before the update or both after.
		e.imu.Lock()
		defer e.imu.Unlock()
		var info backend.UpdateInfo
		var why string
		if mu, info, why = e.prepareMemUpdate(g, pr.mems); mu == nil {
			return info, updateFailure(info, why)
		}
	}
	// Node by node with each node's own failures, as the driver: a memset
	// on an allocation that g frees (memsetRefusal).
	info, why, err := e.install(pr.pairs, pr.cands, pr.mems, e.memsetRefusal(g))
	if err == nil && info.Result != updateSuccess {
		err = updateFailure(info, why)
	}
	if err != nil {
		mu.abandon()
		return info, err
	}
	mu.commit()
	e.updateCondDefaults(pr.conds)
	// The child graph nodes of g now stand for those of e's graph (none:
	// no map, which the caller reads as it reads an empty one).
	for _, p := range pr.pairs {
		for i, c := range p[1].child {
			if c != nil {
				if info.Children == nil {
					info.Children = map[any]any{}
				}
				info.Children[p[1].nodes[i].tag] = p[0].nodes[i].tag
			}
		}
	}
	return info, nil
}

// install checks and prepares new ops for many nodes of e and, if all are
// valid, makes them e's for its next launch; otherwise nothing changes. The
// new op table is built beside the current one, in the spare table when no
// launch can still be reading it, so that a steady update-and-launch loop
// allocates no tables.
func (e *Exec) install(pairs [][2]*topo, cands []paramChange, mems []memChange, refuse func(*Node) (backend.UpdateInfo, string)) (backend.UpdateInfo, string, error) {
	e.mu.Lock()
	cur, curBops := e.ops, e.bops
	// A device graph's uploaded table stays in use until the next upload.
	idle := e.issuing == 0 && !e.dl.launch && e.finished.Load() == e.issued.Load()
	e.mu.Unlock()
	ops, bops := e.spare, e.spareBops
	if !idle || len(ops) != len(cur) {
		ops, bops = make([]op, len(cur)), make([]backend.Op, len(cur))
	}
	copy(ops, cur)
	copy(bops, curBops)
	// The nodes of conditional bodies change in copies of their bodies'
	// tables: a launch takes those at issue too.
	type table struct {
		ops  []op
		bops []backend.Op
	}
	var bodies map[*Exec]*table
	top := &table{ops, bops}
	tableOf := func(x *Exec) *table {
		if x == e {
			return top
		}
		if bodies == nil {
			bodies = map[*Exec]*table{}
		}
		t := bodies[x]
		if t == nil {
			t = &table{slices.Clone(x.ops), slices.Clone(x.bops)}
			bodies[x] = t
		}
		return t
	}
	// With one device open, now and at instantiation, no memory can have
	// moved to another device (and updatable refuses host memory for
	// device memory).
	moves := len(cands) > 0 && (e.multi || e.dev.OpenDevices() > 1)
	// check is a candidate's refusal, if any.
	check := func(c *paramChange) (backend.UpdateInfo, string) {
		t := tableOf(c.x)
		if r, why := updatable(&t.bops[c.op], c.p); r != updateSuccess {
			return backend.UpdateInfo{Result: r, ErrorNode: c.from.tag}, why
		}
		// A captured memset's destination may move to another device's
		// memory, either way (H100 pair, driver 580: two-GPU whole-graph
		// differential inputs, with the graphs captured).
		if moves && !(c.p.Type == backend.NodeMemset && c.from.captured) {
			if mv := c.x.memoryMove(c.op, &t.bops[c.op], c.p); mv != nil {
				return backend.UpdateInfo{Result: updateParametersChanged, ErrorNode: c.from.tag}, mv.String()
			}
		}
		// A node's own parameters first: a 2D memset whose shape changed
		// on an allocation the new graph frees is "parameters changed"
		// (H100, driver 580, a whole-graph differential input).
		if refuse != nil {
			if info, why := refuse(c.from); info.Result != updateSuccess {
				return info, why
			}
		}
		return backend.UpdateInfo{Result: updateSuccess}, ""
	}
	for i := range cands {
		c := &cands[i]
		t := tableOf(c.x)
		if info, why := check(c); info.Result != updateSuccess {
			return firstRefusal(pairs, cands[i:], info, why, check)
		}
		o, err := opDevice(e.dev, c.p).prepare(c.p)
		if err != nil {
			return backend.UpdateInfo{Result: updateError, ErrorNode: c.from.tag}, err.Detail, at(err, c.from.tag)
		}
		keepInstantiated(&o, &t.ops[c.op])
		t.ops[c.op], t.bops[c.op] = o, *c.p
	}
	for _, m := range mems { // all in the top graph
		ops[m.op] = m.o
	}
	e.mu.Lock()
	e.spare, e.spareBops = e.ops, e.bops
	e.ops, e.bops = ops, bops
	e.opsShared = false
	for x, t := range bodies {
		x.ops, x.bops = t.ops, t.bops
	}
	e.mu.Unlock()
	return backend.UpdateInfo{Result: updateSuccess}, "", nil
}

// firstRefusal is the refusal an update names when it refuses several
// candidates, the first of which (in pairing order) is cands[0] with
// refusal info and why: the driver names the first it checks, and it
// checks breadth first from the sinks, the newest sink first, each node's
// dependencies in the order of its incoming edges, a child graph's or a
// body's nodes at their node (H100, driver 580: tools/probe/updorder.cu,
// docs/driver-updorder.txt). A node's own parameters and the rules on
// graph memory are checked in the same walk.
func firstRefusal(pairs [][2]*topo, cands []paramChange, info backend.UpdateInfo, why string, check func(*paramChange) (backend.UpdateInfo, string)) (backend.UpdateInfo, string, error) {
	ranks := checkRanks(pairs)
	best := checkKey(ranks, cands[0].from)
	for i := 1; i < len(cands); i++ {
		c := &cands[i]
		k := checkKey(ranks, c.from)
		if slices.Compare(k, best) >= 0 {
			continue
		}
		if ci, cw := check(c); ci.Result != updateSuccess {
			best, info, why = k, ci, cw
		}
	}
	return info, why, nil
}

// checkRanks gives every node of the new graphs of pairs its place in the
// driver's check order within its own graph.
func checkRanks(pairs [][2]*topo) map[*Node]int {
	ranks := map[*Node]int{}
	for _, p := range pairs {
		t := p[1]
		// The sinks newest first, then breadth first through each node's
		// dependencies in edge order: the pairing order with its sinks
		// reversed.
		order := make([]int32, 0, len(t.nodes))
		seen := make([]bool, len(t.nodes))
		for i := t.sinks - 1; i >= 0; i-- {
			order = append(order, int32(i))
			seen[i] = true
		}
		for k := 0; k < len(order); k++ {
			i := order[k]
			for _, d := range t.deps[t.depOff[i]:t.depOff[i+1]] {
				if !seen[d] {
					seen[d] = true
					order = append(order, d)
				}
			}
		}
		for r, i := range order {
			ranks[t.nodes[i]] = r
		}
	}
	return ranks
}

// checkKey is n's place in the check order: the ranks of the nodes that
// embed its graph, outermost first, then its own.
func checkKey(ranks map[*Node]int, n *Node) []int {
	var k []int
	for ; n != nil; n = n.g.parent {
		k = append(k, ranks[n])
	}
	slices.Reverse(k)
	return k
}

// keepInstantiated carries over to a new op what instantiation gave the op
// it replaces: its event sequence slot, its kernel context, whether it is
// enabled.
func keepInstantiated(o, cur *op) {
	o.seq, o.off, o.stage = cur.seq, cur.off, cur.stage
	o.kern.setCtx(cur.kern.ctx())
}

// setOne installs a new op p for op x (a per-node update). The op is
// prepared first; the table is changed in place unless a launch still
// holds it.
func (e *Exec) setOne(x int32, p *backend.Op, n *Node) error {
	o, err := opDevice(e.dev, p).prepare(p)
	if err != nil {
		return at(err, n.tag)
	}
	e.umu.Lock()
	defer e.umu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, why := updatable(&e.bops[x], p); r != updateSuccess {
		err := backend.Errorf(backend.ErrInvalidValue, "%s", why)
		err.Node = n.tag
		return err
	}
	e.ownOpsLocked()
	keepInstantiated(&o, &e.ops[x])
	e.ops[x], e.bops[x] = o, *p
	return nil
}

// ownOpsLocked makes e.ops safe to change. This is how updates never reach
// a launch already queued or running: each launch holds the op table of its
// time and reads it, so while one may, the table is copied first.
func (e *Exec) ownOpsLocked() {
	if e.opsShared && (e.issuing > 0 || e.dl.launch || e.finished.Load() != e.issued.Load()) {
		e.ops = slices.Clone(e.ops)
		e.bops = slices.Clone(e.bops)
	}
	e.opsShared = false
}

// notInGraph is the error for a node that is not in the graph e was
// instantiated from.
func notInGraph(n *Node) *backend.Error {
	err := backend.Errorf(backend.ErrInvalidValue, "not a node of the graph the executable graph was instantiated from")
	err.Node = n.tag
	return err
}

// SetParams changes the op of node n (of the graph e was instantiated
// from, or of a graph embedded in it) for e's next launch.
func (e *Exec) SetParams(bn backend.Node, p *backend.Op) error {
	n := bn.(*Node)
	q := copyOp(p)
	x, ok := e.opOf[n]
	if !ok {
		if sub, sx := e.bodyOp(n); sub != nil {
			// A node of a conditional body: its body's table changes.
			e.umu.Lock()
			defer e.umu.Unlock()
			info, why, err := e.install(nil, []paramChange{{sub, sx, &q, n}}, nil, nil)
			if err != nil {
				return err
			}
			if info.Result != updateSuccess {
				err := backend.Errorf(backend.ErrInvalidValue, "%s", why)
				err.Node = n.tag
				return err
			}
			return nil
		}
		return notInGraph(n)
	}
	return e.setOne(x, &q, n)
}

// updateScratch holds what Update reuses between calls (under umu): the
// new graph's topology, its index buffer and the pairing's lists.
type updateScratch struct {
	topo topo
	idx  []int32
	pr   pairing
}

// reset empties the scratch for the next update, keeping its slices but
// no references into the graphs (the nodes and ops of the last one).
func (sc *updateScratch) reset() {
	clear(sc.topo.ops)
	clear(sc.topo.nodes)
	clear(sc.topo.child)
	clear(sc.pr.cands)
	clear(sc.pr.pairs)
	clear(sc.pr.conds)
	clear(sc.pr.mems)
	sc.pr = pairing{cands: sc.pr.cands[:0], pairs: sc.pr.pairs[:0], conds: sc.pr.conds[:0], mems: sc.pr.mems[:0]}
}

// SetChildGraph updates the nodes embedded in child graph node n from g,
// which must have the topology of n's graph.
func (e *Exec) SetChildGraph(bn backend.Node, bg backend.Graph) error {
	n, g := bn.(*Node), bg.(*Graph)
	e.umu.Lock()
	defer e.umu.Unlock()
	old, ok := e.childTopo[n]
	if !ok && e.conds != nil {
		// A child graph node in a conditional body (the driver allows it):
		// its body's table changes, through install.
		for _, sub := range e.conds.subs {
			if old, ok = sub.childTopo[n]; ok {
				break
			}
		}
	}
	if !ok {
		return notInGraph(n)
	}
	g.mu.Lock()
	nu := newTopo(g)
	g.mu.Unlock()
	pr := &pairing{cands: make([]paramChange, 0, len(nu.nodes))}
	if !pr.pair(old, nu) {
		// The driver answers a topology mismatch here as an update failure.
		err := backend.Errorf(backend.ErrGraphExecUpdateFailure, "the new graph does not match the child graph: %s", updateResultNames[pr.info.Result])
		err.Node = n.tag
		return err
	}
	info, why, err := e.install(pr.pairs, pr.cands, nil, nil)
	if err != nil {
		return err
	}
	if info.Result != updateSuccess {
		err := backend.Errorf(backend.ErrInvalidValue, "%s: %s", updateResultNames[info.Result], why)
		err.Node = n.tag
		return err
	}
	return nil
}

// SetEnabled enables or disables node n for e's next launch.
func (e *Exec) SetEnabled(bn backend.Node, enabled bool) error {
	n := bn.(*Node)
	x, ok := e.opOf[n]
	if !ok {
		sub, sx := e.bodyOp(n)
		if sub == nil {
			return notInGraph(n)
		}
		// A node of a conditional body (the driver allows it): a copy of
		// the body's table changes, as install does, since a launch takes
		// that table at issue.
		e.umu.Lock()
		defer e.umu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		if sub.ops[sx].off != !enabled {
			ops := slices.Clone(sub.ops)
			ops[sx].off = !enabled
			sub.ops = ops
		}
		return nil
	}
	e.umu.Lock()
	defer e.umu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ops[x].off == !enabled {
		return nil
	}
	e.ownOpsLocked()
	e.ops[x].off = !enabled
	return nil
}

// Enabled reports whether node n is enabled in e.
func (e *Exec) Enabled(bn backend.Node) (bool, error) {
	n := bn.(*Node)
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.opOf[n]; ok {
		return !e.ops[x].off, nil
	}
	if sub, sx := e.bodyOp(n); sub != nil {
		return !sub.ops[sx].off, nil
	}
	return false, notInGraph(n)
}

// index records, once e is flattened, the op of every node and the
// topology of every embedded graph by its child graph node.
func (t *topo) index(e *Exec) {
	t.exec = e
	t.op = make([]int32, len(t.nodes))
	for i, n := range t.nodes {
		t.op[i] = e.opOf[n]
		if c := t.child[i]; c != nil {
			e.childTopo[n] = c
			c.index(e)
		}
	}
}

// edgeData is the data of node i's j-th dependency edge.
func (t *topo) edgeData(i, j int) backend.EdgeData {
	if k := int(t.depOff[i]) + j; k < len(t.data) {
		return t.data[k]
	}
	return backend.EdgeData{}
}

// bodyOp finds node n among the nodes of e's conditional bodies.
func (e *Exec) bodyOp(n *Node) (*Exec, int32) {
	if e.conds == nil {
		return nil, 0
	}
	for _, sub := range e.conds.subs {
		if x, ok := sub.opOf[n]; ok {
			return sub, x
		}
	}
	return nil, 0
}
