package gpugraph

import (
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Stream is a FIFO queue of device work. Work in one stream runs in the
// order it was issued; work in different streams may run concurrently.
// Calls return as soon as the work is queued. Methods are safe for
// concurrent use.
type Stream struct {
	// What every launch reads comes first, on as few cache lines as
	// possible: between two launches the driver has run for microseconds
	// and evicted them (docs/performance-log.md, "The stream launch path").
	dev       *Device
	be        backend.Stream // the backend's stream
	destroyed atomic.Bool
	capturing atomic.Bool // cap != nil; read without the lock on every operation

	argMu sync.Mutex // guards checked, launch and args
	// checked is the kernel whose launch, in the configuration launch
	// holds, was checked and lowered by the last launch: the same launch
	// again needs only its arguments marshalled (a Kernel does not change
	// after its first launch). nil after a launch that failed its checks.
	checked *Kernel
	launch  backend.Launch // a launch, lowered
	args    []uint64       // its argument words; the backend copies both

	capInto *Graph      // the graph a native BeginCaptureToGraph captures into
	capView uintptr     // the graph handle of the native capture begun in s (nativeCaptures)
	cap     *captureSeq // guarded by dev.caps.mu
	capDeps []*Node     // the capture's dependency set for this stream

	capData map[*Node]EdgeData // non-default data of the edges from capDeps (edgedata_capture.go)

	kind streamKind   // non-blocking, blocking, per-thread or legacy (defaultstreams.go)
	ord  *streamOrder // the ordering with the legacy stream this package makes, or nil
}

// NewStream creates a non-blocking stream, as NewStreamWithFlags with
// StreamNonBlocking: its work does not synchronize with the legacy default
// stream (StreamLegacy). (CUDA's cudaStreamCreate makes a blocking stream:
// NewStreamWithFlags(StreamDefault).)
func (d *Device) NewStream() (*Stream, error) {
	return d.newStream("Device.NewStream", streamNonBlocking)
}

// Device is the device the stream belongs to.
func (s *Stream) Device() *Device { return s.dev }

// check validates the stream handle for op.
func (s *Stream) check(opName string) error {
	if s == nil {
		return newErr(opName, ErrInvalidResourceHandle, "nil stream")
	}
	if err := s.dev.check(opName); err != nil {
		return err
	}
	if s.destroyed.Load() {
		return newErr(opName, ErrInvalidResourceHandle, "stream is destroyed")
	}
	return nil
}

// usable is the cheap check of the launch path: a live stream on an open
// device without a sticky error.
func (s *Stream) usable(opName string) error {
	switch {
	case s == nil:
		return newErr(opName, ErrInvalidResourceHandle, "nil stream")
	case s.destroyed.Load():
		return newErr(opName, ErrInvalidResourceHandle, "stream is destroyed")
	case s.dev.closed.Load():
		return newErr(opName, ErrContextIsDestroyed, "device is closed")
	}
	if e := s.dev.sticky.Load(); e != nil {
		return withOp(opName, e)
	}
	return notInDestructor(opName)
}

// Synchronize waits until all work issued to the stream has completed. It
// returns the device's sticky error if any asynchronous work failed.
func (s *Stream) Synchronize() error {
	const opName = "Stream.Synchronize"
	if err := s.check(opName); err != nil {
		return err
	}
	if err := s.syncProhibited(opName); err != nil {
		return err
	}
	if s.kind == streamLegacy {
		// Potentially unsafe while another stream captures, as an
		// instantiation is: the driver refuses it during a global capture
		// of a non-blocking stream (cudaErrorStreamCaptureUnsupported,
		// measured on an H100, driver 580; scenario DefaultStreamCapture).
		if err := s.dev.unsafeCall(opName, s.dev.mainScope(), ErrStreamCaptureUnsupported); err != nil {
			return err
		}
		if err := s.issue(opName, nil); err != nil { // the blocking streams' work too
			return backendErr(opName, err)
		}
	}
	if err := s.dev.wait(opName, s.be.Synchronize); err != nil {
		return backendErr(opName, err)
	}
	if e := s.dev.sticky.Load(); e != nil {
		return withOp(opName, e)
	}
	if e := s.dev.once.Swap(nil); e != nil {
		return withOp(opName, e)
	}
	return nil
}

// Query returns nil if all work issued to the stream has completed, and
// ErrNotReady if some is still pending.
func (s *Stream) Query() error {
	const opName = "Stream.Query"
	if err := s.check(opName); err != nil {
		return err
	}
	if err := s.syncProhibited(opName); err != nil {
		return err
	}
	if s.kind == streamLegacy {
		if err := s.issue(opName, nil); err != nil { // the blocking streams' work too
			return backendErr(opName, err)
		}
	}
	return backendErr(opName, s.be.Query())
}

// Destroy releases the stream. Work already issued still runs to completion;
// any later call on the stream fails with ErrInvalidResourceHandle.
func (s *Stream) Destroy() error {
	const opName = "Stream.Destroy"
	if err := s.check(opName); err != nil {
		return err
	}
	switch s.kind {
	case streamLegacy:
		return newErr(opName, ErrInvalidResourceHandle, "the legacy default stream cannot be destroyed")
	case streamPerThread:
		return newErr(opName, ErrInvalidResourceHandle, "the per-thread default stream cannot be destroyed")
	}
	if s.destroyed.Swap(true) {
		return newErr(opName, ErrInvalidResourceHandle, "stream is destroyed")
	}
	if s.ord != nil {
		s.dev.defStreams.forget(s)
	}
	return backendErr(opName, s.be.Destroy())
}

// Launch queues a kernel launch: grid blocks of block threads, with args
// matching k.Params.
func (s *Stream) Launch(k *Kernel, grid, block Dim3, args ...any) error {
	return s.launchKernel("Stream.Launch", &KernelParams{Kernel: k, Grid: grid, Block: block, Args: args})
}

// LaunchKernel queues the kernel launch p.
func (s *Stream) LaunchKernel(p KernelParams) error { return s.launchKernel("Stream.LaunchKernel", &p) }

func (s *Stream) launchKernel(opName string, p *KernelParams) error {
	if err := s.usable(opName); err != nil {
		return err
	}
	if s.capturing.Load() {
		if _, captured, err := s.captureNode(opName, *p); captured {
			return err
		}
	}
	// The arguments are marshalled into the stream's buffer, which the
	// backend copies: a launch allocates nothing it need not
	// (TestLaunchAllocs).
	s.argMu.Lock()
	if cap(s.args) < len(p.Args) {
		s.args = make([]uint64, 0, max(16, len(p.Args)))
	}
	s.args = s.args[:0]
	var code *Code
	var msg string
	if l := &s.launch; p.Kernel != nil && p.Kernel == s.checked && sameConfig(p, l) {
		// The launch before was of this kernel in this configuration:
		// checked then, lowered in l, its words in l.Args (none if the
		// kernel takes none). Only the arguments are new.
		if len(p.Args) > 0 || len(l.Args) > 0 {
			if l.Args, code, msg = marshalArgs(p, &s.args); code != nil {
				s.checked = nil
			}
		}
	} else {
		s.checked = nil
		if code, msg = checkStreamLaunch(p); code == nil {
			if code, msg = s.dev.lowerLaunchInto(l, p, &s.args); code == nil {
				s.checked = p.Kernel
			}
		}
	}
	var err error
	if code == nil {
		if s.ord == nil {
			w := s.nativeWorkBegin() // nil unless a native capture of another device's graph is under way
			err = s.be.Launch(&s.launch)
			w.end(s, err)
		} else {
			err = s.issue(opName, func() error { return s.be.Launch(&s.launch) })
		}
	}
	s.argMu.Unlock() // not deferred: the launch path is hot (BenchmarkLaunch)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	if err != nil {
		return backendErr(opName, err)
	}
	return nil
}

// sameConfig reports whether p launches in the configuration l was lowered
// with.
func sameConfig(p *KernelParams, l *backend.Launch) bool {
	return p.Grid.X == int(l.Grid[0]) && p.Grid.Y == int(l.Grid[1]) && p.Grid.Z == int(l.Grid[2]) &&
		p.Block.X == int(l.Block[0]) && p.Block.Y == int(l.Block[1]) && p.Block.Z == int(l.Block[2]) &&
		p.SharedMem == int(l.Shared)
}

// LaunchHostFunc queues fn to run on the host after all earlier work in the
// stream, holding back later work until it returns (cudaLaunchHostFunc).
// fn must not call gpugraph, nor wait for something the program does only
// after a later gpugraph call returns: on the cuda backend a call may wait
// for the device's earlier work (a kernel's first launch on a device loads
// it, which may wait for all work on the device), and the driver may run
// the host functions of different streams one at a time.
func (s *Stream) LaunchHostFunc(fn func()) error {
	const opName = "Stream.LaunchHostFunc"
	if err := s.usable(opName); err != nil {
		return err
	}
	if fn == nil {
		return newErr(opName, ErrInvalidValue, "nil function")
	}
	if s.capturing.Load() {
		if _, captured, err := s.captureNode(opName, HostParams{fn}); captured {
			return err
		}
	}
	return backendErr(opName, s.issue(opName, func() error {
		w := s.nativeWorkBegin()
		err := s.be.HostFunc(fn)
		w.end(s, err)
		return err
	}))
}

// Memcpy queues the copy p (cudaMemcpyAsync). With pinned host memory
// (MallocHost, HostRegister), or none, it returns at once and the copy runs
// in stream order, overlapping other streams' work; the host slice must
// not be modified or read by the program until the copy has completed. A
// copy with pageable host memory (any other Go memory) returns when it is
// done, after the work queued in the stream before it.
func (s *Stream) Memcpy(p MemcpyParams) error {
	const opName = "Stream.Memcpy"
	if err := s.usable(opName); err != nil {
		return err
	}
	if s.capturing.Load() {
		if _, captured, err := s.captureNode(opName, p); captured {
			return err
		}
	}
	bp, code, msg := s.dev.lowerCopy(&p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	w := s.nativeWorkBegin()
	var err error
	switch {
	case bp.Pageable() && s.ord != nil:
		err = s.dev.wait(opName, func() error { return s.memcpyPageableInOrder(opName, &bp) })
	case bp.Pageable():
		// A copy with pageable host memory returns when it is done, after
		// the work queued before it: a wait.
		err = s.dev.wait(opName, func() error { return s.be.Memcpy(&bp) })
	default:
		err = s.issue(opName, func() error { return s.be.Memcpy(&bp) })
	}
	w.end(s, err)
	return backendErr(opName, err)
}

// Memset queues the fill p (cudaMemsetAsync).
func (s *Stream) Memset(p MemsetParams) error {
	const opName = "Stream.Memset"
	if err := s.usable(opName); err != nil {
		return err
	}
	if s.capturing.Load() {
		if _, captured, err := s.captureNode(opName, p); captured {
			return err
		}
	}
	bp, code, msg := s.dev.lowerMemset(&p, false)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return backendErr(opName, s.issue(opName, func() error {
		w := s.nativeWorkBegin()
		err := s.be.Memset(&bp)
		w.end(s, err)
		return err
	}))
}

// Memcpy copies synchronously: it waits for all work on the device, then
// copies (cudaMemcpy).
func (d *Device) Memcpy(p MemcpyParams) error { return d.mainScope().Memcpy(p) }

// Memcpy copies synchronously, from this scope.
func (sc *Scope) Memcpy(p MemcpyParams) error {
	const opName = "Device.Memcpy"
	d := sc.dev
	if err := d.check(opName); err != nil {
		return err
	}
	if err := d.unsafeCall(opName, sc, ErrStreamCaptureImplicit); err != nil {
		return err
	}
	if err := d.legacyConflict(opName, true); err != nil { // a copy in the legacy default stream
		return err
	}
	bp, code, msg := d.lowerCopy(&p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return d.afterSync(opName, d.wait(opName, func() error { return d.be.Memcpy(&bp) }))
}

// Memset fills synchronously after all work on the device (cudaMemset).
func (d *Device) Memset(p MemsetParams) error { return d.mainScope().Memset(p) }

// Memset fills synchronously, from this scope.
func (sc *Scope) Memset(p MemsetParams) error {
	const opName = "Device.Memset"
	d := sc.dev
	if err := d.check(opName); err != nil {
		return err
	}
	if err := d.unsafeCall(opName, sc, ErrStreamCaptureImplicit); err != nil {
		return err
	}
	if err := d.legacyConflict(opName, true); err != nil { // a fill in the legacy default stream
		return err
	}
	bp, code, msg := d.lowerMemset(&p, false)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return d.afterSync(opName, d.wait(opName, func() error { return d.be.Memset(&bp) }))
}

// afterSync is the result of a synchronous copy or memset: the backend's
// error, or the device's sticky error (a failed device runs nothing).
func (d *Device) afterSync(opName string, err error) error {
	if err != nil {
		return backendErr(opName, err)
	}
	if e := d.sticky.Load(); e != nil {
		return withOp(opName, e)
	}
	return nil
}
