package gpugraph

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpugraph/gpugraph/internal/backend"
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

// Update updates e with the parameters of g, a graph of the same topology
// (cudaGraphExecUpdate). Nodes pair up deterministically: the sinks of both
// graphs in the order they became sinks, then every paired node's
// dependencies in the order its incoming edges were added, so graphs built
// by the same sequence of API calls (or captures) pair node for node.
//
// On failure nothing changes; the error wraps ErrGraphExecUpdateFailure
// (or ErrInvalidValue for bad arguments), and the result says why and
// which node of g was at fault. The update takes effect at e's next launch.
//
// A memset or memcpy node's memory may move to another device (or between
// device and host memory) only as SetParams allows; otherwise the result
// is UpdateErrorParametersChanged, naming the node, as the driver answers.
// On the cuda backend the driver decides, and it sees peer access however
// it was enabled.
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
	if err := g.lock(opName); err != nil {
		return fail, err
	}
	err := g.usableLocked(opName)
	g.mu.Unlock()
	if err != nil {
		return fail, err
	}
	var info backend.UpdateInfo
	var held []*Graph
	held, err = g.withLoopsAlone(opName, func() error {
		var err error
		info, err = e.be.Update(g.be)
		return backendErr(opName, err)
	})
	e.holdLoopEdges(held)
	res := UpdateResultInfo{Result: UpdateResult(info.Result)}
	if info.ErrorNode != nil || info.ErrFrom != nil { // none named (a success): no lock, no search
		g.mu.Lock()
		res.ErrorNode, res.ErrorFromNode = findNative(g, info.ErrorNode), findNative(g, info.ErrFrom)
		g.mu.Unlock()
	}
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			c := ge.at(ge.Op, res.ErrorNode)
			if c.Code == ErrGraphExecUpdateFailure { // the result says why; the detail, where
				if c.Detail == "" {
					c.Detail = res.Result.String()
				} else {
					c.Detail = res.Result.String() + ": " + c.Detail
				}
			}
			return res, c
		}
		return res, err
	}
	// User objects: e now holds the references of g's graphs instead.
	var pair func(*Node) *Node
	if info.Children != nil {
		pair = func(n *Node) *Node { m, _ := info.Children[n].(*Node); return m }
	}
	e.replaceUserRefs(g, pair)
	e.keepUpdatedParams(g)
	if g.hasRecords.Load() || len(*e.records.Load()) > 0 {
		g.mu.Lock()
		e.setRecords(g.recordEventsLocked(nil, nil))
		g.mu.Unlock()
	}
	return res, nil
}

// SetParams changes the parameters of node n in e, for e's next launch
// (cudaGraphExec*NodeSetParams). n is the node of the graph e was
// instantiated from, or of a graph embedded in it (a child graph or a
// conditional body); the graph itself does not change. Kernel, memcpy, memset, host, event record and wait, and
// child graph nodes can be updated, within the limits of Update; a child
// graph node takes a graph of the same topology as its current one.
//
// A memset node's destination stays in memory of the device that held it
// when e was instantiated, and so does each side of a memcpy node (host
// memory, pinned or not, for a host side), as CUDA requires ("allocated
// from the same context as the original"), with one exception: a copy
// from device memory may move its destination to another device's memory
// when peer access is enabled both ways between the two devices
// (Device.EnablePeerAccess; access enabled outside gpugraph, by NCCL for
// one, is not seen). Any other move is refused with ErrInvalidValue, as
// the driver refuses it (measured on two GPUs, docs/driver-multidev.txt).
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
	if n.be == nil {
		return nodeErr(opName, n, ErrInvalidValue, "not a node of the graph the executable graph was instantiated from")
	}
	if n.dead {
		// The driver names nodes by the graph's handles: they die with it.
		return nodeErr(opName, n, ErrInvalidValue, "a node of a destroyed graph")
	}
	if cp, isChild := p.(ChildGraphParams); isChild {
		g := cp.Graph
		if g == nil {
			return nodeErr(opName, n, ErrInvalidValue, "nil child graph")
		}
		if g.dev != e.dev {
			return nodeErr(opName, n, ErrInvalidValue, "graph belongs to another device")
		}
		if err := g.lock(opName); err != nil {
			return err
		}
		g.mu.Unlock()
		held, err := g.withLoopsAlone(opName, func() error { return e.be.SetChildGraph(n.be, g.be) })
		e.holdLoopEdges(held)
		if err != nil {
			return nodeAt(opName, n, err)
		}
		e.replaceChildUserRefs(n, g)
		e.setChildRecords(n, g)
		return nil
	}
	op, code, msg := n.lowerOp(copyParams(p))
	if code != nil {
		return nodeErr(opName, n, code, "%s", msg)
	}
	if err := e.checkHolders(opName, n, p); err != nil {
		return err
	}
	if err := e.checkCapturedPeerMemset(opName, n, p); err != nil {
		return err
	}
	if err := e.checkGraphMemCopy(opName, n, p); err != nil {
		return err
	}
	if err := e.be.SetParams(n.be, &op); err != nil {
		return nodeAt(opName, n, err)
	}
	if rp, ok := p.(EventRecordParams); ok {
		e.setRecordParams(n, rp.Event)
	}
	return nil
}

// nodeAt reports a backend's error about node n as opName's.
func nodeAt(opName string, n *Node, err error) error {
	err = backendErr(opName, err)
	var ge *Error
	if errors.As(err, &ge) {
		return ge.at(opName, n)
	}
	return err
}

// SetEnabled enables or disables kernel, memcpy and memset node n in e
// (cudaGraphNodeSetEnabled). A disabled node does nothing, like an empty
// node, until enabled again; its parameters are kept, and updates made
// while it is disabled apply when it is enabled. Updates do not change
// whether a node is enabled. Takes effect at e's next launch.
//
// Disabling the last enabled node of a child graph is refused with
// ErrNotSupported, on every backend: the driver then drops the ordering
// the child graph node stands for (measured on an H100, driver 580: the
// node after the child graph runs before the node before it, and the
// launch completes before it does; tools/probe/disabledchild.cu,
// docs/driver-capture.txt). Keep one node of the child graph enabled, or
// disable nodes of the parent graph instead.
//
// Disabling a 1D memset node (Height 1) that has both dependencies and
// dependents is refused the same way, for the same reason: the driver
// then runs its dependents before its dependencies and completes the
// launch early (H100, driver 580: tools/probe/disabledmid.cu,
// docs/driver-disabledmid.txt; a 2D memset, a memcpy, a kernel, or a 1D
// memset that is a source or a sink of the top graph keep the order). In
// a child graph or a body, a memset of any shape that is a source with
// dependents or a sink with dependencies is refused too: it carries the
// ordering of the node that embeds the graph (two-GPU differential
// inputs); an isolated one may be disabled. Update the executable graph
// to a graph without it instead (Exec.Update).
func (e *Exec) SetEnabled(n *Node, enabled bool) error {
	const opName = "Exec.SetEnabled"
	if err := e.enableable(opName, n); err != nil {
		return err
	}
	if !enabled && n.memsetKeepsOrder() {
		return nodeErr(opName, n, ErrNotSupported, "a memset node that orders other work (a 1D memset between nodes, or a source or sink of a child graph or body): disabled, the driver would not order its dependencies before its dependents")
	}
	if !enabled {
		if last, err := e.lastEnabledOfChild(n); err != nil {
			return nodeAt(opName, n, err)
		} else if last {
			return nodeErr(opName, n, ErrNotSupported, "the last enabled node of the child graph of %v: disabled, the driver would not order that child graph node's dependencies and dependents", n.g.parent)
		}
	}
	return nodeAt(opName, n, e.be.SetEnabled(n.be, enabled))
}

// memsetKeepsOrder reports whether disabling memset node n would lose
// ordering on the driver: a 1D memset with dependencies and dependents
// (tools/probe/disabledmid.cu), and in a child graph or body a memset of
// any shape that is a source with dependents or a sink with dependencies,
// which carries the ordering of the node embedding the graph (two-GPU
// differential inputs).
func (n *Node) memsetKeepsOrder() bool {
	if n.typ != NodeMemset {
		return false
	}
	n.g.mu.Lock()
	deps, outs := len(n.deps), len(n.outs)
	n.g.mu.Unlock()
	if n.g.parent != nil && (deps == 0) != (outs == 0) {
		return true // an isolated one keeps the order (scenario SetEnabledNested)
	}
	if deps == 0 || outs == 0 {
		return false
	}
	switch p := n.params.(type) {
	case MemsetParams:
		return p.Height <= 1
	case NativeNodeParams:
		nm, ok := n.g.dev.be.(backend.NativeMemsets)
		if !ok {
			return false
		}
		h, err := nm.NativeMemsetHeight(p.Node)
		return err == nil && h <= 1
	}
	return false
}

// lastEnabledOfChild reports whether n is the only node of an embedded
// child graph (not a conditional body) still enabled in e: every other node
// of its graph is a kernel, memcpy or memset node that e has disabled.
func (e *Exec) lastEnabledOfChild(n *Node) (bool, error) {
	g := n.g
	if g == nil || g.parent == nil || g.parent.typ != NodeChildGraph {
		return false, nil
	}
	g.mu.Lock()
	nodes := slices.Clone(g.nodes)
	g.mu.Unlock()
	for _, m := range nodes {
		if m == n {
			continue
		}
		switch m.typ {
		case NodeKernel, NodeMemcpy, NodeMemset:
		default:
			return false, nil // a node that cannot be disabled keeps the graph's order
		}
		if m.be == nil {
			return false, nil
		}
		on, err := e.be.Enabled(m.be)
		if err != nil {
			return false, err
		}
		if on {
			return false, nil
		}
	}
	return true, nil
}

// Enabled reports whether node n is enabled in e (cudaGraphNodeGetEnabled).
func (e *Exec) Enabled(n *Node) (bool, error) {
	const opName = "Exec.Enabled"
	if err := e.enableable(opName, n); err != nil {
		return false, err
	}
	on, err := e.be.Enabled(n.be)
	return on, nodeAt(opName, n, err)
}

func (e *Exec) enableable(opName string, n *Node) error {
	if err := e.check(opName); err != nil {
		return err
	}
	if n == nil {
		return newErr(opName, ErrInvalidValue, "nil node")
	}
	switch n.typ {
	case NodeKernel, NodeMemcpy, NodeMemset:
	default:
		return nodeErr(opName, n, ErrInvalidValue, "only kernel, memcpy and memset nodes can be enabled or disabled, not %v nodes", n.typ)
	}
	if n.be == nil {
		return nodeErr(opName, n, ErrInvalidValue, "not a node of the graph the executable graph was instantiated from")
	}
	if n.dead {
		return nodeErr(opName, n, ErrInvalidValue, "a node of a destroyed graph")
	}
	return nil
}
