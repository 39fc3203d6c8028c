package gpugraph

import (
	"errors"
	"fmt"
)

// Code is an error value named after a CUDA runtime error. Compare with
// errors.Is: every error this package returns wraps exactly one Code.
type Code struct {
	num  int
	name string
	msg  string
}

func (c *Code) Error() string { return c.msg + " (" + c.name + ")" }

// Num is CUDA's numeric value of the error (cudaError_t).
func (c *Code) Num() int { return c.num }

// Name is CUDA's name of the error, such as "cudaErrorInvalidValue".
func (c *Code) Name() string { return c.name }

// The errors, with CUDA's numbers and names.
var (
	ErrInvalidValue             = &Code{1, "cudaErrorInvalidValue", "invalid argument"}
	ErrMemoryAllocation         = &Code{2, "cudaErrorMemoryAllocation", "out of memory"}
	ErrInvalidConfiguration     = &Code{9, "cudaErrorInvalidConfiguration", "invalid configuration argument"}
	ErrInvalidDeviceFunction    = &Code{98, "cudaErrorInvalidDeviceFunction", "invalid device function"}
	ErrNoDevice                 = &Code{100, "cudaErrorNoDevice", "no CUDA-capable device is detected"}
	ErrInvalidDevice            = &Code{101, "cudaErrorInvalidDevice", "invalid device ordinal"}
	ErrInvalidResourceHandle    = &Code{400, "cudaErrorInvalidResourceHandle", "invalid resource handle"}
	ErrIllegalState             = &Code{401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"}
	ErrLossyQuery               = &Code{402, "cudaErrorLossyQuery", "the query would discard edge data"}
	ErrNotReady                 = &Code{600, "cudaErrorNotReady", "device not ready"}
	ErrIllegalAddress           = &Code{700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"}
	ErrContextIsDestroyed       = &Code{709, "cudaErrorContextIsDestroyed", "context is destroyed"}
	ErrLaunchFailure            = &Code{719, "cudaErrorLaunchFailure", "unspecified launch failure"}
	ErrNotPermitted             = &Code{800, "cudaErrorNotPermitted", "operation not permitted"}
	ErrNotSupported             = &Code{801, "cudaErrorNotSupported", "operation not supported"}
	ErrStreamCaptureUnsupported = &Code{900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"}
	ErrStreamCaptureInvalidated = &Code{901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"}
	ErrStreamCaptureMerge       = &Code{902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"}
	ErrStreamCaptureUnmatched   = &Code{903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"}
	ErrStreamCaptureUnjoined    = &Code{904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"}
	ErrStreamCaptureIsolation   = &Code{905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"}
	ErrStreamCaptureImplicit    = &Code{906, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"}
	ErrCapturedEvent            = &Code{907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"}
	ErrStreamCaptureWrongThread = &Code{908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"}
	ErrGraphExecUpdateFailure   = &Code{910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"}
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

func newErr(op string, code *Code, format string, args ...any) *Error {
	return &Error{Op: op, Code: code, Detail: fmt.Sprintf(format, args...)}
}

func nodeErr(op string, n *Node, code *Code, format string, args ...any) *Error {
	return &Error{Op: op, Node: n, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// withOp re-labels an *Error raised by a helper with the public operation.
func withOp(op string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		c := *e
		c.Op = op
		return &c
	}
	return err
}
