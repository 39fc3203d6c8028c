package gpugraph

import "github.com/gpugraph/gpugraph/internal/backend"

// backendEdgeData is data as the backend takes it. Edge data on the cuda
// backend is the driver's (CUgraphEdgeData): passed to
// cuGraphAddDependencies_v2, cuGraphRemoveDependencies_v2,
// cuStreamBeginCaptureToGraph and cuStreamUpdateCaptureDependencies_v2,
// read back with cuGraphNodeGetDependencies_v2 and
// cuStreamGetCaptureInfo_v3. A programmatic edge needs no launch attribute
// on the kernel node: in a graph the edge is the mechanism.
func backendEdgeData(data []EdgeData) []backend.EdgeData {
	ed := make([]backend.EdgeData, len(data))
	for i, d := range data {
		ed[i] = backend.EdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: uint8(d.Type)}
	}
	return ed
}

func fromBackendEdgeData(d backend.EdgeData) EdgeData {
	return EdgeData{FromPort: d.FromPort, ToPort: d.ToPort, Type: DependencyType(d.Type)}
}

func fromBackendEdgeDataAll(ed []backend.EdgeData) []EdgeData {
	data := make([]EdgeData, len(ed))
	for i, d := range ed {
		data[i] = fromBackendEdgeData(d)
	}
	return data
}

func edgesData(edges []Edge) []EdgeData {
	data := make([]EdgeData, len(edges))
	for i, e := range edges {
		data[i] = e.Data
	}
	return data
}
