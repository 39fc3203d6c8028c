// Package host is the pure-Go backend: device memory that is real reserved
// address space of this process (so a device pointer is an address a Go
// kernel dereferences), streams run by one worker goroutine each, graphs
// (a mirror of the gpugraph package's, made by the same calls as the cuda
// backend's), the executor that flattens a graph into a table of ops run
// by a sched.Runner, whole-graph update pairing, graph memory mapping,
// stream-ordered memory pools, conditional execution, programmatic
// dependent launch, device graph launch and external semaphores. What a
// driver decides itself (graph-memory placement, conditional handles, the
// limits of an update) is decided here, as the driver does, and the
// conformance suite checks it against the driver's answers. The rules that
// are the same on every backend stay in package gpugraph
// (docs/architecture.md).
package host
