// Command capture-memnodes ports the stream capture versions of the CUDA
// guide's graph memory examples.
//
// §3.2 (stream capture): cudaMallocAsync and cudaFreeAsync issued to a
// capturing stream become alloc and free nodes, ordered by the captured
// stream dependencies:
//
//	cudaMallocAsync(&dptr, size, stream1);
//	kernel_A<<< ..., stream1 >>>(dptr, ...);
//	// Fork into stream2
//	cudaEventRecord(event1, stream1);
//	cudaStreamWaitEvent(stream2, event1);
//	kernel_B<<< ..., stream1 >>>(dptr, ...);
//	kernel_C<<< ..., stream2 >>>(dptr, ...);
//	// Join stream2 back to origin stream (stream1)
//	cudaEventRecord(event2, stream2);
//	cudaStreamWaitEvent(stream1, event2);
//	// Free depends on all work accessing the memory.
//	cudaFreeAsync(dptr, stream1);
//	// End capture in the origin stream
//	cudaStreamEndCapture(stream1, &graph);
//
// gives the graph of §3.1, without its kernels d and e:
//
//	alloc ──> A ──> B ──> free
//	          └───> C ───┘
//
// A writes a sequence into the allocation, B and C reduce its two halves.
// The captured graph is checked against the one built with the explicit
// API (gpugraph.StructurallyEqual), and launched several times with every
// result checked against the host.
//
// §3.4 (cudaGraphInstantiateFlagAutoFreeOnLaunch): the producer graph is
// captured from two MallocAsync calls and a produce kernel, and frees
// nothing; the two consumers are captured too. The producer is instantiated
// with InstantiateAutoFreeOnLaunch and every graph is destroyed right after
// its instantiation, as in the guide. The loop relaunches the producer,
// consumer 1 always and consumer 2 every third iteration, checks the
// consumers' results, and checks that reserved graph memory (GraphMemStats)
// stays constant: each relaunch frees the previous buffers. At the end both
// buffers are freed with FreeAsync.
//
// The device is opened in checking mode (gpugraph.WithMemCheck), so a
// kernel touching graph memory outside the allocation's lifetime fails with
// ErrIllegalAddress: the captured orderings are checked, not only claimed.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	gg "github.com/gpugraph/gpugraph"
)

const (
	threads    = 256     // block size of every kernel; a power of two (the reductions halve it)
	n          = 1 << 16 // int32 elements in each graph allocation (256 KiB)
	half       = n / 2   // B reduces x[:half], C reduces x[half:]
	blocks     = 8       // blocks of each reduction; each writes one partial sum
	launches   = 4       // launches of the §3.2 graph
	iterations = 12      // producer/consumer iterations of §3.4
)

// iotaFrom writes x[i] = *start + i. The start value is read from device
// memory, so the host can change it between launches without touching the
// graph.
var iotaFrom = &gg.Kernel{
	Name:   "iota_from",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[int32](a.Ptr(0), n)
		start := gg.Slice[int32](a.Ptr(1), 1)[0]
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				x[i] = start + int32(i)
			}
		}
	},
	CUDA: `extern "C" __global__ void iota_from(int* x, const int* start, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = *start + i;
}`,
}

// produce fills data1[i] = iter + i and data2[i] = (iter*i) % 1009, where
// iter is read from device memory.
var produce = &gg.Kernel{
	Name:   "produce",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(3)
		iter := gg.Slice[int32](a.Ptr(0), 1)[0]
		data1, data2 := gg.Slice[int32](a.Ptr(1), n), gg.Slice[int32](a.Ptr(2), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				data1[i] = iter + int32(i)
				data2[i] = iter * int32(i) % 1009
			}
		}
	},
	CUDA: `extern "C" __global__ void produce(const int* iter, int* data1, int* data2, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		data1[i] = *iter + i;
		data2[i] = *iter * i % 1009;
	}
}`,
}

// sum writes partial[blockIdx.x] = the sum of x[i] over the block's share of
// x[:n] (a grid-stride loop, then a tree reduction in shared memory).
var sum = &gg.Kernel{
	Name:   "sum_partial",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[int32](a.Ptr(0), n)
		gg.Slice[int64](a.Ptr(1), b.GridDim.X)[b.Idx.X] = reduceBlock(b, n, func(i int) int64 { return int64(x[i]) })
	},
	CUDA: reductionCUDA("sum_partial", "(long long)x[i]"),
}

// sumSquares writes partial[blockIdx.x] = the sum of x[i]² over the block's
// share of x[:n].
var sumSquares = &gg.Kernel{
	Name:   "sum_squares_partial",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[int32](a.Ptr(0), n)
		gg.Slice[int64](a.Ptr(1), b.GridDim.X)[b.Idx.X] = reduceBlock(b, n, func(i int) int64 { return int64(x[i]) * int64(x[i]) })
	},
	CUDA: reductionCUDA("sum_squares_partial", "(long long)x[i] * x[i]"),
}

// reduceBlock is the Go body of one block of a reduction: each thread
// accumulates term(i) over a grid-stride loop into its slot of the shared
// array, then the slots are added in a tree, one loop per __syncthreads()
// phase of the CUDA version. It returns what thread 0 writes.
func reduceBlock(b gg.Block, n int, term func(i int) int64) int64 {
	var shared [threads]int64
	sh := shared[:b.Dim.X]
	stride := b.GridDim.X * b.Dim.X
	for t := range sh {
		for i := b.Idx.X*b.Dim.X + t; i < n; i += stride {
			sh[t] += term(i)
		}
	}
	for k := len(sh) / 2; k > 0; k /= 2 {
		for t := 0; t < k; t++ {
			sh[t] += sh[t+k]
		}
	}
	return sh[0]
}

// reductionCUDA is the CUDA source of a block reduction of term over x.
func reductionCUDA(name, term string) string {
	return `extern "C" __global__ void ` + name + `(const int* x, long long* partial, int n) {
	__shared__ long long s[256];
	long long v = 0;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		v += ` + term + `;
	s[threadIdx.x] = v;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}`
}

// kernel returns the parameters of a launch of k with grid blocks of
// threads threads.
func kernel(k *gg.Kernel, grid int, args ...any) gg.KernelParams {
	return gg.KernelParams{Kernel: k, Grid: gg.Dim1(grid), Block: gg.Dim1(threads), Args: args}
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

// run runs the example in checking mode.
func run(w io.Writer) error { return runWith(w, gg.WithMemCheck()) }

// runWith runs the example on a host device opened with opts.
func runWith(w io.Writer, opts ...gg.Option) error {
	dev, err := gg.Open("host", opts...)
	if err != nil {
		return err
	}
	defer dev.Close()
	fmt.Fprintln(w, "§3.2: MallocAsync, fork/join and FreeAsync captured")
	if err := forkJoin(w, dev); err != nil {
		return fmt.Errorf("§3.2: %w", err)
	}
	fmt.Fprintln(w, "§3.4: captured producer and consumers, AutoFreeOnLaunch")
	if err := producerConsumers(w, dev); err != nil {
		return fmt.Errorf("§3.4: %w", err)
	}
	fmt.Fprintln(w, "OK")
	return nil
}

// forkJoin captures the stream code of the guide's stream capture example, checks the graph, and
// launches it.
func forkJoin(w io.Writer, dev *gg.Device) error {
	// Device memory the graph reads and writes but does not own: the start
	// of the sequence, and one partial sum per block for B and for C.
	start, err := dev.Malloc(4)
	if err != nil {
		return err
	}
	defer dev.Free(start)
	out1, err := dev.Malloc(8 * blocks)
	if err != nil {
		return err
	}
	defer dev.Free(out1)
	out2, err := dev.Malloc(8 * blocks)
	if err != nil {
		return err
	}
	defer dev.Free(out2)
	var streams [2]*gg.Stream
	var events [2]*gg.Event
	for i := range 2 {
		if streams[i], err = dev.NewStream(); err != nil {
			return err
		}
		defer streams[i].Destroy()
		if events[i], err = dev.NewEvent(0); err != nil {
			return err
		}
		defer events[i].Destroy()
	}
	s1, s2, event1, event2 := streams[0], streams[1], events[0], events[1]
	pool := dev.DefaultMemPool()
	poolBefore := pool.Stats()

	if err := s1.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return err
	}
	// Captured, MallocAsync returns the address of the alloc node's
	// allocation, which the captured kernels use.
	x, err := s1.MallocAsync(4 * n)
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return s1.LaunchKernel(kernel(iotaFrom, n/threads, x, start, n)) }, // A
		// Fork into stream 2.
		func() error { return s1.Record(event1) },
		func() error { return s2.Wait(event1) },
		func() error { return s1.LaunchKernel(kernel(sumSquares, blocks, x, out1, half)) }, // B
		// The wait on event1 becomes a dependency: C's node depends on
		// A's, and through it on the alloc node.
		func() error { return s2.LaunchKernel(kernel(sum, blocks, x+4*half, out2, n-half)) }, // C
		// Join stream 2 back to the origin stream.
		func() error { return s2.Record(event2) },
		func() error { return s1.Wait(event2) },
		// The free depends on all work accessing the memory.
		func() error { return s1.FreeAsync(x) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("step %d of the stream code: %w", i+1, err)
		}
	}
	g, err := s1.EndCapture()
	if err != nil {
		return err
	}
	defer g.Destroy()
	if st := pool.Stats(); st != poolBefore {
		return fmt.Errorf("the captured MallocAsync used the default pool: stats %+v, were %+v", st, poolBefore)
	}
	fmt.Fprintf(w, "  captured MallocAsync returned %#x; the default memory pool was not touched\n", uint64(x))

	fmt.Fprintln(w, "  captured graph:")
	nodes, err := describe(w, g)
	if err != nil {
		return err
	}
	p, err := nodes[0].Params()
	if err != nil {
		return err
	}
	if ap, ok := p.(gg.MemAllocParams); !ok || ap.Ptr != x || ap.Size != 4*n {
		return fmt.Errorf("first node's params %+v, want an alloc node of %d bytes at %#x", p, 4*n, uint64(x))
	}
	fmt.Fprintf(w, "  the alloc node's address is the one MallocAsync returned\n")

	// The same graph with the explicit API (the guide's node-API example without d and e).
	h, err := dev.NewGraph()
	if err != nil {
		return err
	}
	defer h.Destroy()
	allocNode, hx, err := h.AddMemAllocNode(gg.MemAllocParams{Size: 4 * n})
	if err != nil {
		return err
	}
	a, err := h.AddKernelNode(kernel(iotaFrom, n/threads, hx, start, n), allocNode)
	if err != nil {
		return err
	}
	b, err := h.AddKernelNode(kernel(sumSquares, blocks, hx, out1, half), a)
	if err != nil {
		return err
	}
	c, err := h.AddKernelNode(kernel(sum, blocks, hx+4*half, out2, n-half), a)
	if err != nil {
		return err
	}
	if _, err := h.AddMemFreeNode(hx, b, c); err != nil {
		return err
	}
	if !gg.StructurallyEqual(g, h) {
		return errors.New("the captured graph differs from alloc -> A -> {B, C} -> free")
	}
	fmt.Fprintln(w, "  StructurallyEqual(captured, explicit alloc -> A -> {B, C} -> free) = true")

	exec, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer exec.Destroy()
	var first gg.GraphMemStats
	for l := 1; l <= launches; l++ {
		v := int32(1000 * l)
		if err := dev.Memcpy(gg.HtoD(start, gg.Bytes([]int32{v}))); err != nil {
			return err
		}
		// The graph frees what it allocates, so it can be relaunched
		// without AutoFreeOnLaunch.
		if err := exec.Launch(s1); err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		if err := s1.Synchronize(); err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		sq, sm, err := readSums(dev, out1, out2)
		if err != nil {
			return err
		}
		wantSq, wantSm := expectedHalves(v)
		if sq != wantSq || sm != wantSm {
			return fmt.Errorf("launch %d (start %d): B gave %d, C gave %d; want %d and %d", l, v, sq, sm, wantSq, wantSm)
		}
		st, err := dev.GraphMemStats()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  launch %d: x[i] = %d+i; B: sum x² (first half) = %d; C: sum x (second half) = %d; graph memory used %d KiB, reserved %d KiB\n",
			l, v, sq, sm, st.UsedCurrent>>10, st.ReservedCurrent>>10)
		// The physical memory stays associated with the executable graph
		// between launches (until TrimGraphMem), so it counts as used; but
		// a graph that frees its allocation needs no more at each launch.
		if l == 1 {
			first = st
		} else if st.UsedCurrent != first.UsedCurrent || st.ReservedCurrent != first.ReservedCurrent {
			return fmt.Errorf("launch %d: graph memory used %d, reserved %d bytes; after launch 1 %d and %d",
				l, st.UsedCurrent, st.ReservedCurrent, first.UsedCurrent, first.ReservedCurrent)
		}
	}
	fmt.Fprintf(w, "  graph memory the same after each of the %d launches\n", launches)
	return nil
}

// describe prints g's nodes, each with its dependencies, and returns them.
func describe(w io.Writer, g *gg.Graph) ([]*gg.Node, error) {
	nodes, err := g.Nodes()
	if err != nil {
		return nil, err
	}
	edges := 0
	for _, nd := range nodes {
		deps, err := nd.Dependencies()
		if err != nil {
			return nil, err
		}
		edges += len(deps)
		from := "(root)"
		if len(deps) > 0 {
			names := make([]string, len(deps))
			for i, d := range deps {
				names[i] = d.String()
			}
			from = strings.Join(names, ", ")
		}
		fmt.Fprintf(w, "    %v  <-  %s\n", nd, from)
	}
	fmt.Fprintf(w, "    %d nodes, %d edges\n", len(nodes), edges)
	return nodes, nil
}

// readSums copies the partial sums of B and C to the host and adds them up.
func readSums(dev *gg.Device, out1, out2 gg.DevicePtr) (int64, int64, error) {
	var sums [2]int64
	for j, p := range []gg.DevicePtr{out1, out2} {
		part := make([]int64, blocks)
		if err := dev.Memcpy(gg.DtoH(gg.Bytes(part), p)); err != nil {
			return 0, 0, err
		}
		for _, v := range part {
			sums[j] += v
		}
	}
	return sums[0], sums[1], nil
}

// expectedHalves is what B and C compute when A starts the sequence at v.
func expectedHalves(v int32) (sq, sm int64) {
	for i := int64(0); i < n; i++ {
		if x := int64(v) + i; i < half {
			sq += x * x
		} else {
			sm += x
		}
	}
	return sq, sm
}

// expectedConsumers is what consumers 1 and 2 compute for iteration iter.
func expectedConsumers(iter int32) (sum1, sumSq2 int64) {
	for i := int32(0); i < n; i++ {
		sum1 += int64(iter + i)
		v := int64(iter * i % 1009)
		sumSq2 += v * v
	}
	return sum1, sumSq2
}

// consumer is an instantiated captured graph that reduces a buffer into
// device memory and copies the partial sums to host memory.
type consumer struct {
	exec    *gg.Exec
	partial gg.DevicePtr
	result  []int64 // partial sums, valid after the launch completes
}

func (c *consumer) total() int64 {
	var s int64
	for _, v := range c.result {
		s += v
	}
	return s
}

// captureConsumer captures, in cs, a reduction of buffer x by k and a copy
// of the partial sums to the host, and instantiates it. In the guide
// consumer 1 is a captured library call and consumer 2 a captured kernel.
func captureConsumer(w io.Writer, dev *gg.Device, cs *gg.Stream, name string, k *gg.Kernel, x gg.DevicePtr) (*consumer, error) {
	partial, err := dev.Malloc(8 * blocks)
	if err != nil {
		return nil, err
	}
	c := &consumer{partial: partial, result: make([]int64, blocks)}
	if err := cs.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return nil, err
	}
	if err := cs.LaunchKernel(kernel(k, blocks, x, partial, n)); err != nil {
		return nil, err
	}
	if err := cs.Memcpy(gg.DtoH(gg.Bytes(c.result), partial)); err != nil {
		return nil, err
	}
	g, err := cs.EndCapture()
	if err != nil {
		return nil, err
	}
	defer g.Destroy() // cudaGraphDestroy(graph): the executable graph does not need it
	fmt.Fprintf(w, "  %s graph:\n", name)
	if _, err := describe(w, g); err != nil {
		return nil, err
	}
	if c.exec, err = g.Instantiate(0); err != nil { // regular instantiation
		return nil, err
	}
	return c, nil
}

func (c *consumer) destroy(dev *gg.Device) {
	c.exec.Destroy()
	dev.Free(c.partial)
}

// producerConsumers is the guide's AutoFreeOnLaunch example with every graph captured.
func producerConsumers(w io.Writer, dev *gg.Device) error {
	// cs stands for cudaStreamPerThread, where the guide captures; s for
	// myStream, where it launches.
	cs, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer cs.Destroy()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	// The iteration number the produce kernel reads.
	param, err := dev.Malloc(4)
	if err != nil {
		return err
	}
	defer dev.Free(param)

	// Create the producer graph, which allocates memory and populates it.
	if err := cs.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return err
	}
	data1, err := cs.MallocAsync(4 * n)
	if err != nil {
		return err
	}
	data2, err := cs.MallocAsync(4 * n)
	if err != nil {
		return err
	}
	if err := cs.LaunchKernel(kernel(produce, n/threads, param, data1, data2, n)); err != nil {
		return err
	}
	g, err := cs.EndCapture()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  producer graph (data1 at %#x, data2 at %#x, %d bytes each):\n", uint64(data1), uint64(data2), 4*n)
	if _, err := describe(w, g); err != nil {
		g.Destroy()
		return err
	}
	// Captured in one stream, the work is a chain.
	h, err := dev.NewGraph()
	if err != nil {
		g.Destroy()
		return err
	}
	a1, hd1, err1 := h.AddMemAllocNode(gg.MemAllocParams{Size: 4 * n})
	a2, hd2, err2 := h.AddMemAllocNode(gg.MemAllocParams{Size: 4 * n}, a1)
	_, err3 := h.AddKernelNode(kernel(produce, n/threads, param, hd1, hd2, n), a2)
	equal := gg.StructurallyEqual(g, h)
	h.Destroy()
	if err := errors.Join(err1, err2, err3); err != nil {
		g.Destroy()
		return err
	}
	if !equal {
		g.Destroy()
		return errors.New("the captured producer differs from alloc -> alloc -> produce")
	}
	fmt.Fprintln(w, "  StructurallyEqual(captured producer, explicit alloc -> alloc -> produce) = true")
	// cudaGraphInstantiateWithFlags(&producer, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
	// cudaGraphDestroy(graph);
	producer, err := g.Instantiate(gg.InstantiateAutoFreeOnLaunch)
	g.Destroy()
	if err != nil {
		return err
	}
	defer producer.Destroy()

	consumer1, err := captureConsumer(w, dev, cs, "consumer 1", sum, data1)
	if err != nil {
		return fmt.Errorf("consumer 1: %w", err)
	}
	defer consumer1.destroy(dev)
	consumer2, err := captureConsumer(w, dev, cs, "consumer 2", sumSquares, data2)
	if err != nil {
		return fmt.Errorf("consumer 2: %w", err)
	}
	defer consumer2.destroy(dev)

	// Start the loop with no graph memory cached and fresh high-water
	// marks, so that the marks at the end cover exactly the loop.
	if err := dev.TrimGraphMem(); err != nil {
		return err
	}
	if err := dev.ResetGraphMemHigh(); err != nil {
		return err
	}
	var reserved uint64
	for it := int32(1); it <= iterations; it++ {
		launchConsumer2 := it%3 == 0 // determineAction
		if err := dev.Memcpy(gg.HtoD(param, gg.Bytes([]int32{it}))); err != nil {
			return err
		}
		// From the second iteration on, the relaunch frees the previous
		// iteration's buffers first.
		if err := producer.Launch(s); err != nil {
			return fmt.Errorf("iteration %d: producer: %w", it, err)
		}
		if err := consumer1.exec.Launch(s); err != nil {
			return fmt.Errorf("iteration %d: consumer 1: %w", it, err)
		}
		if launchConsumer2 {
			if err := consumer2.exec.Launch(s); err != nil {
				return fmt.Errorf("iteration %d: consumer 2: %w", it, err)
			}
		}
		// The guide's loop never waits; this one does, only so that the
		// host can check each iteration and set the next iteration number.
		if err := s.Synchronize(); err != nil {
			return fmt.Errorf("iteration %d: %w", it, err)
		}
		want1, want2 := expectedConsumers(it)
		if got := consumer1.total(); got != want1 {
			return fmt.Errorf("iteration %d: consumer 1 got %d, want %d", it, got, want1)
		}
		line := fmt.Sprintf("iteration %2d: consumer 1 sum(data1) = %d", it, consumer1.total())
		if launchConsumer2 {
			if got := consumer2.total(); got != want2 {
				return fmt.Errorf("iteration %d: consumer 2 got %d, want %d", it, got, want2)
			}
			line += fmt.Sprintf(", consumer 2 sum(data2²) = %d", consumer2.total())
		}
		st, err := dev.GraphMemStats()
		if err != nil {
			return err
		}
		if it == 1 {
			reserved = st.ReservedCurrent
		} else if st.ReservedCurrent != reserved {
			return fmt.Errorf("iteration %d: reserved graph memory %d bytes, was %d after iteration 1: the producer's buffers leak",
				it, st.ReservedCurrent, reserved)
		}
		fmt.Fprintf(w, "  %s; graph memory reserved %d KiB, used %d KiB\n", line, st.ReservedCurrent>>10, st.UsedCurrent>>10)
	}
	st, err := dev.GraphMemStats()
	if err != nil {
		return err
	}
	if reserved == 0 || st.ReservedHigh != reserved {
		return fmt.Errorf("reserved graph memory peaked at %d bytes during the loop, %d after each iteration", st.ReservedHigh, reserved)
	}
	fmt.Fprintf(w, "  reserved graph memory constant over %d iterations: %d KiB (high-water mark %d KiB)\n",
		iterations, reserved>>10, st.ReservedHigh>>10)

	// cudaFreeAsync(data1, myStream); cudaFreeAsync(data2, myStream): the
	// last iteration's buffers are still live, and neither AutoFreeOnLaunch
	// nor destroying the graphs frees them.
	if err := s.FreeAsync(data1); err != nil {
		return err
	}
	if err := s.FreeAsync(data2); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := dev.TrimGraphMem(); err != nil {
		return err
	}
	if st, err = dev.GraphMemStats(); err != nil {
		return err
	}
	if st.ReservedCurrent != 0 || st.UsedCurrent != 0 {
		return fmt.Errorf("graph memory left after freeing the buffers and trimming: used %d, reserved %d bytes", st.UsedCurrent, st.ReservedCurrent)
	}
	fmt.Fprintln(w, "  freed both buffers with FreeAsync; after trim, graph memory used and reserved are 0")
	return nil
}
