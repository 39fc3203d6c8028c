package gpugraph

// BeginCaptureToGraphWithData captures into g as BeginCaptureToGraph does,
// the edge from deps[i] to the first captured work carrying data[i]
// (cudaStreamBeginCaptureToGraph with dependency data). data is nil or as
// long as deps. The Edge data section of the package documentation says
// what capture does with the data.
func (s *Stream) BeginCaptureToGraphWithData(g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	return s.beginCaptureData("Stream.BeginCaptureToGraphWithData", s.devMain(), g, deps, data, mode)
}

// UpdateCaptureDependenciesWithData updates the stream's dependency set as
// UpdateCaptureDependencies does, the edge from nodes[i] to the next
// captured work carrying data[i] (cudaStreamUpdateCaptureDependencies with
// dependency data). data is nil or as long as nodes.
func (s *Stream) UpdateCaptureDependenciesWithData(nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	return s.updateCaptureDependencies("Stream.UpdateCaptureDependenciesWithData", nodes, data, flags)
}

// checkHalfEdges checks the data of edges from nodes whose downstream node
// is not known yet.
func checkHalfEdges(opName string, nodes []*Node, data []EdgeData) error {
	if data == nil {
		return nil
	}
	if len(data) != len(nodes) {
		return newErr(opName, ErrInvalidValue, "%d dependencies but edge data for %d", len(nodes), len(data))
	}
	for i, n := range nodes {
		if n == nil {
			return newErr(opName, ErrInvalidValue, "nil node")
		}
		if err := checkEdgeDataFrom(opName, n, data[i]); err != nil {
			return err
		}
	}
	return nil
}

// setCapData records the data of the half edges from nodes, replacing what
// the set held for them. The capture lock is held.
func (s *Stream) setCapData(nodes []*Node, data []EdgeData) {
	for i, d := range data {
		if d == (EdgeData{}) {
			delete(s.capData, nodes[i])
			continue
		}
		if s.capData == nil {
			s.capData = map[*Node]EdgeData{}
		}
		s.capData[nodes[i]] = d
	}
}

// capEdgeData returns the data of the half edges from s.capDeps, nil when
// all are default. The capture lock is held.
func (s *Stream) capEdgeData() []EdgeData {
	if len(s.capData) == 0 {
		return nil
	}
	data := make([]EdgeData, len(s.capDeps))
	for i, n := range s.capDeps {
		data[i] = s.capData[n]
	}
	return data
}

// takeEventData gives s the half-edge data of the record e stands for. The
// capture lock is held.
func (s *Stream) takeEventData(e *Event) {
	for n, d := range e.capData {
		if s.capData == nil {
			s.capData = map[*Node]EdgeData{}
		}
		s.capData[n] = d
	}
}
