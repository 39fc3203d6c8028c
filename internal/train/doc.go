// Package train is the training core of `gpugraph train`: a ReLU MLP
// classifier (forward, softmax cross-entropy, backward, SGD or Adam) trained
// on a synthetic data set, written once as gpugraph kernels so that the same
// step runs op by op on a stream or captured into a graph and replayed.
//
// The shape of a step follows the PyTorch CUDA-graph recipe (seed 004):
// parameters and optimizer state are allocated once; the batch lives in
// static device buffers that the host refills before each step (PyTorch's
// static_input.copy_()); everything else a step needs (activations, logits,
// gradients) is allocated with Stream.MallocAsync inside the step and freed
// with Stream.FreeAsync at its last use. Op by op, the stream-ordered pool
// caches and reuses that memory from step to step; under stream capture the
// same calls become graph alloc and free nodes, and the graph reuses the
// memory of every buffer freed before a later one is allocated. Nothing in a
// step depends on host state that changes between steps (Adam's step count
// lives in device memory and a kernel increments it), so a graph captured
// from one Model.Step stays valid for every later step.
//
// Kernels have a Go body (the host backend runs blocks in parallel) and a
// CUDA C body compiled by NVRTC; the Go body computes what the CUDA body
// does, in the same order where a sum crosses threads, so host and GPU
// training compare step by step. Matrix products go through a GEMM
// function that defaults to this package's tiled kernel (KernelGEMM) and
// may be replaced, for instance by cuBLAS on the cuda backend; GEMMArgs
// carries the operands' element types and the math, so a replacement
// knows what it multiplies.
//
// Config.Precision picks FP32, TF32 (the GEMMs round their inputs to TF32)
// or BF16 (mixed precision: bfloat16 weights' shadow and activations for
// the GEMMs, float32 master weights, optimizer, loss and sums). The
// conversions, roundTF32 and toBF16, are one function each with a CUDA
// twin, so both backends round alike.
//
// A step is few kernels: the parameters are one allocation, so one
// optimizer kernel updates them all (and writes the bfloat16 shadow);
// Adam's step count advances inside that kernel; with plain SGD on one
// device the dW GEMMs update the weights in place (alpha −lr, beta 1) and
// that kernel only the biases and the shadow; the loss and its
// gradient are one kernel, a warp per row (Config.StepOps counts them).
// With Model.Fused (a FusedGEMM: CuBLASLtStep on cuBLASLt, EmulatedFused
// on any GEMM) the bias, the ReLU and their gradients ride in the GEMMs'
// epilogues, 3n+1 kernels for n layers (BF16: 3n+2, one more for an output
// of few classes; Config.FusedStepOps); with Model.ForwardGEMM (CuBLASLt)
// inference does the same for bias and ReLU.
// CuBLAS and CuBLASLt make the cuda backend's GEMMs; the host backend
// always runs the package's own.
package train
