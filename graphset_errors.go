package gpugraph

// The errors of graph sets. Each is a type of its own, for errors.As, that
// unwraps to an *Error carrying the operation, the CUDA error code nearest
// to it and a message, so errors.Is(err, ErrInvalidValue) and
// errors.As(err, &*Error) keep working.

// KeyNotCapturedError is a key that a graph set has no graph for and may
// not capture one for: its MissingKey policy is MissingRefuse, or
// MissingPad and no captured key is at least as large. Its code is
// ErrInvalidValue.
type KeyNotCapturedError struct {
	Err *Error
	Key any // the key asked for
}

func (e *KeyNotCapturedError) Error() string { return e.Err.Error() }
func (e *KeyNotCapturedError) Unwrap() error { return e.Err }

// GraphLimitError is a capture that would take a graph set past its limit
// on the number of graphs (GraphSetConfig.MaxGraphs). Its code is
// ErrNotPermitted.
type GraphLimitError struct {
	Err   *Error
	Key   any // the key that would have been captured
	Limit int
}

func (e *GraphLimitError) Error() string { return e.Err.Error() }
func (e *GraphLimitError) Unwrap() error { return e.Err }

// MemoryBudgetError is a capture after which a graph set would need more
// memory than its budget (GraphSetConfig.MemoryBudget). The graph that did
// not fit is destroyed; the set keeps the others. Its code is
// ErrMemoryAllocation.
type MemoryBudgetError struct {
	Err    *Error
	Key    any    // the key whose graph did not fit
	Need   uint64 // the set's bytes with that graph
	Budget uint64
}

func (e *MemoryBudgetError) Error() string { return e.Err.Error() }
func (e *MemoryBudgetError) Unwrap() error { return e.Err }

// StaleOutputError is the use of a graph set's output that is no longer
// valid: a later replay of the set overwrote it, the user released it, or
// the set was closed. Its code is ErrInvalidValue.
type StaleOutputError struct {
	Err    *Error
	Output string // the output, as Output.String names it
	// OverwrittenBy is the number of the replay that overwrote it (0 if it
	// was released or the set closed), OverwrittenKey that replay's key.
	OverwrittenBy  uint64
	OverwrittenKey string
	Released       bool // the user released it
	Closed         bool // the set was closed
}

func (e *StaleOutputError) Error() string { return e.Err.Error() }
func (e *StaleOutputError) Unwrap() error { return e.Err }
