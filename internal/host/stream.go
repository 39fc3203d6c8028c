package host

import (
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Stream is a FIFO queue of work run by one worker goroutine.
type Stream struct {
	d *Device

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
}

var _ backend.Stream = (*Stream)(nil)

// NewStream creates a stream.
func (d *Device) NewStream() (backend.Stream, error) {
	s := &Stream{d: d, queue: make([]op, 16)}
	s.cond.L = &s.mu
	s.wake.L = &s.mu
	d.mu.Lock()
	d.streams[s] = struct{}{}
	d.mu.Unlock()
	return s, nil
}

// enqueue appends a copy of o to the stream (o is the caller's: passing
// the 250-byte op by pointer saves a copy on every launch). prepare, if not nil, runs under the
// stream's lock just before o is queued, and its result becomes o.seq: event
// records and graph launches take their sequence numbers in queue order, and
// launches and frees check and change allocation state atomically with
// queueing. If prepare fails, nothing is queued.
func (s *Stream) enqueue(o *op, prepare func() (uint64, error)) error {
	s.mu.Lock()
	if s.destroyed.Load() {
		s.mu.Unlock()
		return backend.Errorf(backend.ErrInvalidResourceHandle, "stream is destroyed")
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
	s.queue[(s.head+s.n)%len(s.queue)] = *o
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
	d := s.d
	s.mu.Lock()
	for {
		for s.n == 0 {
			if s.stop {
				s.mu.Unlock()
				d.forget(s)
				return
			}
			s.idle = true
			s.wake.Wait()
			s.idle = false
		}
		// The op runs in its slot, which stays queued until it has run:
		// enqueue never writes it, and a ring grown meanwhile copies it
		// (the worker then clears the copy). Copying the 336-byte op out
		// cost a launch more than the lock around it.
		o := &s.queue[s.head]
		s.mu.Unlock()
		if !d.cfg.Failed() {
			if err := o.run(d); err != nil {
				d.cfg.Fail(err)
			}
		} else if o.kind == opRecord {
			o.ev.Complete(o.seq) // keep waiters from hanging on a failed device
		} else if o.kind == opGraph {
			o.launch.skip()
		}
		s.mu.Lock()
		s.queue[s.head] = op{}
		s.head = (s.head + 1) % len(s.queue)
		s.n--
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
		s.d.forget(s)
	}
}

// wait blocks until everything submitted so far has completed.
func (s *Stream) wait() {
	s.mu.Lock()
	target := s.submitted
	s.mu.Unlock()
	s.waitFor(target)
}

// waitFor blocks until the first target ops submitted have completed.
func (s *Stream) waitFor(target uint64) {
	s.mu.Lock()
	for s.completed < target {
		s.waiters++
		s.cond.Wait()
		s.waiters--
	}
	s.mu.Unlock()
}

// Launch queues a kernel launch; the argument words are copied.
func (s *Stream) Launch(l *backend.Launch) error {
	args := append([]uint64(nil), l.Args...)
	return s.enqueue(&op{kind: opKernel, kern: kernelOf(l, args)}, nil)
}

// HostFunc queues fn.
func (s *Stream) HostFunc(fn func()) error { return s.enqueue(&op{kind: opHost, host: fn}, nil) }

// Call queues fn as the backend's own work in stream order (a pool's
// wait for a free, a graph allocation's free).
func (s *Stream) Call(fn func()) error { return s.enqueue(&op{kind: opCall, host: fn}, nil) }

// Memcpy queues a copy, its device sides resolved now. A copy with
// pageable host memory returns when it has run, after the work queued
// before it, as the gpugraph package's rule has it; one with pinned memory
// or none returns at once.
func (s *Stream) Memcpy(p *backend.Memcpy) error {
	o, err := s.d.copyOp(p)
	if err != nil {
		return err
	}
	if !p.Pageable() {
		return s.enqueue(&o, nil)
	}
	var target uint64
	if err := s.enqueue(&o, func() (uint64, error) { target = s.submitted + 1; return 0, nil }); err != nil {
		return err
	}
	s.waitFor(target)
	return nil
}

// Memset queues a fill, its range resolved now.
func (s *Stream) Memset(p *backend.Memset) error {
	o, err := s.d.memsetOp(p)
	if err != nil {
		return err
	}
	return s.enqueue(&o, nil)
}

// Record queues a record of e.
func (s *Stream) Record(e backend.Event) error {
	ev := e.(*Event)
	return s.enqueue(&op{kind: opRecord, ev: ev}, func() (uint64, error) { return ev.Issue(), nil })
}

// Wait makes later work wait for e's latest record issued so far.
func (s *Stream) Wait(e backend.Event) error {
	ev := e.(*Event)
	t := ev.Target()
	if t == 0 {
		return nil
	}
	return s.enqueue(&op{kind: opWait, ev: ev, seq: t}, nil)
}

// Synchronize waits for the work issued so far and applies the pools'
// release thresholds, as the driver does at a synchronization.
func (s *Stream) Synchronize() error {
	s.wait()
	s.d.poolsAfterSync()
	return nil
}

// Query reports ErrNotReady while work is pending.
func (s *Stream) Query() error {
	s.mu.Lock()
	pending := s.completed < s.submitted
	s.mu.Unlock()
	if pending {
		return backend.Errorf(backend.ErrNotReady, "work pending")
	}
	return nil
}

// Destroy refuses later work; work issued still runs to completion.
func (s *Stream) Destroy() error {
	s.mu.Lock()
	s.destroyed.Store(true)
	s.mu.Unlock()
	s.shutdown()
	return nil
}
