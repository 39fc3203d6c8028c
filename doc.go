// Package gpugraph is the CUDA Graphs work-submission model in Go.
//
// Work reaches a GPU in one of two ways. Issued op by op into a Stream, each
// kernel launch, copy or memset pays the host cost of setting it up. Defined
// once as a Graph of nodes and dependencies, instantiated into an Exec, and
// launched many times, the setup is paid once at instantiation and each
// launch costs little, whatever the number of nodes.
//
// # Phases
//
// Definition: create a Graph with Device.NewGraph and add nodes: kernels,
// memcpy, memset, host functions, empty nodes, event record and wait nodes,
// and child graphs. Each Add call takes the node's dependencies; more edges
// can be added and removed with AddDependencies and RemoveDependencies.
// Parameters are checked when a node is added, and every invalid call
// returns an *Error wrapping a Code named after CUDA's error
// (ErrInvalidValue, ErrInvalidConfiguration, ...) and changes nothing.
//
// Instantiation: Graph.Instantiate snapshots the graph, validates it again
// (memory freed since a node was added, destroyed events, cycles), flattens
// child graphs and plans the execution. The Exec is independent of the Graph
// from then on: editing or destroying the graph does not change it.
//
// Execution: Exec.Launch queues the graph in a stream like any other work.
// A node runs once all its dependencies have finished, independent nodes run
// in parallel, later work in the stream waits for the whole graph, and
// launches of one Exec never overlap, even in different streams.
//
// # Updating an executable graph
//
// When only parameters change, an Exec is updated in place instead of
// instantiated again: Exec.Update takes a graph of the same topology (built
// by the same API calls or captured from the same stream code) and pairs its
// nodes with the Exec's as CUDA does, sinks in the order they became sinks,
// then dependencies in edge order; Exec.SetParams changes one node;
// Exec.SetEnabled turns kernel, memcpy and memset nodes off and on. A
// refused update (UpdateResult says why, naming the node) changes nothing;
// an accepted one reaches the next launch, never a launch already queued.
//
// # Resources, semaphores and edges
//
// A UserObject ties a resource's lifetime to the graphs and executable
// graphs that reference it: its destructor runs once the last reference is
// gone, after the launches using it have finished. ExternalSemaphore signal
// and wait nodes (and stream operations) synchronise graphs with work
// outside them; on host a semaphore is signalled and waited on from Go.
// EdgeData on an edge makes it a programmatic dependency: the downstream
// kernel may start once the upstream one triggers
// (Block.TriggerProgrammaticLaunchCompletion) and waits for its results with
// Block.GridDependencySynchronize.
//
// # Device graph launch
//
// A graph instantiated with InstantiateDeviceLaunch (only kernel, memcpy,
// memset and child graph nodes, copying device memory only) is a device
// graph: once uploaded (Exec.Upload, InstantiateUpload or a host launch), a
// kernel node of any graph can launch it with Block.LaunchGraph, given its
// Exec.DeviceHandle: fire-and-forget, as a tail launch after the launching
// graph, or as a sibling. A kernel that does so sets Kernel.DeviceRuntime.
// See devlaunch.go for the rules.
//
// # Stream capture
//
// Ordinary stream code becomes a graph by capture: between
// Stream.BeginCapture and Stream.EndCapture, work issued to the stream is
// recorded as nodes instead of run, each depending on the work issued before
// it. Another stream joins the capture by waiting on an event recorded in a
// capturing stream (a fork), and must be joined back, by the origin stream
// waiting on an event recorded in it, before EndCapture. MallocAsync and
// FreeAsync become memory nodes (the address MallocAsync returns is the
// graph allocation's), and launching an Exec becomes a child graph node.
// Operations that cannot be captured (synchronizing or querying a capturing
// stream or a captured event, waiting on an event recorded outside the
// capture, synchronous Malloc, Free, Memcpy, Memset, Device.Synchronize)
// fail with CUDA's error and invalidate the capture: later work in it fails
// with ErrStreamCaptureInvalidated, and EndCapture returns that error and no
// graph.
//
// CUDA's capture modes decide which host threads may make the unsafe
// synchronous calls during a capture. Go has no thread identity programs
// see, so a Scope (Device.NewScope) stands for a host thread: calls made on
// a Device directly come from the device's main scope. In global mode an
// unsafe call from any scope in global interaction mode fails; in
// thread-local mode only one from the scope that began the capture; in
// relaxed mode none does. See capture.go for the full rule.
//
// # Conditional nodes
//
// A conditional node (ConditionalParams: IF with an optional ELSE body,
// WHILE, SWITCH) runs body graphs of its own depending on a value that
// kernels set on the device while the graph runs (Block.SetConditional,
// cudaGraphSetConditional), through a handle made with
// Graph.ConditionalHandleCreate: loops and branches without a return to the
// host. Adding the node creates its bodies (Node.ConditionalBodies), filled
// with the graph API or by capturing into them. See conditional.go for the
// rules.
//
// # Backends
//
// Open("host") (the default) runs everything in this process: device memory
// is a reserved range of virtual address space whose pages are committed on
// allocation, so a DevicePtr is a real address that Go kernels read and
// write with Slice; kernels are Go functions run block by block on a pool of
// GOMAXPROCS workers; streams are FIFO queues drained by goroutines. A fault
// on device memory inside a kernel fails it with ErrIllegalAddress, and like
// CUDA's sticky errors, an asynchronous failure makes every later call on the
// device return that error.
//
// Open("cuda") drives an NVIDIA GPU through the CUDA driver API, loaded at
// run time (no cgo, no toolkit to build). Streams, events, graphs, captures
// and memory nodes are the driver's own; kernels run their CUDA body,
// compiled with NVRTC on first use. NativeStream and its siblings give the
// driver handles to code that calls other CUDA libraries; work such code
// enqueues on a capturing stream is captured too; memory pools are the
// driver's. Not on cuda: the checking mode of WithMemCheck (ErrNotSupported).
//
// # Kernels
//
// A Kernel is defined once, with a Go body for the host backend and CUDA
// source for GPUs. The Go body is called once per thread block and loops over
// the block's threads itself:
//
//	var scale = &gpugraph.Kernel{
//		Name:   "scale",
//		Params: []gpugraph.ParamType{gpugraph.Pointer, gpugraph.Float32, gpugraph.Int32},
//		Go: func(b gpugraph.Block, a gpugraph.Args) {
//			x := gpugraph.Slice[float32](a.Ptr(0), a.Int(2))
//			for t := 0; t < b.Dim.X; t++ {
//				if i := b.Idx.X*b.Dim.X + t; i < len(x) {
//					x[i] *= a.Float32(1)
//				}
//			}
//		},
//		CUDA: `extern "C" __global__ void scale(float* x, float a, int n) {
//			int i = blockIdx.x * blockDim.x + threadIdx.x;
//			if (i < n) x[i] *= a;
//		}`,
//	}
//
// # Concurrency
//
// Every method is safe for concurrent use. Host functions (LaunchHostFunc,
// host nodes) run on the device's workers and must not call back into the
// package, as in CUDA.
package gpugraph
