package gpugraph

import (
	"errors"
	"fmt"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Code is an error value named after a CUDA runtime error. Compare with
// errors.Is: every error this package returns wraps exactly one Code. Its
// Num method returns CUDA's numeric value of the error (cudaError_t), Name
// CUDA's name ("cudaErrorInvalidValue"), and Error the message with the
// name. (Both backends report with these values, so the type lives below
// them and this is its name here.)
type Code = backend.Code

// The errors, with CUDA's numbers and names. Both backends report with
// these values.
var (
	ErrInvalidValue             = backend.ErrInvalidValue
	ErrMemoryAllocation         = backend.ErrMemoryAllocation
	ErrInvalidConfiguration     = backend.ErrInvalidConfiguration
	ErrInvalidDeviceFunction    = backend.ErrInvalidDeviceFunction
	ErrNoDevice                 = backend.ErrNoDevice
	ErrInvalidDevice            = backend.ErrInvalidDevice
	ErrSharedObjectInitFailed   = backend.ErrSharedObjectInitFailed
	ErrInvalidResourceHandle    = backend.ErrInvalidResourceHandle
	ErrIllegalState             = backend.ErrIllegalState
	ErrLossyQuery               = backend.ErrLossyQuery
	ErrNotReady                 = backend.ErrNotReady
	ErrIllegalAddress           = backend.ErrIllegalAddress
	ErrLaunchTimeout            = backend.ErrLaunchTimeout
	ErrPeerAccessAlreadyEnabled = backend.ErrPeerAccessAlreadyEnabled
	ErrPeerAccessUnsupported    = backend.ErrPeerAccessUnsupported
	ErrPeerAccessNotEnabled     = backend.ErrPeerAccessNotEnabled
	ErrContextIsDestroyed       = backend.ErrContextIsDestroyed
	ErrLaunchFailure            = backend.ErrLaunchFailure
	ErrNotPermitted             = backend.ErrNotPermitted
	ErrNotSupported             = backend.ErrNotSupported
	ErrStreamCaptureUnsupported = backend.ErrStreamCaptureUnsupported
	ErrStreamCaptureInvalidated = backend.ErrStreamCaptureInvalidated
	ErrStreamCaptureMerge       = backend.ErrStreamCaptureMerge
	ErrStreamCaptureUnmatched   = backend.ErrStreamCaptureUnmatched
	ErrStreamCaptureUnjoined    = backend.ErrStreamCaptureUnjoined
	ErrStreamCaptureIsolation   = backend.ErrStreamCaptureIsolation
	ErrStreamCaptureImplicit    = backend.ErrStreamCaptureImplicit
	ErrCapturedEvent            = backend.ErrCapturedEvent
	ErrStreamCaptureWrongThread = backend.ErrStreamCaptureWrongThread
	ErrGraphExecUpdateFailure   = backend.ErrGraphExecUpdateFailure
	ErrUnknown                  = backend.ErrUnknown
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
		e := &Error{Op: opName, Code: be.Code, Detail: be.Detail}
		e.Node, _ = be.Node.(*Node)
		return e
	}
	var e *Error
	if errors.As(err, &e) {
		return e.at(opName, e.Node)
	}
	return newErr(opName, ErrLaunchFailure, "%v", err)
}
