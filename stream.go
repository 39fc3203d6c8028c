package gpugraph

import (
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Stream is a FIFO queue of device work. Work in one stream runs in the
// order it was issued; work in different streams may run concurrently.
// Calls return as soon as the work is queued. Methods are safe for
// concurrent use.
type Stream struct {
	dev *Device

	mu        sync.Mutex
	cond      sync.Cond // signalled when work completes and someone waits
	wake      sync.Cond // signalled when work arrives for an idle worker
	queue     []op      // ring buffer
	head, n   int
	started   bool // the worker goroutine runs
	idle      bool // the worker waits on wake
	stop      bool // the worker exits once the queue is empty
	submitted uint64
	completed uint64
	waiters   int
	destroyed atomic.Bool

	be      backend.Stream // the cuda backend's stream; nil on host
	capInto *Graph         // the graph a native BeginCaptureToGraph captures into
	argMu   sync.Mutex     // guards args
	args    []uint64       // a cuda stream launch's argument words

	capturing atomic.Bool // cap != nil; read without the lock on every operation
	cap       *captureSeq // guarded by dev.cap.mu
	capDeps   []*Node     // the capture's dependency set for this stream

	capData map[*Node]EdgeData // non-default data of the edges from capDeps (edgedata_capture.go)
}

// NewStream creates a stream.
func (d *Device) NewStream() (*Stream, error) {
	if err := d.check("Device.NewStream"); err != nil {
		return nil, err
	}
	s := &Stream{dev: d, queue: make([]op, 16)}
	s.cond.L = &s.mu
	s.wake.L = &s.mu
	if d.cuda != nil {
		if err := d.cudaNewStream(s); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	d.streams[s] = struct{}{}
	d.mu.Unlock()
	return s, nil
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
// device. The device's sticky error is checked when the work is queued.
func (s *Stream) usable(opName string) error {
	switch {
	case s == nil:
		return newErr(opName, ErrInvalidResourceHandle, "nil stream")
	case s.destroyed.Load():
		return newErr(opName, ErrInvalidResourceHandle, "stream is destroyed")
	case s.dev.closed.Load():
		return newErr(opName, ErrContextIsDestroyed, "device is closed")
	}
	return notInDestructor(opName)
}

// enqueue appends o to the stream. prepare, if not nil, runs under the
// stream's lock just before o is queued, and its result becomes o.seq: event
// records and graph launches take their sequence numbers in queue order, and
// launches and frees check and change allocation state atomically with
// queueing. If prepare fails, nothing is queued.
func (s *Stream) enqueue(opName string, o op, prepare func() (uint64, error)) error {
	if e := s.dev.sticky.Load(); e != nil {
		return withOp(opName, e)
	}
	s.mu.Lock()
	if s.destroyed.Load() {
		s.mu.Unlock()
		return newErr(opName, ErrInvalidResourceHandle, "stream is destroyed")
	}
	if prepare != nil {
		seq, err := prepare()
		if err != nil {
			s.mu.Unlock()
			return err
		}
		o.seq = seq
	}
	if s.n == len(s.queue) {
		q := make([]op, 2*len(s.queue))
		for i := 0; i < s.n; i++ {
			q[i] = s.queue[(s.head+i)%len(s.queue)]
		}
		s.queue, s.head = q, 0
	}
	s.queue[(s.head+s.n)%len(s.queue)] = o
	s.n++
	s.submitted++
	if !s.started {
		s.started = true
		go s.worker()
	} else if s.idle {
		s.wake.Signal()
	}
	s.mu.Unlock()
	return nil
}

// worker runs the stream's work in order. One long-lived goroutine per
// stream keeps the stream FIFO and keeps its grown stack from one launch to
// the next (a fresh goroutine per burst paid for stack growth every graph
// launch).
func (s *Stream) worker() {
	debug.SetPanicOnFault(true) // faults on device memory become errors
	s.mu.Lock()
	for {
		for s.n == 0 {
			if s.stop {
				s.mu.Unlock()
				s.dev.forget(s)
				return
			}
			s.idle = true
			s.wake.Wait()
			s.idle = false
		}
		o := s.queue[s.head]
		s.queue[s.head] = op{}
		s.head = (s.head + 1) % len(s.queue)
		s.n--
		s.mu.Unlock()
		if s.dev.sticky.Load() == nil {
			if err := o.run(s.dev); err != nil {
				s.dev.fail(err)
			}
		} else if o.kind == opRecord {
			o.ev.complete(o.seq) // keep waiters from hanging on a failed device
		} else if o.kind == opGraph {
			o.launch.skip()
		}
		s.mu.Lock()
		s.completed++
		if s.waiters > 0 {
			s.cond.Broadcast()
		}
	}
}

// shutdown lets the worker exit once the queued work is done.
func (s *Stream) shutdown() {
	s.mu.Lock()
	s.stop = true
	if s.idle {
		s.wake.Signal()
	}
	started := s.started
	s.mu.Unlock()
	if !started {
		s.dev.forget(s)
	}
}

// wait blocks until everything submitted so far has completed.
func (s *Stream) wait() {
	s.mu.Lock()
	target := s.submitted
	for s.completed < target {
		s.waiters++
		s.cond.Wait()
		s.waiters--
	}
	s.mu.Unlock()
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
	if s.be != nil {
		return s.cudaSynchronize(opName)
	}
	s.wait()
	s.dev.poolsAfterSync()
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
	if s.be != nil {
		return s.cudaQuery(opName)
	}
	s.mu.Lock()
	pending := s.completed < s.submitted
	s.mu.Unlock()
	if pending {
		return newErr(opName, ErrNotReady, "work pending")
	}
	return nil
}

// Destroy releases the stream. Work already issued still runs to completion;
// any later call on the stream fails with ErrInvalidResourceHandle.
func (s *Stream) Destroy() error {
	const opName = "Stream.Destroy"
	if err := s.check(opName); err != nil {
		return err
	}
	s.mu.Lock()
	s.destroyed.Store(true)
	s.mu.Unlock()
	s.shutdown()
	if s.be != nil {
		return s.cudaDestroy(opName)
	}
	return nil
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
	if s.be != nil {
		return s.cudaLaunch(opName, p)
	}
	if err := checkStreamLaunch(opName, p); err != nil { // the driver's own check on cuda
		return err
	}
	k, code, msg := s.dev.prepareKernel(p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return s.enqueue(opName, op{kind: opKernel, kern: k}, nil)
}

// LaunchHostFunc queues fn to run on the host after all earlier work in the
// stream, holding back later work until it returns (cudaLaunchHostFunc).
// fn must not call gpugraph.
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
	if s.be != nil {
		return s.cudaHostFunc(opName, fn)
	}
	return s.enqueue(opName, op{kind: opHost, host: fn}, nil)
}

// Memcpy queues the copy p (cudaMemcpyAsync). A host slice must not be
// modified or read by the program until the copy has completed.
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
	if s.be != nil {
		return s.cudaMemcpy(opName, &p)
	}
	o, code, msg := s.dev.prepareMemcpy(&p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return s.enqueue(opName, o, nil)
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
	if s.be != nil {
		return s.cudaMemset(opName, &p)
	}
	o, code, msg := s.dev.prepareMemset(&p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return s.enqueue(opName, o, nil)
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
	if d.cuda != nil {
		return d.cudaMemcpySync(opName, &p)
	}
	o, code, msg := d.prepareMemcpy(&p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return d.runSync(opName, &o)
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
	if d.cuda != nil {
		return d.cudaMemsetSync(opName, &p)
	}
	o, code, msg := d.prepareMemset(&p)
	if code != nil {
		return newErr(opName, code, "%s", msg)
	}
	return d.runSync(opName, &o)
}

func (d *Device) runSync(opName string, o *op) error {
	// The copy runs on the caller's goroutine: a fault on device memory
	// must become an error here too, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	d.syncAll()
	if e := d.sticky.Load(); e != nil {
		return withOp(opName, e)
	}
	if err := o.run(d); err != nil {
		return withOp(opName, err)
	}
	return nil
}
