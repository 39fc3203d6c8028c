// Package backendtest is the conformance suite of gpugraph's backends:
// scenarios written once against the public API and run on any backend, as
// gonum's blas/testblas and graph/testgraph test any implementation. Where
// the host backend and the NVIDIA driver disagree, the driver is right and
// the host backend is fixed.
//
// A backend's tests call Run with a function that opens a device of that
// backend. The gpugraph package does so for both of its backends, in
// TestConformanceHost and TestConformanceCUDA (which skips where there is
// no GPU), so that
//
//	go test -run Conformance .
//
// runs the whole suite. Each scenario is a subtest named after it, e.g.
// TestConformanceCUDA/ConditionalSwitch. On the GPU machine (docs/gpu.md),
// build the test binary here with
//
//	CGO_ENABLED=0 go test -c -o .gpu/gpugraph.test .
//
// and run it there with
//
//	.gpu/gpugraph.test -test.run Conformance -test.v
//
// Besides Open and Run, the package exports the test kernels (with Go and
// CUDA C bodies) and helpers that the gpugraph package's own tests share
// with the scenarios; the rest is unexported.
package backendtest
