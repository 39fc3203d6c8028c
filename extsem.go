package gpugraph

import (
	"context"
	"fmt"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/host"
)

// ExternalSemaphoreHandleType is the kind of operating-system handle a
// semaphore is imported from (cudaExternalSemaphoreHandleType).
type ExternalSemaphoreHandleType int

const (
	// ExternalSemaphoreHandleOpaqueFD is a binary semaphore's file
	// descriptor (a VkSemaphore exported as VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT).
	// Signal and wait values are ignored for it.
	ExternalSemaphoreHandleOpaqueFD ExternalSemaphoreHandleType = 1
	// ExternalSemaphoreHandleTimelineSemaphoreFD is a timeline semaphore's
	// file descriptor (a VkSemaphore of VK_SEMAPHORE_TYPE_TIMELINE).
	ExternalSemaphoreHandleTimelineSemaphoreFD ExternalSemaphoreHandleType = 9
)

// ExternalSemaphore is a semaphore that streams and graphs signal and wait
// on (cudaExternalSemaphore_t); see the External semaphores section of the
// package documentation. On the host backend it is a timeline semaphore
// that Go code signals and waits on too. Its methods are safe for
// concurrent use.
type ExternalSemaphore struct {
	dev  *Device
	kind ExternalSemaphoreHandleType // what it was imported from; 0 for a Go-side (host) semaphore
	be   backend.ExternalSemaphore   // the backend's semaphore: h itself on host

	h host.Semaphore // the value, its waiters and users; for an imported one only its destroyed state
}

// NewExternalSemaphore creates a timeline semaphore at value 0. It is a
// host backend feature: on the cuda backend it fails with ErrNotSupported,
// since the driver only imports semaphores from graphics APIs
// (ImportExternalSemaphoreFD).
func (d *Device) NewExternalSemaphore() (*ExternalSemaphore, error) {
	const opName = "Device.NewExternalSemaphore"
	if err := d.check(opName); err != nil {
		return nil, err
	}
	if !d.goRun {
		return nil, newErr(opName, ErrNotSupported, "the CUDA driver has no semaphores of its own: "+
			"import one from a graphics API handle (a Vulkan semaphore's file descriptor) with ImportExternalSemaphoreFD")
	}
	s := &ExternalSemaphore{dev: d}
	s.be = &s.h
	return s, nil
}

// ImportExternalSemaphoreFD imports a semaphore from a file descriptor made
// by a graphics API (cuImportExternalSemaphore), such as a Vulkan semaphore
// exported with vkGetSemaphoreFdKHR. On success the driver owns fd. It is a
// cuda backend feature: the host backend fails with ErrNotSupported.
func (d *Device) ImportExternalSemaphoreFD(kind ExternalSemaphoreHandleType, fd int) (*ExternalSemaphore, error) {
	const opName = "Device.ImportExternalSemaphoreFD"
	if err := d.check(opName); err != nil {
		return nil, err
	}
	switch kind {
	case ExternalSemaphoreHandleOpaqueFD, ExternalSemaphoreHandleTimelineSemaphoreFD:
	default:
		return nil, newErr(opName, ErrInvalidValue, "handle type %d is not a file descriptor type", int(kind))
	}
	xs, ok := d.be.(backend.ExternalSemaphores)
	if !ok {
		return nil, newErr(opName, ErrNotSupported, "the backend has no external semaphores")
	}
	be, err := xs.ImportExternalSemaphoreFD(int(kind), fd)
	if err != nil {
		return nil, backendErr(opName, err)
	}
	return &ExternalSemaphore{dev: d, kind: kind, be: be}, nil
}

// check validates a semaphore handle for op, on device d if d is not nil;
// code is the error a bad handle gets.
func (s *ExternalSemaphore) check(opName string, d *Device, code *Code) error {
	if s == nil {
		return newErr(opName, code, "nil external semaphore")
	}
	if d != nil && s.dev != d {
		return newErr(opName, code, "external semaphore belongs to another device")
	}
	if err := s.dev.check(opName); err != nil {
		return err
	}
	if s.h.Destroyed() {
		return newErr(opName, code, "external semaphore is destroyed")
	}
	return nil
}

// goSide checks a call that Go makes on the semaphore itself.
func (s *ExternalSemaphore) goSide(opName string) error {
	if err := s.check(opName, nil, ErrInvalidResourceHandle); err != nil {
		return err
	}
	if s.kind != 0 {
		return newErr(opName, ErrNotSupported, "an imported semaphore is signalled, waited on and read through the API it came from, not from Go")
	}
	return nil
}

// Signal sets the semaphore's value to v from Go, releasing the waits for
// values up to v. As for a Vulkan timeline semaphore signalled from the
// host, v must exceed the current value (ErrInvalidValue otherwise).
func (s *ExternalSemaphore) Signal(v uint64) error {
	const opName = "ExternalSemaphore.Signal"
	if err := s.goSide(opName); err != nil {
		return err
	}
	if cur, ok := s.h.Signal(v); !ok {
		if s.h.Destroyed() {
			return newErr(opName, ErrInvalidResourceHandle, "external semaphore is destroyed")
		}
		return newErr(opName, ErrInvalidValue, "value %d does not exceed the semaphore's value %d", v, cur)
	}
	return nil
}

// Wait blocks until the semaphore's value is at least v, or ctx is done.
// An error from ctx has code ErrNotReady and also matches ctx.Err() with
// errors.Is.
func (s *ExternalSemaphore) Wait(ctx context.Context, v uint64) error {
	const opName = "ExternalSemaphore.Wait"
	if err := s.goSide(opName); err != nil {
		return err
	}
	if ctx == nil {
		return newErr(opName, ErrInvalidValue, "nil context")
	}
	reached, destroyed := s.h.Wait(v, ctx.Done())
	switch {
	case destroyed:
		return newErr(opName, ErrInvalidResourceHandle, "external semaphore is destroyed")
	case !reached:
		return ctxErr{newErr(opName, ErrNotReady, "value %d not reached: %v", v, ctx.Err()), ctx.Err()}
	}
	return nil
}

// ctxErr is an *Error that also matches the context error that caused it.
type ctxErr struct {
	err *Error
	ctx error
}

func (e ctxErr) Error() string   { return e.err.Error() }
func (e ctxErr) Unwrap() []error { return []error{e.err, e.ctx} }

// Value returns the semaphore's current value.
func (s *ExternalSemaphore) Value() (uint64, error) {
	const opName = "ExternalSemaphore.Value"
	if err := s.goSide(opName); err != nil {
		return 0, err
	}
	return s.h.Value(), nil
}

// Destroy releases the semaphore (cudaDestroyExternalSemaphore). CUDA
// requires every signal and wait on it to have completed first and leaves
// the rest undefined; the host backend checks it: while a stream operation
// or a graph launch that uses the semaphore is pending, or a Go Wait is
// blocked on it, Destroy fails with ErrIllegalState and changes nothing.
// Later use of the semaphore, launches of executable graphs with nodes on
// it included, fails with ErrInvalidResourceHandle.
func (s *ExternalSemaphore) Destroy() error {
	const opName = "ExternalSemaphore.Destroy"
	if err := s.check(opName, nil, ErrInvalidResourceHandle); err != nil {
		return err
	}
	switch users, already := s.h.TryDestroy(); {
	case already:
		return newErr(opName, ErrInvalidResourceHandle, "external semaphore is destroyed")
	case users > 0:
		return newErr(opName, ErrIllegalState, "%d signal or wait operations on the semaphore have not completed", users)
	}
	if s.kind != 0 { // the driver's own; a Go-side semaphore is h
		return backendErr(opName, s.be.Destroy())
	}
	return nil
}

// ExtSemaphoreSignalParams describe a node that signals external
// semaphores (cudaExternalSemaphoreSignalNodeParams): Semaphores[i] is set
// to Values[i] (a timeline semaphore; a binary one is signalled and its
// value ignored).
type ExtSemaphoreSignalParams struct {
	Semaphores []*ExternalSemaphore
	Values     []uint64
}

// ExtSemaphoreWaitParams describe a node that waits until every
// Semaphores[i] has reached Values[i]
// (cudaExternalSemaphoreWaitNodeParams). A binary semaphore is waited on
// until signalled, and reset.
type ExtSemaphoreWaitParams struct {
	Semaphores []*ExternalSemaphore
	Values     []uint64
}

func (ExtSemaphoreSignalParams) NodeType() NodeType { return NodeExtSemasSignal }
func (ExtSemaphoreWaitParams) NodeType() NodeType   { return NodeExtSemasWait }

// extSemArgs returns the arrays of external semaphore params.
func extSemArgs(p NodeParams) (sems []*ExternalSemaphore, values []uint64, signal, ok bool) {
	switch p := p.(type) {
	case ExtSemaphoreSignalParams:
		return p.Semaphores, p.Values, true, true
	case ExtSemaphoreWaitParams:
		return p.Semaphores, p.Values, false, true
	}
	return nil, nil, false, false
}

// checkExtSems checks the arrays of a signal or wait for every backend: at
// least one semaphore, one value for each, each a live semaphore of d.
// handle is the code a bad semaphore gets: CUDA documents
// cudaErrorInvalidResourceHandle for the stream calls and
// cudaErrorInvalidValue for graph nodes.
func (d *Device) checkExtSems(sems []*ExternalSemaphore, values []uint64, handle *Code) (*Code, string) {
	if len(sems) == 0 {
		return ErrInvalidValue, "no external semaphores"
	}
	if len(values) != len(sems) {
		return ErrInvalidValue, fmt.Sprintf("%d values for %d semaphores", len(values), len(sems))
	}
	for i, s := range sems {
		if err := s.check("", d, handle); err != nil {
			e := err.(*Error)
			return e.Code, fmt.Sprintf("semaphore %d: %s", i, e.Detail)
		}
	}
	return nil, ""
}

// copyExtSemParams copies the arrays of signal or wait params.
func copyExtSemParams(p NodeParams) (NodeParams, bool) {
	switch q := p.(type) {
	case ExtSemaphoreSignalParams:
		q.Semaphores, q.Values = append([]*ExternalSemaphore(nil), q.Semaphores...), append([]uint64(nil), q.Values...)
		return q, true
	case ExtSemaphoreWaitParams:
		q.Semaphores, q.Values = append([]*ExternalSemaphore(nil), q.Semaphores...), append([]uint64(nil), q.Values...)
		return q, true
	}
	return p, false
}

// extSemUpdatable reports whether nu may replace old as the parameters of
// an external semaphore node of an executable graph, as
// cudaGraphExecExternalSemaphores{Signal,Wait}NodeSetParams and
// cudaGraphExecUpdate allow: a node of the same type with the same number
// of semaphores (the semaphores and values may change). nu must also pass
// Device.prepare.
func extSemUpdatable(old, nu NodeParams) (ok bool, why string) {
	oldSems, _, osig, ok1 := extSemArgs(old)
	ns, _, nsig, ok2 := extSemArgs(nu)
	switch {
	case !ok1 || !ok2:
		return false, fmt.Sprintf("not external semaphore params (%T, %T)", old, nu)
	case osig != nsig:
		return false, "a signal node and a wait node"
	case len(oldSems) != len(ns):
		return false, fmt.Sprintf("the number of semaphores cannot change (%d to %d)", len(oldSems), len(ns))
	}
	return true, ""
}

// extSemLabel is the DOT label of a signal or wait node.
func extSemLabel(p NodeParams) []string {
	sems, values, _, _ := extSemArgs(p)
	return []string{fmt.Sprintf("%d semaphores", len(sems)), fmt.Sprintf("values %v", values)}
}

// SignalExternalSemaphores signals sems in stream order, sems[i] to
// values[i] (cudaSignalExternalSemaphoresAsync): after all work issued to s
// before it. A value that does not exceed a host semaphore's current one
// leaves it as it is. In a capturing stream it becomes a signal node.
func (s *Stream) SignalExternalSemaphores(sems []*ExternalSemaphore, values []uint64) error {
	return s.extSem("Stream.SignalExternalSemaphores", true, sems, values)
}

// WaitExternalSemaphores makes all later work in s wait until each sems[i]
// has reached values[i] (cudaWaitExternalSemaphoresAsync). It returns at
// once; the stream, not the caller, waits. In a capturing stream it becomes
// a wait node.
func (s *Stream) WaitExternalSemaphores(sems []*ExternalSemaphore, values []uint64) error {
	return s.extSem("Stream.WaitExternalSemaphores", false, sems, values)
}

func (s *Stream) extSem(opName string, signal bool, sems []*ExternalSemaphore, values []uint64) error {
	if err := s.usable(opName); err != nil {
		return err
	}
	if code, msg := s.dev.checkExtSems(sems, values, ErrInvalidResourceHandle); code != nil {
		return newErr(opName, code, "%s", msg)
	}
	if s.capturing.Load() {
		var p NodeParams = ExtSemaphoreWaitParams{sems, values}
		if signal {
			p = ExtSemaphoreSignalParams{sems, values}
		}
		if _, captured, err := s.captureNode(opName, p); captured {
			return err
		}
	}
	xs, ok := s.dev.be.(backend.ExternalSemaphores)
	if !ok {
		return newErr(opName, ErrNotSupported, "the backend has no external semaphores")
	}
	bs := backendSems(sems)
	return backendErr(opName, s.issue(opName, func() error {
		w := s.nativeWorkBegin()
		var err error
		if signal {
			err = xs.SignalExternalSemaphores(s.be, bs, values)
		} else {
			err = xs.WaitExternalSemaphores(s.be, bs, values)
		}
		w.end(s, err)
		return err
	}))
}
