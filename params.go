package gpugraph

import "fmt"

// NodeType is the kind of a graph node, numbered as cudaGraphNodeType.
type NodeType int

// Node types.
const (
	NodeKernel         NodeType = 0
	NodeMemcpy         NodeType = 1
	NodeMemset         NodeType = 2
	NodeHost           NodeType = 3
	NodeChildGraph     NodeType = 4
	NodeEmpty          NodeType = 5
	NodeEventWait      NodeType = 6
	NodeEventRecord    NodeType = 7
	NodeExtSemasSignal NodeType = 8
	NodeExtSemasWait   NodeType = 9
	NodeMemAlloc       NodeType = 10
	NodeMemFree        NodeType = 11
	NodeConditional    NodeType = 13
)

var nodeTypeNames = map[NodeType]string{
	NodeKernel: "kernel", NodeMemcpy: "memcpy", NodeMemset: "memset", NodeHost: "host",
	NodeChildGraph: "child graph", NodeEmpty: "empty", NodeEventWait: "event wait",
	NodeEventRecord: "event record", NodeMemAlloc: "mem alloc", NodeMemFree: "mem free",
	NodeExtSemasSignal: "external semaphore signal", NodeExtSemasWait: "external semaphore wait",
	NodeConditional: "conditional",
}

func (t NodeType) String() string {
	if s, ok := nodeTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("NodeType(%d)", int(t))
}

// NodeParams are the parameters of one node: one of KernelParams,
// MemcpyParams, MemsetParams, HostParams, ChildGraphParams, EmptyParams,
// EventRecordParams, EventWaitParams, MemAllocParams, MemFreeParams or
// ConditionalParams. Graph.AddNode takes any of them.
type NodeParams interface {
	NodeType() NodeType
}

// NativeNodeParams stand for the parameters of a node the driver made (a
// node captured on the cuda backend), which gpugraph does not read back.
type NativeNodeParams struct {
	Type NodeType
	Node uintptr // the CUgraphNode
	Name string  // a kernel node's function name, when the driver tells it
}

func (p NativeNodeParams) NodeType() NodeType { return p.Type }

// EmptyParams describe an empty node: no work, only ordering.
type EmptyParams struct{}

// EventRecordParams describe a node that records Event when reached.
type EventRecordParams struct{ Event *Event }

// EventWaitParams describe a node that waits for Event's most recent record
// as of the graph's launch.
type EventWaitParams struct{ Event *Event }

// ChildGraphParams describe a node that runs Graph as a nested graph. Adding
// the node clones Graph; the node's Params then return the embedded clone.
type ChildGraphParams struct{ Graph *Graph }

func (KernelParams) NodeType() NodeType      { return NodeKernel }
func (MemcpyParams) NodeType() NodeType      { return NodeMemcpy }
func (MemsetParams) NodeType() NodeType      { return NodeMemset }
func (HostParams) NodeType() NodeType        { return NodeHost }
func (ChildGraphParams) NodeType() NodeType  { return NodeChildGraph }
func (EmptyParams) NodeType() NodeType       { return NodeEmpty }
func (EventWaitParams) NodeType() NodeType   { return NodeEventWait }
func (EventRecordParams) NodeType() NodeType { return NodeEventRecord }

// prepare checks p for device d and returns the work it stands for. It is the
// one place node parameters are validated, at node creation, SetParams and
// instantiation alike. Child graphs are checked by the caller.
func (d *Device) prepare(p NodeParams) (op, *Code, string) { return d.prepareIn(p, nil) }

// prepareIn is prepare taking kernel argument words from *words (see
// prepareKernelIn).
func (d *Device) prepareIn(p NodeParams, words *[]uint64) (op, *Code, string) {
	switch p := p.(type) {
	case KernelParams:
		k, code, msg := d.prepareKernelIn(&p, words)
		return op{kind: opKernel, kern: k}, code, msg
	case MemcpyParams:
		return d.prepareMemcpy(&p)
	case MemsetParams:
		return d.prepareMemset(&p)
	case HostParams:
		if p.Fn == nil {
			return op{}, ErrInvalidValue, "nil host function"
		}
		return op{kind: opHost, host: p.Fn}, nil, ""
	case EmptyParams:
		return op{kind: opEmpty}, nil, ""
	case EventRecordParams:
		if err := p.Event.check("", d); err != nil {
			return op{}, err.(*Error).Code, err.(*Error).Detail
		}
		return op{kind: opRecord, ev: p.Event}, nil, ""
	case EventWaitParams:
		if err := p.Event.check("", d); err != nil {
			return op{}, err.(*Error).Code, err.(*Error).Detail
		}
		return op{kind: opWait, ev: p.Event}, nil, ""
	case ExtSemaphoreSignalParams, ExtSemaphoreWaitParams:
		return d.prepareExtSem(p)
	case nil:
		return op{}, ErrInvalidValue, "nil params"
	}
	return op{}, ErrInvalidValue, fmt.Sprintf("unsupported params type %T", p)
}

// copyParams returns a copy of p that shares no mutable state with the
// caller's value (kernel arguments are copied).
func copyParams(p NodeParams) NodeParams {
	if k, ok := p.(KernelParams); ok {
		k.Args = append([]any(nil), k.Args...)
		return k
	}
	if q, ok := copyExtSemParams(p); ok {
		return q
	}
	return p
}
