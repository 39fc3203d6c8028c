// Package coll is collective communication between devices, as NCCL
// provides it: communicators over a set of devices, all-reduce, broadcast,
// reduce, all-gather, reduce-scatter, point-to-point send and receive, and
// group calls.
//
// Every call is a stream operation: it runs in stream order and, issued to
// a capturing stream, is captured into the graph and run again by every
// launch, which is how training and inference put their collectives inside
// the step's graph. As with NCCL, every rank must issue the same
// collectives in the same order; a rank that sends to and receives from
// another issues both inside GroupStart and GroupEnd, and one goroutine
// driving several devices issues all their calls in one group.
//
// On the cuda backend the communicators are NCCL's (libnccl.so.2, loaded
// at run time; ErrSharedObjectInitFailed naming the library where it is
// absent): InitAll is ncclCommInitAll, each call is the NCCL call on the
// stream's native handle, and NCCL's own capture support puts its kernels
// in the graph. A job of one process per GPU starts with InitFromEnv (or
// NewUniqueID and InitRank). Every communicator is connected when it is
// made (a warm-up group), so its collectives can be captured in every
// capture mode. A rank that never arrives at start-up, or that dies while
// the others' NCCL kernels wait for it, fails the others' waits within the
// timeout (WithTimeout): the communicator is aborted and the wait returns
// ErrLaunchTimeout, or ErrLaunchFailure where NCCL reports the failure
// first. A communicator that failed is refused with ErrIllegalState from
// then on: destroy it and create another.
//
// On the host backend a communicator made by InitAll spans host devices of
// one process (gpugraph.SetHostDeviceCount): the collectives run in shared
// memory on the devices' workers. One made by InitRank or InitFromEnv
// spans processes, one host device each (gpugraph launch --nproc N, or
// torchrun), joined by TCP in a star: every rank connects to rank 0, which
// runs each collective with the same code over copies of the others'
// buffers and sends each rank its result (bit for bit the in-process
// results), and relays sends between other ranks. Either way a rank that
// does not arrive within the communicator's timeout, or whose connection
// closes (its process died), fails the others' calls with
// ErrLaunchFailure naming it (the device's sticky error, as an aborted
// NCCL communicator leaves it), never a hang; the communicator is broken
// from then on, and its other ranks are told.
//
// A group is process-wide, not per thread as in NCCL: the outermost
// GroupEnd issues the calls every goroutine made since the outermost
// GroupStart. Open groups from one goroutine at a time.
package coll

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/host"
)

// DataType is an element type, with NCCL's values (ncclDataType_t).
// Float16 and BFloat16 buffers are raw 16-bit values; reductions compute
// in higher precision and round once to nearest even.
type DataType uint8

// Element types.
const (
	Int32    = DataType(host.Int32)
	Int64    = DataType(host.Int64)
	Float16  = DataType(host.Float16)
	Float32  = DataType(host.Float32)
	Float64  = DataType(host.Float64)
	BFloat16 = DataType(host.BFloat16)
)

// Size is the element size in bytes, 0 for an unknown type.
func (t DataType) Size() int { return host.DType(t).Size() }

// RedOp is a reduction, with NCCL's values (ncclRedOp_t). Avg divides the
// sum by the number of ranks (integer division for integer types).
type RedOp uint8

// Reductions.
const (
	Sum  = RedOp(host.Sum)
	Prod = RedOp(host.Prod)
	Max  = RedOp(host.Max)
	Min  = RedOp(host.Min)
	Avg  = RedOp(host.Avg)
)

// DefaultTimeout is how long a rank waits for the others by default: at
// start-up, and, on the cuda backend, in any one wait on a device whose
// work includes the communicator's collectives.
const DefaultTimeout = 30 * time.Second

// Option configures InitAll.
type Option func(*config)

type config struct{ timeout time.Duration }

// options applies opts to the defaults.
func options(opName string, opts []Option) (config, error) {
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout <= 0 {
		return cfg, errorf(opName, gg.ErrInvalidValue, "timeout %v: a rank must be given time to wait for the others", cfg.timeout)
	}
	return cfg, nil
}

// WithTimeout sets how long a rank waits for the others before its call
// fails: at a host collective, at the rendezvous of InitFromEnv, in a
// nonblocking NCCL communicator's start-up and calls, and in every wait
// (Synchronize, a synchronous copy) on a device of an NCCL communicator:
// past it the communicator is aborted (ncclCommAbort), the wait fails with
// ErrLaunchTimeout and the device with it. Set it above the longest wait
// of the program.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Comm is one rank's communicator (ncclComm_t): rank i of the devices
// InitAll was given, on the i-th of them.
type Comm struct {
	dev        *gg.Device
	rank, size int
	group      runner    // host backend
	nc         *ncclComm // cuda backend

	mu        sync.Mutex
	plans     []uint64 // captured calls, kept for the graphs that replay them
	destroyed bool
}

// runner runs a rank's calls of a host communicator: *host.CommGroup (the
// devices of one process) or *host.NetComm (one device per process).
type runner interface {
	Run(rank int, calls []host.Call)
}

// InitAll creates one communicator per device, rank i on devs[i]
// (ncclCommInitAll). The devices are distinct devices of one backend: host
// devices, or GPUs of the cuda backend, where the communicators are
// NCCL's (libnccl.so.2, loaded at the first call).
func InitAll(devs []*gg.Device, opts ...Option) ([]*Comm, error) {
	const opName = "coll.InitAll"
	cfg, err := options(opName, opts)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, errorf(opName, gg.ErrInvalidValue, "no devices")
	}
	seen := map[int]bool{}
	ords := make([]int, len(devs))
	for i, d := range devs {
		if d == nil {
			return nil, errorf(opName, gg.ErrInvalidDevice, "device %d is nil", i)
		}
		p := d.Properties()
		if be := devs[0].Properties().Backend; p.Backend != be {
			return nil, errorf(opName, gg.ErrInvalidDevice, "devices of two backends (%s and %s)", be, p.Backend)
		}
		if seen[p.Ordinal] {
			return nil, errorf(opName, gg.ErrInvalidDevice, "device %d appears twice", p.Ordinal)
		}
		seen[p.Ordinal] = true
		ords[i] = p.Ordinal
	}
	comms := make([]*Comm, len(devs))
	if devs[0].Properties().Backend == gg.BackendCUDA {
		ncs, err := ncclInitAll(opName, ords, cfg.timeout)
		if err != nil {
			return nil, err
		}
		for i, d := range devs {
			comms[i] = &Comm{dev: d, rank: i, size: len(devs), nc: ncs[i]}
		}
		if err := start(opName, comms); err != nil {
			return nil, err
		}
		return comms, nil
	}
	g := host.NewCommGroup(len(devs), cfg.timeout)
	for i, d := range devs {
		comms[i] = &Comm{dev: d, rank: i, size: len(devs), group: g}
	}
	return comms, nil
}

// Rank is the communicator's rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Device is the device the rank runs on.
func (c *Comm) Device() *gg.Device { return c.dev }

// Destroy releases the communicator (ncclCommDestroy), and the captured
// calls that graphs of it replay: launch none of them after. On cuda a
// communicator whose calls an unfinished stream capture holds is not
// destroyed (ErrStreamCaptureUnsupported: end the capture first), one that
// failed is aborted (ncclCommAbort), and Destroy returns within the
// communicator's timeout. Destroy the graphs and executable graphs that
// captured a communicator's calls before it: NCCL waits for them.
func (c *Comm) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return errorf("Comm.Destroy", gg.ErrInvalidValue, "communicator already destroyed")
	}
	if c.nc != nil {
		if err := c.nc.checkDestroy("Comm.Destroy"); err != nil {
			return err
		}
		c.destroyed = true
		return c.nc.destroy("Comm.Destroy")
	}
	c.destroyed = true
	if a, ok := c.group.(interface{ Abort() }); ok {
		a.Abort() // closes a communicator's connections to other processes
	}
	for _, id := range c.plans {
		plans.Delete(id)
	}
	c.plans = nil
	return nil
}

// AllReduce reduces count elements of every rank's send buffer with op and
// writes the result to every rank's recv buffer (ncclAllReduce). send and
// recv may be the same buffer.
func (c *Comm) AllReduce(s *gg.Stream, send, recv gg.DevicePtr, count int, t DataType, op RedOp) error {
	return c.issue("Comm.AllReduce", s, host.Call{Kind: host.AllReduce, Send: uint64(send), Recv: uint64(recv), Count: count, Type: host.DType(t), Op: host.RedOp(op)})
}

// Broadcast copies count elements of root's send buffer to every rank's
// recv buffer (ncclBroadcast).
func (c *Comm) Broadcast(s *gg.Stream, send, recv gg.DevicePtr, count int, t DataType, root int) error {
	return c.issue("Comm.Broadcast", s, host.Call{Kind: host.Broadcast, Send: uint64(send), Recv: uint64(recv), Count: count, Type: host.DType(t), Peer: root})
}

// Reduce reduces every rank's send buffer into root's recv buffer
// (ncclReduce); other ranks' recv buffers are not written.
func (c *Comm) Reduce(s *gg.Stream, send, recv gg.DevicePtr, count int, t DataType, op RedOp, root int) error {
	return c.issue("Comm.Reduce", s, host.Call{Kind: host.Reduce, Send: uint64(send), Recv: uint64(recv), Count: count, Type: host.DType(t), Op: host.RedOp(op), Peer: root})
}

// AllGather gathers sendCount elements from every rank into every rank's
// recv buffer, rank r's at offset r*sendCount (ncclAllGather).
func (c *Comm) AllGather(s *gg.Stream, send, recv gg.DevicePtr, sendCount int, t DataType) error {
	return c.issue("Comm.AllGather", s, host.Call{Kind: host.AllGather, Send: uint64(send), Recv: uint64(recv), Count: sendCount, Type: host.DType(t)})
}

// ReduceScatter reduces every rank's send buffer (Size()*recvCount
// elements) and writes block r of the result to rank r's recv buffer
// (ncclReduceScatter).
func (c *Comm) ReduceScatter(s *gg.Stream, send, recv gg.DevicePtr, recvCount int, t DataType, op RedOp) error {
	return c.issue("Comm.ReduceScatter", s, host.Call{Kind: host.ReduceScatter, Send: uint64(send), Recv: uint64(recv), Count: recvCount, Type: host.DType(t), Op: host.RedOp(op)})
}

// Send sends count elements to rank peer, which receives them with Recv
// (ncclSend). A rank that also receives from peer issues both in a group.
func (c *Comm) Send(s *gg.Stream, buf gg.DevicePtr, count int, t DataType, peer int) error {
	return c.issue("Comm.Send", s, host.Call{Kind: host.Send, Send: uint64(buf), Count: count, Type: host.DType(t), Peer: peer})
}

// Recv receives count elements sent by rank peer (ncclRecv).
func (c *Comm) Recv(s *gg.Stream, buf gg.DevicePtr, count int, t DataType, peer int) error {
	return c.issue("Comm.Recv", s, host.Call{Kind: host.Recv, Recv: uint64(buf), Count: count, Type: host.DType(t), Peer: peer})
}

// check validates a call of the communicator on stream s.
func (c *Comm) check(opName string, s *gg.Stream, call *host.Call) error {
	c.mu.Lock()
	dead := c.destroyed
	c.mu.Unlock()
	switch {
	case dead:
		return errorf(opName, gg.ErrInvalidValue, "communicator destroyed")
	case s == nil:
		return errorf(opName, gg.ErrInvalidResourceHandle, "nil stream")
	case s.Device() != c.dev:
		return errorf(opName, gg.ErrInvalidValue, "a stream of device %d for rank %d on device %d",
			s.Device().Properties().Ordinal, c.rank, c.dev.Properties().Ordinal)
	case call.Count < 0:
		return errorf(opName, gg.ErrInvalidValue, "negative count %d", call.Count)
	case call.Type.Size() == 0:
		return errorf(opName, gg.ErrInvalidValue, "unknown data type %d", call.Type)
	case call.Op > host.Avg:
		return errorf(opName, gg.ErrInvalidValue, "unknown reduction %d", call.Op)
	}
	switch call.Kind {
	case host.Broadcast, host.Reduce, host.Send, host.Recv:
		if call.Peer < 0 || call.Peer >= c.Size() {
			return errorf(opName, gg.ErrInvalidValue, "rank %d of %d", call.Peer, c.Size())
		}
		if (call.Kind == host.Send || call.Kind == host.Recv) && call.Peer == c.rank {
			return errorf(opName, gg.ErrInvalidValue, "rank %d sending to or receiving from itself", c.rank)
		}
	}
	return nil
}

// issue checks a call and queues it in s, or, inside a group, keeps it for
// GroupEnd.
func (c *Comm) issue(opName string, s *gg.Stream, call host.Call) error {
	if err := c.check(opName, s, &call); err != nil {
		return err
	}
	p := pendingCall{c: c, s: s, call: call}
	if c.nc != nil {
		if err := c.nc.usable(opName); err != nil {
			return err
		}
		st, err := s.IsCapturing()
		if err != nil {
			return relabel(opName, err)
		}
		p.capturing = st != gg.CaptureStatusNone
		if err := c.nc.checkP2P(opName, &p.call, p.capturing); err != nil {
			return err
		}
	}
	groups.mu.Lock()
	if groups.depth > 0 {
		groups.pending = append(groups.pending, p)
		groups.mu.Unlock()
		return nil
	}
	groups.mu.Unlock()
	if c.nc != nil {
		return c.nc.post(opName, s, call, p.capturing)
	}
	return c.launch(opName, s, []host.Call{call})
}

// plan is the calls one kernel launch runs for a rank.
type plan struct {
	c       *Comm
	calls   []host.Call
	oneShot bool // issued to a stream, not captured: forgotten once run
}

var (
	plans  sync.Map // uint64 -> *plan
	planID atomic.Uint64
)

// collective is the kernel every call is: its one argument names the plan.
// Captured, it is a kernel node, as NCCL's calls are.
var collective = &gg.Kernel{
	Name:   "gpugraph_collective",
	Params: []gg.ParamType{gg.Uint64},
	Go: func(_ gg.Block, a gg.Args) {
		v, ok := plans.Load(a.Uint64(0))
		if !ok {
			panic(host.CollError{Msg: "the communicator of this collective was destroyed"})
		}
		p := v.(*plan)
		if p.oneShot {
			plans.Delete(a.Uint64(0))
		}
		p.c.group.Run(p.c.rank, p.calls)
	},
}

// launch queues calls of a host communicator as one collective kernel in
// s.
func (c *Comm) launch(opName string, s *gg.Stream, calls []host.Call) error {
	st, err := s.IsCapturing()
	if err != nil {
		return err
	}
	id := planID.Add(1)
	p := &plan{c: c, calls: calls, oneShot: st == gg.CaptureStatusNone}
	plans.Store(id, p)
	if !p.oneShot {
		c.mu.Lock()
		c.plans = append(c.plans, id)
		c.mu.Unlock()
	}
	if err := s.Launch(collective, gg.Dim1(1), gg.Dim1(1), id); err != nil {
		plans.Delete(id)
		return relabel(opName, err)
	}
	return nil
}

// Group calls: one process-wide nesting, as NCCL's per thread.
var groups struct {
	mu      sync.Mutex
	depth   int
	pending []pendingCall
}

type pendingCall struct {
	c         *Comm
	s         *gg.Stream
	call      host.Call
	capturing bool // s was capturing when the call was issued (NCCL's)
}

// GroupStart begins a group (ncclGroupStart): calls until the matching
// GroupEnd are issued together, so sends and receives between ranks, and
// collectives of several communicators driven from one goroutine, cannot
// deadlock.
func GroupStart() {
	groups.mu.Lock()
	groups.depth++
	groups.mu.Unlock()
}

// GroupEnd ends a group (ncclGroupEnd); the outermost one issues the
// group's calls, one collective kernel per communicator and stream.
func GroupEnd() error {
	groups.mu.Lock()
	if groups.depth == 0 {
		groups.mu.Unlock()
		return errorf("coll.GroupEnd", gg.ErrInvalidValue, "GroupEnd without GroupStart")
	}
	groups.depth--
	if groups.depth > 0 {
		groups.mu.Unlock()
		return nil
	}
	pending := groups.pending
	groups.pending = nil
	groups.mu.Unlock()
	// NCCL's calls are posted together, in one ncclGroupStart/End on one
	// thread, as a single goroutine driving several GPUs must.
	var native []pendingCall
	for _, p := range pending {
		if p.c.nc != nil {
			native = append(native, p)
		}
	}
	if len(native) > 0 {
		if err := ncclGroup("coll.GroupEnd", native); err != nil {
			return err
		}
	}
	type key struct {
		c *Comm
		s *gg.Stream
	}
	var order []key
	calls := map[key][]host.Call{}
	for _, p := range pending {
		if p.c.nc != nil {
			continue
		}
		k := key{p.c, p.s}
		if _, ok := calls[k]; !ok {
			order = append(order, k)
		}
		calls[k] = append(calls[k], p.call)
	}
	for _, k := range order {
		if err := k.c.launch("coll.GroupEnd", k.s, calls[k]); err != nil {
			return err
		}
	}
	return nil
}

func errorf(opName string, code *gg.Code, format string, args ...any) error {
	return &gg.Error{Op: opName, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// relabel reports a stream's error as opName's.
func relabel(opName string, err error) error {
	if e, ok := err.(*gg.Error); ok {
		c := *e
		c.Op = opName
		return &c
	}
	return err
}
