package gpugraph

import (
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// cuEdgeData returns the driver's form of data, nil when it is all default
// (the driver takes NULL for that). Edge data on the cuda backend is the
// driver's (CUgraphEdgeData): passed to cuGraphAddDependencies_v2,
// cuGraphRemoveDependencies_v2, cuStreamBeginCaptureToGraph and
// cuStreamUpdateCaptureDependencies_v2, read back with
// cuGraphNodeGetDependencies_v2 and cuStreamGetCaptureInfo_v3. A
// programmatic edge needs no launch attribute on the kernel node: in a
// graph the edge is the mechanism.
func cuEdgeData(data []EdgeData) []driver.GraphEdgeData {
	if defaultData(data) {
		return nil
	}
	ed := make([]driver.GraphEdgeData, len(data))
	for i, d := range data {
		ed[i] = driver.GraphEdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: uint8(d.Type)}
	}
	return ed
}

func fromCUEdgeData(ed []driver.GraphEdgeData) []EdgeData {
	data := make([]EdgeData, len(ed))
	for i, d := range ed {
		data[i] = EdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: DependencyType(d.Type)}
	}
	return data
}

// captureEdgeData is the edge data of a capture's n dependencies, as the
// driver reports it (nil: all default).
func captureEdgeData(ed []driver.GraphEdgeData, n int) []EdgeData {
	if ed == nil {
		return make([]EdgeData, n)
	}
	return fromCUEdgeData(ed)
}

func edgesData(edges []Edge) []EdgeData {
	data := make([]EdgeData, len(edges))
	for i, e := range edges {
		data[i] = e.Data
	}
	return data
}

// cudaAddNodeEdges adds n's native node. With non-default edge data it adds
// the node without dependencies, then its edges with their data in one
// cuGraphAddDependencies_v2 call, destroying the node if the driver refuses
// them, so that nothing is half done.
func (d *Device) cudaAddNodeEdges(g *Graph, n *Node, data []EdgeData) error {
	if defaultData(data) {
		return d.cudaAddNode(g, n)
	}
	deps := n.deps
	n.deps = nil
	err := d.cudaAddNode(g, n)
	n.deps = deps
	if err != nil {
		return err
	}
	c := d.cuda
	from, to := make([]uintptr, len(deps)), make([]uintptr, len(deps))
	for i, x := range deps {
		from[i], to[i] = x.cu, n.cu
	}
	ed := cuEdgeData(data)
	err = c.do(func() error { return c.drv.GraphAddDependencies(g.cu, from, to, ed) })
	if err != nil {
		c.do(func() error { return c.drv.GraphDestroyNode(n.cu) })
		n.cu = 0
		return cudaErr("", err)
	}
	return nil
}
