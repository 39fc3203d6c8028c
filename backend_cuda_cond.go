package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// cudaCondHandle creates a handle on g's native graph, in the device's
// context. Conditional nodes on the cuda backend are the driver's: handles
// come from cuGraphConditionalHandleCreate, the node and its body graphs
// from cuGraphAddNode_v2, and the driver checks handles and body contents.
// Kernels set handles with cudaGraphSetConditional (SetConditionalCUDA).
func (d *Device) cudaCondHandle(opName string, g *Graph, def uint32, flags ConditionalFlags) (ConditionalHandle, error) {
	var h uint64
	err := d.cuCall(opName, func() error {
		var err error
		h, err = d.cuda.drv.GraphConditionalHandleCreate(g.cu, d.cuda.ctx, def, uint32(flags))
		return err
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
	c := d.cuda
	c.cm.Lock()
	defer c.cm.Unlock()
	cp := driver.ConditionalNodeParams{Handle: uint64(p.Handle), Type: uint32(p.Type), Size: uint32(p.Size), Ctx: c.ctx}
	h, hs, err := c.drv.GraphAddConditionalNode(c.cm, g.cu, deps, cp)
	if err != nil {
		return 0, err
	}
	bodies := make([]*Graph, len(hs))
	for i, b := range hs {
		bodies[i] = &Graph{dev: d, id: graphIDs.Add(1), parent: n, cu: b}
	}
	n.conds = &condNode{bodies: bodies}
	return h, nil
}
