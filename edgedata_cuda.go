//go:build linux

package gpugraph

import (
	"runtime"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/cuda"
)

// cuEdgeData returns the driver's form of data, nil when it is all default
// (the driver takes NULL for that). Edge data on the cuda backend is the
// driver's (CUgraphEdgeData): passed to cuGraphAddDependencies_v2,
// cuGraphRemoveDependencies_v2, cuStreamBeginCaptureToGraph and
// cuStreamUpdateCaptureDependencies_v2, read back with
// cuGraphNodeGetDependencies_v2 and cuStreamGetCaptureInfo_v3. A
// programmatic edge needs no launch attribute on the kernel node: in a
// graph the edge is the mechanism.
func cuEdgeData(data []EdgeData) []cuda.GraphEdgeData {
	if defaultData(data) {
		return nil
	}
	ed := make([]cuda.GraphEdgeData, len(data))
	for i, d := range data {
		ed[i] = cuda.GraphEdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: uint8(d.Type)}
	}
	return ed
}

// cuEdgeDataPtr is the address of ed for a driver call, or NULL. The caller
// keeps ed alive across the call (it holds no Go pointers).
func cuEdgeDataPtr(ed []cuda.GraphEdgeData) uintptr {
	if len(ed) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&ed[0]))
}

func fromCUEdgeData(ed []cuda.GraphEdgeData) []EdgeData {
	data := make([]EdgeData, len(ed))
	for i, d := range ed {
		data[i] = EdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: DependencyType(d.Type)}
	}
	return data
}

// captureEdgeData reads the n edge data of a capture's dependencies at p, a
// driver-owned array (NULL: all default).
func captureEdgeData(p uintptr, n uintptr) []EdgeData {
	if p == 0 {
		return make([]EdgeData, n)
	}
	return fromCUEdgeData(unsafe.Slice(*(**cuda.GraphEdgeData)(unsafe.Pointer(&p)), n))
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
	c := d.cu
	from, to := make([]uintptr, len(deps)), make([]uintptr, len(deps))
	for i, x := range deps {
		from[i], to[i] = x.cu, n.cu
	}
	ed := cuEdgeData(data)
	err = c.do(func() error {
		err := c.drv.Call("cuGraphAddDependencies_v2", g.cu, cudaDeps(from), cudaDeps(to), cuEdgeDataPtr(ed), uintptr(len(deps)))
		runtime.KeepAlive(from)
		runtime.KeepAlive(to)
		runtime.KeepAlive(ed)
		return err
	})
	if err != nil {
		c.do(func() error { return c.drv.Call("cuGraphDestroyNode", n.cu) })
		n.cu = 0
		return cudaErr("", err)
	}
	return nil
}
