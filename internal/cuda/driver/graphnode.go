//go:build linux

package driver

import "unsafe"

// GraphNodeParams is CUgraphNodeParams, the argument of cuGraphAddNode_v2:
// the node type, then a union of every node type's parameters (29 words),
// 256 bytes in all. Set the union with the accessor of the node's type.
type GraphNodeParams struct {
	Type  int32 // CUgraphNodeType
	_     [3]int32
	Union [29]int64
	_     int64
}

// Node types of CUgraphNodeType used with GraphNodeParams.
const GraphNodeTypeConditional = 13

// ConditionalNodeParams is CUDA_CONDITIONAL_NODE_PARAMS. PhGraphOut is set
// by the driver: a C array of Size body graphs, owned by the node.
type ConditionalNodeParams struct {
	Handle     uint64 // CUgraphConditionalHandle
	Type       uint32 // CUgraphConditionalNodeType: IF 0, WHILE 1, SWITCH 2
	Size       uint32
	PhGraphOut uintptr // CUgraph*
	Ctx        uintptr // CUcontext
}

// Conditional returns the union as conditional node parameters.
func (p *GraphNodeParams) Conditional() *ConditionalNodeParams {
	return (*ConditionalNodeParams)(unsafe.Pointer(&p.Union))
}

// Bodies returns the body graphs the driver wrote to PhGraphOut.
func (p *ConditionalNodeParams) Bodies() []uintptr {
	if p.PhGraphOut == 0 || p.Size == 0 {
		return nil
	}
	arr := *(**uintptr)(unsafe.Pointer(&p.PhGraphOut)) // a C pointer, not Go memory
	return append([]uintptr(nil), unsafe.Slice(arr, p.Size)...)
}
