package coll

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/host"
	"github.com/gpugraph/gpugraph/internal/nccl"
	"github.com/gpugraph/gpugraph/internal/watch"
)

// NCCL on the cuda backend. A call is posted to NCCL on the stream's native
// handle: NCCL enqueues its kernel there, so a capturing stream captures
// it (NCCL 2.9 and later), and every launch of the graph runs it again.
//
// What makes NCCL in graphs fail, and what this file does about it
// (measured on two GPUs, docs/distributed.md):
//   - NCCL connects peers lazily, at the first collective of each
//     algorithm and the first send or receive to each peer; inside a
//     global-mode capture that connection is refused and the communicator
//     is left broken. So the library connects before any capture: it sets
//     NCCL_RUNTIME_CONNECT=0 (every collective algorithm connects at
//     init) unless the user set it, and every new communicator runs one
//     warm-up group: an all-reduce, and a send and a receive with each ring
//     neighbour. A send or receive to another peer is refused under capture
//     until one has been issued outside (ErrStreamCaptureUnsupported),
//     never left to break the communicator.
//   - A communicator that failed (an NCCL error, a failed call into a
//     capture, an abort) is refused from then on with ErrIllegalState:
//     recreate it. Destroy aborts a broken one instead of waiting on peers.
//   - A peer that dies leaves NCCL's kernels waiting forever. Every
//     communicator is attached to its devices (internal/watch): each wait
//     on those devices polls ncclCommGetAsyncError and is bounded by the
//     communicator's timeout, after which the communicator is aborted
//     (ncclCommAbort: its kernels return) and the wait fails.

// ncclComm is one rank of an NCCL communicator.
type ncclComm struct {
	lib        *nccl.Lib
	comm       uintptr
	rank, size int
	// timeout bounds how long a call of a nonblocking communicator (one
	// made by InitRank) may stay in progress: init, and the connection
	// set-up NCCL does at a communicator's first collectives, wait for
	// every rank. Past it the communicator is aborted. It also bounds
	// every wait on the communicator's devices (clique).
	timeout time.Duration
	clique  *clique // the communicators made together
	detach  func()  // detaches the clique from this rank's device

	broken atomic.Pointer[gg.Error] // why the communicator is unusable
	freed  atomic.Bool              // comm is no longer NCCL's: aborted or being destroyed

	mu       sync.Mutex
	sendTo   map[int]bool        // peers connected for sends (see above)
	recvOf   map[int]bool        // and for receives
	captures map[*gg.Stream]bool // streams whose captures took calls of the communicator
}

// clique is the communicators of one init (ncclCommInitAll's, or one
// process's InitRank): a failure of one aborts all of them, since each
// waits for the others. It is the watch attached to their devices.
type clique struct {
	comms   []*ncclComm
	timeout time.Duration
}

var _ watch.Watch = (*clique)(nil)

func (q *clique) Timeout() time.Duration { return q.timeout }

func (q *clique) Name() string {
	n := q.comms[0]
	if len(q.comms) == 1 {
		return fmt.Sprintf("the NCCL communicator of rank %d of %d", n.rank, n.size)
	}
	return fmt.Sprintf("the NCCL communicators of ranks %d-%d of %d", n.rank, q.comms[len(q.comms)-1].rank, n.size)
}

// Check is ncclCommGetAsyncError of every communicator not yet aborted.
func (q *clique) Check() error {
	for _, n := range q.comms {
		if n.freed.Load() {
			continue
		}
		res, err := n.lib.AsyncError(n.comm)
		if err != nil {
			return err
		}
		if res != nccl.Success && res != nccl.InProgress {
			return fmt.Errorf("rank %d: ncclCommGetAsyncError: %v", n.rank, res)
		}
	}
	return nil
}

// Abort aborts every communicator of the clique (ncclCommAbort): their
// kernels return, and they are unusable after.
func (q *clique) Abort(cause error) {
	for _, n := range q.comms {
		n.abort(cause)
	}
}

// abort frees the communicator at once, abandoning its work; later calls
// get cause.
func (n *ncclComm) abort(cause error) {
	n.fail(cause)
	if n.freed.CompareAndSwap(false, true) {
		n.lib.Abort(n.comm)
	}
}

// fail marks the communicator unusable (the first cause stays).
func (n *ncclComm) fail(cause error) {
	e, ok := cause.(*gg.Error)
	if !ok {
		e = &gg.Error{Code: gg.ErrIllegalState, Detail: cause.Error()}
	}
	n.broken.CompareAndSwap(nil, e)
}

// usable returns the error a call of a broken communicator gets.
func (n *ncclComm) usable(opName string) error {
	if e := n.broken.Load(); e != nil {
		return errorf(opName, gg.ErrIllegalState, "the communicator of rank %d failed earlier (%v): destroy it and create another", n.rank, e)
	}
	return nil
}

// settle waits out a nonblocking call that returned ncclInProgress.
func (n *ncclComm) settle(call string, err error) error {
	if !nccl.IsInProgress(err) {
		return err
	}
	return n.lib.Wait(n.comm, call, time.Now().Add(n.timeout))
}

var runtimeConnectOnce sync.Once

// lib loads libnccl, reporting its absence as ErrSharedObjectInitFailed
// with the names tried.
func lib(opName string) (*nccl.Lib, error) {
	runtimeConnectOnce.Do(func() {
		// Connect every collective algorithm at init, not inside a capture
		// (see above). NCCL reads it at each communicator's init.
		if _, set := os.LookupEnv("NCCL_RUNTIME_CONNECT"); !set {
			os.Setenv("NCCL_RUNTIME_CONNECT", "0")
		}
	})
	l, err := nccl.Load()
	if err != nil {
		return nil, errorf(opName, gg.ErrSharedObjectInitFailed, "collectives on the cuda backend need NCCL: %v", err)
	}
	return l, nil
}

func ncclInitAll(opName string, ords []int, timeout time.Duration) ([]*ncclComm, error) {
	l, err := lib(opName)
	if err != nil {
		return nil, err
	}
	hs, err := l.InitAll(ords)
	if err != nil {
		return nil, ncclErr(opName, err)
	}
	cs := make([]*ncclComm, len(hs))
	for i, h := range hs {
		cs[i] = &ncclComm{lib: l, comm: h, rank: i, size: len(hs), timeout: timeout}
	}
	return cs, nil
}

// start finishes the communicators of one init, comms[i] driving
// devs[i]: it attaches them to their devices' waits and runs the warm-up
// group, which connects them before any capture. On failure they are
// aborted.
func start(opName string, comms []*Comm) error {
	q := &clique{timeout: comms[0].nc.timeout}
	for _, c := range comms {
		c.nc.clique = q
		q.comms = append(q.comms, c.nc)
		c.nc.detach = watch.Attach(c.dev, q)
	}
	if err := warmUp(opName, comms); err != nil {
		for _, c := range comms {
			c.nc.abort(err)
			c.nc.detach()
			c.destroyed = true
		}
		return err
	}
	return nil
}

// warmUp runs one group on every communicator: an all-reduce of one
// element and, between ring neighbours, a send and a receive each way, then
// waits for it (bounded, as every wait on the devices).
func warmUp(opName string, comms []*Comm) error {
	type side struct {
		s   *gg.Stream
		buf gg.DevicePtr
	}
	sides := make([]side, len(comms))
	defer func() {
		for i, sd := range sides {
			if sd.buf != 0 {
				comms[i].dev.Free(sd.buf)
			}
			if sd.s != nil {
				sd.s.Destroy()
			}
		}
	}()
	var calls []pendingCall
	for i, c := range comms {
		var err error
		if sides[i].s, err = c.dev.NewStream(); err != nil {
			return relabel(opName, err)
		}
		// [0] all-reduced, [1] sent, [2] and [3] received.
		if sides[i].buf, err = c.dev.Malloc(16); err != nil {
			return relabel(opName, err)
		}
		s, b := sides[i].s, uint64(sides[i].buf)
		calls = append(calls, pendingCall{c: c, s: s, call: host.Call{Kind: host.AllReduce, Send: b, Recv: b, Count: 1, Type: host.Float32, Op: host.Sum}})
		for k, peer := range c.ringPeers() {
			calls = append(calls,
				pendingCall{c: c, s: s, call: host.Call{Kind: host.Send, Send: b + 4, Count: 1, Type: host.Float32, Peer: peer}},
				pendingCall{c: c, s: s, call: host.Call{Kind: host.Recv, Recv: b + 8 + 4*uint64(k), Count: 1, Type: host.Float32, Peer: peer}})
		}
	}
	if err := ncclGroup(opName, calls); err != nil {
		return err
	}
	for i := range comms {
		if err := sides[i].s.Synchronize(); err != nil {
			return relabel(opName, err)
		}
	}
	return nil
}

// ringPeers are the rank's ring neighbours, each once.
func (c *Comm) ringPeers() []int {
	if c.size == 1 {
		return nil
	}
	next, prev := (c.rank+1)%c.size, (c.rank+c.size-1)%c.size
	if next == prev {
		return []int{next}
	}
	return []int{next, prev}
}

// checkP2P refuses a send or receive into a capture to a peer NCCL has not
// connected yet (see above).
func (n *ncclComm) checkP2P(opName string, call *host.Call, capturing bool) error {
	if !capturing || (call.Kind != host.Send && call.Kind != host.Recv) {
		return nil
	}
	n.mu.Lock()
	ok := n.sendTo[call.Peer]
	if call.Kind == host.Recv {
		ok = n.recvOf[call.Peer]
	}
	n.mu.Unlock()
	if ok {
		return nil
	}
	return errorf(opName, gg.ErrStreamCaptureUnsupported,
		"rank %d has not yet issued a %v with rank %d outside a capture: NCCL connects a pair of ranks at their first send or receive, "+
			"which a global-mode capture forbids; issue one outside the capture first (the library does so for ring neighbours)", n.rank, call.Kind, call.Peer)
}

// connected records the peers of eager sends and receives that NCCL took.
func (n *ncclComm) connected(calls []host.Call) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range calls {
		switch c.Kind {
		case host.Send:
			if n.sendTo == nil {
				n.sendTo = map[int]bool{}
			}
			n.sendTo[c.Peer] = true
		case host.Recv:
			if n.recvOf == nil {
				n.recvOf = map[int]bool{}
			}
			n.recvOf[c.Peer] = true
		}
	}
}

// ncclErr turns an NCCL failure into an *gg.Error with the CUDA code
// nearest its meaning; the detail keeps NCCL's result and words.
func ncclErr(opName string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, nccl.ErrTimedOut) {
		return &gg.Error{Op: opName, Code: gg.ErrLaunchTimeout, Detail: err.Error() + " (a rank did not arrive in time)"}
	}
	var e *nccl.Error
	if !errors.As(err, &e) {
		return err
	}
	code := gg.ErrUnknown
	switch e.Result {
	case nccl.InvalidArgument, nccl.InvalidUsage:
		code = gg.ErrInvalidValue
	case nccl.UnhandledCudaError:
		code = gg.ErrLaunchFailure
	}
	return &gg.Error{Op: opName, Code: code, Detail: e.Error()}
}

// argumentError reports an NCCL refusal of the call's arguments, made
// before NCCL touched the communicator or the stream.
func argumentError(err error) bool {
	var e *nccl.Error
	return errors.As(err, &e) && (e.Result == nccl.InvalidArgument || e.Result == nccl.InvalidUsage)
}

// openCapture returns a stream still capturing calls of the communicator.
func (n *ncclComm) openCapture() *gg.Stream {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.captures {
		if st, err := s.IsCapturing(); err == nil && st != gg.CaptureStatusNone {
			return s
		}
		delete(n.captures, s)
	}
	return nil
}

// checkDestroy refuses to destroy a communicator whose calls an unfinished
// capture holds: ncclCommDestroy then never returns (measured on two GPUs,
// with a global-mode capture left open).
func (n *ncclComm) checkDestroy(opName string) error {
	if s := n.openCapture(); s != nil {
		return errorf(opName, gg.ErrStreamCaptureUnsupported,
			"a capture of a stream of device %d holds calls of the communicator of rank %d: end it first", s.Device().Properties().Ordinal, n.rank)
	}
	return nil
}

// destroy releases the communicator: ncclCommDestroy, or ncclCommAbort if
// it failed (a broken communicator's peers may never answer the destroy).
// It returns within the communicator's timeout: a destroy that takes
// longer is left to finish on its own and reported.
func (n *ncclComm) destroy(opName string) error {
	if n.detach != nil {
		n.detach()
	}
	if n.broken.Load() != nil {
		n.abort(n.broken.Load())
		return nil
	}
	n.freed.Store(true) // no watch touches it from here
	done := make(chan error, 1)
	go func() { done <- n.lib.Destroy(n.comm) }()
	select {
	case err := <-done:
		if err != nil && !nccl.IsInProgress(err) {
			return ncclErr(opName, err)
		}
		return nil
	case <-time.After(n.timeout):
		return errorf(opName, gg.ErrLaunchTimeout, "ncclCommDestroy of rank %d did not return within %v; left running: "+
			"NCCL waits until every graph and executable graph holding the communicator's captured calls is destroyed "+
			"(destroy them first), and for its peers", n.rank, n.timeout)
	}
}

// post issues one call of the rank on s, which Comm.issue checked.
func (n *ncclComm) post(opName string, s *gg.Stream, call host.Call, capturing bool) error {
	err := n.settle(call.Kind.String(), n.call(s.NativeStream(), call))
	return n.after(opName, s, err, []host.Call{call}, capturing)
}

// after is the result of posting calls: a failure breaks the
// communicator unless NCCL only refused the arguments outside a capture; a
// success connects the peers of eager sends and receives.
func (n *ncclComm) after(opName string, s *gg.Stream, err error, calls []host.Call, capturing bool) error {
	if capturing {
		n.mu.Lock()
		if n.captures == nil {
			n.captures = map[*gg.Stream]bool{}
		}
		n.captures[s] = true
		n.mu.Unlock()
	}
	if err == nil {
		if !capturing {
			n.connected(calls)
		}
		return nil
	}
	e := ncclErr(opName, err)
	if errors.Is(err, nccl.ErrTimedOut) {
		n.freed.Store(true) // Wait aborted it
	}
	if capturing || !argumentError(err) {
		n.fail(e)
	}
	return e
}

// ncclGroup posts the NCCL calls of a group, of any communicators, in one
// NCCL group.
func ncclGroup(opName string, calls []pendingCall) error {
	for _, p := range calls {
		if err := p.c.nc.usable(opName); err != nil {
			return err
		}
		if err := p.c.nc.checkP2P(opName, &p.call, p.capturing); err != nil {
			return err
		}
	}
	l := calls[0].c.nc.lib
	err := l.Group(func() error {
		for _, p := range calls {
			if err := p.c.nc.settle(p.call.Kind.String(), p.c.nc.call(p.s.NativeStream(), p.call)); err != nil {
				return err
			}
		}
		return nil
	})
	if nccl.IsInProgress(err) {
		// Every communicator of the group finishes, or is aborted.
		err = nil
		seen := map[*ncclComm]bool{}
		for _, p := range calls {
			if n := p.c.nc; !seen[n] {
				seen[n] = true
				err = errors.Join(err, n.lib.Wait(n.comm, "group", time.Now().Add(n.timeout)))
			}
		}
	}
	// Every communicator and stream of the group shares the outcome.
	type key struct {
		n *ncclComm
		s *gg.Stream
	}
	byKey := map[key][]host.Call{}
	capturing := map[key]bool{}
	var order []key
	for _, p := range calls {
		k := key{p.c.nc, p.s}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], p.call)
		capturing[k] = capturing[k] || p.capturing
	}
	var first error
	for _, k := range order {
		if e := k.n.after(opName, k.s, err, byKey[k], capturing[k]); e != nil && first == nil {
			first = e
		}
	}
	return first
}

// call makes one NCCL call.
func (n *ncclComm) call(stream uintptr, c host.Call) error {
	l, dt, op := n.lib, int(c.Type), int(c.Op)
	send, recv := uintptr(c.Send), uintptr(c.Recv)
	switch c.Kind {
	case host.AllReduce:
		return l.AllReduce(send, recv, c.Count, dt, op, n.comm, stream)
	case host.Broadcast:
		return l.Broadcast(send, recv, c.Count, dt, c.Peer, n.comm, stream)
	case host.Reduce:
		return l.Reduce(send, recv, c.Count, dt, op, c.Peer, n.comm, stream)
	case host.AllGather:
		return l.AllGather(send, recv, c.Count, dt, n.comm, stream)
	case host.ReduceScatter:
		return l.ReduceScatter(send, recv, c.Count, dt, op, n.comm, stream)
	case host.Send:
		return l.Send(send, c.Count, dt, c.Peer, n.comm, stream)
	case host.Recv:
		return l.Recv(recv, c.Count, dt, c.Peer, n.comm, stream)
	}
	return fmt.Errorf("coll: unknown call kind %d", c.Kind)
}
