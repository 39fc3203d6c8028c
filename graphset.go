package gpugraph

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpugraph/gpugraph/internal/vmem"
)

// GraphSet holds one captured graph per key (a batch size, or any
// comparable shape) and replays the graph of a key: what serving systems
// build to run a model at many batch sizes with one launch each. Graphs are
// captured ahead of time (GraphSetConfig.Keys, largest first) or on first
// use; a key with no graph is captured, padded up to the next captured key,
// or refused, as GraphSetConfig.OnMissing says; and a set never holds more
// than its limit of graphs.
//
// # Memory
//
// The function a set captures allocates its temporaries with
// Stream.MallocAsync and frees them with Stream.FreeAsync, so in the graph
// they are graph memory (alloc and free nodes). Graph allocations of
// different graphs share physical memory when the graphs cannot run at the
// same time: every graph of a set is launched into the set's stream, where
// launches run one after another, so each graph maps its memory onto the
// same physical memory as the others (the CUDA guide's graph memory
// chapter, "Physical memory management and sharing": "since graphs in the
// same stream never run concurrently, CUDA can and should use the same
// physical memory to satisfy all the allocations"). The set's graph memory
// is therefore its largest graph's, not the sum. Stats reports each graph's
// and the set's, computed from the graphs' memory layouts after capture and
// before anything is launched, and GraphSetConfig.MemoryBudget refuses a
// graph after which the set would not fit.
//
// For that to hold, no graph may leave an allocation live after its launch
// (a live allocation keeps its memory out of the shared pages). So the
// allocations the captured function returns, its outputs, are copied at the
// end of the graph into the set's output buffer and freed by the graph: one
// device copy of each output per replay. All graphs write their outputs to
// one buffer, sized for the first graph captured: capture the largest key
// first (as Keys are, given Compare) and no later graph needs another.
//
// # Outputs
//
// Replay returns the replay's outputs. They stay valid until the set
// replays again (any key) or the user releases them; using one after that
// is a StaleOutputError that names the output and the replay that
// overwrote it. Keep copies an output into memory of the caller's, which
// the set never touches, and Read copies it to the host.
//
// A GraphSet is safe for use by several goroutines; replays and captures
// are serialized.
type GraphSet[K comparable] struct {
	core    *setCore
	fn      func(s *Stream, key K) ([]DevicePtr, error)
	cfg     GraphSetConfig[K]
	limit   int
	members map[K]*setMember[K]
	order   []K         // captured keys, in capture order
	regions []setRegion // output buffers, the newest last
}

// GraphSetConfig configures a graph set. The zero value captures each key
// on first use, up to DefaultMaxGraphs graphs, with no budget.
type GraphSetConfig[K comparable] struct {
	// Keys are captured by NewGraphSet, largest first if Compare is set,
	// else in this order.
	Keys []K
	// Compare orders keys (negative if a < b, as cmp.Compare); MissingPad
	// needs it. For int keys, cmp.Compare[int].
	Compare func(a, b K) int
	// OnMissing is what Replay does with a key that has no graph.
	OnMissing MissingKey
	// MaxGraphs is the most graphs the set holds; 0 means DefaultMaxGraphs,
	// or len(Keys) if larger.
	MaxGraphs int
	// MemoryBudget, if not 0, is the most memory the set may need, in
	// bytes: its graph memory (the largest graph's) plus its output
	// buffers.
	MemoryBudget uint64
	// Warmup is how many times the function runs eagerly for a key before
	// its capture (the stream is synchronized after them).
	Warmup int
	// Mode is the capture mode (CaptureModeGlobal by default).
	Mode CaptureMode
}

// DefaultMaxGraphs is a graph set's limit on its number of graphs when
// GraphSetConfig.MaxGraphs is 0 (vLLM captures 51 batch sizes by default).
const DefaultMaxGraphs = 64

// MissingKey is what a graph set does with a key it has no graph for.
type MissingKey int

const (
	// MissingCapture captures the key's graph, if the set is under its
	// limit (else a GraphLimitError).
	MissingCapture MissingKey = iota
	// MissingPad runs the graph of the smallest captured key at least as
	// large (by Compare), as a batch is padded up to a captured batch
	// size; a key larger than every captured one is a
	// KeyNotCapturedError.
	MissingPad
	// MissingRefuse refuses the key with a KeyNotCapturedError.
	MissingRefuse
)

func (m MissingKey) String() string {
	switch m {
	case MissingCapture:
		return "capture"
	case MissingPad:
		return "pad"
	case MissingRefuse:
		return "refuse"
	}
	return fmt.Sprintf("MissingKey(%d)", int(m))
}

// GraphSetStats are a graph set's graphs, their memory and capture times.
type GraphSetStats[K comparable] struct {
	Members []GraphSetMember[K] // in capture order
	// GraphBytes is the set's graph memory: its largest graph's, as all
	// share one stream's physical memory. SumGraphBytes is what the graphs
	// would need if each had memory of its own (a private pool per graph).
	GraphBytes, SumGraphBytes uint64
	// OutputBytes is the set's output buffers (Device.Malloc memory).
	OutputBytes uint64
	// Capture is the time spent capturing and instantiating the graphs,
	// Warmup the time of the eager runs before them.
	Capture, Warmup time.Duration
}

// Bytes is the memory the set needs: graph memory and output buffers.
func (st GraphSetStats[K]) Bytes() uint64 { return st.GraphBytes + st.OutputBytes }

// GraphSetMember is one graph of a set.
type GraphSetMember[K comparable] struct {
	Key   K
	Nodes int // nodes of the graph, the output copies and frees included
	// Allocs and AllocBytes are the graph's allocations and their total
	// size; GraphBytes is the graph memory it maps: the ChunkBytes-sized
	// pieces of address space its allocations span (exact on the host
	// backend; on cuda, the driver's figure may differ).
	Allocs                 int
	AllocBytes, GraphBytes uint64
	Outputs                []int // the size of each output, in bytes
	// Capture is the time from the start of the capture to the end of the
	// instantiation; Warmup the time of the eager runs before it.
	Capture, Warmup time.Duration
}

// setCore is the state a set shares with its outputs.
type setCore struct {
	mu     sync.Mutex
	s      *Stream
	seq    uint64     // replays made
	last   *replayRec // the latest replay
	closed bool
}

// replayRec is one replay of a set: its number and keys, and the replay
// that overwrote its outputs (nil while they are current).
type replayRec struct {
	seq      uint64
	key, ran string // the key asked for and the key whose graph ran
	by       *replayRec
}

func (r *replayRec) String() string {
	if r.key == r.ran {
		return fmt.Sprintf("replay %d (key %s)", r.seq, r.key)
	}
	return fmt.Sprintf("replay %d (key %s, padded to %s)", r.seq, r.key, r.ran)
}

type setMember[K comparable] struct {
	key   K
	name  string
	graph *Graph
	exec  *Exec
	outs  []setOut
	stats GraphSetMember[K]
}

type setOut struct {
	ptr  DevicePtr // in the set's output buffer
	size int
}

type setRegion struct {
	ptr  DevicePtr
	size int
}

// outAlign is the alignment of outputs in the output buffer.
const outAlign = 256

// NewGraphSet makes a graph set on stream s: fn issues the work for a key on
// the stream it is given (the set's stream, capturing) and returns its
// outputs, allocations it made with Stream.MallocAsync and did not free
// (possibly none). Every allocation it leaves live must be an output. The
// keys of cfg.Keys are captured before NewGraphSet returns; if one fails,
// the set is not made and the error says why.
func NewGraphSet[K comparable](s *Stream, fn func(s *Stream, key K) ([]DevicePtr, error), cfg GraphSetConfig[K]) (*GraphSet[K], error) {
	const op = "NewGraphSet"
	if fn == nil {
		return nil, newErr(op, ErrInvalidValue, "nil function")
	}
	if err := s.check(op); err != nil {
		return nil, err
	}
	switch {
	case cfg.Warmup < 0:
		return nil, newErr(op, ErrInvalidValue, "negative warm-up count %d", cfg.Warmup)
	case cfg.MaxGraphs < 0:
		return nil, newErr(op, ErrInvalidValue, "negative MaxGraphs %d", cfg.MaxGraphs)
	case cfg.OnMissing < MissingCapture || cfg.OnMissing > MissingRefuse:
		return nil, newErr(op, ErrInvalidValue, "unknown OnMissing %v", cfg.OnMissing)
	case cfg.OnMissing == MissingPad && cfg.Compare == nil:
		return nil, newErr(op, ErrInvalidValue, "MissingPad needs Compare, to find the next captured key")
	}
	keys := slices.Clone(cfg.Keys)
	seen := make(map[K]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return nil, newErr(op, ErrInvalidValue, "key %v is in Keys twice", k)
		}
		seen[k] = true
	}
	limit := cfg.MaxGraphs
	if limit == 0 {
		limit = max(DefaultMaxGraphs, len(keys))
	}
	gs := &GraphSet[K]{core: &setCore{s: s}, fn: fn, cfg: cfg, limit: limit, members: map[K]*setMember[K]{}}
	if len(keys) > limit {
		return nil, &GraphLimitError{Err: newErr(op, ErrNotPermitted, "%d keys for a limit of %d graphs (MaxGraphs)", len(keys), limit),
			Key: keys[limit], Limit: limit}
	}
	if err := gs.captureKeys(op, keys); err != nil {
		return nil, errors.Join(err, gs.Close())
	}
	return gs, nil
}

// Capture captures the graphs of keys that the set has none for, largest
// first if the set has Compare; keys it has are skipped. It stops at the
// first failure, keeping what it captured.
func (gs *GraphSet[K]) Capture(keys ...K) error {
	const op = "GraphSet.Capture"
	c := gs.core
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return newErr(op, ErrInvalidResourceHandle, "closed graph set")
	}
	return gs.captureKeys(op, keys)
}

func (gs *GraphSet[K]) captureKeys(op string, keys []K) error {
	keys = slices.Clone(keys)
	if gs.cfg.Compare != nil {
		slices.SortStableFunc(keys, func(a, b K) int { return gs.cfg.Compare(b, a) })
	}
	for _, k := range keys {
		if _, ok := gs.members[k]; ok {
			continue
		}
		if _, err := gs.captureLocked(op, k); err != nil {
			return err
		}
	}
	return nil
}

// captureLocked captures, instantiates and adds the graph of key.
func (gs *GraphSet[K]) captureLocked(op string, key K) (*setMember[K], error) {
	if len(gs.members) >= gs.limit {
		return nil, &GraphLimitError{Err: newErr(op, ErrNotPermitted,
			"key %v: the set holds its limit of %d graphs (MaxGraphs) and captures no more", key, gs.limit), Key: key, Limit: gs.limit}
	}
	s := gs.core.s
	m := &setMember[K]{key: key, name: fmt.Sprint(key)}
	m.stats.Key = key
	t0 := time.Now()
	for range gs.cfg.Warmup {
		outs, err := gs.fn(s, key)
		for _, p := range outs {
			err = errors.Join(err, s.FreeAsync(p))
		}
		if err != nil {
			return nil, fmt.Errorf("warm-up of key %v: %w", key, err)
		}
	}
	if gs.cfg.Warmup > 0 {
		if err := s.Synchronize(); err != nil {
			return nil, withOp(op, err)
		}
	}
	t1 := time.Now()
	m.stats.Warmup = t1.Sub(t0)
	if err := s.BeginCapture(gs.cfg.Mode); err != nil {
		return nil, withOp(op, err)
	}
	outs, err := gs.fn(s, key)
	g, endErr := s.EndCapture()
	if err != nil || endErr != nil {
		if endErr == nil {
			g.Destroy()
		}
		if err == nil {
			return nil, withOp(op, endErr)
		}
		return nil, fmt.Errorf("capture of key %v: %w", key, err)
	}
	m.graph = g
	newRegion, err := gs.finishGraph(op, m, outs)
	fail := func(err error) (*setMember[K], error) {
		if m.exec != nil {
			m.exec.Destroy()
		}
		g.Destroy()
		if newRegion {
			r := gs.regions[len(gs.regions)-1]
			gs.regions = gs.regions[:len(gs.regions)-1]
			err = errors.Join(err, s.Device().Free(r.ptr))
		}
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	if m.exec, err = g.Instantiate(0); err != nil {
		return fail(withOp(op, err))
	}
	m.stats.Capture = time.Since(t1)
	if err := gs.measure(op, m); err != nil {
		return fail(err)
	}
	if b := gs.cfg.MemoryBudget; b > 0 {
		st := gs.statsLocked()
		need := max(st.GraphBytes, m.stats.GraphBytes) + st.OutputBytes
		if need > b {
			return fail(&MemoryBudgetError{Err: newErr(op, ErrMemoryAllocation,
				"key %v: its graph maps %s, after which the set would need %s (%d bytes: graph memory %s, outputs %s), over its budget of %s (%d bytes)",
				key, byteSize(m.stats.GraphBytes), byteSize(need), need, byteSize(max(st.GraphBytes, m.stats.GraphBytes)),
				byteSize(st.OutputBytes), byteSize(b), b), Key: key, Need: need, Budget: b})
		}
	}
	gs.members[key] = m
	gs.order = append(gs.order, key)
	return m, nil
}

// finishGraph checks the outputs of m's captured graph and appends to the
// graph, after everything in it, a copy of each output into the set's
// output buffer and its free. newRegion reports that it allocated a new
// output buffer (the last of gs.regions).
func (gs *GraphSet[K]) finishGraph(op string, m *setMember[K], outs []DevicePtr) (newRegion bool, err error) {
	g := m.graph
	nodes, err := g.Nodes()
	if err != nil {
		return false, withOp(op, err)
	}
	// The allocations the graph leaves live: walk the nodes in capture
	// order (a topological order), pairing frees with allocs.
	live := map[DevicePtr][]MemAllocParams{}
	for _, n := range nodes {
		p, err := n.Params()
		if err != nil {
			return false, withOp(op, err)
		}
		switch p := p.(type) {
		case MemAllocParams:
			live[p.Ptr] = append(live[p.Ptr], p)
		case MemFreeParams:
			if l := live[p.Ptr]; len(l) > 0 {
				live[p.Ptr] = l[:len(l)-1]
			}
		}
	}
	sizes := make([]int, len(outs))
	for i, p := range outs {
		l := live[p]
		if len(l) == 0 {
			if slices.Index(outs, p) < i {
				return false, newErr(op, ErrInvalidValue, "key %v: output %d (%#x) is output %d again", m.key, i, uint64(p), slices.Index(outs, p))
			}
			return false, newErr(op, ErrInvalidValue, "key %v: output %d (%#x) is not an allocation the function made with "+
				"Stream.MallocAsync and left live (outputs must be: the set copies and frees them)", m.key, i, uint64(p))
		}
		sizes[i] = l[len(l)-1].Size
		live[p] = l[:len(l)-1]
	}
	for p, l := range live {
		if len(l) > 0 {
			return false, newErr(op, ErrInvalidValue, "key %v: the function leaves the %d-byte allocation at %#x live and does not "+
				"return it: free it, or return it as an output", m.key, l[0].Size, uint64(p))
		}
	}
	m.stats.Outputs = sizes
	if len(outs) == 0 {
		return false, nil
	}
	total := 0
	for _, n := range sizes {
		total += (n + outAlign - 1) / outAlign * outAlign
	}
	if len(gs.regions) == 0 || gs.regions[len(gs.regions)-1].size < total {
		p, err := gs.core.s.Device().Malloc(total)
		if err != nil {
			return false, withOp(op, err)
		}
		gs.regions = append(gs.regions, setRegion{ptr: p, size: total})
		newRegion = true
	}
	region := gs.regions[len(gs.regions)-1].ptr
	var sinks []*Node
	for _, n := range nodes {
		succ, err := n.Dependents()
		if err != nil {
			return newRegion, withOp(op, err)
		}
		if len(succ) == 0 {
			sinks = append(sinks, n)
		}
	}
	off := 0
	for i, p := range outs {
		dst := region + DevicePtr(off)
		cp, err := g.AddMemcpyNode(DtoD(dst, p, sizes[i]), sinks...)
		if err != nil {
			return newRegion, withOp(op, err)
		}
		if _, err := g.AddMemFreeNode(p, cp); err != nil {
			return newRegion, withOp(op, err)
		}
		m.outs = append(m.outs, setOut{ptr: dst, size: sizes[i]})
		off += (sizes[i] + outAlign - 1) / outAlign * outAlign
	}
	return newRegion, nil
}

// measure fills m's statistics from its executable graph's memory layout.
func (gs *GraphSet[K]) measure(op string, m *setMember[K]) error {
	n, err := m.graph.Nodes()
	if err != nil {
		return withOp(op, err)
	}
	m.stats.Nodes = len(n)
	l, err := m.exec.MemLayout()
	if err != nil {
		return withOp(op, err)
	}
	chunk := l.ChunkBytes
	if chunk == 0 {
		chunk = vmem.Granularity
	}
	chunks := map[uint64]bool{}
	for _, a := range l.Allocs {
		m.stats.Allocs++
		m.stats.AllocBytes += a.Size
		for c := uint64(a.Ptr) / chunk; c <= (uint64(a.Ptr)+a.Size-1)/chunk; c++ {
			chunks[c] = true
		}
	}
	m.stats.GraphBytes = uint64(len(chunks)) * chunk
	return nil
}

// Replay launches the graph of key into the set's stream, first capturing
// it or padding key up to a captured key if the set has no graph for it
// (GraphSetConfig.OnMissing), and returns the replay's outputs. Like any
// launch it is asynchronous: Output.Read waits for it. The outputs of the
// previous replay are no longer valid once it returns. A failed replay
// changes nothing: the previous outputs stay valid.
func (gs *GraphSet[K]) Replay(key K) ([]*Output, error) {
	const op = "GraphSet.Replay"
	c := gs.core
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, newErr(op, ErrInvalidResourceHandle, "closed graph set")
	}
	m, err := gs.memberLocked(op, key)
	if err != nil {
		return nil, err
	}
	if err := m.exec.Launch(c.s); err != nil {
		return nil, withOp(op, err)
	}
	c.seq++
	rec := &replayRec{seq: c.seq, ran: m.name}
	if m.key == key {
		rec.key = m.name
	} else {
		rec.key = fmt.Sprint(key)
	}
	if c.last != nil {
		c.last.by = &replayRec{seq: rec.seq, key: rec.key, ran: rec.ran}
	}
	c.last = rec
	outs := make([]*Output, len(m.outs))
	for i, o := range m.outs {
		outs[i] = &Output{core: c, rec: rec, index: i, ptr: o.ptr, size: o.size}
	}
	return outs, nil
}

// memberLocked returns the graph that runs key: its own, a new one, or a
// larger key's, as OnMissing says.
func (gs *GraphSet[K]) memberLocked(op string, key K) (*setMember[K], error) {
	if m, ok := gs.members[key]; ok {
		return m, nil
	}
	switch gs.cfg.OnMissing {
	case MissingCapture:
		return gs.captureLocked(op, key)
	case MissingPad:
		if m := gs.padLocked(key); m != nil {
			return m, nil
		}
		largest := "none captured"
		if len(gs.order) > 0 {
			k := slices.MaxFunc(gs.order, gs.cfg.Compare)
			largest = fmt.Sprintf("the largest is %v", k)
		}
		return nil, &KeyNotCapturedError{Err: newErr(op, ErrInvalidValue,
			"key %v has no graph and no captured key is larger to pad it to (%s)", key, largest), Key: key}
	}
	return nil, &KeyNotCapturedError{Err: newErr(op, ErrInvalidValue,
		"key %v has no graph (captured: %v) and the set captures no key on use", key, gs.order), Key: key}
}

// padLocked returns the graph of the smallest captured key larger than key.
func (gs *GraphSet[K]) padLocked(key K) *setMember[K] {
	var best *setMember[K]
	for _, k := range gs.order {
		if gs.cfg.Compare(k, key) >= 0 && (best == nil || gs.cfg.Compare(k, best.key) < 0) {
			best = gs.members[k]
		}
	}
	return best
}

// Lookup returns the captured key whose graph Replay(key) would run now
// (key itself, or the key it is padded to), and false if none would
// (Replay would capture it or refuse it).
func (gs *GraphSet[K]) Lookup(key K) (K, bool) {
	c := gs.core
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := gs.members[key]; ok && !c.closed {
		return m.key, true
	}
	if gs.cfg.OnMissing == MissingPad && !c.closed {
		if m := gs.padLocked(key); m != nil {
			return m.key, true
		}
	}
	var zero K
	return zero, false
}

// Keys returns the captured keys, in ascending order if the set has
// Compare, else in capture order.
func (gs *GraphSet[K]) Keys() []K {
	gs.core.mu.Lock()
	defer gs.core.mu.Unlock()
	keys := slices.Clone(gs.order)
	if gs.cfg.Compare != nil {
		slices.SortFunc(keys, gs.cfg.Compare)
	}
	return keys
}

// Stream is the stream the set captures on and replays into.
func (gs *GraphSet[K]) Stream() *Stream { return gs.core.s }

// Stats returns the set's graphs, their memory and capture times. It is
// known once the graphs are captured, before any is launched.
func (gs *GraphSet[K]) Stats() GraphSetStats[K] {
	gs.core.mu.Lock()
	defer gs.core.mu.Unlock()
	return gs.statsLocked()
}

func (gs *GraphSet[K]) statsLocked() GraphSetStats[K] {
	var st GraphSetStats[K]
	for _, k := range gs.order {
		m := gs.members[k].stats
		m.Outputs = slices.Clone(m.Outputs)
		st.Members = append(st.Members, m)
		st.GraphBytes = max(st.GraphBytes, m.GraphBytes)
		st.SumGraphBytes += m.GraphBytes
		st.Capture += m.Capture
		st.Warmup += m.Warmup
	}
	for _, r := range gs.regions {
		st.OutputBytes += uint64(r.size)
	}
	return st
}

// Close destroys the graphs and frees the output buffers (after the work
// queued on the device). Outputs of the set are no longer valid.
func (gs *GraphSet[K]) Close() error {
	c := gs.core
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return newErr("GraphSet.Close", ErrInvalidResourceHandle, "graph set closed twice")
	}
	c.closed = true
	var errs []error
	for _, k := range gs.order {
		m := gs.members[k]
		errs = append(errs, m.exec.Destroy(), m.graph.Destroy())
	}
	gs.members, gs.order = nil, nil
	for _, r := range gs.regions {
		errs = append(errs, c.s.Device().Free(r.ptr))
	}
	gs.regions = nil
	return errors.Join(errs...)
}

// Output is one output of a graph set's replay: a range of device memory
// that holds the output until the set replays again.
type Output struct {
	core     *setCore
	rec      *replayRec
	index    int
	ptr      DevicePtr
	size     int
	released bool
}

// String names the output: "output 0 of replay 7 (key 5, padded to 8)".
func (o *Output) String() string {
	if o == nil || o.rec == nil {
		return "output <nil>"
	}
	return fmt.Sprintf("output %d of %v", o.index, o.rec)
}

// checkLocked reports why o may not be used, or nil.
func (o *Output) checkLocked(op string) error {
	stale := func(format string, args ...any) *StaleOutputError {
		return &StaleOutputError{Err: newErr(op, ErrInvalidValue, "%v "+format, append([]any{o}, args...)...), Output: o.String()}
	}
	switch {
	case o.core.closed:
		e := stale("is gone: its graph set was closed")
		e.Closed = true
		return e
	case o.released:
		e := stale("was released")
		e.Released = true
		return e
	case o.rec.by != nil:
		e := stale("was overwritten by %v: use outputs before the next replay of the set, or Keep or Read them", o.rec.by)
		e.OverwrittenBy, e.OverwrittenKey = o.rec.by.seq, o.rec.by.key
		return e
	}
	return nil
}

func (o *Output) lock(op string) error {
	if o == nil || o.core == nil {
		return newErr(op, ErrInvalidValue, "nil output")
	}
	o.core.mu.Lock()
	if err := o.checkLocked(op); err != nil {
		o.core.mu.Unlock()
		return err
	}
	return nil
}

// Ptr returns the output's address, valid until the set replays again;
// work that reads it must be ordered before that replay (issue it on the
// set's stream).
func (o *Output) Ptr() (DevicePtr, error) {
	if err := o.lock("Output.Ptr"); err != nil {
		return 0, err
	}
	defer o.core.mu.Unlock()
	return o.ptr, nil
}

// Size is the output's size in bytes (the size of the graph's allocation:
// for a padded key, the padded output).
func (o *Output) Size() int {
	if o == nil {
		return 0
	}
	return o.size
}

// Read waits for the replay and copies the first len(dst) bytes of the
// output into dst.
func (o *Output) Read(dst []byte) error {
	const op = "Output.Read"
	if err := o.lock(op); err != nil {
		return err
	}
	defer o.core.mu.Unlock()
	if len(dst) > o.size {
		return newErr(op, ErrInvalidValue, "%d bytes asked of the %d of %v", len(dst), o.size, o)
	}
	if len(dst) == 0 {
		return nil
	}
	s := o.core.s
	if err := s.Memcpy(DtoH(dst, o.ptr)); err != nil {
		return withOp(op, err)
	}
	if !s.dev.pinned(dst) {
		return nil // a copy into pageable memory returns when it is done
	}
	return withOp(op, s.Synchronize())
}

// Keep copies the output, in the set's stream order, into new device memory
// (Device.Malloc) that the set never touches, and returns it; the caller
// frees it with Device.Free.
func (o *Output) Keep() (DevicePtr, error) {
	const op = "Output.Keep"
	if err := o.lock(op); err != nil {
		return 0, err
	}
	defer o.core.mu.Unlock()
	s := o.core.s
	p, err := s.Device().Malloc(o.size)
	if err != nil {
		return 0, withOp(op, err)
	}
	if err := s.Memcpy(DtoD(p, o.ptr, o.size)); err != nil {
		s.Device().Free(p)
		return 0, withOp(op, err)
	}
	return p, nil
}

// Release says the caller is done with the output: using it afterwards is
// a StaleOutputError. It frees nothing (the memory is the set's). Releasing
// an output that is no longer valid is that error too.
func (o *Output) Release() error {
	if err := o.lock("Output.Release"); err != nil {
		return err
	}
	defer o.core.mu.Unlock()
	o.released = true
	return nil
}

// byteSize prints n bytes in the largest binary unit that keeps it exact
// to one decimal.
func byteSize(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
