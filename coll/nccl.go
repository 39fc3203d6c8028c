package coll

import (
	"errors"
	"fmt"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/host"
	"github.com/gpugraph/gpugraph/internal/nccl"
)

// NCCL on the cuda backend. A call is posted to NCCL on the stream's native
// handle: NCCL enqueues its kernel there, so a capturing stream captures
// it (NCCL 2.9 and later), and every launch of the graph runs it again.

// ncclComm is one rank of an NCCL communicator.
type ncclComm struct {
	lib  *nccl.Lib
	comm uintptr
	// timeout bounds how long a call of a nonblocking communicator (one
	// made by InitRank) may stay in progress: init, and the connection
	// set-up NCCL does at a communicator's first collectives, wait for
	// every rank. Past it the communicator is aborted.
	timeout time.Duration
}

// settle waits out a nonblocking call that returned ncclInProgress.
func (n *ncclComm) settle(call string, err error) error {
	if !nccl.IsInProgress(err) {
		return err
	}
	return n.lib.Wait(n.comm, call, time.Now().Add(n.timeout))
}

// lib loads libnccl, reporting its absence as ErrSharedObjectInitFailed
// with the names tried.
func lib(opName string) (*nccl.Lib, error) {
	l, err := nccl.Load()
	if err != nil {
		return nil, errorf(opName, gg.ErrSharedObjectInitFailed, "collectives on the cuda backend need NCCL: %v", err)
	}
	return l, nil
}

func ncclInitAll(opName string, ords []int) ([]*ncclComm, error) {
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
		cs[i] = &ncclComm{lib: l, comm: h}
	}
	return cs, nil
}

// ncclErr turns an NCCL failure into an *gg.Error with the CUDA code
// nearest its meaning; the detail keeps NCCL's result and words.
func ncclErr(opName string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, nccl.ErrTimedOut) {
		return &gg.Error{Op: opName, Code: gg.ErrUnknown, Detail: err.Error() + " (a rank did not arrive in time)"}
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

func (n *ncclComm) destroy(opName string) error {
	if err := n.lib.Destroy(n.comm); err != nil && !nccl.IsInProgress(err) {
		return ncclErr(opName, err)
	}
	return nil
}

// post issues calls of one rank on s: one call alone, several in a group.
func (n *ncclComm) post(opName string, s *gg.Stream, calls []host.Call) error {
	if len(calls) == 1 {
		return ncclErr(opName, n.settle(calls[0].Kind.String(), n.call(s.NativeStream(), calls[0])))
	}
	return ncclErr(opName, n.settle("group", n.lib.Group(func() error {
		for _, c := range calls {
			if err := n.settle(c.Kind.String(), n.call(s.NativeStream(), c)); err != nil {
				return err
			}
		}
		return nil
	})))
}

// ncclGroup posts the NCCL calls of a group, of any communicators, in one
// NCCL group.
func ncclGroup(opName string, calls []pendingCall) error {
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
	return ncclErr(opName, err)
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
