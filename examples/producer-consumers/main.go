// Command producer-consumers ports the CUDA guide's graph memory example
// (cudaGraphInstantiateFlagAutoFreeOnLaunch): a single producer and several
// consumers. Each iteration the producer graph allocates two buffers and
// fills them; consumer 1 always reads buffer 1, consumer 2 reads buffer 2
// only on some iterations (every third here). Since which consumers run
// varies, no consumer can free the buffers; instead the producer is
// instantiated with InstantiateAutoFreeOnLaunch, so relaunching it frees the
// previous iteration's buffers, in stream order, before allocating them
// again. The launch loop never tracks the producer's allocations; only the
// last ones are freed explicitly, at the end.
//
// It shows that the same relaunch without the flag fails with
// ErrInvalidValue, checks each consumer's result every iteration, and checks
// that reserved graph memory (GraphMemStats) stays constant across the loop:
// auto-free leaks nothing.
//
// The guide builds all three graphs by stream capture (cudaMallocAsync and
// kernel launches in cudaStreamPerThread, a library call for consumer 1).
// Stream capture does not exist in gpugraph yet, so the graphs are built here
// with the explicit graph API: alloc nodes for the cudaMallocAsync calls and
// kernel nodes for the launches.
//
// The device is opened in checking mode (gpugraph.WithMemCheck): a consumer
// reading a buffer outside its lifetime fails with ErrIllegalAddress.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	gg "github.com/gpugraph/gpugraph"
)

const (
	threads    = 256     // block size of every kernel; a power of two (the reductions halve it)
	n          = 1 << 14 // int32 elements per buffer
	blocks     = 4       // blocks of each reduction; each writes one partial sum
	iterations = 12
)

// produce fills data1[i] = iter + i and data2[i] = (iter*i) % 1009, where
// iter is read from device memory, written each launch by the producer's
// memcpy node.
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
// x[:n]: consumer 1.
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
// share of x[:n]: consumer 2.
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

// expected is what consumers 1 and 2 compute for iteration iter.
func expected(iter int32) (sum1, sumSq2 int64) {
	for i := int32(0); i < n; i++ {
		sum1 += int64(iter + i)
		v := int64(iter * i % 1009)
		sumSq2 += v * v
	}
	return sum1, sumSq2
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

// run runs the example in checking mode.
func run(w io.Writer) error { return runWith(w, gg.WithMemCheck()) }

// producer is the producer graph and what it allocates.
type producer struct {
	g            *gg.Graph
	data1, data2 gg.DevicePtr
	iter         []int32 // the host value the memcpy node copies each launch
}

// newProducer builds the producer graph:
//
//	alloc data1 ──┐
//	alloc data2 ──┼──> produce
//	copy iter ────┘
//
// It frees nothing: the buffers outlive each launch for the consumers.
func newProducer(dev *gg.Device, param gg.DevicePtr) (*producer, error) {
	g, err := dev.NewGraph()
	if err != nil {
		return nil, err
	}
	p := &producer{g: g, iter: make([]int32, 1)}
	a1, data1, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 4 * n})
	if err != nil {
		return nil, err
	}
	a2, data2, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 4 * n})
	if err != nil {
		return nil, err
	}
	// The memcpy node reads p.iter when it runs, so the host sets the
	// iteration number there before each launch.
	cp, err := g.AddMemcpyNode(gg.HtoD(param, gg.Bytes(p.iter)))
	if err != nil {
		return nil, err
	}
	_, err = g.AddKernelNode(gg.KernelParams{Kernel: produce, Grid: gg.Dim1(n / threads), Block: gg.Dim1(threads),
		Args: []any{param, data1, data2, n}}, a1, a2, cp)
	if err != nil {
		return nil, err
	}
	p.data1, p.data2 = data1, data2
	return p, nil
}

// consumer is an instantiated graph that reduces a buffer into device memory
// and copies the partial sums to host memory.
type consumer struct {
	exec    *gg.Exec
	partial gg.DevicePtr
	result  []int64 // partial sums, valid after the launch completes
}

// newConsumer builds reduce ──> copy out, for buffer x. In the guide consumer
// 1 is a captured library call and consumer 2 a captured kernel launch.
func newConsumer(dev *gg.Device, k *gg.Kernel, x gg.DevicePtr) (*consumer, error) {
	partial, err := dev.Malloc(8 * blocks)
	if err != nil {
		return nil, err
	}
	c := &consumer{partial: partial, result: make([]int64, blocks)}
	g, err := dev.NewGraph()
	if err != nil {
		return nil, err
	}
	defer g.Destroy() // the executable graph does not need it
	r, err := g.AddKernelNode(gg.KernelParams{Kernel: k, Grid: gg.Dim1(blocks), Block: gg.Dim1(threads), Args: []any{x, partial, n}})
	if err != nil {
		return nil, err
	}
	if _, err := g.AddMemcpyNode(gg.DtoH(gg.Bytes(c.result), partial), r); err != nil {
		return nil, err
	}
	if c.exec, err = g.Instantiate(0); err != nil { // regular instantiation
		return nil, err
	}
	return c, nil
}

func (c *consumer) total() int64 {
	var s int64
	for _, v := range c.result {
		s += v
	}
	return s
}

func (c *consumer) destroy(dev *gg.Device) {
	c.exec.Destroy()
	dev.Free(c.partial)
}

// runWith runs the example on a host device opened with opts.
func runWith(w io.Writer, opts ...gg.Option) error {
	dev, err := gg.Open("host", opts...)
	if err != nil {
		return err
	}
	defer dev.Close()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	param, err := dev.Malloc(4)
	if err != nil {
		return err
	}
	defer dev.Free(param)

	prod, err := newProducer(dev, param)
	if err != nil {
		return err
	}
	defer prod.g.Destroy()
	fmt.Fprintf(w, "producer allocates data1 at %#x and data2 at %#x (%d bytes each)\n", uint64(prod.data1), uint64(prod.data2), 4*n)

	// Without AutoFreeOnLaunch, the producer cannot be relaunched while
	// its buffers from the previous launch are live.
	if err := withoutAutoFree(w, s, prod); err != nil {
		return err
	}

	// cudaGraphInstantiateWithFlags(&producer, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch)
	producerExec, err := prod.g.Instantiate(gg.InstantiateAutoFreeOnLaunch)
	if err != nil {
		return err
	}
	defer producerExec.Destroy()
	consumer1, err := newConsumer(dev, sum, prod.data1)
	if err != nil {
		return err
	}
	defer consumer1.destroy(dev)
	consumer2, err := newConsumer(dev, sumSquares, prod.data2)
	if err != nil {
		return err
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
		launchConsumer2 := it%3 == 0
		prod.iter[0] = it
		// The relaunch frees the previous iteration's buffers first.
		if err := producerExec.Launch(s); err != nil {
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
		// The guide's loop never waits. This one does, only so the host can
		// check each iteration's results and refill prod.iter (which the
		// next launch's memcpy node reads) safely.
		if err := s.Synchronize(); err != nil {
			return fmt.Errorf("iteration %d: %w", it, err)
		}
		want1, want2 := expected(it)
		line := fmt.Sprintf("iteration %2d: consumer 1 sum(data1) = %d", it, consumer1.total())
		if got := consumer1.total(); got != want1 {
			return fmt.Errorf("iteration %d: consumer 1 got %d, want %d", it, got, want1)
		}
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
		fmt.Fprintf(w, "%s; graph memory reserved %d KiB, used %d KiB\n", line, st.ReservedCurrent>>10, st.UsedCurrent>>10)
	}
	st, err := dev.GraphMemStats()
	if err != nil {
		return err
	}
	if reserved == 0 || st.ReservedHigh != reserved {
		return fmt.Errorf("reserved graph memory peaked at %d bytes during the loop, %d after each iteration", st.ReservedHigh, reserved)
	}
	fmt.Fprintf(w, "reserved graph memory constant over %d iterations: %d KiB (high-water mark %d KiB)\n",
		iterations, reserved>>10, st.ReservedHigh>>10)

	// The last iteration's buffers are still live; AutoFreeOnLaunch does not
	// free them, and neither would destroying the graphs.
	if err := s.FreeAsync(prod.data1); err != nil {
		return err
	}
	if err := s.FreeAsync(prod.data2); err != nil {
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
	if st.ReservedCurrent != 0 {
		return fmt.Errorf("graph memory reserved after freeing the buffers and trimming: %d bytes", st.ReservedCurrent)
	}
	fmt.Fprintln(w, "freed both buffers with FreeAsync; after trim reserved graph memory is 0")
	fmt.Fprintln(w, "OK")
	return nil
}

// withoutAutoFree instantiates the producer without the flag, launches it,
// and shows that launching it again before freeing its buffers fails with
// ErrInvalidValue; after FreeAsync of both buffers the relaunch is accepted.
func withoutAutoFree(w io.Writer, s *gg.Stream, prod *producer) error {
	e, err := prod.g.Instantiate(0)
	if err != nil {
		return err
	}
	// A graph with memory nodes can have one executable graph at a time:
	// this one goes before the AutoFreeOnLaunch one is made.
	defer e.Destroy()
	if err := e.Launch(s); err != nil {
		return err
	}
	err = e.Launch(s)
	if !errors.Is(err, gg.ErrInvalidValue) {
		return fmt.Errorf("relaunch without AutoFreeOnLaunch with the buffers live: got %v, want ErrInvalidValue", err)
	}
	fmt.Fprintf(w, "without AutoFreeOnLaunch, relaunch refused: %v\n", err)
	for _, p := range []gg.DevicePtr{prod.data1, prod.data2} {
		if err := s.FreeAsync(p); err != nil {
			return err
		}
	}
	if err := e.Launch(s); err != nil {
		return fmt.Errorf("relaunch after freeing the buffers: %w", err)
	}
	for _, p := range []gg.DevicePtr{prod.data1, prod.data2} {
		if err := s.FreeAsync(p); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "without AutoFreeOnLaunch, relaunch accepted once both buffers were freed with FreeAsync")
	return s.Synchronize()
}
