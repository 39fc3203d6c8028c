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

	ptrs []DevicePtr // a kernel node's Pointer arguments (kernels of this package's devices), a memcpy node's device sides, a memset node's destination
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
