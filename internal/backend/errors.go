package backend

import "fmt"

// Code is an error value named after a CUDA runtime error. Both backends
// report failures with these values; the gpugraph package re-exports them
// (as os re-exports fs.ErrNotExist), so errors.Is works for users whichever
// backend raised the error.
type Code struct {
	num  int
	name string
	msg  string
}

// NewCode returns a Code for a CUDA error that has no value below, such as
// a driver result the cuda backend does not map.
func NewCode(num int, name, msg string) *Code { return &Code{num, name, msg} }

func (c *Code) Error() string { return c.msg + " (" + c.name + ")" }

// Num is CUDA's numeric value of the error (cudaError_t).
func (c *Code) Num() int { return c.num }

// Name is CUDA's name of the error, such as "cudaErrorInvalidValue".
func (c *Code) Name() string { return c.name }

// Is reports whether target is the same CUDA error under another type (the
// gpugraph package's Code is a distinct type over the same values), so
// errors.Is matches whichever of the two an error chain holds.
func (c *Code) Is(target error) bool {
	t, ok := target.(interface {
		Num() int
		Name() string
	})
	return ok && c != nil && t.Num() == c.num && t.Name() == c.name
}

// The errors, with CUDA's numbers and names.
var (
	ErrInvalidValue                = &Code{1, "cudaErrorInvalidValue", "invalid argument"}
	ErrMemoryAllocation            = &Code{2, "cudaErrorMemoryAllocation", "out of memory"}
	ErrInvalidConfiguration        = &Code{9, "cudaErrorInvalidConfiguration", "invalid configuration argument"}
	ErrInsufficientDriver          = &Code{35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"}
	ErrInvalidDeviceFunction       = &Code{98, "cudaErrorInvalidDeviceFunction", "invalid device function"}
	ErrNoDevice                    = &Code{100, "cudaErrorNoDevice", "no CUDA-capable device is detected"}
	ErrInvalidDevice               = &Code{101, "cudaErrorInvalidDevice", "invalid device ordinal"}
	ErrSharedObjectInitFailed      = &Code{303, "cudaErrorSharedObjectInitFailed", "shared object initialization failed"}
	ErrInvalidResourceHandle       = &Code{400, "cudaErrorInvalidResourceHandle", "invalid resource handle"}
	ErrIllegalState                = &Code{401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"}
	ErrPeerAccessUnsupported       = &Code{217, "cudaErrorPeerAccessUnsupported", "peer access is not supported across the given devices"}
	ErrLossyQuery                  = &Code{402, "cudaErrorLossyQuery", "the query would discard edge data"}
	ErrNotReady                    = &Code{600, "cudaErrorNotReady", "device not ready"}
	ErrIllegalAddress              = &Code{700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"}
	ErrLaunchTimeout               = &Code{702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"}
	ErrPeerAccessAlreadyEnabled    = &Code{704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"}
	ErrPeerAccessNotEnabled        = &Code{705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"}
	ErrHostMemoryAlreadyRegistered = &Code{712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"}
	ErrHostMemoryNotRegistered     = &Code{713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"}
	ErrContextIsDestroyed          = &Code{709, "cudaErrorContextIsDestroyed", "context is destroyed"}
	ErrLaunchFailure               = &Code{719, "cudaErrorLaunchFailure", "unspecified launch failure"}
	ErrNotPermitted                = &Code{800, "cudaErrorNotPermitted", "operation not permitted"}
	ErrNotSupported                = &Code{801, "cudaErrorNotSupported", "operation not supported"}
	ErrStreamCaptureUnsupported    = &Code{900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"}
	ErrStreamCaptureInvalidated    = &Code{901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"}
	ErrStreamCaptureMerge          = &Code{902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"}
	ErrStreamCaptureUnmatched      = &Code{903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"}
	ErrStreamCaptureUnjoined       = &Code{904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"}
	ErrStreamCaptureIsolation      = &Code{905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"}
	ErrStreamCaptureImplicit       = &Code{906, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"}
	ErrCapturedEvent               = &Code{907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"}
	ErrStreamCaptureWrongThread    = &Code{908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"}
	ErrGraphExecUpdateFailure      = &Code{910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"}
	ErrUnknown                     = &Code{999, "cudaErrorUnknown", "unknown error"}
)

// Error is how a backend reports a failure: a Code and what was wrong. The
// gpugraph package turns it into its own *Error, naming the public
// operation (and the node, where there is one).
type Error struct {
	Code   *Code
	Detail string
	// Op names what failed where no caller does: the work of an
	// asynchronous failure ("kernel k", "host function").
	Op string
	// Node is the tag of the node at fault, if any (Graph.AddNode's tag).
	Node any
	// Transient marks an asynchronous failure that the next synchronizing
	// call reports once, without making the device unusable.
	Transient bool
}

// Errorf returns an *Error with code and a detail formatted as by
// fmt.Sprintf.
func Errorf(code *Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.Code.Error() + ": " + e.Detail }

// Unwrap returns the Code, so errors.Is(err, ErrInvalidValue) works.
func (e *Error) Unwrap() error { return e.Code }
