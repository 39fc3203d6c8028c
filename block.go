package gpugraph

// The Block methods that reach the graph launch running a kernel, on the
// host backend (internal/host's Runtime): conditional handles,
// programmatic dependent launch, device graph launch.

// SetConditional sets the value of the conditional handle h for the graph
// launch running the kernel (cudaGraphSetConditional). A kernel of any node
// of the executable graph, bodies included, may set any of its handles;
// blocks that set one handle concurrently leave one of their values. Setting
// a handle of no conditional node of the running graph, or from a kernel
// launched into a stream, is a device-side error: the kernel fails with
// ErrLaunchFailure.
func (b Block) SetConditional(h ConditionalHandle, v uint32) { b.rt.SetConditional(uint64(h), v) }

// TriggerProgrammaticLaunchCompletion tells the kernels that depend on this
// one through its programmatic port that this block is ready for them to
// start (cudaTriggerProgrammaticLaunchCompletion): they may start once
// every block has called it or exited. It does not make this block's
// writes visible to them; GridDependencySynchronize does. Calls after the
// first, and calls in a kernel launched into a stream or without such
// dependents, do nothing.
func (b Block) TriggerProgrammaticLaunchCompletion() { b.rt.TriggerProgrammaticLaunchCompletion() }

// GridDependencySynchronize waits until every kernel this one depends on
// through programmatic edges has completed and its memory is visible
// (cudaGridDependencySynchronize). A kernel started early must call it
// before it reads what those kernels write. In a kernel launched into a
// stream, or without programmatic dependencies, it returns at once.
func (b Block) GridDependencySynchronize() { b.rt.GridDependencySynchronize() }
