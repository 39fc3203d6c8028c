package gpugraph

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Graphs the driver built (the cuda backend): native capture
// (backend.Capturer), and clones, read back into this package's view
// through backend.Inspector.

// nativeCaptures holds the Go view of each native capture's graph, by the
// graph's handle, from BeginCapture (or the first CaptureInfo of a capture
// begun outside this package, or BeginCaptureToGraph) to EndCapture: every
// CaptureInfo of the capture, from any of its streams, and the graph
// EndCapture returns are that one view, so a node keeps its identity (a
// node from CaptureInfo is a node of the captured graph), as on the host
// backend. One registry serves every device of the cuda backend
// (cudaCaptures): a capture forks onto streams of other devices, whose
// CaptureInfo must answer with nodes of the same view.
type nativeCaptures struct {
	mu    sync.Mutex
	views map[uintptr]*Graph
	n     atomic.Int32 // len(views): stream work asks the driver about captures only while some are under way
	// only is the device of every view while they are all one device's
	// (nil otherwise): stream work of that device cannot be joining
	// another device's capture, and does not ask.
	only atomic.Pointer[Device]
}

// countLocked publishes len(views) and only; c.mu is held.
func (c *nativeCaptures) countLocked() {
	c.n.Store(int32(len(c.views)))
	var one *Device
	for _, g := range c.views {
		if one != nil && g.dev != one {
			one = nil
			break
		}
		one = g.dev
	}
	c.only.Store(one)
}

// cudaCaptures is the registry of the cuda backend's devices; noCaptures
// that of devices whose backend does not capture itself (host): it stays
// empty.
var cudaCaptures, noCaptures nativeCaptures

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
		c.countLocked()
	}
	return g
}

// lookup returns the view of the capture of graph h, or nil.
func (c *nativeCaptures) lookup(h uintptr) *Graph {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.views[h]
}

// end forgets the view of the capture of graph h and returns it.
func (c *nativeCaptures) end(h uintptr) *Graph {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.views[h]
	delete(c.views, h)
	c.countLocked()
	return g
}

// endDevice forgets the views of the captures into graphs of d, which is
// closing: the backend ends them, and the views would keep stream work
// asking the driver about captures (nativeWorkBegin).
func (c *nativeCaptures) endDevice(d *Device) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, g := range c.views {
		if g.dev == d {
			delete(c.views, h)
		}
	}
	c.countLocked()
}

func nativeHandle(g backend.Graph) uintptr {
	if n, ok := g.(backend.Native); ok {
		return n.Native()
	}
	return 0
}

// nativeBeginCapture begins a native capture and makes its view now, a
// graph of s's device: the capture's graph is the origin stream's device's
// whichever stream of the capture asks first.
func (s *Stream) nativeBeginCapture(opName string, mode CaptureMode) error {
	cp := s.be.(backend.Capturer)
	if err := cp.BeginCapture(int(mode)); err != nil {
		return backendErr(opName, err)
	}
	if ci, err := cp.CaptureInfo(); err == nil && ci.Graph != nil {
		s.capView = nativeHandle(ci.Graph)
		s.dev.native.view(s.capView, func() *Graph {
			return &Graph{dev: s.dev, id: graphIDs.Add(1), be: ci.Graph}
		})
	}
	return nil
}

func (s *Stream) nativeEndCapture(opName string) (*Graph, error) {
	cp := s.be.(backend.Capturer)
	// The capture's graph, whose view ends with it whatever EndCapture
	// answers: the driver may reuse the handle.
	h := s.capView // what the driver answers for an invalidated capture aside
	if ci, err := cp.CaptureInfo(); err == nil && ci.Graph != nil {
		h = nativeHandle(ci.Graph)
	}
	s.capView = 0
	var view *Graph
	if h != 0 {
		view = s.dev.native.end(h)
	}
	eh, err := cp.EndCapture()
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
		g.be = eh
	default:
		g = &Graph{dev: s.dev, id: graphIDs.Add(1), be: eh}
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
	byHandle := make(map[backend.Node]*Node, len(handles)+len(g.nodes))
	g.edata = nil
	for _, node := range g.nodes {
		byHandle[node.be] = node
		node.deps, node.outs = nil, nil
	}
	// Each listed node's description, by its index in handles: maps grown
	// one entry at a time, one of them of whole NodeInfo values, took 4 %
	// of a graph set's capture on an H100.
	infos := make([]backend.NodeInfo, len(handles))
	at := make(map[backend.Node]int, len(handles))
	for i, h := range handles {
		known := byHandle[h] != nil
		info, err := in.Node(h, !known)
		if err != nil {
			return err
		}
		infos[i], at[h] = info, i
		if known {
			continue
		}
		t := NodeType(info.Type)
		node := &Node{g: g, id: g.nextID, typ: t, params: nativeParams(t, info), be: h, dev: g.dev, captured: true}
		g.nextID++
		// A captured node became a sink when the driver made it, in the
		// order it lists them: update pairing orders sinks so.
		g.sinkSeq++
		node.sink = g.sinkSeq
		byHandle[h] = node
		g.nodes = append(g.nodes, node)
	}
	// Nodes that work in a stream of another device made (nativeWork):
	// that device's, whether this mirror or an earlier one made them.
	for h, d := range g.capDevs {
		if node := byHandle[h]; node != nil {
			node.dev = d
			delete(g.capDevs, h)
		}
	}
	for _, node := range g.nodes {
		var info backend.NodeInfo
		if i, ok := at[node.be]; ok {
			info = infos[i]
		} else { // a node the driver no longer lists
			if info, err = in.Node(node.be, false); err != nil {
				return err
			}
		}
		for i, d := range info.Deps {
			if dn := byHandle[d]; dn != nil && !heldEdge(g, dn, node) {
				node.deps = append(node.deps, dn)
				dn.outs = append(dn.outs, node)
				g.setEdgeDataLocked(dn, node, fromBackendEdgeData(info.Data[i]))
			}
		}
	}
	g.topoChanged() // what the driver added (reenable.go pairs against the graph as instantiated)
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
	case NodeKernel, NodeMemcpy, NodeMemset:
		p := NativeNodeParams{Type: t, Node: info.Handle, Name: info.Name}
		for _, q := range info.Pointers {
			p.ptrs = append(p.ptrs, DevicePtr(q))
		}
		return p
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
	s.capView = nativeHandle(g.be)
	s.dev.native.view(s.capView, func() *Graph { return g })
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
				// Nodes of the child graph on another device than
				// the graph's (captured in a stream of it, or added
				// with AddNodeOn) keep it in the clone: their clones
				// are found in the clone's embedded graph, where the
				// driver says which they are.
				n.child.mu.Lock()
				orig := slices.Clone(n.child.nodes)
				n.child.mu.Unlock()
				for _, o := range orig {
					if o.dev != n.child.dev {
						if c, err := m.child.be.ClonedNode(o.be); err == nil {
							if m.child.capDevs == nil {
								m.child.capDevs = map[backend.Node]*Device{}
							}
							m.child.capDevs[c] = o.dev
						}
					}
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

// Nodes that work enqueued into a stream of another device makes in a
// native capture.
//
// A capture begun in a stream of one device may fork onto a stream of
// another (an event recorded in the one, waited on in the other), and the
// work captured in that stream runs on the stream's device: the host
// backend's capture makes it a node of that device (captureNode), and so
// does the driver (the node runs in the stream's context). The driver says
// which context a node has only for kernel nodes
// (CUDA_KERNEL_NODE_PARAMS_v2.ctx), so this package notes it as the work is
// enqueued: when a capture of another device's graph is under way in s, the
// nodes the work added to the stream's capture dependencies (the node it
// made; cuStreamGetCaptureInfo before and after) are s's device's, and
// mirror gives them that device. Work that other code enqueues on the
// native stream (a CUDA library) is not seen: its nodes are the graph's
// device's.

// nativeWork is work being enqueued into a stream whose native capture is
// into a graph of another device: the capture's view, and the stream's
// capture dependencies before the work.
type nativeWork struct {
	g      *Graph
	before []backend.Node
}

// nativeWorkBegin is called before work is enqueued into s; it returns nil
// unless a native capture of a graph of another device than s's is under
// way in s. While no native capture is under way in the process (always on
// host), that costs an atomic load and the work no driver call more; while
// one is, a cuStreamGetCaptureInfo before and after.
func (s *Stream) nativeWorkBegin() *nativeWork {
	if nc := s.dev.native; nc.n.Load() == 0 || nc.only.Load() == s.dev {
		return nil
	}
	return s.nativeWorkSlow()
}

func (s *Stream) nativeWorkSlow() *nativeWork {
	nc := s.dev.native
	cp, ok := s.be.(backend.Capturer)
	if !ok {
		return nil
	}
	ci, err := cp.CaptureInfo()
	if err != nil || ci.Status != int(CaptureStatusActive) || ci.Graph == nil {
		return nil
	}
	g := nc.lookup(nativeHandle(ci.Graph))
	if g == nil || g.dev == s.dev {
		return nil
	}
	return &nativeWork{g: g, before: ci.Deps}
}

// end notes the nodes that the work, which returned err, made in the
// capture as s's device's.
func (w *nativeWork) end(s *Stream, err error) {
	if w != nil && err == nil {
		w.note(s)
	}
}

func (w *nativeWork) note(s *Stream) {
	ci, err := s.be.(backend.Capturer).CaptureInfo()
	if err != nil || ci.Graph == nil || nativeHandle(ci.Graph) != nativeHandle(w.g.be) {
		return
	}
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	for _, h := range ci.Deps {
		if slices.Contains(w.before, h) {
			continue // a dependency the work did not make (none was made)
		}
		if w.g.capDevs == nil {
			w.g.capDevs = map[backend.Node]*Device{}
		}
		w.g.capDevs[h] = s.dev
	}
}
