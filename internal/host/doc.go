// Package host is the pure-Go backend's machinery: device memory that is
// real reserved address space of this process (so a device pointer is an
// address a Go kernel dereferences), and, as the split of issue 12
// proceeds, the stream workers, the graph executor, graph memory mapping,
// pools, conditional execution and the rest of what runs CUDA's semantics
// on goroutines (docs/architecture.md). The rules that are the same on
// every backend stay in package gpugraph; this package executes.
package host
