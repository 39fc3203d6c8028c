// Package nccl binds the NCCL entry points gpugraph's collectives use,
// loaded at run time with purego (libnccl.so.2) as libcuda is, so the
// module builds with CGO_ENABLED=0 and runs without NCCL where no
// collective on a GPU is asked for.
//
// Communicators, buffers and streams are uintptrs: an ncclComm_t, device
// pointers, and the driver's CUstream (the runtime's cudaStream_t). NCCL
// switches to a communicator's device itself. Group calls are per OS
// thread in NCCL: Group locks the calling goroutine to its thread for the
// group's span, and every call of the group must be made inside f.
package nccl

import (
	"errors"
	"fmt"
)

// ErrNoNCCL is returned (wrapped, with the names tried) by Load when no
// libnccl can be loaded.
var ErrNoNCCL = errors.New("nccl: libnccl.so.2 not found")

// Result is an ncclResult_t.
type Result int32

// ncclResult_t values (nccl.h).
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
)

var resultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
	"ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}

func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int32(r))
}

// Error is a failed NCCL call.
type Error struct {
	Call   string
	Result Result
	// Detail is NCCL's own words: ncclGetErrorString and, where a
	// communicator is known, ncclGetLastError.
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s: %v", e.Call, e.Result)
	}
	return fmt.Sprintf("%s: %v (%s)", e.Call, e.Result, e.Detail)
}

// UniqueID is an ncclUniqueId: rank 0 makes it (GetUniqueID) and hands it
// to every other rank, which passes it to InitRank.
type UniqueID [128]byte

// Element types (ncclDataType_t) and reductions (ncclRedOp_t) are the
// callers' values, passed through as ints: gpugraph's coll package uses
// NCCL's numbering.
