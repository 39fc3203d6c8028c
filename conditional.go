package gpugraph

import (
	"bufio"
	"fmt"
	"math"
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// ConditionalHandle names the condition value of one conditional node
// (cudaGraphConditionalHandle). Kernels receive it as a Uint64 argument.
type ConditionalHandle uint64

// ConditionalFlags modify a conditional handle.
type ConditionalFlags uint32

// ConditionalAssignDefault resets the value to the handle's default at the
// start of every launch (cudaGraphCondAssignDefault).
const ConditionalAssignDefault ConditionalFlags = 1

// ConditionalType is the kind of a conditional node
// (cudaGraphConditionalNodeType).
type ConditionalType int

// Conditional node types.
const (
	ConditionalIf     ConditionalType = 0 // body 0 if the value is non-zero; body 1 (Size 2) if it is zero
	ConditionalWhile  ConditionalType = 1 // body 0 while the value is non-zero
	ConditionalSwitch ConditionalType = 2 // body n if the value is n < Size
)

func (t ConditionalType) String() string {
	switch t {
	case ConditionalIf:
		return "IF"
	case ConditionalWhile:
		return "WHILE"
	case ConditionalSwitch:
		return "SWITCH"
	}
	return fmt.Sprintf("ConditionalType(%d)", int(t))
}

// ConditionalParams describe a conditional node (cudaConditionalNodeParams):
// its handle, its type and its number of bodies (1 for WHILE, 1 or 2 for IF,
// at least 1 for SWITCH). The bodies are created with the node; find them
// with Node.ConditionalBodies. The Conditional nodes section of the package
// documentation gives the rules.
type ConditionalParams struct {
	Handle ConditionalHandle
	Type   ConditionalType
	Size   int
}

func (ConditionalParams) NodeType() NodeType { return NodeConditional }

// SetConditionalCUDA declares cudaGraphSetConditional for a kernel's CUDA
// body: put it before the kernel in Kernel.CUDA. The function is a device
// runtime builtin that the driver resolves when it loads the module, so
// NVRTC code calls it without relocatable device code or the device runtime
// library (cudadevrt).
//
//	__global__ void k(cudaGraphConditionalHandle h) { cudaGraphSetConditional(h, 0); }
const SetConditionalCUDA = `typedef __device_builtin__ unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
`

// condMu guards every graph's handle list (Graph.conds), the node each
// handle serves (condHandle.node) and the executable-graph counts. It is a
// leaf lock: nothing else is locked while it is held, so it may be taken
// with any graph locked.
var condMu sync.Mutex

// condHandle is one handle: where it was created, its default, and the
// conditional node it serves.
type condHandle struct {
	h     ConditionalHandle
	g     *Graph
	seq   int // creation order within g
	def   uint32
	flags ConditionalFlags
	node  *Node // the conditional node using it, or nil
}

// graphConds is a graph's conditional state.
type graphConds struct {
	handles []*condHandle // in creation order
}

// condNode is a conditional node's state: its handle and its bodies.
type condNode struct {
	handle *condHandle // nil on cuda when the handle was made outside gpugraph's view
	bodies []*Graph
}

// ConditionalHandleCreate creates a handle for a conditional node of g or of
// a body nested in it (cudaGraphConditionalHandleCreate). defaultValue is
// the value at the start of every launch with ConditionalAssignDefault;
// without that flag it is not applied. Handles cannot be destroyed.
func (g *Graph) ConditionalHandleCreate(defaultValue uint32, flags ConditionalFlags) (ConditionalHandle, error) {
	const op = "Graph.ConditionalHandleCreate"
	if flags&^ConditionalAssignDefault != 0 {
		return 0, newErr(op, ErrInvalidValue, "unknown flags %#x", uint32(flags))
	}
	if err := g.lock(op); err != nil {
		return 0, err
	}
	defer g.mu.Unlock()
	bh, err := g.be.CondHandleCreate(defaultValue, uint32(flags))
	if err != nil {
		return 0, backendErr(op, err)
	}
	h := ConditionalHandle(bh)
	condMu.Lock()
	defer condMu.Unlock()
	if g.conds == nil {
		g.conds = &graphConds{}
	}
	g.conds.handles = append(g.conds.handles, &condHandle{h: h, g: g, seq: len(g.conds.handles), def: defaultValue, flags: flags})
	return h, nil
}

// ConditionalBodies returns the body graphs of a conditional node, in body
// order (cudaConditionalNodeParams.phGraph_out): the graphs the node runs,
// which belong to the node and are filled by the caller.
func (n *Node) ConditionalBodies() ([]*Graph, error) {
	const op = "Node.ConditionalBodies"
	if n == nil {
		return nil, newErr(op, ErrInvalidValue, "nil node")
	}
	if err := n.g.lock(op); err != nil {
		return nil, err
	}
	defer n.g.mu.Unlock()
	if err := n.g.checkNodeLocked(op, n); err != nil {
		return nil, err
	}
	if n.typ != NodeConditional {
		return nil, nodeErr(op, n, ErrInvalidValue, "not a conditional node")
	}
	if n.conds == nil {
		return nil, nodeErr(op, n, ErrNotSupported, "the bodies of a conditional node made by the driver are not known")
	}
	return append([]*Graph(nil), n.conds.bodies...), nil
}

// checkCondParams checks what every backend needs of conditional node
// parameters: a type, and a number of bodies the type allows. (The handle
// is the driver's to check on cuda, where 0 may be a valid handle.)
func checkCondParams(opName string, p ConditionalParams) error {
	ok := false
	switch p.Type {
	case ConditionalIf:
		ok = p.Size == 1 || p.Size == 2
	case ConditionalWhile:
		ok = p.Size == 1
	case ConditionalSwitch:
		ok = p.Size >= 1 && p.Size <= math.MaxUint32
	default:
		return newErr(opName, ErrInvalidValue, "unknown conditional type %d", int(p.Type))
	}
	if !ok {
		return newErr(opName, ErrInvalidValue, "%v node with %d bodies (WHILE takes 1, IF 1 or 2, SWITCH at least 1)", p.Type, p.Size)
	}
	return nil
}

// findHandle returns the handle record for h visible from g: created in g
// or in a graph that g is a body of, directly or through nested bodies. It
// is called with condMu held.
func (g *Graph) findHandle(h ConditionalHandle) *condHandle {
	for x := g; x != nil; {
		if x.conds != nil {
			for _, r := range x.conds.handles {
				if r.h == h {
					return r
				}
			}
		}
		if x.parent == nil || x.parent.typ != NodeConditional {
			return nil
		}
		x = x.parent.g
	}
	return nil
}

// condAddLocked records the handle of the conditional node n just added to
// g (locked). The backend has checked the handle and created the bodies
// (addBackendNode), as the driver does.
func (g *Graph) condAddLocked(opName string, n *Node) error {
	p := n.params.(ConditionalParams)
	condMu.Lock()
	defer condMu.Unlock()
	r := g.findHandle(p.Handle)
	if n.conds != nil {
		n.conds.handle = r
	}
	if r != nil && r.node == nil {
		r.node = n
	}
	return nil
}

// condDestroy is called when the conditional node n (of a locked graph) is
// destroyed, with the node or its graph: the bodies go with it, and its
// handle may serve another node.
func (n *Node) condDestroy() {
	c := n.conds
	if c == nil {
		return
	}
	for _, b := range c.bodies {
		b.mu.Lock()
		b.destroyLocked()
		b.mu.Unlock()
	}
	condMu.Lock()
	if c.handle != nil && c.handle.node == n {
		c.handle.node = nil
	}
	condMu.Unlock()
}

// hasCondLocked reports whether the locked graph g contains conditional
// nodes.
func (g *Graph) hasCondLocked() bool {
	for _, n := range g.nodes {
		if n.typ == NodeConditional {
			return true
		}
	}
	return false
}

// condDeviceRuleLocked refuses, at instantiation, a conditional body that
// holds work of another device than the conditional node's (its graph's),
// directly or in a graph nested in the body (a child graph, a body of a
// conditional node in it), with ErrInvalidValue naming the node:
//   - a node of another device (from AddNodeOn, or from a capture into the
//     body that forked onto a stream of another device): the driver refuses
//     it at instantiation with "multiple devices not supported", as CUDA
//     says (CUDA_CONDITIONAL_NODE_PARAMS' ctx "must match context used to
//     create the handle and all body nodes"; docs/driver-multidev.txt);
//   - a memset, memcpy or kernel node on memory of another device, even
//     with peer access: the driver refuses an added memset at
//     instantiation, but it takes the memcpy and the launch then faults
//     (cudaErrorLaunchFailure, the context lost), and it takes the kernel
//     and its writes to that memory are lost (measured on two H100s, driver
//     580, directly in the body and in a child graph in it;
//     tools/probe/condpeer.cu, docs/driver-condpeer.txt). A memset made by
//     a capture it takes too, and runs out of order: after a node that
//     depends on the conditional node (a whole-graph differential input). A
//     kernel's memory is what its Pointer arguments address.
//
// The driver also refuses a body's copy of pageable memory, which it runs as
// work of another device, at instantiation with "multiple devices not
// supported" (docs/driver-conditional.txt). g is locked.
func (g *Graph) condDeviceRuleLocked(opName string) *Error {
	mo, _ := g.dev.be.(backend.MemoryOwners)
	if mo != nil && mo.OpenDevices() < 2 {
		mo = nil
	}
	own := g.dev.props.Ordinal
	var bad *Node
	var why string
	check := func(n *Node) bool {
		switch {
		case n.dev != nil && n.dev != g.dev:
			bad, why = n, fmt.Sprintf("runs on device %d", n.dev.props.Ordinal)
		case mo != nil:
			if p, owner, ok := otherDeviceMemory(n.params, mo, own); ok {
				bad, why = n, fmt.Sprintf("uses memory of device %d (%#x; the driver %s)", owner, uint64(p), bodyPeerEffect(n.typ))
			}
		}
		return bad == nil
	}
	for _, n := range g.nodes {
		if n.typ != NodeConditional || n.conds == nil {
			continue
		}
		for _, b := range n.conds.bodies {
			if !b.walkNested(false, check) {
				return nodeErr(opName, bad, ErrInvalidValue, "%s, in a body of %v of device %d: the work of a conditional body runs on the conditional node's device, on its memory",
					why, n, own)
			}
		}
	}
	return nil
}

// otherDeviceMemory returns an address that memset, memcpy or kernel params
// p use and that memory of another device than own holds, with that device.
// Of a node the driver captured, a kernel's Pointer arguments, a copy's
// device sides and a memset's destination are known (NativeNodeParams).
func otherDeviceMemory(p NodeParams, mo backend.MemoryOwners, own int) (DevicePtr, int, bool) {
	var ptrs []DevicePtr
	switch p := p.(type) {
	case MemsetParams:
		ptrs = []DevicePtr{p.Dst}
	case MemcpyParams:
		if p.DstHost == nil {
			ptrs = append(ptrs, p.Dst)
		}
		if p.SrcHost == nil {
			ptrs = append(ptrs, p.Src)
		}
	case NativeNodeParams: // a kernel, copy or memset the driver captured
		ptrs = p.ptrs
	case KernelParams:
		if p.Kernel == nil {
			return 0, 0, false
		}
		for i, t := range p.Kernel.Params {
			if t != Pointer || i >= len(p.Args) {
				continue
			}
			if v, ok := p.Args[i].(DevicePtr); ok {
				ptrs = append(ptrs, v)
			}
		}
	}
	for _, q := range ptrs {
		if q == 0 {
			continue
		}
		if o := mo.MemoryOwner(uint64(q)); o >= 0 && o != own {
			return q, o, true
		}
	}
	return 0, 0, false
}

// bodyPeerEffect says what the driver does with a body node of type t on
// another device's memory (docs/driver-condpeer.txt).
func bodyPeerEffect(t NodeType) string {
	switch t {
	case NodeMemset:
		return "refuses it at instantiation"
	case NodeMemcpy:
		return "would fault the launch, cudaErrorLaunchFailure"
	}
	return "would lose the kernel's writes to it"
}

// condChildRule refuses a graph with conditional nodes as a child graph, as
// the driver does.
func condChildRule(opName string, c *Graph) error {
	c.mu.Lock()
	has := c.hasCondLocked()
	c.mu.Unlock()
	if has {
		return newErr(opName, ErrNotSupported, "a graph with conditional nodes cannot be a child graph")
	}
	return nil
}

// condCloneRule refuses to clone a locked graph with conditional nodes, as
// the driver does.
func (g *Graph) condCloneRule(opName string) error {
	if g.hasCondLocked() {
		return newErr(opName, ErrNotSupported, "a graph with conditional nodes cannot be cloned")
	}
	return nil
}

// condStructurallyEqual compares two conditional nodes for StructurallyEqual:
// type, number of bodies and structurally equal bodies. Nodes the driver
// made (NativeNodeParams) compare by node type only.
func condStructurallyEqual(x, y *Node, xp ConditionalParams, yp NodeParams) bool {
	yc, ok := yp.(ConditionalParams)
	if !ok {
		return true
	}
	if xp.Type != yc.Type || xp.Size != yc.Size {
		return false
	}
	xb, err1 := x.ConditionalBodies()
	yb, err2 := y.ConditionalBodies()
	if err1 != nil || err2 != nil || len(xb) != len(yb) {
		return err1 != nil && err2 != nil
	}
	for i := range xb {
		if !StructurallyEqual(xb[i], yb[i]) {
			return false
		}
	}
	return true
}

// condUpdatable reports whether the conditional node old, in an executable
// graph's graph, can take the parameters of the conditional node new of an
// updated graph, as whole-graph update requires: the same type and number
// of bodies, and handles created in the same order (the same position in
// the same relative graph) and assigned to the paired nodes. The handles'
// defaults and flags may differ: an update takes the new ones. Bodies are
// paired by the caller like any other graphs.
func condUpdatable(old, new *Node) (ok bool, why string) {
	if old == nil || new == nil || old.typ != NodeConditional || new.typ != NodeConditional {
		return false, "not two conditional nodes"
	}
	op, okOld := old.params.(ConditionalParams)
	np, okNew := new.params.(ConditionalParams)
	if !okOld || !okNew {
		return false, "the parameters of a conditional node made by the driver are not known"
	}
	if op.Type != np.Type {
		return false, fmt.Sprintf("conditional type changed from %v to %v", op.Type, np.Type)
	}
	if op.Size != np.Size {
		return false, fmt.Sprintf("number of bodies changed from %d to %d", op.Size, np.Size)
	}
	if old.conds == nil || new.conds == nil || old.conds.handle == nil || new.conds.handle == nil {
		return false, "the handle of a conditional node made by the driver is not known"
	}
	condMu.Lock()
	defer condMu.Unlock()
	oh, nh := old.conds.handle, new.conds.handle
	if oh.seq != nh.seq {
		return false, fmt.Sprintf("handle is number %d in creation order, was %d", nh.seq, oh.seq)
	}
	if bodyDepth(old.g, oh.g) != bodyDepth(new.g, nh.g) {
		return false, "handle created in a graph at another nesting level"
	}
	return true, ""
}

// bodyDepth is how many conditional bodies up from g the handle's graph h
// is, or -1.
func bodyDepth(g, h *Graph) int {
	for d, x := 0, g; x != nil; d++ {
		if x == h {
			return d
		}
		if x.parent == nil || x.parent.typ != NodeConditional {
			return -1
		}
		x = x.parent.g
	}
	return -1
}

// condDOTLabel adds the lines of a conditional node's DOT label.
func condDOTLabel(p ConditionalParams) []string {
	return []string{fmt.Sprintf("%v handle %#x", p.Type, uint64(p.Handle)), fmt.Sprintf("%d bodies", p.Size)}
}

// condBodyName names body i of a conditional node of type t in DOT output.
func condBodyName(t ConditionalType, i int) string {
	switch {
	case t == ConditionalIf && i == 0:
		return "then"
	case t == ConditionalIf:
		return "else"
	case t == ConditionalWhile:
		return "loop"
	}
	return fmt.Sprintf("case %d", i)
}

// writeDOTBodies writes the bodies of the conditional node n (its graph
// locked) as nested clusters, with a dashed edge, labelled with the body's
// role, from n to each body's roots.
func writeDOTBodies(w *bufio.Writer, n *Node, name string, next *int) error {
	if n.conds == nil {
		return nil
	}
	p, _ := n.params.(ConditionalParams)
	for i, b := range n.conds.bodies {
		first := *next + 1
		roots, err := writeDOTGraph(w, b, next)
		if err != nil {
			return err
		}
		for _, id := range roots {
			fmt.Fprintf(w, "%q -> \"graph_%d_node_%d\" [style=\"dashed\" label=%q];\n", name, first, id, condBodyName(p.Type, i))
		}
	}
	return nil
}
