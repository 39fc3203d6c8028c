package gpugraph

import (
	"errors"
	"fmt"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Code is an error named after a CUDA runtime error (cudaError_t). Every
// error this package returns wraps exactly one Code, whichever backend
// raised it, so compare with errors.Is:
//
//	if errors.Is(err, gpugraph.ErrInvalidValue) { ... }
//
// A Code prints as its message and CUDA's name, such as "invalid argument
// (cudaErrorInvalidValue)". The Codes are the Err values below; a driver
// error with no value of its own gets a Code carrying the driver's number
// and name.
type Code backend.Code

// Error returns the message and CUDA's name: "invalid argument
// (cudaErrorInvalidValue)".
func (c *Code) Error() string { return c.be().Error() }

// Num returns CUDA's numeric value of the error (cudaError_t), such as 1
// for ErrInvalidValue.
func (c *Code) Num() int { return c.be().Num() }

// Name returns CUDA's name of the error, such as "cudaErrorInvalidValue".
func (c *Code) Name() string { return c.be().Name() }

// Is reports whether target is the same CUDA error (same number and name),
// for errors.Is.
func (c *Code) Is(target error) bool { return c.be().Is(target) }

// be is c as the backends know it: the same value under the type the
// backends report with.
func (c *Code) be() *backend.Code { return (*backend.Code)(c) }

// code is a backend's code under this package's type (nil stays nil).
func code(c *backend.Code) *Code { return (*Code)(c) }

// The errors, with CUDA's numbers and names. Both backends report with
// these values.
var (
	ErrInvalidValue             = code(backend.ErrInvalidValue)
	ErrMemoryAllocation         = code(backend.ErrMemoryAllocation)
	ErrInvalidConfiguration     = code(backend.ErrInvalidConfiguration)
	ErrInsufficientDriver       = code(backend.ErrInsufficientDriver) // the NVIDIA driver is older than the cuda backend needs
	ErrInvalidDeviceFunction    = code(backend.ErrInvalidDeviceFunction)
	ErrNoDevice                 = code(backend.ErrNoDevice)
	ErrInvalidDevice            = code(backend.ErrInvalidDevice)
	ErrSharedObjectInitFailed   = code(backend.ErrSharedObjectInitFailed)
	ErrInvalidResourceHandle    = code(backend.ErrInvalidResourceHandle)
	ErrIllegalState             = code(backend.ErrIllegalState)
	ErrLossyQuery               = code(backend.ErrLossyQuery)
	ErrNotReady                 = code(backend.ErrNotReady)
	ErrIllegalAddress           = code(backend.ErrIllegalAddress)
	ErrLaunchTimeout            = code(backend.ErrLaunchTimeout)
	ErrPeerAccessAlreadyEnabled = code(backend.ErrPeerAccessAlreadyEnabled)
	ErrPeerAccessUnsupported    = code(backend.ErrPeerAccessUnsupported)
	ErrPeerAccessNotEnabled     = code(backend.ErrPeerAccessNotEnabled)
	ErrContextIsDestroyed       = code(backend.ErrContextIsDestroyed)
	// ErrHostMemoryAlreadyRegistered: HostRegister of memory that is
	// pinned already, in part or whole.
	ErrHostMemoryAlreadyRegistered = code(backend.ErrHostMemoryAlreadyRegistered)
	// ErrHostMemoryNotRegistered: HostUnregister of memory that
	// HostRegister did not register.
	ErrHostMemoryNotRegistered  = code(backend.ErrHostMemoryNotRegistered)
	ErrLaunchFailure            = code(backend.ErrLaunchFailure)
	ErrNotPermitted             = code(backend.ErrNotPermitted)
	ErrNotSupported             = code(backend.ErrNotSupported)
	ErrStreamCaptureUnsupported = code(backend.ErrStreamCaptureUnsupported)
	ErrStreamCaptureInvalidated = code(backend.ErrStreamCaptureInvalidated)
	ErrStreamCaptureMerge       = code(backend.ErrStreamCaptureMerge)
	ErrStreamCaptureUnmatched   = code(backend.ErrStreamCaptureUnmatched)
	ErrStreamCaptureUnjoined    = code(backend.ErrStreamCaptureUnjoined)
	ErrStreamCaptureIsolation   = code(backend.ErrStreamCaptureIsolation)
	ErrStreamCaptureImplicit    = code(backend.ErrStreamCaptureImplicit)
	ErrCapturedEvent            = code(backend.ErrCapturedEvent)
	ErrStreamCaptureWrongThread = code(backend.ErrStreamCaptureWrongThread)
	ErrGraphExecUpdateFailure   = code(backend.ErrGraphExecUpdateFailure)
	ErrUnknown                  = code(backend.ErrUnknown)
)

// Error is what the API returns: the operation, the node it concerns (if
// any), the CUDA error code, and a detail that says what was wrong.
type Error struct {
	Op     string // the API call, such as "Graph.AddDependencies"
	Node   *Node  // the offending node, or nil
	Code   *Code
	Detail string

	// transient marks an asynchronous failure that the next synchronizing
	// call reports once, without making the device unusable (a device graph
	// launch of a host graph, as the driver reports it).
	transient bool
}

func (e *Error) Error() string {
	s := "gpugraph: " + e.Op + ": "
	if e.Node != nil {
		s += e.Node.String() + ": "
	}
	s += e.Code.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the Code, so errors.Is(err, ErrInvalidValue) works.
func (e *Error) Unwrap() error { return e.Code }

func newErr(opName string, code *Code, format string, args ...any) *Error {
	return &Error{Op: opName, Code: code, Detail: fmt.Sprintf(format, args...)}
}

func nodeErr(opName string, n *Node, code *Code, format string, args ...any) *Error {
	return &Error{Op: opName, Node: n, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// withOp re-labels an *Error raised by a helper with the public operation.
func withOp(opName string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e.at(opName, e.Node)
	}
	return err
}

// at returns a copy of e reported by the public operation op about node n:
// a helper's error, or a device's sticky one, reaches each caller under the
// caller's own name, and the original stays unchanged for the next.
func (e *Error) at(opName string, n *Node) *Error {
	c := *e
	c.Op, c.Node = opName, n
	return &c
}

// fromBackend reports a backend's failure as the public operation opName's:
// a *backend.Error becomes an *Error with its code and detail, an *Error
// is relabelled, any other error is a launch failure, and nil stays nil.
func fromBackend(opName string, err error) error {
	if err == nil {
		return nil
	}
	var be *backend.Error
	if errors.As(err, &be) {
		e := &Error{Op: opName, Code: code(be.Code), Detail: be.Detail}
		e.Node, _ = be.Node.(*Node)
		return e
	}
	var e *Error
	if errors.As(err, &e) {
		return e.at(opName, e.Node)
	}
	return newErr(opName, ErrLaunchFailure, "%v", err)
}
