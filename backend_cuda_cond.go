package gpugraph

// cudaCondHandle creates a handle on g's native graph. Conditional nodes on
// the cuda backend are the driver's: handles come from
// cuGraphConditionalHandleCreate, the node and its body graphs from
// cuGraphAddNode_v2, and the driver checks handles and body contents.
// Kernels set handles with cudaGraphSetConditional (SetConditionalCUDA).
func (d *Device) cudaCondHandle(opName string, g *Graph, def uint32, flags ConditionalFlags) (ConditionalHandle, error) {
	h, err := g.be.CondHandleCreate(def, uint32(flags))
	if err != nil {
		return 0, cudaErr(opName, err)
	}
	return ConditionalHandle(h), nil
}
