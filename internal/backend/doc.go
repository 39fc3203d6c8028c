// Package backend is what the gpugraph package and its backends share: the
// interfaces a backend implements (Device, Stream, Event, Graph, Exec, and
// optional ones, found by type assertion, for what only one backend has:
// Capturer, Inspector, Pools, GraphMemory, ExternalSemaphores, UserObjects,
// Native), the types public parameters are lowered to (Op, Launch, Memcpy,
// Memset, Kernel, EdgeData), and the error Codes both backends report with
// (named after CUDA's errors and re-exported by gpugraph) with Error, how
// a backend reports one, naming the node at fault by its tag.
//
// The gpugraph package calls a backend after its own checks, so a backend
// checks only what it alone knows, as a driver does. Its subpackage
// backendtest is the conformance suite, run against any backend.
// docs/architecture.md draws the whole.
package backend
