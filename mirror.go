package gpugraph

import (
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Graphs the driver built (the cuda backend): native capture
// (backend.Capturer), and clones, read back into this package's view
// through backend.Inspector.

// nativeCaptures holds the Go view of each native capture's graph, by the
// graph's handle, from the first CaptureInfo (or BeginCaptureToGraph) to
// EndCapture: every CaptureInfo of the capture, from any of its streams,
// and the graph EndCapture returns are that one view, so a node keeps its
// identity (a node from CaptureInfo is a node of the captured graph), as on
// the host backend.
type nativeCaptures struct {
	mu    sync.Mutex
	views map[uintptr]*Graph
}

// view returns the view of the capture of graph h, made by newView the
// first time.
func (c *nativeCaptures) view(h uintptr, newView func() *Graph) *Graph {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.views[h]
	if g == nil {
		if c.views == nil {
			c.views = map[uintptr]*Graph{}
		}
		g = newView()
		c.views[h] = g
	}
	return g
}

// end forgets the view of the capture of graph h and returns it.
func (c *nativeCaptures) end(h uintptr) *Graph {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.views[h]
	delete(c.views, h)
	return g
}

func nativeHandle(g backend.Graph) uintptr {
	if n, ok := g.(backend.Native); ok {
		return n.Native()
	}
	return 0
}

func (s *Stream) nativeBeginCapture(opName string, mode CaptureMode) error {
	return backendErr(opName, s.be.(backend.Capturer).BeginCapture(int(mode)))
}

func (s *Stream) nativeEndCapture(opName string) (*Graph, error) {
	cp := s.be.(backend.Capturer)
	// The capture's graph, whose view ends with it whatever EndCapture
	// answers: the driver may reuse the handle.
	var view *Graph
	if ci, err := cp.CaptureInfo(); err == nil && ci.Graph != nil {
		view = s.dev.native.end(nativeHandle(ci.Graph))
	}
	h, err := cp.EndCapture()
	into := s.capInto
	s.capInto = nil
	if err != nil {
		err = backendErr(opName, err)
		if c, _ := codeOf(err); into != nil && c == ErrStreamCaptureInvalidated {
			into.destroyedByCapture(err)
		}
		return nil, err
	}
	g := into
	switch {
	case g != nil:
	case view != nil:
		g = view
		g.be = h
	default:
		g = &Graph{dev: s.dev, id: graphIDs.Add(1), be: h}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := mirror(g); err != nil {
		return nil, backendErr(opName, err)
	}
	return g, nil
}

// mirror brings the Go view of a native graph up to date: nodes the Go
// side knows keep their identity, nodes the driver added (by capture) are
// appended in the driver's order with NativeNodeParams, and every node's
// dependencies are read back. g must be locked or not yet shared.
func mirror(g *Graph) error {
	in := g.be.(backend.Inspector)
	handles, err := in.Nodes()
	if err != nil {
		return err
	}
	byHandle := map[backend.Node]*Node{}
	g.edata = nil
	for _, node := range g.nodes {
		byHandle[node.be] = node
		node.deps, node.outs = nil, nil
	}
	infos := map[backend.Node]backend.NodeInfo{}
	for _, h := range handles {
		known := byHandle[h] != nil
		info, err := in.Node(h, !known)
		if err != nil {
			return err
		}
		infos[h] = info
		if known {
			continue
		}
		t := NodeType(info.Type)
		node := &Node{g: g, id: g.nextID, typ: t, params: nativeParams(t, info), be: h, dev: g.dev}
		g.nextID++
		byHandle[h] = node
		g.nodes = append(g.nodes, node)
	}
	for _, node := range g.nodes {
		info, ok := infos[node.be]
		if !ok { // a node the driver no longer lists
			if info, err = in.Node(node.be, false); err != nil {
				return err
			}
		}
		for i, d := range info.Deps {
			if dn := byHandle[d]; dn != nil {
				node.deps = append(node.deps, dn)
				dn.outs = append(dn.outs, node)
				g.setEdgeDataLocked(dn, node, fromBackendEdgeData(info.Data[i]))
			}
		}
	}
	return nil
}

// nativeParams are the parameters of a node the driver made where gpugraph
// models them (memory nodes: their address and size, which graph memory
// accounting and layouts need); others stay NativeNodeParams.
func nativeParams(t NodeType, info backend.NodeInfo) NodeParams {
	switch t {
	case NodeMemAlloc:
		if info.Ptr != 0 {
			p := MemAllocParams{Size: info.Size, Location: info.Location, Ptr: DevicePtr(info.Ptr)}
			for _, dev := range info.Access {
				p.Access = append(p.Access, MemAccessDesc{Device: dev})
			}
			return p
		}
	case NodeMemFree:
		if info.Ptr != 0 {
			return MemFreeParams{Ptr: DevicePtr(info.Ptr)}
		}
	case NodeKernel:
		return NativeNodeParams{Type: t, Node: info.Handle, Name: info.Name}
	}
	return NativeNodeParams{Type: t, Node: info.Handle}
}

// nativeBeginCaptureToGraph captures into g after deps.
func (s *Stream) nativeBeginCaptureToGraph(opName string, g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	hs := make([]backend.Node, len(deps))
	for i, n := range deps {
		hs[i] = n.be
	}
	err := s.be.(backend.Capturer).BeginCaptureToGraph(g.be, hs, backendEdgeData(data), int(mode))
	if err != nil {
		return backendErr(opName, err)
	}
	s.capInto = g
	s.dev.native.view(nativeHandle(g.be), func() *Graph { return g })
	return nil
}

// nativeUpdateCaptureDependencies sets or adds to the capture's dependencies.
func (s *Stream) nativeUpdateCaptureDependencies(opName string, nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	hs := make([]backend.Node, len(nodes))
	for i, n := range nodes {
		hs[i] = n.be
	}
	return backendErr(opName, s.be.(backend.Capturer).UpdateCaptureDependencies(hs, backendEdgeData(data), uint32(flags)))
}

// nativeClone clones g natively; the clone's nodes keep the originals'
// parameters and ids, found with cuGraphNodeFindInClone.
func (g *Graph) nativeClone(opName string) (*Graph, error) {
	cl := &Graph{dev: g.dev, id: graphIDs.Add(1), nextID: g.nextID, sinkSeq: g.sinkSeq, clonedBy: map[*Node]*Node{}}
	cl.hasRecords.Store(g.hasRecords.Load())
	err := func() error {
		var err error
		if cl.be, err = g.be.Clone(); err != nil {
			return err
		}
		for _, n := range g.nodes {
			h, err := cl.be.ClonedNode(n.be)
			if err != nil {
				return err
			}
			m := &Node{g: cl, id: n.id, typ: n.typ, params: copyParams(n.params), be: h, sink: n.sink, dev: n.dev}
			if n.child != nil {
				m.child = &Graph{dev: g.dev, id: graphIDs.Add(1), parent: m}
				if m.child.be, err = cl.be.ChildGraph(h); err != nil {
					return err
				}
				if err := mirror(m.child); err != nil {
					return err
				}
				m.params = ChildGraphParams{m.child}
			}
			cl.clonedBy[n] = m
			cl.nodes = append(cl.nodes, m)
		}
		return mirror(cl) // dependencies
	}()
	if err != nil {
		return nil, backendErr(opName, err)
	}
	return cl, nil
}

// nativeCaptureInfo reports a native capture. Graph is the capture's Go
// view (nativeCaptures), brought up to date; Dependencies are nodes of it.
func (s *Stream) nativeCaptureInfo(opName string) (CaptureInfo, error) {
	ci, err := s.be.(backend.Capturer).CaptureInfo()
	if err != nil {
		return CaptureInfo{}, backendErr(opName, err)
	}
	info := CaptureInfo{Status: CaptureStatus(ci.Status), ID: ci.ID}
	if ci.Status != int(CaptureStatusActive) || ci.Graph == nil {
		return info, nil
	}
	g := s.dev.native.view(nativeHandle(ci.Graph), func() *Graph {
		return &Graph{dev: s.dev, id: graphIDs.Add(1), be: ci.Graph}
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := mirror(g); err != nil {
		return CaptureInfo{}, backendErr(opName, err)
	}
	info.Graph = g
	if n := len(ci.Deps); n > 0 {
		data := fromBackendEdgeDataAll(ci.Data)
		for i, h := range ci.Deps {
			for _, node := range g.nodes {
				if node.be == h {
					info.Dependencies = append(info.Dependencies, node)
					info.DependencyData = append(info.DependencyData, data[i])
				}
			}
		}
		if defaultData(info.DependencyData) {
			info.DependencyData = nil
		}
	}
	return info, nil
}
