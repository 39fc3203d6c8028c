package gpugraph

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda"
)

// InstantiateFlags modify instantiation (cudaGraphInstantiateFlags).
type InstantiateFlags uint

const (
	// InstantiateAutoFreeOnLaunch lets the graph be launched again while
	// allocations of its previous launch are live: the launch frees them
	// first, in stream order (cudaGraphInstantiateFlagAutoFreeOnLaunch).
	InstantiateAutoFreeOnLaunch InstantiateFlags = 1
	// InstantiateUpload uploads the graph as part of instantiation, into the
	// stream given to InstantiateWithParams (cudaGraphInstantiateFlagUpload).
	InstantiateUpload InstantiateFlags = 2
	// InstantiateDeviceLaunch makes a device graph, one that kernels can
	// launch (cudaGraphInstantiateFlagDeviceLaunch).
	InstantiateDeviceLaunch InstantiateFlags = 4
	// InstantiateUseNodePriority makes kernel nodes launch with their
	// priority attribute (cudaGraphInstantiateFlagUseNodePriority). The
	// host backend has no priorities and accepts the flag.
	InstantiateUseNodePriority InstantiateFlags = 8
)

// Exec is an executable graph: a snapshot of a Graph, validated and planned,
// that can be launched into streams any number of times. Later changes to
// the Graph do not affect it. Launches of one Exec never overlap: each starts
// after the previous one finished, whatever streams they were launched into.
type Exec struct {
	dev *Device
	be  backend.Exec // the backend's executable graph
	src *Graph       // the graph instantiated (MemLayout reads it on cuda)
	// srcTopo is src.topoVer when e was instantiated (reenable.go).
	srcTopo uint64

	// destroyed is read by every call on e, Launch included: an atomic
	// load rather than a mutex taken and released per launch.
	destroyed atomic.Bool

	// loopHeld are graphs whose backend graphs kept edges loops.go added
	// for e: Destroy tries to remove them again.
	loopMu   sync.Mutex
	loopHeld []*Graph

	mem  bool // the graph has memory nodes: its launches cannot be captured
	cond bool // the graph has conditional nodes: likewise
	// records are the events e's record nodes record, which a launch marks
	// recorded (ElapsedTime needs it). Update and SetParams replace the
	// slice, never edit it: Launch reads it with one atomic load.
	records atomic.Pointer[[]execRecord]

	users execUserRefs // user object references

	holders execHolders // the devices of its memset and memcpy nodes' memory (memholders.go)
}

// Instantiate validates the graph and builds an executable graph from it
// (cudaGraphInstantiate). It fails, naming the node, on invalid parameters
// (for example memory freed since the node was added, or a destroyed event),
// on bad child graphs and on cycles. With InstantiateDeviceLaunch the graph
// must also meet the requirements of a device graph (see
// InstantiateWithParams).
func (g *Graph) Instantiate(flags InstantiateFlags) (*Exec, error) {
	return g.instantiate("Graph.Instantiate", &InstantiateParams{Flags: flags}, false)
}

// instantiate is Instantiate and InstantiateWithParams (withParams: p may
// ask for an upload).
func (g *Graph) instantiate(opName string, p *InstantiateParams, withParams bool) (*Exec, error) {
	if g == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil graph")
	}
	if err := g.checkInstantiate(opName, p, withParams); err != nil {
		return nil, err
	}
	// A potentially unsafe call, as the driver treats it (the
	// CaptureInstantiateProhibited scenario).
	if err := g.dev.unsafeCall(opName, g.dev.mainScope(), ErrStreamCaptureUnsupported); err != nil {
		return nil, err
	}
	if err := g.lock(opName); err != nil {
		return nil, err
	}
	if err := g.usableLocked(opName); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	if err := g.foreignMemsetLocked(opName); err != nil {
		g.mu.Unlock()
		return nil, p.fail(InstantiateError, err.(*Error))
	}
	e := &Exec{dev: g.dev, src: g, srcTopo: g.topoVer.Load(), mem: g.memNodes > 0, cond: g.hasCondLocked()}
	if e.cond {
		if err := g.condDeviceRuleLocked(opName); err != nil {
			g.mu.Unlock()
			return nil, p.fail(InstantiateMultipleDevicesNotSupported, err)
		}
	}
	e.setRecords(g.recordEventsLocked(nil, nil))
	e.holders = g.memHoldersLocked()
	g.mu.Unlock()
	var be backend.Exec
	var err error
	e.loopHeld, err = g.withLoopsAlone(opName, func() error {
		if p.Flags&InstantiateUpload != 0 {
			// The upload is work in the stream, ordered with the legacy
			// default stream as the stream's other work.
			return p.UploadStream.issue(opName, func() error {
				var err error
				be, err = g.be.Instantiate(uint(p.Flags), p.UploadStream.be, e)
				return err
			})
		}
		var err error
		be, err = g.be.Instantiate(uint(p.Flags), nil, e)
		return err
	})
	if err != nil {
		return nil, instantiateErr(opName, g, p, err)
	}
	e.be = be
	e.takeUserRefs(g)
	return e, nil
}

// instantiateErr reports a failed instantiation, with the backend's result
// and node in p.
func instantiateErr(opName string, g *Graph, p *InstantiateParams, err error) error {
	p.Result = InstantiateError
	var ie *cuda.InstantiateError
	if errors.As(err, &ie) {
		p.Result = InstantiateResult(ie.Result)
		if ie.Node != 0 {
			p.ErrNode = g.nodeOfHandle(ie.Node)
		}
		if p.Result == InstantiateSuccess {
			p.Result = InstantiateError
		}
	}
	err = backendErr(opName, err)
	var ge *Error
	if errors.As(err, &ge) {
		if p.ErrNode != nil {
			ge.Node = p.ErrNode
		} else if ge.Node != nil {
			p.Result, p.ErrNode = instantiateFailure(ge)
		}
	}
	return err
}

// nodeOfHandle finds the node of g, or of a graph embedded in it, whose
// backend node is h.
func (g *Graph) nodeOfHandle(h backend.Node) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return findNative(g, h)
}

// execRecord is an event record node of an executable graph: the node (of
// the graph instantiated or last updated from), the child graph nodes that
// embed it, outermost first, and the event it records.
type execRecord struct {
	node *Node
	path []*Node
	ev   *Event
}

// recordEventsLocked appends the record nodes of g, embedded in the child
// graph nodes path, and of the graphs embedded in g, to rs.
func (g *Graph) recordEventsLocked(rs []execRecord, path []*Node) []execRecord {
	for _, n := range g.nodes {
		switch p := n.params.(type) {
		case EventRecordParams:
			if p.Event != nil {
				rs = append(rs, execRecord{n, path, p.Event})
			}
		case ChildGraphParams:
			n.child.mu.Lock()
			rs = n.child.recordEventsLocked(rs, append(path[:len(path):len(path)], n))
			n.child.mu.Unlock()
		}
	}
	return rs
}

func (e *Exec) setRecords(rs []execRecord) { e.records.Store(&rs) }

// holdLoopEdges adds gs to the graphs whose loop edges e's Destroy removes.
func (e *Exec) holdLoopEdges(gs []*Graph) {
	if len(gs) == 0 {
		return
	}
	e.loopMu.Lock()
	e.loopHeld = append(e.loopHeld, gs...)
	e.loopMu.Unlock()
}

// markRecords sets hasRecords on g and the graphs that embed it.
func (g *Graph) markRecords() {
	for x := g; x != nil && !x.hasRecords.Load(); {
		x.hasRecords.Store(true)
		if x.parent == nil {
			return
		}
		x = x.parent.g
	}
}

// setRecordParams follows SetParams of record node n to record ev.
func (e *Exec) setRecordParams(n *Node, ev *Event) {
	rs := slices.Clone(*e.records.Load())
	if i := slices.IndexFunc(rs, func(r execRecord) bool { return r.node == n }); i >= 0 {
		rs[i].ev = ev
	} else {
		// n is a node of the graph e was instantiated from, but e was
		// updated from another graph since (records name that graph's
		// nodes): ev is marked too, and so is the event n recorded
		// before. Marking an event not recorded errs on the safe side: a
		// capture's Wait on it asks for WaitExternal instead of dropping
		// the dependency.
		rs = append(rs, execRecord{node: n, ev: ev})
	}
	e.setRecords(rs)
}

// setChildRecords follows SetParams of child graph node n to embed g: the
// record nodes under n are g's now.
func (e *Exec) setChildRecords(n *Node, g *Graph) {
	old := *e.records.Load()
	path := n.embedding()
	rs := make([]execRecord, 0, len(old))
	for _, r := range old {
		if !slices.Contains(r.path, n) {
			rs = append(rs, r)
		}
	}
	g.mu.Lock()
	rs = g.recordEventsLocked(rs, append(path, n))
	g.mu.Unlock()
	e.setRecords(rs)
}

// embedding returns the nodes whose graphs embed n's graph, outermost
// first (the Graph.parent links): nil for a node of a top-level graph.
func (n *Node) embedding() []*Node {
	var path []*Node
	for g := n.g; g.parent != nil; g = g.parent.g {
		path = append(path, g.parent)
	}
	slices.Reverse(path)
	return path
}

// Launch queues one execution of the graph in s (cudaGraphLaunch). Later
// work in s waits for it; it starts after the previous launch of e finished.
func (e *Exec) Launch(s *Stream) error {
	const opName = "Exec.Launch"
	if err := e.checkStream(opName, s); err != nil {
		return err
	}
	if s.capturing.Load() {
		if captured, err := e.captureLaunch(opName, s); captured {
			return err
		}
	}
	if e := s.dev.sticky.Load(); e != nil {
		return withOp(opName, e)
	}
	var err error
	if s.ord == nil {
		err = e.be.Launch(s.be)
	} else {
		err = s.issue(opName, func() error { return e.be.Launch(s.be) })
	}
	if err != nil {
		return backendErr(opName, err)
	}
	for _, r := range *e.records.Load() {
		// recorded is only ever set: after the first launch a load
		// suffices, instead of a locked store per record node per launch.
		if !r.ev.recorded.Load() {
			r.ev.recorded.Store(true)
		}
	}
	return nil
}

// checkStream validates e and a stream to launch or upload it into.
func (e *Exec) checkStream(opName string, s *Stream) error {
	if err := e.check(opName); err != nil {
		return err
	}
	// s.check, less its checks of s's device when that is e's, which
	// e.check has just made (every launch would make them twice): the same
	// errors in the same order.
	if s == nil {
		return newErr(opName, ErrInvalidResourceHandle, "nil stream")
	}
	if s.dev != e.dev {
		if err := s.dev.check(opName); err != nil {
			return err
		}
	}
	if s.destroyed.Load() {
		return newErr(opName, ErrInvalidResourceHandle, "stream is destroyed")
	}
	if s.dev != e.dev {
		return newErr(opName, ErrInvalidValue, "stream belongs to another device")
	}
	return nil
}

func (e *Exec) check(opName string) error {
	if e == nil {
		return newErr(opName, ErrInvalidResourceHandle, "nil executable graph")
	}
	if err := e.dev.check(opName); err != nil {
		return err
	}
	if e.destroyed.Load() {
		return newErr(opName, ErrInvalidResourceHandle, "executable graph is destroyed")
	}
	return nil
}

// Destroy releases the executable graph. Launches already queued still run;
// the memory the graph has mapped is released when they have finished.
// Allocations still live are not freed.
func (e *Exec) Destroy() error {
	const opName = "Exec.Destroy"
	if err := e.check(opName); err != nil {
		return err
	}
	if !e.destroyed.CompareAndSwap(false, true) { // a Destroy racing this one won
		return newErr(opName, ErrInvalidResourceHandle, "executable graph is destroyed")
	}
	e.destroyUserRefs() // after the launches queued
	err := backendErr(opName, e.be.Destroy())
	e.loopMu.Lock()
	held := e.loopHeld
	e.loopHeld = nil
	e.loopMu.Unlock()
	removeLoopEdges(opName, held)
	return err
}

// Upload maps the graph's memory in stream order, ahead of its first launch,
// and binds it to s (cudaGraphUpload): a later launch into s needs no
// remapping, one into another stream does.
func (e *Exec) Upload(s *Stream) error {
	const opName = "Exec.Upload"
	if err := e.checkStream(opName, s); err != nil {
		return err
	}
	if s.capturing.Load() {
		if captured, err := s.captureProhibited(opName, ErrStreamCaptureUnsupported, "uploading a graph"); captured {
			return err
		}
	}
	return backendErr(opName, s.issue(opName, func() error { return e.be.Upload(s.be) }))
}

// captureLaunch refuses a launch of e into a capture: the driver refuses
// cuGraphLaunch in a capturing stream whatever the graph, the capture mode
// or where the capture goes (measured on the H100 with driver 580: global,
// relaxed, into a graph, into a conditional body), and the capture is
// invalidated. captured is false when the capture ended meanwhile.
func (e *Exec) captureLaunch(opName string, s *Stream) (captured bool, err error) {
	return s.captureProhibited(opName, ErrStreamCaptureUnsupported, "launching a graph")
}
