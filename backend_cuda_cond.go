//go:build linux

package gpugraph

import (
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/cuda"
)

// cudaCondHandle creates a handle on g's native graph, in the device's
// context. Conditional nodes on the cuda backend are the driver's: handles
// come from cuGraphConditionalHandleCreate, the node and its body graphs
// from cuGraphAddNode_v2, and the driver checks handles and body contents.
// Kernels set handles with cudaGraphSetConditional (SetConditionalCUDA).
func (d *Device) cudaCondHandle(op string, g *Graph, def uint32, flags ConditionalFlags) (ConditionalHandle, error) {
	var h uint64
	err := d.cuCall(op, func() error {
		return d.cu.drv.Call("cuGraphConditionalHandleCreate", uintptr(unsafe.Pointer(&h)), g.cu, d.cu.ctx, uintptr(def), uintptr(flags))
	})
	if err != nil {
		return 0, err
	}
	return ConditionalHandle(h), nil
}

// cudaCondNode adds the native conditional node of n to g's native graph
// and gives n Go graphs bound to the bodies the driver created, so nodes
// added to them (or captured into them) go to the native bodies. It runs
// with the context current (cudaNode).
func (d *Device) cudaCondNode(g *Graph, n *Node, p ConditionalParams, deps []uintptr) (uintptr, error) {
	c := d.cu
	c.cm.Lock()
	defer c.cm.Unlock()
	np := (*cuda.GraphNodeParams)(c.cm.Alloc(int(unsafe.Sizeof(cuda.GraphNodeParams{}))))
	*np = cuda.GraphNodeParams{Type: cuda.GraphNodeTypeConditional}
	cp := np.Conditional()
	*cp = cuda.ConditionalNodeParams{Handle: uint64(p.Handle), Type: uint32(p.Type), Size: uint32(p.Size), Ctx: c.ctx}
	var h uintptr
	err := c.drv.Call("cuGraphAddNode_v2", uintptr(unsafe.Pointer(&h)), g.cu, cudaDeps(deps), 0, uintptr(len(deps)), uintptr(unsafe.Pointer(np)))
	if err != nil {
		return 0, err
	}
	hs := cp.Bodies()
	bodies := make([]*Graph, len(hs))
	for i, b := range hs {
		bodies[i] = &Graph{dev: d, id: graphIDs.Add(1), parent: n, cu: b}
	}
	n.conds = &condNode{bodies: bodies}
	return h, nil
}
