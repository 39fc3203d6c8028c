package driver

import "unsafe"

// graphNodeParams is CUgraphNodeParams, the argument of cuGraphAddNode_v2
// and cuGraphNodeSetParams: the node type, then a union of every node
// type's parameters (29 words), 256 bytes in all. Set the union with the
// accessor of the node's type.
type graphNodeParams struct {
	Type  int32 // CUgraphNodeType
	_     [3]int32
	Union [29]int64
	_     int64
}

// Node types of CUgraphNodeType used with graphNodeParams.
const (
	graphNodeTypeGraph       = 4
	graphNodeTypeConditional = 13
)

// ConditionalNodeParams is CUDA_CONDITIONAL_NODE_PARAMS. PhGraphOut is set
// by the driver: a C array of Size body graphs, owned by the node;
// GraphAddConditionalNode returns a copy of it.
type ConditionalNodeParams struct {
	Handle     uint64 // CUgraphConditionalHandle
	Type       uint32 // CUgraphConditionalNodeType: IF 0, WHILE 1, SWITCH 2
	Size       uint32
	PhGraphOut uintptr // CUgraph*
	Ctx        uintptr // CUcontext
}

// conditional returns the union as conditional node parameters.
func (p *graphNodeParams) conditional() *ConditionalNodeParams {
	return (*ConditionalNodeParams)(unsafe.Pointer(&p.Union))
}

// bodies returns the body graphs the driver wrote to PhGraphOut.
func (p *ConditionalNodeParams) bodies() []uintptr {
	if p.PhGraphOut == 0 || p.Size == 0 {
		return nil
	}
	return cArray[uintptr](p.PhGraphOut, uintptr(p.Size))
}

// GraphConditionalHandleCreate creates a conditional handle on g, with the
// default value def applied at each launch if flags say so
// (CU_GRAPH_COND_ASSIGN_DEFAULT).
func (d *Driver) GraphConditionalHandleCreate(g, ctx uintptr, def, flags uint32) (uint64, error) {
	var h uint64
	err := d.call("cuGraphConditionalHandleCreate", uintptr(unsafe.Pointer(&h)), g, ctx, uintptr(def), uintptr(flags))
	return h, err
}

// GraphAddConditionalNode adds a conditional node (cuGraphAddNode_v2, with
// the parameters laid out in m, held locked) and returns it with its body
// graphs, which the driver creates and the node owns.
func (d *Driver) GraphAddConditionalNode(m *CMem, g uintptr, deps []uintptr, p ConditionalNodeParams) (uintptr, []uintptr, error) {
	np := put(m, &graphNodeParams{Type: graphNodeTypeConditional})
	cp := np.conditional()
	*cp = p
	cp.PhGraphOut = 0
	var n uintptr
	err := d.call("cuGraphAddNode_v2", uintptr(unsafe.Pointer(&n)), g, uintptr(sliceptr(deps)), 0, uintptr(len(deps)), uintptr(unsafe.Pointer(np)))
	if err != nil {
		return 0, nil, err
	}
	return n, cp.bodies(), nil
}

// GraphNodeSetChildGraph replaces the graph embedded in child graph node
// node with a clone of g (cuGraphNodeSetParams, CU_GRAPH_NODE_TYPE_GRAPH).
func (d *Driver) GraphNodeSetChildGraph(node, g uintptr) error {
	var p graphNodeParams
	p.Type = graphNodeTypeGraph
	p.Union[0] = int64(g) // CUDA_CHILD_GRAPH_NODE_PARAMS.graph; ownership 0: clone
	return d.call("cuGraphNodeSetParams", node, uintptr(unsafe.Pointer(&p)))
}
