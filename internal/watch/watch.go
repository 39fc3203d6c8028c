// Package watch links the gpugraph package's waits to what can make them
// hang: a communicator whose peer is gone leaves its kernels, and every
// wait on work queued behind them, waiting forever. A Watch attached to a
// device bounds every wait on that device (synchronize, synchronous copy,
// Close) to the watch's timeout and polls its asynchronous error meanwhile;
// on a timeout or an error it aborts the watch (ncclCommAbort, which makes
// NCCL's kernels return) and the wait fails with a typed error.
//
// The gpugraph package implements Attach; the coll package attaches its
// communicators. Nothing else should need it.
package watch

import "time"

// A Watch is what a device's waits keep an eye on.
type Watch interface {
	// Check returns an asynchronous failure (a peer that went away), nil
	// while all is well. It is called every PollInterval during a wait and
	// must not block.
	Check() error
	// Abort gives up the watched work so that the device's queued work can
	// finish (ncclCommAbort); cause says why. Called at most once per
	// failure, from the waiting goroutine.
	Abort(cause error)
	// Timeout bounds how long one wait may last while the watch is
	// attached.
	Timeout() time.Duration
	// Name says what is watched, for the error ("NCCL communicator, rank 1 of 2").
	Name() string
}

// PollInterval is how often a wait polls its watches' Check.
const PollInterval = 20 * time.Millisecond

// Attach attaches w to dev (a *gpugraph.Device) and returns the function
// that detaches it. The gpugraph package sets it at init.
var Attach func(dev any, w Watch) (detach func())
