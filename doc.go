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
// an accepted one takes effect at the next launch: a launch already queued
// or running keeps the parameters it was launched with.
//
// # Default streams
//
// Streams made by NewStream are non-blocking: their work never waits for
// another stream's unless an event says so. CUDA also has the legacy
// default stream (the "NULL stream", Device.StreamLegacy) and implicit
// synchronization between it and blocking streams
// (NewStreamWithFlags(StreamDefault), the stream cudaStreamCreate makes):
//
//   - work issued to the legacy stream waits for all work issued before it
//     to the device's blocking streams;
//   - work issued to a blocking stream waits for all work issued before it
//     to the legacy stream;
//   - non-blocking streams (NewStream, StreamNonBlocking) do neither;
//   - Synchronize and Query on the legacy stream cover the blocking
//     streams' work issued before them too;
//   - the synchronous Device.Memcpy and Device.Memset are legacy-stream
//     work (they also wait for all work on the device).
//
// The per-thread default stream (Device.StreamPerThread,
// Scope.StreamPerThread, cudaStreamPerThread) is a blocking stream: it
// synchronizes with the legacy stream. Go has no thread identity, so it is
// per Scope, the stand-in for a host thread in the rules of stream capture.
// The default streams cannot be destroyed.
//
// The legacy stream cannot be captured (ErrStreamCaptureUnsupported); the
// per-thread stream can. While a capture includes a blocking stream of the
// device, in any capture mode, any use of the legacy stream fails with
// ErrStreamCaptureImplicit, since its work would depend on the captured
// work, which does not run: work, Synchronize and Query invalidate the
// capture, asking the legacy stream's capture status does not. A capture
// of non-blocking streams leaves the legacy stream's work alone, but
// synchronizing the legacy stream is then a potentially unsafe call, like
// an instantiation: during a global capture it fails with
// ErrStreamCaptureUnsupported and invalidates the capture. On the cuda
// backend the driver orders and refuses all this itself; on the host
// backend gpugraph does, the same way.
//
// # Stream capture
//
// Ordinary stream code becomes a graph by capture: between
// Stream.BeginCapture and Stream.EndCapture, work issued to the stream is
// recorded as nodes of a graph instead of run. A capturing stream has a
// dependency set, at first empty (or the nodes given to
// Stream.BeginCaptureToGraph, which captures into an existing graph): each
// captured node depends on the set, then becomes it, so it depends on the
// work issued before it. Recording an event in a capturing stream captures
// the stream's dependency set in the event, and the next work of a stream
// that waits on the event depends on the event's nodes. Another stream
// joins the capture that way (a fork), and must be joined back, by the
// origin stream waiting on an event recorded in it, before EndCapture
// (ErrStreamCaptureUnjoined otherwise). MallocAsync and FreeAsync become
// memory nodes (the address MallocAsync returns is the graph allocation's),
// and launching an Exec becomes a child graph node. Capture follows what
// the CUDA 13.0 driver does.
//
// Operations that cannot be captured (synchronizing or querying a capturing
// stream or a captured event, waiting on an event recorded outside the
// capture, synchronous Malloc, Free, Memcpy, Memset, Device.Synchronize)
// fail with CUDA's error and invalidate the capture: later work in it fails
// with ErrStreamCaptureInvalidated, and EndCapture returns that error and no
// graph.
//
// CUDA's capture modes say which host threads may make the potentially
// unsafe calls (synchronous Malloc, Free, Memcpy and Memset) while a capture
// is under way. Go has no thread identity that programs see, so a Scope
// (Device.NewScope) stands for a CUDA host thread: calls made on a Device, a
// Stream or a Graph directly come from the device's main scope, and a
// Scope's methods make the same calls from it. A scope's interaction mode
// (Scope.ExchangeCaptureMode, cudaThreadExchangeStreamCaptureMode;
// CaptureModeGlobal unless exchanged) decides which captures its unsafe
// calls conflict with:
//
//   - CaptureModeGlobal: captures begun from the same scope in global or
//     thread-local mode, and global-mode captures begun from any scope;
//   - CaptureModeThreadLocal: captures begun from the same scope, unless
//     relaxed;
//   - CaptureModeRelaxed: none.
//
// So no unsafe call conflicts with a capture begun in relaxed mode. An
// unsafe call that conflicts fails (Malloc and Free with
// ErrStreamCaptureUnsupported, Memcpy and Memset with
// ErrStreamCaptureImplicit) and invalidates the captures it conflicts with.
// Device.Synchronize conflicts with every capture, relaxed ones included, as
// the driver's cudaDeviceSynchronize does. A capture begun in global or
// thread-local mode must be ended from the scope that began it: EndCapture
// from another scope fails with ErrStreamCaptureWrongThread and ends the
// capture. These are the host backend's rules; on the cuda backend the
// driver applies its own to OS threads, and gpugraph begins and ends every
// capture on one OS thread of the device.
//
// # Capture and replay
//
// Capture and CapturedGraph.Replay are the high-level form of stream
// capture, for loops that do the same work every iteration (a training or
// inference step), in the spirit of PyTorch's torch.cuda.CUDAGraph. A Go
// function that issues work on a stream is run a few times eagerly (warm-up:
// kernels compile, pools fill), captured once into a graph, instantiated,
// and then replayed as one launch per iteration. The work reads and writes
// static buffers: the caller copies each iteration's input into them before
// Replay and reads the outputs after.
//
// Memory the function allocates with Stream.MallocAsync and frees with
// Stream.FreeAsync becomes graph memory: fixed addresses, physical memory
// reused along the graph's order, shared with every other graph replayed in
// the same stream (what a shared memory pool gives in PyTorch). Memory it
// allocates and does not free is a static output: it keeps its address,
// stays readable after Replay, and is freed and allocated again by the next
// Replay (the graph is instantiated with InstantiateAutoFreeOnLaunch).
//
// # Stream-ordered allocation
//
// Stream.MallocAsync and Stream.FreeAsync allocate and free in stream order
// (cudaMallocAsync, cudaFreeAsync) from a MemPool (cudaMemPool_t): the
// device's default pool, or one made with Device.NewMemPool and allocated
// from with Stream.MallocFromPoolAsync. A pool hands out its address range
// as the driver's does: first fit, lowest address first, in multiples of 512
// bytes, with memory committed in 2 MiB granules. A granule that no
// allocation touches any more stays committed (reserved), so the next
// allocation costs nothing, until MemPool.TrimTo, or a synchronization that
// finds the pool holding more than its release threshold, returns it to the
// system.
//
// A free happens in two steps, as in CUDA: FreeAsync ends the allocation at
// once (it no longer counts as used and cannot be freed again), and the free
// itself, when the stream reaches it, returns the memory to the pool. In
// between, the memory is pending. As measured on the driver (CUDA 13.0,
// H100):
//
//   - a later allocation in the freeing stream takes pending memory before
//     any other, splitting a larger range: stream order makes that safe;
//   - another stream takes it only once the free has run
//     (cudaMemPoolReuseAllowOpportunistic), unless the pool has no other
//     memory left: then the pending memory is handed out and the allocating
//     stream waits for the free (cudaMemPoolReuseAllowInternalDependencies).
//
// The host backend does not model reuse across a Stream.Wait on an event
// recorded after the free (cudaMemPoolReuseFollowEventDependencies): such an
// allocation gets other memory.
//
// # Pinned host memory
//
// Device.MallocHost allocates pinned (page-locked) host memory, and
// Device.HostRegister pins memory the program has, such as a Go slice, as
// cudaMallocHost and cudaHostRegister do. Copies with it are what the GPU's
// copy engines do directly: Stream.Memcpy returns at once and the copy
// overlaps other streams' work, and a graph's memcpy node reads a pinned
// source when the node runs. With pageable memory (any other slice),
// Stream.Memcpy returns when the copy is done, and a memcpy node reads its
// source when the graph is launched, at the Exec.Launch call, as the driver
// stages it: a host node of the same launch that writes the source comes
// too late. Conditional bodies and graphs for device launch can copy only
// pinned host memory. See docs/memory.md.
//
// # Graph memory
//
// Alloc and free nodes (MemAllocParams, MemFreeParams, and MallocAsync and
// FreeAsync in a capture) give a graph memory of its own. An alloc node gets
// its address when it is added and keeps it for its life
// (MemAllocParams.Ptr). Within a graph, an allocation may reuse the
// addresses of allocations whose free node is an ancestor of its alloc node,
// and of no others; allocations of different graphs never share addresses.
//
// Physical memory is mapped when a launch starts, or ahead of it with
// Exec.Upload. Graphs launched into one stream share it, so the stream needs
// as much as its largest graph, not the sum. A graph launched into another
// stream is remapped to that stream's memory, in execution order after its
// previous launch. An allocation still live when its graph's launch ends
// keeps its memory until it is freed. Device.GraphMemStats reports the
// footprint; Device.TrimGraphMem returns what is not in use.
//
// An allocation's lifetime is checked twice. From the Launch that allocates
// it until the call that frees it (Device.Free, Stream.FreeAsync, or the
// Launch of a graph with a free node for it), it is outstanding: launching
// its graph again fails with ErrInvalidValue unless the graph was
// instantiated with InstantiateAutoFreeOnLaunch, and a second free fails
// with ErrInvalidValue, both at the call, as the driver does. In execution
// order it is live from its alloc node to its free: in the checking mode of
// WithMemCheck it can be accessed only then.
//
// As in CUDA, a graph with memory nodes cannot be cloned or embedded in a
// child graph node, nodes cannot be destroyed in it nor edges removed, it
// can have one executable graph at a time, and memory nodes cannot be added
// to a graph embedded in another (a child graph or a conditional body):
// each is refused with ErrNotSupported. A memcpy node added to a graph
// with the explicit API cannot copy to or from an allocation of another
// graph's alloc node (nor can one of a graph that is to become a child
// graph of the allocating one): it is refused with ErrInvalidValue, as
// the driver refuses it; kernels may use such memory.
//
// Exec.Update works across memory nodes as on the driver: the alloc and free
// nodes of the new graph, which are its own (other addresses, any sizes),
// pair with the executable graph's like any node. After the update the
// executable graph allocates the new graph's allocations, at the new graph's
// addresses, from its next launch on (a launch already queued keeps the old
// ones), and it is the new graph's one executable graph: the new graph
// cannot be instantiated while it lives, the old one can again, and an
// update back to the old graph works the same way. One node the driver does
// not update: a memset node on an allocation that the new graph frees
// refuses the whole update with UpdateError, naming the first such memset,
// before any other node's failure (a memcpy node into that allocation, or a
// memset on one the new graph does not free, is updated). The host backend
// also refuses, with UpdateErrorNotSupported, an update to a graph that has
// an executable graph already, and keeps an allocation that the executable
// graph's last launch left live as that executable graph's: its next launch
// frees it under InstantiateAutoFreeOnLaunch, and is refused while it is
// live otherwise (the driver's answers to these two are not measured yet).
//
// # Conditional nodes
//
// A conditional node (ConditionalParams; CUDA 12.4 and later, IF with an
// ELSE body and SWITCH 12.8 and later) runs graphs of its own, its bodies,
// depending on a value that kernels set on the device while the graph runs:
// loops and branches without a return to the host.
//
//   - ConditionalIf runs body 0 once if the value is non-zero when the node
//     is reached; with Size 2, body 1 (the ELSE body) runs once if it is
//     zero.
//   - ConditionalWhile checks the value before every iteration and runs
//     body 0 as long as it is non-zero; kernels in the body (or upstream of
//     the node) update it.
//   - ConditionalSwitch runs body n once if the value is n < Size, and no
//     body otherwise.
//
// The value is reached through a ConditionalHandle, created on a graph
// before the node with Graph.ConditionalHandleCreate and given to kernels as
// a Uint64 argument; kernels set it with Block.SetConditional (Go) or
// cudaGraphSetConditional (CUDA, declared by SetConditionalCUDA). A handle
// belongs to the graph it was created in and serves exactly one conditional
// node, in that graph or in a body nested in it. Each executable graph keeps
// its own values: with ConditionalAssignDefault a value is reset to the
// handle's default at the start of every launch; without it, CUDA leaves
// the value at the start of a launch undefined, and the host backend, like
// the H100, starts it at 0 (the default is not applied) and keeps it from
// one launch of the executable graph to the next.
//
// A WHILE loop runs alone in its graph: nothing else of the graph runs
// while it runs, because the CUDA driver loses the context (Xid 13) when a
// loop repeats its body beside other nodes of its graph. gpugraph orders
// the loop after the nodes before it and before the nodes after it in the
// backend's copy of the graph, on both backends so that they run the same
// graphs; the graph's own edges do not change. Work in other streams still
// runs beside it.
//
// Adding the node creates its bodies (Node.ConditionalBodies), empty graphs
// owned by the node, filled with the graph API or by capturing into them
// with Stream.BeginCaptureToGraph. A body may hold kernel, empty, memset,
// memcpy (device memory only), child graph and conditional nodes,
// recursively. Other nodes (host, event, external semaphore nodes, copies
// to or from host memory) are accepted when added, and instantiation then
// fails with ErrInvalidValue, as with the CUDA 13.0 driver; memory nodes are
// refused when added (ErrNotSupported). A body's nodes run on the
// conditional node's device: a node of another device in a body, or in a
// graph nested in one (added with Graph.AddNodeOn, or captured in a stream
// of another device), is likewise accepted when added and refused at
// instantiation (ErrInvalidValue, InstantiateMultipleDevicesNotSupported),
// as CUDA documents for conditional bodies. So is a memset, memcpy or kernel
// node in a body that uses another device's memory (a kernel: through a
// Pointer argument), even with peer access: the driver refuses such a
// memset itself, faults the launch of such a copy, and loses such a
// kernel's writes. As the driver documents, a graph
// that contains conditional nodes cannot be cloned or embedded in a child
// graph node, and can have one executable graph at a time (ErrNotSupported);
// instantiating a graph fails (ErrInvalidValue) while one of its handles
// serves no conditional node.
//
// A kernel that sets a handle of no conditional node of the graph launch it
// runs in (a handle of another graph, or any handle from a kernel launched
// into a stream) is a device-side error, undefined in CUDA: on the host
// backend the kernel fails with ErrLaunchFailure, which, like every kernel
// fault, is sticky.
//
// # Device graph launch
//
// A graph instantiated with InstantiateDeviceLaunch (only kernel, memcpy,
// memset and child graph nodes, copying device memory only) is a device
// graph: once uploaded (Exec.Upload, InstantiateUpload or a host launch), a
// kernel node of any graph can launch it with Block.LaunchGraph
// (cudaGraphLaunch in CUDA code), given its Exec.DeviceHandle. A kernel that
// does so sets Kernel.DeviceRuntime. As in CUDA's device graph launch, there
// are three modes:
//
//   - A fire-and-forget launch (FireAndForget) starts at once, as a child of
//     the launching graph's execution, which completes only when its
//     children have.
//   - A tail launch (TailLaunch) is queued; the queue runs once the
//     launching graph's execution (children included) is complete, in
//     order, each tail graph in place of the one before it, and a tail
//     graph's own tail launches run before the rest of the queue. A graph
//     may queue itself (Block.CurrentGraphExec; one such self launch pending
//     at a time): a loop on the device.
//   - A sibling launch (SiblingLaunch) is a fire-and-forget launch from the
//     launching graph's parent environment: it runs beside the launching
//     graph and does not hold back its tail launches.
//
// Every device launch belongs to the stream launch of the host-launched
// graph it descends from, its stream environment: the stream moves on only
// when all of it is done. A launch the device refuses (not uploaded, already
// running or queued, a second self tail launch, more than 120
// fire-and-forget launches in one execution or 255 pending tail launches)
// returns ErrInvalidValue (cudaErrorInvalidValue) to the kernel and nothing
// else happens, as on the GPU. Launching a graph that is not a device graph
// faults, on the GPU as on the host backend: the launch fails with
// ErrIllegalAddress, reported once (not sticky, as the driver does).
//
// # User objects
//
// A UserObject ties a resource's lifetime to the graphs and executable
// graphs that reference it: its destructor runs once the last reference is
// gone, after the launches using it have finished.
//
// # External semaphores
//
// An ExternalSemaphore (CUDA's external resource interoperability) is shared
// with code outside the device's streams. Stream operations
// (Stream.SignalExternalSemaphores, Stream.WaitExternalSemaphores) and
// signal and wait nodes (ExtSemaphoreSignalParams, ExtSemaphoreWaitParams)
// synchronise streams and graphs with that code. A timeline semaphore holds
// a 64-bit value that only grows: signalling sets it, and a wait returns
// once it has reached a given value. On the host backend the semaphore is
// gpugraph's own (Device.NewExternalSemaphore), signalled and waited on from
// Go. On the cuda backend the driver only imports semaphores made by a
// graphics API (Device.ImportExternalSemaphoreFD, a Vulkan semaphore's file
// descriptor), which that API signals and waits on.
//
// # Edge data
//
// EdgeData on an edge makes it a programmatic dependency: the downstream
// kernel may start once the upstream one triggers
// (Block.TriggerProgrammaticLaunchCompletion) and waits for its results with
// Block.GridDependencySynchronize. On the host backend a node started early
// reports completion to its own dependents only after the kernels that
// released it early have completed, as if it ended with
// GridDependencySynchronize: the order of the graph past that node is that
// of the graph without edge data.
//
// In stream capture, a capturing stream's dependency set is a set of half
// edges: nodes, each with the data of the edge that will join it to the next
// captured work. The data is given to Stream.BeginCaptureToGraphWithData
// and Stream.UpdateCaptureDependenciesWithData, reported by
// Stream.CaptureInfo, and used up by the next captured work: a kernel takes
// it, and other work is captured behind such half edges with ordinary
// edges, as the driver does. An event recorded in the capture carries the
// data with its nodes to the stream that waits on it. Half edges with data
// still pending at EndCapture are discarded.
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
// # Several devices
//
// DeviceCount tells how many devices a backend has; Open with WithOrdinal
// opens any of them, several at once from any goroutines, and
// Properties.Ordinal says which. On cuda they are the GPUs the driver
// reports; on host as many as SetHostDeviceCount or the environment
// variable GPUGRAPH_HOST_DEVICES say (default 1), each with memory and
// workers of its own, so programs of several devices and their tests run
// without a GPU.
//
// Peer access is CUDA's (the CUDA guide's graph memory chapter, section
// Peer Access): Device.EnablePeerAccess lets work of one device use
// another's memory, one way; enabling it twice fails with
// ErrPeerAccessAlreadyEnabled, disabling what is not enabled with
// ErrPeerAccessNotEnabled, and a device is not its own peer
// (ErrPeerAccessUnsupported). Copies between devices need no access. Peer
// access opens Malloc memory, not a pool's: memory of a pool is accessible
// where MemPool.SetAccess grants it, a graph
// allocation where its alloc node's access descriptors do (the resident
// device's access is implicit); a MallocAsync captured into a graph records
// the pool's access at that moment, and later changes to the pool do not
// change the captured node. On host, a memset or memset node of one device
// on another's memory without access is refused with ErrInvalidValue, and
// in the checking mode (WithMemCheck) a kernel given a pointer argument to
// such memory fails with ErrIllegalAddress, the fault it would be on a GPU
// (what a kernel computes from its pointers is not checked: it reaches
// memory through raw pointers). docs/driver-peer.txt holds the driver's
// answers to each of these questions, measured on two GPUs.
//
// A graph may hold work of several devices: Graph.AddNodeOn adds a kernel,
// copy, memset, host, empty or event node that runs on another device of
// the same backend (CUDA keeps this as a node's context). The graph is
// launched into a stream of its own device; edges across devices are
// honoured. Memory, conditional and child graph nodes run on their graph's
// device. Stream.Wait accepts an event of another device, and so a capture
// forks onto a stream of another device and joins back through events: the
// work captured in that stream becomes nodes of its device (the host
// backend's devices share one capture state, as a process's captures are
// one in CUDA).
// examples/peer-pipeline is a two-device pipeline built as one graph.
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
