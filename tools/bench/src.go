// Package benchsrc holds the reference programs that gpugraph's
// side-by-side benchmarks compare against, as text, so that the harnesses
// of internal/side can build and run them on the machine they measure
// (gpugraph bench --vs native, --vs torch): the same sources the test
// benchmarks and tools/gpu/perf.sh use.
package benchsrc

import _ "embed"

// LaunchLoop is launchloop.c: cuLaunchKernel and cuGraphLaunch loops.
//
//go:embed native/launchloop.c
var LaunchLoop string

// InstLoop is instloop.c: cuGraphInstantiate and cuGraphExecUpdate loops.
//
//go:embed native/instloop.c
var InstLoop string

// TorchStep is torch_step.py: the reference training step in PyTorch,
// captured in a CUDA graph.
//
//go:embed torch_step.py
var TorchStep string
