package gpugraph

// cudaCondHandle creates a handle on g's native graph. Conditional nodes on
// the cuda backend are the driver's: handles come from
// cuGraphConditionalHandleCreate, the node and its body graphs from
// cuGraphAddNode_v2, and the driver checks handles and body contents.
// Kernels set handles with cudaGraphSetConditional (SetConditionalCUDA).
func (d *Device) cudaCondHandle(opName string, g *Graph, def uint32, flags ConditionalFlags) (ConditionalHandle, error) {
	h, err := d.cuda.CondHandleCreate(g.cu, def, uint32(flags))
	if err != nil {
		return 0, cudaErr(opName, err)
	}
	return ConditionalHandle(h), nil
}

// cudaCondNode adds the native conditional node of n to g's native graph
// and gives n Go graphs bound to the bodies the driver created, so nodes
// added to them (or captured into them) go to the native bodies.
func (d *Device) cudaCondNode(g *Graph, n *Node, p ConditionalParams, deps []uintptr) (uintptr, error) {
	h, hs, err := d.cuda.AddConditionalNode(g.cu, deps, uint64(p.Handle), int(p.Type), p.Size)
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
