package gpugraph

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/host"
)

// A stand-in for a driver that captures itself, for testing without a GPU
// the package's native path (mirror.go): views of native captures, their
// nodes' identity and devices across the streams of several devices,
// mirroring and clones. It wraps host devices; its streams capture work as
// the driver does (backend.Capturer: work in a capturing stream becomes a
// node of the capture's graph, an event recorded in a capture carries the
// stream's dependencies to the stream that waits on it, a stream of another
// device included), and its graphs only record nodes and edges
// (backend.Inspector): they cannot be instantiated. Outside a capture,
// streams run their work on the host device.

var fakeCaps nativeCaptures // the fake devices' registry, as cudaCaptures is the cuda backend's

// openFakeNative opens host device ordinal of a two-device host backend
// with the fake native backend in place of the host backend.
func openFakeNative(t *testing.T, ordinal int) *Device {
	t.Helper()
	if DeviceCountHost() < 2 {
		if err := SetHostDeviceCount(2); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { SetHostDeviceCount(1) })
	}
	d, err := Open(BackendHost, WithOrdinal(ordinal))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.be = &fakeDev{Device: d.be.(*host.Device)}
	d.caps = &capState{}
	d.native = &fakeCaps
	return d
}

// DeviceCountHost is the host backend's device count.
func DeviceCountHost() int { n, _ := DeviceCount(BackendHost); return n }

type fakeDev struct {
	*host.Device
}

func (d *fakeDev) NewStream() (backend.Stream, error) {
	s, err := d.Device.NewStream()
	if err != nil {
		return nil, err
	}
	return &fakeStream{Stream: s}, nil
}

func (d *fakeDev) NewEvent(f backend.EventFlags) (backend.Event, error) {
	e, err := d.Device.NewEvent(f)
	if err != nil {
		return nil, err
	}
	return &fakeEvent{Event: e}, nil
}

func (d *fakeDev) NewGraph() (backend.Graph, error) { return newFakeGraph(), nil }

// Peer access is the host devices'.

func (d *fakeDev) CanAccessPeer(p backend.Device) (bool, error) {
	return d.Device.CanAccessPeer(p.(*fakeDev).Device)
}
func (d *fakeDev) EnablePeerAccess(p backend.Device) error {
	return d.Device.EnablePeerAccess(p.(*fakeDev).Device)
}
func (d *fakeDev) DisablePeerAccess(p backend.Device) error {
	return d.Device.DisablePeerAccess(p.(*fakeDev).Device)
}

// OpenFakeNative is openFakeNative for the external tests (fuzz_diff_native_test.go).
func OpenFakeNative(t *testing.T, ordinal int) *Device { return openFakeNative(t, ordinal) }

// fakeMu guards every fake stream, event and graph.
var fakeMu sync.Mutex

var fakeHandles atomic.Uintptr // graph and node handles, process-wide as the driver's

func fakeHandle() uintptr { return fakeHandles.Add(1) }

type fakeCapture struct {
	g       *fakeGraph
	id      uint64
	origin  *fakeStream
	streams []*fakeStream
}

type fakeStream struct {
	backend.Stream // the host stream, for work outside a capture
	cap            *fakeCapture
	deps           []backend.Node
}

type fakeEvent struct {
	backend.Event
	cap  *fakeCapture // the capture the last record was in
	deps []backend.Node
}

func (s *fakeStream) join(c *fakeCapture, deps []backend.Node) {
	s.cap, s.deps = c, slices.Clone(deps)
	c.streams = append(c.streams, s)
}

func (s *fakeStream) BeginCapture(int) error {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if s.cap != nil {
		return backend.Errorf(backend.ErrIllegalState, "already capturing")
	}
	s.join(&fakeCapture{g: newFakeGraph(), id: uint64(fakeHandle()), origin: s}, nil)
	return nil
}

func (s *fakeStream) BeginCaptureToGraph(g backend.Graph, deps []backend.Node, _ []backend.EdgeData, _ int) error {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if s.cap != nil {
		return backend.Errorf(backend.ErrIllegalState, "already capturing")
	}
	s.join(&fakeCapture{g: g.(*fakeGraph), id: uint64(fakeHandle()), origin: s}, deps)
	return nil
}

func (s *fakeStream) EndCapture() (backend.Graph, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	c := s.cap
	switch {
	case c == nil:
		return nil, backend.Errorf(backend.ErrIllegalState, "not capturing")
	case c.origin != s:
		return nil, backend.Errorf(backend.ErrStreamCaptureUnmatched, "not the origin stream")
	}
	for _, t := range c.streams {
		t.cap, t.deps = nil, nil
	}
	return c.g, nil
}

func (s *fakeStream) CaptureInfo() (backend.CaptureInfo, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if s.cap == nil {
		return backend.CaptureInfo{}, nil
	}
	return backend.CaptureInfo{Status: 1, ID: s.cap.id, Graph: s.cap.g, Deps: slices.Clone(s.deps),
		Data: make([]backend.EdgeData, len(s.deps))}, nil
}

func (s *fakeStream) UpdateCaptureDependencies(deps []backend.Node, _ []backend.EdgeData, flags uint32) error {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if s.cap == nil {
		return backend.Errorf(backend.ErrIllegalState, "not capturing")
	}
	if flags == 1 {
		s.deps = nil
	}
	for _, d := range deps {
		if !slices.Contains(s.deps, d) {
			s.deps = append(s.deps, d)
		}
	}
	return nil
}

// capture adds a node of type t after the stream's dependencies, which it
// becomes; captured is false outside a capture.
func (s *fakeStream) capture(t backend.NodeType) (captured bool) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if s.cap == nil {
		return false
	}
	s.deps = []backend.Node{s.cap.g.add(t, s.deps)}
	return true
}

func (s *fakeStream) Launch(l *backend.Launch) error {
	if s.capture(backend.NodeKernel) {
		return nil
	}
	return s.Stream.Launch(l)
}

func (s *fakeStream) HostFunc(fn func()) error {
	if s.capture(backend.NodeHost) {
		return nil
	}
	return s.Stream.HostFunc(fn)
}

func (s *fakeStream) Memcpy(p *backend.Memcpy) error {
	if s.capture(backend.NodeMemcpy) {
		return nil
	}
	return s.Stream.Memcpy(p)
}

func (s *fakeStream) Memset(p *backend.Memset) error {
	if s.capture(backend.NodeMemset) {
		return nil
	}
	return s.Stream.Memset(p)
}

func (s *fakeStream) Record(be backend.Event) error {
	e := be.(*fakeEvent)
	fakeMu.Lock()
	e.cap, e.deps = s.cap, slices.Clone(s.deps)
	capturing := s.cap != nil
	fakeMu.Unlock()
	if capturing {
		return nil
	}
	return s.Stream.Record(e.Event)
}

func (s *fakeStream) Wait(be backend.Event) error {
	e := be.(*fakeEvent)
	fakeMu.Lock()
	switch {
	case e.cap != nil && s.cap == nil: // fork: s joins the capture
		s.join(e.cap, e.deps)
	case e.cap != nil && s.cap == e.cap:
		for _, d := range e.deps {
			if !slices.Contains(s.deps, d) {
				s.deps = append(s.deps, d)
			}
		}
	case e.cap != nil || s.cap != nil:
		fakeMu.Unlock()
		return backend.Errorf(backend.ErrStreamCaptureIsolation, "not modelled by the fake")
	default:
		fakeMu.Unlock()
		return s.Stream.Wait(e.Event)
	}
	fakeMu.Unlock()
	return nil
}

// fakeNode is a node of a fake graph; its handle is its identity.
type fakeNode struct {
	h      uintptr
	typ    backend.NodeType
	deps   []backend.Node
	child  *fakeGraph
	bodies []*fakeGraph
}

type fakeGraph struct {
	h      uintptr
	nodes  []*fakeNode
	clones map[backend.Node]backend.Node // original node -> its copy, in a graph copied from another
}

func newFakeGraph() *fakeGraph { return &fakeGraph{h: fakeHandle()} }

func (g *fakeGraph) Native() uintptr { return g.h }

func (g *fakeGraph) add(t backend.NodeType, deps []backend.Node) *fakeNode {
	n := &fakeNode{h: fakeHandle(), typ: t, deps: slices.Clone(deps)}
	g.nodes = append(g.nodes, n)
	return n
}

// copyOf copies g, recording which node is whose copy (ClonedNode), in
// embedded graphs too.
func (g *fakeGraph) copyOf() *fakeGraph {
	c := &fakeGraph{h: fakeHandle(), clones: map[backend.Node]backend.Node{}}
	for _, n := range g.nodes {
		m := &fakeNode{h: fakeHandle(), typ: n.typ}
		if n.child != nil {
			m.child = n.child.copyOf()
		}
		c.clones[n] = m
		c.nodes = append(c.nodes, m)
	}
	for i, n := range g.nodes {
		for _, d := range n.deps {
			c.nodes[i].deps = append(c.nodes[i].deps, c.clones[d])
		}
	}
	return c
}

var errFake = errors.New("not modelled by the fake native backend")

func (g *fakeGraph) AddNode(op *backend.Op, deps []backend.Node, _ []backend.EdgeData, _ any) (backend.Node, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	return g.add(op.Type, deps), nil
}

func (g *fakeGraph) AddChildGraphNode(child backend.Graph, deps []backend.Node, _ []backend.EdgeData, _ any) (backend.Node, backend.Graph, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	n := g.add(backend.NodeChildGraph, deps)
	n.child = child.(*fakeGraph).copyOf()
	return n, n.child, nil
}

func (g *fakeGraph) AddMemAllocNode(int, []int, []backend.Node, []backend.EdgeData, any) (backend.Node, uint64, error) {
	return nil, 0, errFake
}

func (g *fakeGraph) AddMemFreeNode(uint64, []backend.Node, []backend.EdgeData, any) (backend.Node, error) {
	return nil, errFake
}

func (g *fakeGraph) CondHandleCreate(uint32, uint32) (uint64, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	return uint64(fakeHandle()), nil
}

func (g *fakeGraph) AddConditionalNode(c backend.Cond, deps []backend.Node, _ []backend.EdgeData, _ any) (backend.Node, []backend.Graph, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	n := g.add(backend.NodeConditional, deps)
	bodies := make([]backend.Graph, c.Bodies)
	for i := range bodies {
		b := newFakeGraph()
		n.bodies = append(n.bodies, b)
		bodies[i] = b
	}
	return n, bodies, nil
}

func (g *fakeGraph) SetParams(backend.Node, *backend.Op) error { return nil }

func (g *fakeGraph) SetChildGraph(n backend.Node, c backend.Graph) (backend.Graph, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	n.(*fakeNode).child = c.(*fakeGraph).copyOf()
	return n.(*fakeNode).child, nil
}

func (g *fakeGraph) ChildGraph(n backend.Node) (backend.Graph, error) {
	return n.(*fakeNode).child, nil
}

func (g *fakeGraph) AddEdges(from, to []backend.Node, _ []backend.EdgeData) error {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	for i := range from {
		t := to[i].(*fakeNode)
		t.deps = append(t.deps, from[i])
	}
	return nil
}

func (g *fakeGraph) RemoveEdges(from, to []backend.Node, _ []backend.EdgeData) error {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	for i := range from {
		t := to[i].(*fakeNode)
		t.deps = slices.DeleteFunc(t.deps, func(d backend.Node) bool { return d == from[i] })
	}
	return nil
}

func (g *fakeGraph) DestroyNode(n backend.Node) error {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	g.nodes = slices.DeleteFunc(g.nodes, func(m *fakeNode) bool { return m == n })
	for _, m := range g.nodes {
		m.deps = slices.DeleteFunc(m.deps, func(d backend.Node) bool { return d == n })
	}
	return nil
}

func (g *fakeGraph) Clone() (backend.Graph, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	return g.copyOf(), nil
}

func (g *fakeGraph) ClonedNode(orig backend.Node) (backend.Node, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	if m, ok := g.clones[orig]; ok {
		return m, nil
	}
	return nil, backend.Errorf(backend.ErrInvalidValue, "no clone of the node")
}

func (g *fakeGraph) Instantiate(uint, backend.Stream, any) (backend.Exec, error) {
	return nil, backend.Errorf(backend.ErrNotSupported, "%v", errFake)
}

func (g *fakeGraph) Destroy() error { return nil }

func (g *fakeGraph) Nodes() ([]backend.Node, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	ns := make([]backend.Node, len(g.nodes))
	for i, n := range g.nodes {
		ns[i] = n
	}
	return ns, nil
}

func (g *fakeGraph) Node(bn backend.Node, _ bool) (backend.NodeInfo, error) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	n := bn.(*fakeNode)
	return backend.NodeInfo{Type: n.typ, Deps: slices.Clone(n.deps), Data: make([]backend.EdgeData, len(n.deps)), Handle: n.h}, nil
}

func (g *fakeGraph) SameNode(a, b backend.Node) bool { return a == b }
