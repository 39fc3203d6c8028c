package gpugraph

import (
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// CaptureMode is a stream capture mode (cudaStreamCaptureMode).
type CaptureMode int

const (
	CaptureModeGlobal      CaptureMode = 0
	CaptureModeThreadLocal CaptureMode = 1
	CaptureModeRelaxed     CaptureMode = 2
)

// CaptureStatus is a stream's capture state (cudaStreamCaptureStatus).
type CaptureStatus int

const (
	CaptureStatusNone        CaptureStatus = 0
	CaptureStatusActive      CaptureStatus = 1
	CaptureStatusInvalidated CaptureStatus = 2
)

// CaptureInfo describes a stream's capture (cudaStreamGetCaptureInfo).
type CaptureInfo struct {
	Status CaptureStatus
	ID     uint64 // unique per capture sequence; 0 when not capturing
	Graph  *Graph // the graph being built
	// Dependencies are the nodes the stream's next captured work will
	// depend on.
	Dependencies []*Node
	// DependencyData holds the data of the edge from each of Dependencies
	// to that work; nil when every edge is ordinary.
	DependencyData []EdgeData
}

// UpdateCaptureFlags select how UpdateCaptureDependencies changes the set.
type UpdateCaptureFlags int

const (
	AddCaptureDependencies UpdateCaptureFlags = 0 // add to the set
	SetCaptureDependencies UpdateCaptureFlags = 1 // replace the set
)

// Scope stands for a CUDA host thread in the rules of stream capture (see
// capture modes in the Stream capture section of the package
// documentation). Its methods are the potentially unsafe calls, made from
// this scope.
type Scope struct {
	dev  *Device
	mode atomic.Int32

	ptMu      sync.Mutex
	perThread *Stream // StreamPerThread, once asked for
}

// NewScope returns a new scope, in interaction mode CaptureModeGlobal.
func (d *Device) NewScope() *Scope { return &Scope{dev: d} }

// ExchangeCaptureMode sets the scope's interaction mode and returns the
// previous one (cudaThreadExchangeStreamCaptureMode); use it push-pop.
func (sc *Scope) ExchangeCaptureMode(m CaptureMode) CaptureMode {
	return CaptureMode(sc.mode.Swap(int32(m)))
}

// captureSeq is one capture sequence of the host backend: the graph and the
// streams in it. Capture follows what the CUDA 13.0 driver does, as
// recorded in docs/driver-capture.txt; the rules for users are in the
// package documentation (Stream capture).
type captureSeq struct {
	id      uint64
	graph   *Graph
	origin  *Stream
	mode    CaptureMode
	scope   *Scope
	owned   bool   // the graph was made by BeginCapture (not ToGraph)
	invalid *Error // why the capture was invalidated, or nil
	streams []*Stream
	events  []*Event
}

var captureIDs atomic.Uint64

// capState is the capture state of devices whose captures may join
// streams of each other (every host device of the process), guarded by
// its mutex.
type capState struct {
	mu     sync.Mutex
	active map[*captureSeq]struct{}
}

// BeginCapture puts s into capture mode (cudaStreamBeginCapture), from the
// device's main scope.
func (s *Stream) BeginCapture(mode CaptureMode) error {
	return s.beginCapture("Stream.BeginCapture", s.devMain(), nil, nil, mode)
}

// BeginCaptureToGraph captures into g, the first captured work depending on
// deps (cudaStreamBeginCaptureToGraph). EndCapture then returns g.
func (s *Stream) BeginCaptureToGraph(g *Graph, deps []*Node, mode CaptureMode) error {
	return s.beginCapture("Stream.BeginCaptureToGraph", s.devMain(), g, deps, mode)
}

// BeginCapture begins a capture of s from this scope.
func (sc *Scope) BeginCapture(s *Stream, mode CaptureMode) error {
	return s.beginCapture("Scope.BeginCapture", sc, nil, nil, mode)
}

// EndCapture ends a capture of s from this scope.
func (sc *Scope) EndCapture(s *Stream) (*Graph, error) { return s.endCapture("Scope.EndCapture", sc) }

// EndCapture ends the capture begun in s, which must be its origin stream,
// and returns the graph (cudaStreamEndCapture). Every stream that joined the
// capture leaves capture mode. It fails, returning no graph, if the capture
// was invalidated or a stream that joined it did not rejoin s.
func (s *Stream) EndCapture() (*Graph, error) { return s.endCapture("Stream.EndCapture", s.devMain()) }

func (s *Stream) devMain() *Scope {
	if s == nil {
		return nil
	}
	return s.dev.mainScope()
}

func (d *Device) mainScope() *Scope {
	d.capOnce.Do(func() { d.main = d.NewScope() })
	return d.main
}

func (s *Stream) beginCapture(opName string, sc *Scope, g *Graph, deps []*Node, mode CaptureMode) error {
	return s.beginCaptureData(opName, sc, g, deps, nil, mode)
}

// beginCaptureData begins a capture; data, if not nil, holds the data of
// the edge from each of deps to the first captured work (see
// BeginCaptureToGraphWithData).
func (s *Stream) beginCaptureData(opName string, sc *Scope, g *Graph, deps []*Node, data []EdgeData, mode CaptureMode) error {
	if err := s.check(opName); err != nil {
		return err
	}
	if mode < CaptureModeGlobal || mode > CaptureModeRelaxed {
		return newErr(opName, ErrInvalidValue, "unknown capture mode %d", mode)
	}
	if err := checkHalfEdges(opName, deps, data); err != nil {
		return err
	}
	if s.kind == streamLegacy {
		return newErr(opName, ErrStreamCaptureUnsupported, "the legacy default stream cannot be captured")
	}
	if s.nativeCapture() {
		if g != nil {
			return s.nativeBeginCaptureToGraph(opName, g, deps, data, mode)
		}
		return s.nativeBeginCapture(opName, mode)
	}
	owned := g == nil
	if owned {
		var err error
		if g, err = s.dev.NewGraph(); err != nil {
			return err
		}
	} else {
		if g.dev != s.dev {
			return newErr(opName, ErrInvalidValue, "graph of another device")
		}
		if err := g.lock(opName); err != nil {
			return err
		}
		for _, n := range deps {
			if err := g.checkNodeLocked(opName, n); err != nil {
				g.mu.Unlock()
				return err
			}
		}
		g.mu.Unlock()
	}
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if s.cap != nil {
		return newErr(opName, ErrIllegalState, "the stream is already capturing")
	}
	seq := &captureSeq{id: captureIDs.Add(1), graph: g, origin: s, mode: mode, scope: sc, owned: owned}
	if cs.active == nil {
		cs.active = map[*captureSeq]struct{}{}
	}
	cs.active[seq] = struct{}{}
	s.joinLocked(seq, deps)
	s.setCapData(deps, data)
	return nil
}

// joinLocked puts s into seq's capture with dependency set deps.
func (s *Stream) joinLocked(seq *captureSeq, deps []*Node) {
	s.cap = seq
	s.capDeps = append([]*Node(nil), deps...)
	s.capturing.Store(true)
	seq.streams = append(seq.streams, s)
}

// invalidateLocked invalidates a capture: later work in its streams fails,
// and EndCapture returns the error and no graph.
func (seq *captureSeq) invalidateLocked(e *Error) {
	if seq.invalid == nil {
		seq.invalid = e
	}
}

// endLocked takes every stream out of the capture.
// hostCaps is the capture state of the host backend's devices: one, so a
// capture may fork onto a stream of another device and join back.
var hostCaps capState

// endDeviceCaptures ends the captures begun in streams of d, which is
// closing: they cannot end now, and must not hold back other devices'.
func (cs *capState) endDeviceCaptures(d *Device) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for seq := range cs.active {
		if seq.origin.dev == d {
			cs.endLocked(seq)
		}
	}
}

func (cs *capState) endLocked(seq *captureSeq) {
	for _, t := range seq.streams {
		t.cap, t.capDeps, t.capData = nil, nil, nil
		t.capturing.Store(false)
	}
	for _, e := range seq.events {
		if e.capSeq == seq {
			e.capSeq, e.capNodes = nil, nil
			e.inCapture.Store(false)
		}
	}
	delete(cs.active, seq)
}

func (s *Stream) endCapture(opName string, sc *Scope) (*Graph, error) {
	if err := s.check(opName); err != nil {
		return nil, err
	}
	if s.nativeCapture() {
		return s.nativeEndCapture(opName)
	}
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	seq := s.cap
	if seq == nil {
		return nil, newErr(opName, ErrIllegalState, "the stream is not capturing")
	}
	if seq.origin != s {
		e := newErr(opName, ErrStreamCaptureUnmatched, "the capture was begun in another stream")
		seq.invalidateLocked(e)
		return nil, e
	}
	if seq.mode != CaptureModeRelaxed && seq.scope != sc {
		cs.endLocked(seq)
		return nil, newErr(opName, ErrStreamCaptureWrongThread, "the capture was begun from another scope")
	}
	if seq.invalid != nil {
		cs.endLocked(seq)
		err := newErr(opName, ErrStreamCaptureInvalidated, "%v", seq.invalid)
		if !seq.owned {
			seq.graph.destroyedByCapture(err)
		}
		return nil, err
	}
	if bad := unjoined(seq); bad != nil {
		cs.endLocked(seq)
		return nil, newErr(opName, ErrStreamCaptureUnjoined, "work captured in another stream was not joined into the origin stream")
	}
	cs.endLocked(seq)
	return seq.graph, nil
}

// unjoined returns a stream of seq whose captured work the origin stream's
// dependency set does not cover, or nil.
func unjoined(seq *captureSeq) *Stream {
	covered := map[*Node]bool{}
	for _, n := range seq.origin.capDeps {
		covered[n] = true
	}
	g := seq.graph
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range seq.origin.capDeps {
		for a := range ancestors(n) {
			covered[a] = true
		}
	}
	for _, t := range seq.streams {
		for _, n := range t.capDeps {
			if !covered[n] {
				return t
			}
		}
	}
	return nil
}

// IsCapturing reports the stream's capture status (cudaStreamIsCapturing).
func (s *Stream) IsCapturing() (CaptureStatus, error) {
	info, err := s.CaptureInfo()
	return info.Status, err
}

// CaptureInfo reports the stream's capture (cudaStreamGetCaptureInfo).
func (s *Stream) CaptureInfo() (CaptureInfo, error) {
	const opName = "Stream.CaptureInfo"
	if err := s.check(opName); err != nil {
		return CaptureInfo{}, err
	}
	if s.nativeCapture() {
		return s.nativeCaptureInfo(opName)
	}
	if s.kind == streamLegacy {
		return s.legacyCaptureInfo(opName)
	}
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	seq := s.cap
	if seq == nil {
		return CaptureInfo{}, nil
	}
	info := CaptureInfo{Status: CaptureStatusActive, ID: seq.id, Graph: seq.graph,
		Dependencies: append([]*Node(nil), s.capDeps...), DependencyData: s.capEdgeData()}
	if seq.invalid != nil {
		info.Status = CaptureStatusInvalidated
	}
	return info, nil
}

// UpdateCaptureDependencies adds nodes to, or replaces with nodes, the set
// the stream's next captured work depends on
// (cudaStreamUpdateCaptureDependencies). The nodes must be in the capture's
// graph.
func (s *Stream) UpdateCaptureDependencies(nodes []*Node, flags UpdateCaptureFlags) error {
	return s.updateCaptureDependencies("Stream.UpdateCaptureDependencies", nodes, nil, flags)
}

// updateCaptureDependencies updates the capture's dependency set; data, if
// not nil, holds the data of the edges from nodes (see
// UpdateCaptureDependenciesWithData).
func (s *Stream) updateCaptureDependencies(opName string, nodes []*Node, data []EdgeData, flags UpdateCaptureFlags) error {
	if err := s.check(opName); err != nil {
		return err
	}
	if flags != AddCaptureDependencies && flags != SetCaptureDependencies {
		return newErr(opName, ErrInvalidValue, "unknown flags %d", flags)
	}
	if err := checkHalfEdges(opName, nodes, data); err != nil {
		return err
	}
	if s.nativeCapture() {
		return s.nativeUpdateCaptureDependencies(opName, nodes, data, flags)
	}
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	seq := s.cap
	if seq == nil {
		return newErr(opName, ErrIllegalState, "the stream is not capturing")
	}
	if seq.invalid != nil {
		return newErr(opName, ErrStreamCaptureInvalidated, "%v", seq.invalid)
	}
	g := seq.graph
	g.mu.Lock()
	for _, n := range nodes {
		if err := g.checkNodeLocked(opName, n); err != nil {
			g.mu.Unlock()
			return err
		}
	}
	g.mu.Unlock()
	if flags == SetCaptureDependencies {
		s.capDeps = s.capDeps[:0]
		s.capData = nil
	}
	s.capDeps = union(s.capDeps, nodes)
	s.setCapData(nodes, data)
	return nil
}

func union(a, b []*Node) []*Node {
	for _, n := range b {
		if !contains(a, n) {
			a = append(a, n)
		}
	}
	return a
}

// captureNode records work issued to a capturing stream as a node depending
// on the stream's dependency set. A call that fails invalidates the
// capture: the captured sequence would lack the work. captured is false
// when the capture ended meanwhile: the caller runs the work as usual.
func (s *Stream) captureNode(opName string, p NodeParams) (n *Node, captured bool, err error) {
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	seq, err := s.activeLocked(opName)
	if seq == nil {
		return nil, err != nil, err
	}
	data := s.capEdgeData()
	if p.NodeType() != NodeKernel {
		data = nil // the driver captures other work behind such half edges as full dependencies
	}
	n, err = seq.graph.addNodeOn(opName, s.dev, p, s.capDeps, data) // a stream of another device captures work of its device
	if err != nil {
		if e, ok := err.(*Error); ok {
			seq.invalidateLocked(e)
		}
		return nil, true, err
	}
	n.captured = true
	if m, ok := n.be.(backend.CaptureMarker); ok {
		m.MarkCaptured() // the host backend's whole-graph update rule on captured memsets
	}
	s.capDeps = append(s.capDeps[:0], n)
	s.capData = nil
	return n, true, nil
}

// activeLocked returns the capture s is in, or the invalidation error. It
// returns neither when the capture has ended meanwhile: a stream operation
// that raced with EndCapture runs as ordinary work.
func (s *Stream) activeLocked(opName string) (*captureSeq, error) {
	seq := s.cap
	if seq == nil {
		return nil, nil
	}
	if seq.invalid != nil {
		return nil, newErr(opName, ErrStreamCaptureInvalidated, "%v", seq.invalid)
	}
	return seq, nil
}

// prohibit fails a call that stream capture forbids, invalidating the
// captures it concerns.
func prohibit(seqs []*captureSeq, e *Error) error {
	for _, seq := range seqs {
		seq.invalidateLocked(e)
	}
	return e
}

// unsafeCall checks a potentially unsafe call made from scope sc against
// the active captures, invalidating those it conflicts with.
func (d *Device) unsafeCall(opName string, sc *Scope, code *Code) error {
	cs := d.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.active) == 0 {
		return nil
	}
	mode := CaptureMode(sc.mode.Load())
	var hit []*captureSeq
	for seq := range cs.active {
		own := seq.scope == sc && seq.mode != CaptureModeRelaxed
		global := mode == CaptureModeGlobal && seq.mode == CaptureModeGlobal
		all := code == nil // Device.Synchronize: every capture
		if all || (mode != CaptureModeRelaxed && (own || global)) {
			hit = append(hit, seq)
		}
	}
	if len(hit) == 0 {
		return nil
	}
	if code == nil {
		code = ErrStreamCaptureUnsupported
	}
	return prohibit(hit, newErr(opName, code, "not allowed while a stream is capturing"))
}

// captureProhibited fails work that cannot be captured and invalidates the
// capture. captured is false when the capture ended meanwhile.
func (s *Stream) captureProhibited(opName string, code *Code, what string) (captured bool, err error) {
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if s.cap == nil {
		return false, nil
	}
	return true, prohibit([]*captureSeq{s.cap}, newErr(opName, code, "%s is not supported in stream capture", what))
}

// streamSyncProhibited fails Synchronize and Query of a capturing stream.
func (s *Stream) syncProhibited(opName string) error {
	if !s.capturing.Load() {
		return nil
	}
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if s.cap == nil {
		return nil
	}
	return prohibit([]*captureSeq{s.cap}, newErr(opName, ErrStreamCaptureUnsupported, "the stream is capturing"))
}

// captureRecord records event e in a capturing stream: the event now stands
// for the stream's dependency set. external makes it a record node instead
// (cudaEventRecordExternal). captured is false when the capture ended
// meanwhile.
func (s *Stream) captureRecord(opName string, e *Event, external bool) (captured bool, err error) {
	if external {
		_, captured, err := s.captureNode(opName, EventRecordParams{e})
		return captured, err
	}
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	seq, err := s.activeLocked(opName)
	if seq == nil {
		return err != nil, err
	}
	e.capSeq, e.capNodes = seq, append([]*Node(nil), s.capDeps...)
	e.capData = nil
	for n, d := range s.capData {
		if e.capData == nil {
			e.capData = map[*Node]EdgeData{}
		}
		e.capData[n] = d
	}
	e.captured.Store(true)
	e.inCapture.Store(true)
	seq.events = append(seq.events, e)
	return true, nil
}

// captureWait makes s wait on e during a capture, or makes s join the
// capture e was recorded in. It reports handled=false when neither s nor e
// is in a capture.
func (s *Stream) captureWait(opName string, e *Event, external bool) (bool, error) {
	if external && s.capturing.Load() {
		_, captured, err := s.captureNode(opName, EventWaitParams{e})
		return captured, err
	}
	cs := s.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	seq, eseq := s.cap, e.capSeq
	switch {
	case seq == nil && eseq == nil:
		return false, nil
	case seq == nil && s.kind == streamLegacy:
		return true, prohibit([]*captureSeq{eseq}, newErr(opName, ErrStreamCaptureImplicit,
			"the legacy default stream cannot join a capture"))
	case seq == nil: // fork: s joins the capture e belongs to
		if eseq.invalid != nil {
			return true, newErr(opName, ErrStreamCaptureInvalidated, "%v", eseq.invalid)
		}
		s.joinLocked(eseq, e.capNodes)
		s.takeEventData(e)
		return true, nil
	case seq.invalid != nil:
		return true, newErr(opName, ErrStreamCaptureInvalidated, "%v", seq.invalid)
	case eseq == seq:
		s.capDeps = union(s.capDeps, e.capNodes)
		s.takeEventData(e)
		return true, nil
	case eseq != nil:
		err := newErr(opName, ErrStreamCaptureMerge, "the event was recorded in another capture")
		eseq.invalidateLocked(err)
		return true, prohibit([]*captureSeq{seq}, err)
	case !e.recorded.Load():
		return true, nil // never recorded: nothing to wait for
	}
	return true, prohibit([]*captureSeq{seq}, newErr(opName, ErrStreamCaptureIsolation,
		"the event was recorded outside the capture; wait on it with WaitExternal"))
}

// eventProhibited fails Query and Synchronize of an event recorded in a
// capture: while the capture is active (invalidating it), and after, since
// a captured record is not work that runs.
func (e *Event) eventProhibited(opName string, invalidate bool) error {
	cs := e.dev.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if seq := e.capSeq; seq != nil {
		err := newErr(opName, ErrCapturedEvent, "the event was recorded in a capture under way")
		if invalidate {
			seq.invalidateLocked(err)
		}
		return err
	}
	if e.captured.Load() {
		return newErr(opName, ErrInvalidValue, "the event's last record was captured into a graph, not run")
	}
	return nil
}

// nativeCapture reports whether the stream's driver captures its work
// itself (backend.Capturer, the cuda backend); on other backends this
// package captures.
func (s *Stream) nativeCapture() bool {
	_, ok := s.be.(backend.Capturer)
	return ok
}
