// Package backend is what the gpugraph package and its backends share:
// the error Codes both report with (named after CUDA's errors and
// re-exported by gpugraph) and Error, how a backend reports one. As the
// split of docs/architecture.md proceeds it gains the interfaces a backend
// implements (device, stream, event, graph, executable graph, and optional
// ones for what only one backend has) and the operation type that public
// node parameters are lowered to. Its subpackage backendtest is the
// conformance suite, run against any backend.
package backend
