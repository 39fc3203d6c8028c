package gpugraph

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// StreamFlags are the flags of NewStreamWithFlags
// (cudaStreamCreateWithFlags).
type StreamFlags uint

const (
	// StreamDefault makes a blocking stream: it synchronizes with the
	// legacy default stream (cudaStreamDefault).
	StreamDefault StreamFlags = 0
	// StreamNonBlocking makes a stream that does not synchronize with the
	// legacy default stream (cudaStreamNonBlocking).
	StreamNonBlocking StreamFlags = 1
)

// String returns the flag's CUDA name.
func (f StreamFlags) String() string {
	switch f {
	case StreamDefault:
		return "StreamDefault"
	case StreamNonBlocking:
		return "StreamNonBlocking"
	}
	return "StreamFlags(" + strconv.Itoa(int(f)) + ")"
}

// streamKind is how a stream takes part in the default streams' ordering.
type streamKind uint8

const (
	streamNonBlocking streamKind = iota // NewStream, StreamNonBlocking
	streamBlocking                      // StreamDefault
	streamPerThread                     // StreamPerThread: blocking, never destroyed
	streamLegacy                        // StreamLegacy
)

// blocking reports whether work in the stream synchronizes with the legacy
// default stream.
func (k streamKind) blocking() bool { return k != streamNonBlocking }

// defaultStreams is a device's legacy default stream and, on backends
// whose streams do not order themselves (backend.DefaultStreams), the
// ordering between it and the device's blocking streams, made of events:
//
//   - work issued to the legacy stream waits for all work issued before it
//     to the device's blocking streams;
//   - work issued to a blocking stream waits for all work issued before it
//     to the legacy stream.
//
// A legacy-stream issue holds mu and every blocking stream's order lock
// from its first wait to its record after the work; a blocking stream
// holds its own order lock from its check of gen to its work. So every
// pair of issues, one to the legacy stream and one to a blocking stream, is
// ordered one way or the other, even when they race.
type defaultStreams struct {
	mu       sync.Mutex // guards legacy, blocking; held by legacy-stream issues
	legacy   *Stream
	blocking []*Stream // live blocking streams ordered by this package
	gen      atomic.Uint64
	// gen counts the issues to the legacy stream (ordered by this
	// package): a blocking stream that saw gen at its last issue needs no
	// wait.
}

// streamOrder is a stream's part in the ordering of defaultStreams, on
// backends that do not order the default streams themselves; nil for a
// non-blocking stream and on those that do.
type streamOrder struct {
	mu sync.Mutex
	ev backend.Event // recorded in the stream for the other side to wait on
	// A blocking stream's counts, under mu: the legacy issues it has
	// waited for; its issues; its issues the legacy stream has waited for.
	seen, issued, synced uint64
}

// NewStreamWithFlags creates a stream (cudaStreamCreateWithFlags):
// StreamDefault makes a blocking stream, which synchronizes with the legacy
// default stream (see StreamLegacy); StreamNonBlocking makes one that does
// not, as NewStream does.
func (d *Device) NewStreamWithFlags(flags StreamFlags) (*Stream, error) {
	const opName = "Device.NewStreamWithFlags"
	switch flags {
	case StreamNonBlocking:
		return d.newStream(opName, streamNonBlocking)
	case StreamDefault:
		return d.newStream(opName, streamBlocking)
	}
	return nil, newErr(opName, ErrInvalidValue, "unknown stream flags %#x (want StreamDefault or StreamNonBlocking)", uint(flags))
}

// StreamLegacy returns the device's legacy default stream (cudaStreamLegacy,
// the "NULL stream"). Its work waits for all work issued before it to the
// device's blocking streams (StreamDefault, StreamPerThread), and their
// work issued after it waits for it; non-blocking streams do not
// synchronize with it. Synchronize and Query on it cover the blocking
// streams' work issued before them too. It cannot be captured
// (ErrStreamCaptureUnsupported), and while a capture includes a blocking
// stream of the device, any use of it fails with ErrStreamCaptureImplicit.
// It cannot be destroyed. Every call returns the same stream.
func (d *Device) StreamLegacy() (*Stream, error) {
	const opName = "Device.StreamLegacy"
	if err := d.check(opName); err != nil {
		return nil, err
	}
	ds := &d.defStreams
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.legacy != nil {
		return ds.legacy, nil
	}
	s := &Stream{dev: d, kind: streamLegacy}
	if n, ok := d.be.(backend.DefaultStreams); ok {
		be, err := n.LegacyStream()
		if err != nil {
			return nil, backendErr(opName, err)
		}
		s.be = be
	} else {
		be, ord, err := d.orderedStream()
		if err != nil {
			return nil, backendErr(opName, err)
		}
		s.be, s.ord = be, ord
	}
	ds.legacy = s
	return s, nil
}

// StreamPerThread returns the device's per-thread default stream
// (cudaStreamPerThread) of the device's main scope; see
// Scope.StreamPerThread.
func (d *Device) StreamPerThread() (*Stream, error) {
	return d.mainScope().streamPerThread("Device.StreamPerThread")
}

// StreamPerThread returns the scope's per-thread default stream
// (cudaStreamPerThread): a blocking stream that the scope makes at its
// first call and that lives as long as the device. It synchronizes with the
// legacy default stream as any blocking stream does, and it can be
// captured. A Scope stands for a CUDA host thread (Go code moves between
// threads), so each scope has its own; on the cuda backend it is a stream
// the driver made blocking (CU_STREAM_DEFAULT), not the driver's
// CU_STREAM_PER_THREAD handle, which names a different stream on each OS
// thread a goroutine runs on. It cannot be destroyed.
func (sc *Scope) StreamPerThread() (*Stream, error) {
	return sc.streamPerThread("Scope.StreamPerThread")
}

func (sc *Scope) streamPerThread(opName string) (*Stream, error) {
	d := sc.dev
	if err := d.check(opName); err != nil {
		return nil, err
	}
	sc.ptMu.Lock()
	defer sc.ptMu.Unlock()
	if sc.perThread != nil {
		return sc.perThread, nil
	}
	s, err := d.newStream(opName, streamPerThread)
	if err != nil {
		return nil, err
	}
	sc.perThread = s
	return s, nil
}

// Flags returns the stream's creation flags (cudaStreamGetFlags):
// StreamNonBlocking for a non-blocking stream, StreamDefault for the
// others, the default streams included.
func (s *Stream) Flags() (StreamFlags, error) {
	if err := s.check("Stream.Flags"); err != nil {
		return 0, err
	}
	if s.kind.blocking() {
		return StreamDefault, nil
	}
	return StreamNonBlocking, nil
}

// newStream creates a stream of kind: non-blocking, blocking or per-thread.
func (d *Device) newStream(opName string, kind streamKind) (*Stream, error) {
	if err := d.check(opName); err != nil {
		return nil, err
	}
	if !kind.blocking() {
		be, err := d.be.NewStream()
		if err != nil {
			return nil, backendErr(opName, err)
		}
		return &Stream{dev: d, be: be}, nil
	}
	if n, ok := d.be.(backend.DefaultStreams); ok {
		be, err := n.NewBlockingStream()
		if err != nil {
			return nil, backendErr(opName, err)
		}
		return &Stream{dev: d, be: be, kind: kind}, nil
	}
	be, ord, err := d.orderedStream()
	if err != nil {
		return nil, backendErr(opName, err)
	}
	s := &Stream{dev: d, be: be, kind: kind, ord: ord}
	ds := &d.defStreams
	ds.mu.Lock()
	ds.blocking = append(ds.blocking, s)
	// Work issued to the legacy stream before the stream existed is prior
	// to all of its work.
	s.ord.seen = 0
	ds.mu.Unlock()
	return s, nil
}

// issue runs enq, which queues work in the stream's backend stream, in the
// order of the default streams (see defaultStreams); opName names the call
// for the errors of the legacy stream.
func (s *Stream) issue(opName string, enq func() error) error {
	if s.ord == nil {
		if enq == nil {
			return nil
		}
		return enq()
	}
	ds := &s.dev.defStreams
	if s.kind == streamLegacy {
		return ds.issueLegacy(opName, s, enq)
	}
	o := s.ord
	o.mu.Lock()
	defer o.mu.Unlock()
	if g := ds.gen.Load(); g != o.seen {
		if err := s.be.Wait(ds.legacy.ord.ev); err != nil {
			return err
		}
		o.seen = g
	}
	o.issued++
	if enq == nil {
		return nil
	}
	return enq()
}

// memcpyPageableInOrder is a copy with pageable host memory (which returns
// when it is done) into a stream this package orders with the legacy
// stream. The copy is queued under the order locks as other work is, but
// waited for after issue let them go: waiting under them would hold every
// other issue to the stream (to every blocking stream, for the legacy
// stream) until the copy's earlier work ran, and a program whose earlier
// work waits for such an issue would never return, where the driver's
// would.
func (s *Stream) memcpyPageableInOrder(opName string, bp *backend.Memcpy) error {
	q := *bp
	q.SrcPinned, q.DstPinned = true, true // queued, not waited for, under the locks
	done, err := s.dev.be.NewEvent(backend.EventDisableTiming)
	if err != nil {
		return err
	}
	defer done.Destroy()
	err = s.issue(opName, func() error {
		if err := s.be.Memcpy(&q); err != nil {
			return err
		}
		return s.be.Record(done)
	})
	if err != nil {
		return err
	}
	return done.Synchronize()
}

// issueLegacy issues enq (nil: nothing, for Synchronize and Query) to the
// legacy stream after waits for the work issued so far to every blocking
// stream, and records the legacy stream's event after it for their later
// work. A use of the legacy stream while a capture includes a blocking
// stream of the device fails first (legacyConflict).
func (ds *defaultStreams) issueLegacy(opName string, s *Stream, enq func() error) error {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if err := s.dev.legacyConflict(opName, true); err != nil {
		return err
	}
	for _, b := range ds.blocking {
		b.ord.mu.Lock()
	}
	defer func() {
		for _, b := range ds.blocking {
			b.ord.mu.Unlock()
		}
	}()
	for _, b := range ds.blocking {
		if err := ds.waitFor(s, b); err != nil {
			return err
		}
	}
	if enq == nil {
		return nil
	}
	if err := enq(); err != nil {
		return err
	}
	if err := s.be.Record(s.ord.ev); err != nil {
		return err
	}
	ds.gen.Add(1)
	return nil
}

// waitFor makes the legacy stream l wait for the work issued so far to the
// blocking stream b, if it has not already; ds.mu and b's order lock are
// held.
func (ds *defaultStreams) waitFor(l, b *Stream) error {
	o := b.ord
	if o.issued == o.synced {
		return nil
	}
	if err := b.be.Record(o.ev); err != nil {
		return err
	}
	if err := l.be.Wait(o.ev); err != nil {
		return err
	}
	o.synced = o.issued
	return nil
}

// forget takes the blocking stream b, which is being destroyed, out of the
// ordering; the legacy stream's later work still waits for b's work issued
// before.
func (ds *defaultStreams) forget(b *Stream) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for i, x := range ds.blocking {
		if x == b {
			ds.blocking = append(ds.blocking[:i:i], ds.blocking[i+1:]...)
			break
		}
	}
	if ds.legacy == nil || ds.legacy.ord == nil {
		return
	}
	b.ord.mu.Lock()
	defer b.ord.mu.Unlock()
	ds.waitFor(ds.legacy, b) // a failure here is the device's, reported by its next call
}

// legacyConflict fails a use of the legacy default stream of d while a
// capture under way includes a blocking stream of d: the legacy stream's
// work would depend on the captured work, which does not run
// (cudaErrorStreamCaptureImplicit). invalidate: the use invalidates those
// captures (work, Synchronize, Query), unlike asking for the legacy
// stream's capture status.
func (d *Device) legacyConflict(opName string, invalidate bool) error {
	cs := d.caps
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var hit []*captureSeq
	for seq := range cs.active {
		for _, t := range seq.streams {
			if t.dev == d && t.kind.blocking() {
				hit = append(hit, seq)
				break
			}
		}
	}
	if len(hit) == 0 {
		return nil
	}
	e := newErr(opName, ErrStreamCaptureImplicit, "the legacy default stream would depend on work captured in a blocking stream")
	if !invalidate {
		return e
	}
	return prohibit(hit, e)
}

// legacyCaptureInfo is the capture status of the legacy stream, which is
// never capturing, unless a capture of a blocking stream makes asking an
// error that leaves the capture intact.
func (s *Stream) legacyCaptureInfo(opName string) (CaptureInfo, error) {
	if err := s.dev.legacyConflict(opName, false); err != nil {
		return CaptureInfo{}, err
	}
	return CaptureInfo{}, nil
}

// orderedStream makes a backend stream for a default or blocking stream
// that this package orders itself (a backend without DefaultStreams), with
// the event its order waits on.
func (d *Device) orderedStream() (backend.Stream, *streamOrder, error) {
	be, err := d.be.NewStream()
	if err != nil {
		return nil, nil, err
	}
	ev, err := d.be.NewEvent(backend.EventDisableTiming)
	if err != nil {
		be.Destroy()
		return nil, nil, err
	}
	return be, &streamOrder{ev: ev}, nil
}
