package gpugraph

import (
	"cmp"
	"fmt"
	"slices"
)

// UpdateResult says why a whole-graph update failed
// (cudaGraphExecUpdateResult).
type UpdateResult int

// Update results, numbered as CUDA's.
const (
	UpdateSuccess                    UpdateResult = 0
	UpdateError                      UpdateResult = 1 // invalid parameters, described by the error
	UpdateErrorTopologyChanged       UpdateResult = 2
	UpdateErrorNodeTypeChanged       UpdateResult = 3
	UpdateErrorFunctionChanged       UpdateResult = 4
	UpdateErrorParametersChanged     UpdateResult = 5
	UpdateErrorNotSupported          UpdateResult = 6
	UpdateErrorUnsupportedFuncChange UpdateResult = 7
	UpdateErrorAttributesChanged     UpdateResult = 8
)

var updateResultNames = [...]string{"success", "error", "topology changed", "node type changed",
	"function changed", "parameters changed", "not supported", "unsupported function change",
	"attributes changed"}

func (r UpdateResult) String() string {
	if r >= 0 && int(r) < len(updateResultNames) {
		return updateResultNames[r]
	}
	return fmt.Sprintf("UpdateResult(%d)", int(r))
}

// UpdateResultInfo is the outcome of Exec.Update (cudaGraphExecUpdateResultInfo).
// ErrorNode is the node of the new graph at fault, if any; when two
// topologies differ at an edge, ErrorFromNode is the dependency that did
// not match.
type UpdateResultInfo struct {
	Result        UpdateResult
	ErrorNode     *Node
	ErrorFromNode *Node
}

// topo is the shape of a graph as update pairing sees it: its nodes in
// pairing order (the sinks in the order they became sinks, then the
// dependencies of each node in the order of its incoming edges, breadth
// first), the pairing indexes of every node's dependencies, and the same
// for the graphs embedded in child graph nodes.
type topo struct {
	nodes  []*Node
	params []NodeParams // parallel to nodes: the new graph's, when updating
	depOff []int32      // deps of nodes[i] are deps[depOff[i]:depOff[i+1]]
	deps   []int32
	data   []EdgeData // parallel to deps, when the graph has edge data
	sinks  int
	child  []*topo // parallel to nodes; set for child graph nodes
	op     []int32 // parallel to nodes: each node's op in exec (old topology only)
	exec   *Exec   // the Exec whose ops op indexes: the instantiated one, or a conditional body's
}

// buildTopo computes g's pairing order. g must be locked.
func buildTopo(g *Graph) *topo { return buildTopoInto(g, &topo{}, nil) }

// buildTopoInto is buildTopo reusing the slices of t and the index buffer
// *idxBuf (if not nil), so that an update loop does not allocate them anew.
func buildTopoInto(g *Graph, t *topo, idxBuf *[]int32) *topo {
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
					t.data = append(t.data, EdgeData{})
				}
				t.data = append(t.data, g.edgeDataLocked(d, n))
			}
		}
		t.depOff = append(t.depOff, int32(len(t.deps)))
	}
	t.params = slices.Grow(t.params[:0], len(t.nodes))[:len(t.nodes)]
	t.child = slices.Grow(t.child[:0], len(t.nodes))[:len(t.nodes)]
	for i, n := range t.nodes {
		t.params[i] = n.params
		t.child[i] = nil
		if n.typ == NodeChildGraph {
			n.child.mu.Lock()
			t.child[i] = buildTopo(n.child)
			n.child.mu.Unlock()
		}
	}
	return t
}

// pairing maps the nodes of a new topology onto an old one.
type pairing struct {
	info UpdateResultInfo
	// pairs lists (old, new) topologies matched node for node, the top
	// graph first, then embedded graphs.
	pairs [][2]*topo
	// cands lists every paired node with parameters: the old node (which
	// names the op), the new node and its parameters.
	cands []paramChange
	conds [][2]*Node // paired conditional nodes (old, new)
}

type paramChange struct {
	x    *Exec // the Exec the op is in: the instantiated one, or a conditional body's
	op   int32 // the op of the node of the instantiated graph
	p    NodeParams
	from *Node // of the graph the parameters come from
}

// pair matches nu against old as CUDA does: node counts must agree, then
// nodes pair up from the sinks through each node's dependencies in edge
// order. It reports the first mismatch.
func (pr *pairing) pair(old, nu *topo) bool {
	fail := func(r UpdateResult, n, from *Node) bool {
		pr.info = UpdateResultInfo{Result: r, ErrorNode: n, ErrorFromNode: from}
		return false
	}
	if len(old.nodes) != len(nu.nodes) {
		return fail(UpdateErrorTopologyChanged, nil, nil)
	}
	if nu.sinks > old.sinks { // the driver names the first sink (H100, CUDA 13.0)
		return fail(UpdateErrorTopologyChanged, nu.nodes[0], nil)
	}
	// Both orders are breadth first from the sinks, so equal topologies
	// give equal dependency index lists; the first difference is the edge
	// at fault.
	for i := range nu.nodes {
		od := old.deps[old.depOff[i]:old.depOff[i+1]]
		nd := nu.deps[nu.depOff[i]:nu.depOff[i+1]]
		if len(od) != len(nd) {
			return fail(UpdateErrorTopologyChanged, nu.nodes[i], nil)
		}
		for j := range nd {
			if nd[j] != od[j] || old.edgeData(i, j) != nu.edgeData(i, j) {
				return fail(UpdateErrorTopologyChanged, nu.nodes[i], nu.nodes[nd[j]])
			}
		}
	}
	if nu.sinks != old.sinks {
		return fail(UpdateErrorTopologyChanged, nil, nil)
	}
	pr.pairs = append(pr.pairs, [2]*topo{old, nu})
	for i, n := range nu.nodes {
		o := old.nodes[i]
		if n.typ != o.typ {
			return fail(UpdateErrorNodeTypeChanged, n, nil)
		}
		if n.typ == NodeChildGraph {
			if !pr.pair(old.child[i], nu.child[i]) {
				return false
			}
			continue
		}
		if n.typ == NodeMemAlloc || n.typ == NodeMemFree {
			return fail(UpdateErrorNotSupported, n, nil)
		}
		if n.typ == NodeConditional {
			// The node's parameters cannot change; its handle's default
			// and flags are updated.
			if ok, _ := condUpdatable(o, n); !ok {
				return fail(UpdateErrorParametersChanged, n, nil)
			}
			pr.conds = append(pr.conds, [2]*Node{o, n})
			// The nodes of its bodies pair like those of a child graph.
			co := old.exec.ops[old.op[i]].cond
			if n.conds == nil || len(n.conds.bodies) != len(co.bodies) {
				return fail(UpdateErrorParametersChanged, n, nil)
			}
			for b, body := range n.conds.bodies {
				body.mu.Lock()
				nt := buildTopo(body)
				body.mu.Unlock()
				if !pr.pair(co.bodies[b].topo, nt) {
					return false
				}
			}
			continue
		}
		pr.cands = append(pr.cands, paramChange{old.exec, old.op[i], nu.params[i], n})
	}
	return true
}

// updatable applies CUDA's limits on what an update may change in one node.
// It is the one place these rules live, for whole-graph and per-node updates.
func updatable(old, nu NodeParams) (UpdateResult, string) {
	switch o := old.(type) {
	case MemcpyParams:
		n := nu.(MemcpyParams)
		if o.Kind() != n.Kind() {
			return UpdateErrorParametersChanged, fmt.Sprintf("the copy's kind cannot change (%s to %s)", o.Kind(), n.Kind())
		}
	case MemsetParams:
		n := nu.(MemsetParams)
		if (o.Height > 1 || n.Height > 1) &&
			(o.ElementSize != n.ElementSize || o.Width != n.Width || o.Height != n.Height || o.Pitch != n.Pitch) {
			return UpdateErrorParametersChanged, "only the address and value of a 2D memset can change"
		}
	case ExtSemaphoreSignalParams, ExtSemaphoreWaitParams:
		if ok, why := extSemUpdatable(old, nu); !ok {
			return UpdateErrorParametersChanged, why
		}
	case NativeNodeParams:
		return UpdateErrorNotSupported, "the node was made by the driver"
	}
	return UpdateSuccess, ""
}

// Update updates e with the parameters of g, a graph of the same topology
// (cudaGraphExecUpdate). Nodes pair up deterministically: the sinks of both
// graphs in the order they became sinks, then every paired node's
// dependencies in the order its incoming edges were added, so graphs built
// by the same sequence of API calls (or captures) pair node for node.
//
// On failure nothing changes; the error wraps ErrGraphExecUpdateFailure
// (or ErrInvalidValue for bad arguments), and the result says why and
// which node of g was at fault. The update takes effect at e's next launch.
func (e *Exec) Update(g *Graph) (UpdateResultInfo, error) {
	const opName = "Exec.Update"
	fail := UpdateResultInfo{Result: UpdateError}
	if err := e.check(opName); err != nil {
		return fail, err
	}
	if g == nil {
		return fail, newErr(opName, ErrInvalidValue, "nil graph")
	}
	if g.dev != e.dev {
		return fail, newErr(opName, ErrInvalidValue, "graph belongs to another device")
	}
	if e.be != nil {
		info, err := e.cudaUpdate(opName, g)
		if err == nil {
			e.replaceUserRefs(g, nil)
		}
		return info, err
	}
	// One update at a time: the scratch topology and candidate list are
	// reused from one update to the next.
	e.umu.Lock()
	defer e.umu.Unlock()
	if err := g.lock(opName); err != nil {
		return fail, err
	}
	if e.scratch == nil {
		e.scratch = &updateScratch{}
	}
	sc := e.scratch
	nu := buildTopoInto(g, &sc.topo, &sc.idx)
	g.mu.Unlock()
	pr := &pairing{cands: sc.cands[:0]}
	defer func() { sc.cands = pr.cands[:0]; clear(sc.topo.params); clear(sc.topo.nodes) }()
	if !pr.pair(e.topo, nu) {
		err := nodeErr(opName, pr.info.ErrorNode, ErrGraphExecUpdateFailure, "%v", pr.info.Result)
		return pr.info, err
	}
	info, why, err := e.install(pr.cands)
	if err != nil {
		return info, withOp(opName, err)
	}
	if info.Result != UpdateSuccess {
		return info, nodeErr(opName, info.ErrorNode, ErrGraphExecUpdateFailure, "%v: %s", info.Result, why)
	}
	e.updateCondDefaults(pr.conds)
	// User objects: e now holds the references of g's graphs instead.
	childOf := map[*Node]*Node{}
	for _, p := range pr.pairs {
		for i, c := range p[1].child {
			if c != nil {
				childOf[p[1].nodes[i]] = p[0].nodes[i]
			}
		}
	}
	e.replaceUserRefs(g, func(n *Node) *Node { return childOf[n] })
	return info, nil
}

// install checks and prepares new parameters for many nodes of e and, if
// all are valid, makes them e's for its next launch; otherwise nothing
// changes. The new op table is built beside the current one, in the spare
// table when no launch can still be reading it, so that a steady
// update-and-launch loop allocates no tables.
func (e *Exec) install(cands []paramChange) (UpdateResultInfo, string, error) {
	e.mu.Lock()
	cur, curParams := e.ops, e.params
	// A device graph's uploaded table stays in use until the next upload.
	idle := e.issuing == 0 && !e.dl.launch && e.finished.Load() == e.issued.Load()
	e.mu.Unlock()
	ops, params := e.spare, e.spareParams
	if !idle || len(ops) != len(cur) {
		ops, params = make([]op, len(cur)), make([]NodeParams, len(cur))
	}
	copy(ops, cur)
	copy(params, curParams)
	// The nodes of conditional bodies change in copies of their bodies'
	// tables: a launch takes those at issue too.
	type table struct {
		ops    []op
		params []NodeParams
	}
	var bodies map[*Exec]*table
	top := &table{ops, params}
	tableOf := func(x *Exec) *table {
		if x == e {
			return top
		}
		if bodies == nil {
			bodies = map[*Exec]*table{}
		}
		t := bodies[x]
		if t == nil {
			t = &table{slices.Clone(x.ops), slices.Clone(x.params)}
			bodies[x] = t
		}
		return t
	}
	var words []uint64
	n := 0
	for _, c := range cands {
		if k, ok := c.p.(KernelParams); ok {
			n += len(k.Args)
		}
	}
	if n > 0 {
		words = make([]uint64, 0, n)
	}
	for _, c := range cands {
		t := tableOf(c.x)
		if r, why := updatable(t.params[c.op], c.p); r != UpdateSuccess {
			return UpdateResultInfo{Result: r, ErrorNode: c.from}, why, nil
		}
		o, code, msg := e.dev.prepareIn(c.p, &words)
		if code != nil {
			return UpdateResultInfo{Result: UpdateError, ErrorNode: c.from}, msg, nodeErr("", c.from, code, "%s", msg)
		}
		keepInstantiated(&o, &t.ops[c.op])
		t.ops[c.op], t.params[c.op] = o, c.p
	}
	e.mu.Lock()
	e.spare, e.spareParams = e.ops, e.params
	e.ops, e.params = ops, params
	e.opsShared = false
	for x, t := range bodies {
		x.ops, x.params = t.ops, t.params
	}
	e.mu.Unlock()
	return UpdateResultInfo{Result: UpdateSuccess}, "", nil
}

// keepInstantiated carries over to a new op what instantiation gave the op
// it replaces: its event sequence slot, its kernel context, whether it is
// enabled.
func keepInstantiated(o, cur *op) {
	o.seq, o.off, o.kern.ctx = cur.seq, cur.off, cur.kern.ctx
}

// setOne installs new parameters p for op x (a per-node update). The op is
// prepared first; the table is changed in place unless a launch still
// holds it.
func (e *Exec) setOne(x int32, p NodeParams, n *Node) error {
	o, code, msg := e.dev.prepare(p)
	if code != nil {
		return nodeErr("", n, code, "%s", msg)
	}
	e.umu.Lock()
	defer e.umu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, why := updatable(e.params[x], p); r != UpdateSuccess {
		return nodeErr("", n, ErrInvalidValue, "%s", why)
	}
	e.ownOpsLocked()
	keepInstantiated(&o, &e.ops[x])
	e.ops[x], e.params[x] = o, p
	return nil
}

// ownOpsLocked makes e.ops safe to change. This is how updates never reach
// a launch already queued or running: each launch holds the op table of its
// time and reads it, so while one may, the table is copied first.
func (e *Exec) ownOpsLocked() {
	if e.opsShared && (e.issuing > 0 || e.dl.launch || e.finished.Load() != e.issued.Load()) {
		e.ops = slices.Clone(e.ops)
		e.params = slices.Clone(e.params)
	}
	e.opsShared = false
}

// SetParams changes the parameters of node n in e, for e's next launch
// (cudaGraphExec*NodeSetParams). n is the node of the graph e was
// instantiated from, or of a graph embedded in it (a child graph or a
// conditional body); the graph itself does not change. Kernel, memcpy, memset, host, event record and wait, and
// child graph nodes can be updated, within the limits of Update; a child
// graph node takes a graph of the same topology as its current one.
func (e *Exec) SetParams(n *Node, p NodeParams) error {
	const opName = "Exec.SetParams"
	if err := e.check(opName); err != nil {
		return err
	}
	if n == nil {
		return newErr(opName, ErrInvalidValue, "nil node")
	}
	if p == nil || p.NodeType() != n.typ {
		return nodeErr(opName, n, ErrInvalidValue, "params of another node type (%T)", p)
	}
	switch n.typ {
	case NodeMemAlloc, NodeMemFree, NodeEmpty, NodeConditional:
		return nodeErr(opName, n, ErrInvalidValue, "the parameters of %v nodes cannot be updated", n.typ)
	}
	if e.be != nil {
		switch p.(type) {
		case ExtSemaphoreSignalParams, ExtSemaphoreWaitParams:
			return e.cudaSetExtSemExecParams(opName, n, p)
		}
		err := e.cudaSetParams(opName, n, p)
		if cp, isChild := p.(ChildGraphParams); isChild && err == nil {
			e.replaceChildUserRefs(n, cp.Graph)
		}
		return err
	}
	x, ok := e.opOf[n]
	if !ok {
		if sub, sx := e.bodyOp(n); sub != nil && p.NodeType() != NodeChildGraph {
			// A node of a conditional body: its body's table changes.
			e.umu.Lock()
			defer e.umu.Unlock()
			info, why, err := e.install([]paramChange{{sub, sx, copyParams(p), n}})
			if err != nil {
				return withOp(opName, err)
			}
			if info.Result != UpdateSuccess {
				return nodeErr(opName, n, ErrInvalidValue, "%s", why)
			}
			return nil
		}
		return nodeErr(opName, n, ErrInvalidValue, "not a node of the graph the executable graph was instantiated from")
	}
	if cp, isChild := p.(ChildGraphParams); isChild {
		return e.setChild(opName, n, cp.Graph)
	}
	return withOp(opName, e.setOne(x, copyParams(p), n))
}

// updateScratch holds what Update reuses between calls (under umu).
type updateScratch struct {
	topo  topo
	idx   []int32
	cands []paramChange
}

// setChild updates the nodes embedded in child graph node n from g, which
// must have the topology of n's graph (cudaGraphExecChildGraphNodeSetParams).
func (e *Exec) setChild(opName string, n *Node, g *Graph) error {
	if g == nil {
		return nodeErr(opName, n, ErrInvalidValue, "nil child graph")
	}
	if g.dev != e.dev {
		return nodeErr(opName, n, ErrInvalidValue, "graph belongs to another device")
	}
	e.umu.Lock()
	defer e.umu.Unlock()
	old := e.childTopo[n]
	if err := g.lock(opName); err != nil {
		return err
	}
	nu := buildTopo(g)
	g.mu.Unlock()
	pr := &pairing{cands: make([]paramChange, 0, len(nu.nodes))}
	if !pr.pair(old, nu) {
		// The driver answers a topology mismatch here as an update failure.
		return nodeErr(opName, n, ErrGraphExecUpdateFailure, "the new graph does not match the child graph: %v", pr.info.Result)
	}
	info, why, err := e.install(pr.cands)
	if err != nil {
		return withOp(opName, err)
	}
	if info.Result != UpdateSuccess {
		return nodeErr(opName, n, ErrInvalidValue, "%v: %s", info.Result, why)
	}
	e.replaceChildUserRefs(n, g)
	return nil
}

// SetEnabled enables or disables kernel, memcpy and memset node n in e
// (cudaGraphNodeSetEnabled). A disabled node does nothing, like an empty
// node, until enabled again; its parameters are kept, and updates made
// while it is disabled apply when it is enabled. Updates do not change
// whether a node is enabled. Takes effect at e's next launch.
func (e *Exec) SetEnabled(n *Node, enabled bool) error {
	const opName = "Exec.SetEnabled"
	x, err := e.enableable(opName, n)
	if err != nil {
		return err
	}
	if e.be != nil {
		return e.cudaSetEnabled(opName, n, enabled)
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

// Enabled reports whether node n is enabled in e (cudaGraphNodeGetEnabled).
func (e *Exec) Enabled(n *Node) (bool, error) {
	const opName = "Exec.Enabled"
	x, err := e.enableable(opName, n)
	if err != nil {
		return false, err
	}
	if e.be != nil {
		return e.cudaEnabled(opName, n)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.ops[x].off, nil
}

func (e *Exec) enableable(opName string, n *Node) (int32, error) {
	if err := e.check(opName); err != nil {
		return 0, err
	}
	if n == nil {
		return 0, newErr(opName, ErrInvalidValue, "nil node")
	}
	switch n.typ {
	case NodeKernel, NodeMemcpy, NodeMemset:
	default:
		return 0, nodeErr(opName, n, ErrInvalidValue, "only kernel, memcpy and memset nodes can be enabled or disabled, not %v nodes", n.typ)
	}
	if e.be != nil {
		return 0, nil
	}
	x, ok := e.opOf[n]
	if !ok {
		return 0, nodeErr(opName, n, ErrInvalidValue, "not a node of the graph the executable graph was instantiated from")
	}
	return x, nil
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

// updateCondDefaults gives e's conditional handles the default values and
// flags of the handles of the new graph (whole-graph update).
func (e *Exec) updateCondDefaults(pairs [][2]*Node) {
	if len(pairs) == 0 || e.conds == nil {
		return
	}
	condMu.Lock()
	defer condMu.Unlock()
	for _, p := range pairs {
		oh, nh := p[0].conds.handle, p[1].conds.handle
		if i, ok := e.conds.index[oh.h]; ok {
			e.conds.slots[i].dflt.Store(packDefault(nh.def, nh.flags))
		}
	}
}

// edgeData is the data of node i's j-th dependency edge.
func (t *topo) edgeData(i, j int) EdgeData {
	if k := int(t.depOff[i]) + j; k < len(t.data) {
		return t.data[k]
	}
	return EdgeData{}
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
