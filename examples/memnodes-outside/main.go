// Command memnodes-outside ports the CUDA guide's graph memory example of
// accessing and freeing graph memory outside the allocating graph. A graph that allocates memory and
// does not free it leaves the allocation live after its launch; later work
// may use it and free it, provided that work is ordered after the alloc node
// and the free is ordered after every use. The guide's three ways of ordering
// them are run here, each for several rounds:
//
//	(a) a single stream: launch the allocating graph, a kernel in the same
//	    stream uses the memory, FreeAsync in the same stream frees it;
//	(b) events between streams: the allocating graph runs in stream 1, an
//	    event carries the order to stream 2 where a kernel uses the memory,
//	    another carries it to stream 3 where a graph with a kernel and a free
//	    node reads and frees it;
//	(c) event nodes in the graphs: the allocating graph records an event after
//	    its alloc node, and the freeing graph waits for it and for stream 2's
//	    use with event wait nodes before its free node.
//
// Each round checks the data computed in the allocation, and GraphMemStats is
// read while the allocation is live and after everything is freed and
// TrimGraphMem has run, when reserved graph memory must be 0.
//
// The device is opened in checking mode (gpugraph.WithMemCheck): a use of the
// allocation outside its lifetime fails with ErrIllegalAddress instead of
// silently touching other memory.
package main

import (
	"fmt"
	"io"
	"os"

	gg "github.com/gpugraph/gpugraph"
)

const (
	threads = 256     // block size of every kernel; a power of two (the reduction halves it)
	n       = 1 << 16 // int32 elements in the graph allocation (256 KiB)
	size    = 4 * n   // bytes
	half    = n / 2
	rounds  = 3 // allocate, use and free this many times per ordering
)

// affine writes x[i] = a*i + b for i < n.
var affine = &gg.Kernel{
	Name:   "affine",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(1)
		x := gg.Slice[int32](a.Ptr(0), n)
		k, c := a.Int32(2), a.Int32(3)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				x[i] = k*int32(i) + c
			}
		}
	},
	CUDA: `extern "C" __global__ void affine(int* x, int n, int a, int b) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = a * i + b;
}`,
}

// sum writes partial[blockIdx.x] = the sum of x[i] over the block's share of
// x[:n] (a grid-stride loop, then a tree reduction in shared memory). Run
// with one block, partial[0] is the whole sum.
var sum = &gg.Kernel{
	Name:   "sum_partial",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[int32](a.Ptr(0), n)
		var shared [threads]int64
		sh := shared[:b.Dim.X]
		for t := range sh {
			for i := b.Idx.X*b.Dim.X + t; i < n; i += b.GridDim.X * b.Dim.X {
				sh[t] += int64(x[i])
			}
		}
		for k := len(sh) / 2; k > 0; k /= 2 { // one step per __syncthreads()
			for t := 0; t < k; t++ {
				sh[t] += sh[t+k]
			}
		}
		gg.Slice[int64](a.Ptr(1), b.GridDim.X)[b.Idx.X] = sh[0]
	},
	CUDA: `extern "C" __global__ void sum_partial(const int* x, long long* partial, int n) {
	__shared__ long long s[256];
	long long v = 0;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		v += x[i];
	s[threadIdx.x] = v;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}`,
}

// affineSum is the sum of a*i + b over i in [lo, hi).
func affineSum(a, b int32, lo, hi int) int64 {
	var s int64
	for i := lo; i < hi; i++ {
		s += int64(a*int32(i) + b)
	}
	return s
}

// fillParams is a launch of affine over x[:n], one thread per element.
func fillParams(x gg.DevicePtr, n int, a, b int32) gg.KernelParams {
	return gg.KernelParams{Kernel: affine, Grid: gg.Dim1((n + threads - 1) / threads), Block: gg.Dim1(threads), Args: []any{x, n, a, b}}
}

// sumParams is a one-block launch of sum: out[0] = the sum of x[:n].
func sumParams(x, out gg.DevicePtr, n int) gg.KernelParams {
	return gg.KernelParams{Kernel: sum, Grid: gg.Dim1(1), Block: gg.Dim1(threads), Args: []any{x, out, n}}
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
	for _, sc := range []struct {
		name string
		run  func(io.Writer, *gg.Device) error
	}{
		{"(a) single stream", singleStream},
		{"(b) events between streams", eventsBetweenStreams},
		{"(c) event nodes in the graphs", eventNodes},
	} {
		fmt.Fprintln(w, sc.name)
		if err := sc.run(w, dev); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		// Everything is freed; trimming returns all graph memory.
		if err := dev.TrimGraphMem(); err != nil {
			return err
		}
		st, err := dev.GraphMemStats()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  after trim:          %s\n", fmtStats(st))
		if st.ReservedCurrent != 0 || st.UsedCurrent != 0 {
			return fmt.Errorf("%s: graph memory left after freeing everything and trimming: %s", sc.name, fmtStats(st))
		}
	}
	fmt.Fprintln(w, "OK")
	return nil
}

// allocGraph returns an instantiated graph with one alloc node and no free
// node, and the allocation's address. If ev is not nil, an event record node
// after the alloc node records it, as in ordering (c).
func allocGraph(dev *gg.Device, ev *gg.Event) (*gg.Graph, *gg.Exec, gg.DevicePtr, error) {
	g, err := dev.NewGraph()
	if err != nil {
		return nil, nil, 0, err
	}
	allocNode, x, err := g.AddMemAllocNode(gg.MemAllocParams{Size: size})
	if err != nil {
		return nil, nil, 0, err
	}
	if ev != nil {
		// The record node depends on the alloc node: once the event has
		// completed, the allocation is live.
		if _, err := g.AddEventRecordNode(ev, allocNode); err != nil {
			return nil, nil, 0, err
		}
	}
	e, err := g.Instantiate(0)
	if err != nil {
		return nil, nil, 0, err
	}
	return g, e, x, nil
}

// liveStats reads and checks the graph memory statistics while the
// allocation is live.
func liveStats(w io.Writer, dev *gg.Device) error {
	st, err := dev.GraphMemStats()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  allocation live:     %s\n", fmtStats(st))
	if st.UsedCurrent < size || st.ReservedCurrent < st.UsedCurrent {
		return fmt.Errorf("while a %d-byte allocation is live: %s", size, fmtStats(st))
	}
	return nil
}

// freedStats reports the statistics after the frees, before trimming: the
// memory stays reserved for the next launch.
func freedStats(w io.Writer, dev *gg.Device) error {
	st, err := dev.GraphMemStats()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  all rounds freed:    %s\n", fmtStats(st))
	return nil
}

func fmtStats(st gg.GraphMemStats) string {
	const mib = 1 << 20
	return fmt.Sprintf("used %.1f MiB (high %.1f), reserved %.1f MiB (high %.1f)",
		float64(st.UsedCurrent)/mib, float64(st.UsedHigh)/mib, float64(st.ReservedCurrent)/mib, float64(st.ReservedHigh)/mib)
}

// singleStream is ordering (a). The guide:
//
//	cudaGraphLaunch(allocGraphExec, stream);
//	kernel<<< …, stream >>>(dptr, …);
//	cudaFreeAsync(dptr, stream);
//
// Here the kernel fills the allocation and a second kernel in the same
// stream sums it into device memory from Malloc, which the host checks.
func singleStream(w io.Writer, dev *gg.Device) error {
	g, allocExec, x, err := allocGraph(dev, nil)
	if err != nil {
		return err
	}
	defer g.Destroy()
	defer allocExec.Destroy()
	out, err := dev.Malloc(8)
	if err != nil {
		return err
	}
	defer dev.Free(out)
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()

	for r := 1; r <= rounds; r++ {
		a, b := int32(r), int32(10*r)
		var got [1]int64
		// Everything is in stream order: the launch, the uses, the copy of
		// the result, the free.
		steps := []func() error{
			func() error { return allocExec.Launch(s) },
			func() error { return s.LaunchKernel(fillParams(x, n, a, b)) },
			func() error { return s.LaunchKernel(sumParams(x, out, n)) },
			func() error { return s.Memcpy(gg.DtoH(gg.Bytes(got[:]), out)) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		if r == 1 {
			// Synchronizing here is not part of the ordering; it only lets
			// the host look at the statistics while the allocation is live.
			if err := s.Synchronize(); err != nil {
				return err
			}
			if err := liveStats(w, dev); err != nil {
				return err
			}
		}
		if err := s.FreeAsync(x); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if want := affineSum(a, b, 0, n); got[0] != want {
			return fmt.Errorf("round %d: sum %d, want %d", r, got[0], want)
		}
		fmt.Fprintf(w, "  round %d: allocation at %#x filled with %d*i+%d in the stream, sum %d\n", r, uint64(x), a, b, got[0])
	}
	return freedStats(w, dev)
}

// eventsBetweenStreams is ordering (b). The guide:
//
//	cudaGraphLaunch(allocGraphExec, allocStream);
//	cudaEventRecord(allocEvent, allocStream);
//	cudaStreamWaitEvent(stream2, allocEvent);
//	kernel<<< …, stream2 >>> (dptr, …);
//	cudaEventRecord(streamUseDoneEvent, stream2);
//	cudaStreamWaitEvent(stream3, streamUseDoneEvent);
//	cudaGraphLaunch(freeGraphExec, stream3);
//
// The freeing graph is kernel a ──> free: a sums the allocation (which the
// kernel in stream 2 filled) into device memory from Malloc, then the free
// node ends the allocation's lifetime.
func eventsBetweenStreams(w io.Writer, dev *gg.Device) error {
	g, allocExec, x, err := allocGraph(dev, nil)
	if err != nil {
		return err
	}
	defer g.Destroy()
	defer allocExec.Destroy()
	out, err := dev.Malloc(8)
	if err != nil {
		return err
	}
	defer dev.Free(out)

	freeGraph, err := dev.NewGraph()
	if err != nil {
		return err
	}
	defer freeGraph.Destroy()
	a, err := freeGraph.AddKernelNode(sumParams(x, out, n))
	if err != nil {
		return err
	}
	if _, err := freeGraph.AddMemFreeNode(x, a); err != nil {
		return err
	}
	freeExec, err := freeGraph.Instantiate(0)
	if err != nil {
		return err
	}
	defer freeExec.Destroy()

	streams, events, err := streamsAndEvents(dev)
	if err != nil {
		return err
	}
	defer destroy(streams, events)
	s1, s2, s3 := streams[0], streams[1], streams[2]
	allocEvent, useDone, freed := events[0], events[1], events[2]

	// One result slot per round, copied out in stream 3 after each freeing
	// graph, so the rounds run without the host waiting between them.
	got := make([]int64, rounds)
	for r := 1; r <= rounds; r++ {
		a, b := int32(r), int32(-7*r)
		steps := []func() error{
			// The next allocation must not start before this round's free
			// has run (the first round's wait does nothing: the event has
			// not been recorded yet).
			func() error { return s1.Wait(freed) },
			func() error { return allocExec.Launch(s1) },
			func() error { return s1.Record(allocEvent) },
			func() error { return s2.Wait(allocEvent) },
			func() error { return s2.LaunchKernel(fillParams(x, n, a, b)) },
			func() error { return s2.Record(useDone) },
			func() error { return s3.Wait(useDone) },
		}
		if r == 1 {
			steps = append(steps, func() error {
				// Not part of the ordering: the host waits for stream 2's
				// use only to look at the statistics while the allocation
				// is live.
				if err := useDone.Synchronize(); err != nil {
					return err
				}
				return liveStats(w, dev)
			})
		}
		steps = append(steps,
			// It is now safe to launch the freeing graph, which also reads
			// the memory.
			func() error { return freeExec.Launch(s3) },
			func() error { return s3.Memcpy(gg.DtoH(gg.Bytes(got[r-1:r]), out)) },
			func() error { return s3.Record(freed) },
		)
		for _, step := range steps {
			if err := step(); err != nil {
				return fmt.Errorf("round %d: %w", r, err)
			}
		}
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	for r := 1; r <= rounds; r++ {
		a, b := int32(r), int32(-7*r)
		if want := affineSum(a, b, 0, n); got[r-1] != want {
			return fmt.Errorf("round %d: the freeing graph summed %d, want %d", r, got[r-1], want)
		}
		fmt.Fprintf(w, "  round %d: allocation at %#x filled with %d*i%+d in stream 2, summed and freed by a graph in stream 3: %d\n",
			r, uint64(x), a, b, got[r-1])
	}
	return freedStats(w, dev)
}

// eventNodes is ordering (c). The allocating graph is alloc ──> record
// allocEvent; the consuming and freeing graph is
//
//	wait allocEvent ──> kernel ──┐
//	                             ├──> sum ──> free
//	wait streamUseDone ──────────┘
//
// and the host issues
//
//	cudaGraphLaunch(allocGraphExec, allocStream);
//	cudaStreamWaitEvent(stream2, allocEvent);
//	kernel<<< …, stream2 >>> (dptr, …);
//	cudaStreamRecordEvent(streamUseDoneEvent, stream2);
//	cudaGraphLaunch(waitAndFreeGraphExec, stream3);
//
// The kernel in stream 2 fills the first half of the allocation while the
// graph's kernel node, ordered after the alloc node by the allocReady wait
// node only, fills the second half: they run concurrently, so they write
// disjoint halves. In the guide the free node depends on the kernel node and
// the streamUseDone wait node; here a sum kernel node that depends on both
// reads the whole allocation into device memory from Malloc, and the free
// node depends on it, which orders the free after every use as before.
func eventNodes(w io.Writer, dev *gg.Device) error {
	streams, events, err := streamsAndEvents(dev)
	if err != nil {
		return err
	}
	defer destroy(streams, events)
	s1, s2, s3 := streams[0], streams[1], streams[2]
	allocEvent, useDone, freed := events[0], events[1], events[2]

	g, allocExec, x, err := allocGraph(dev, allocEvent)
	if err != nil {
		return err
	}
	defer g.Destroy()
	defer allocExec.Destroy()
	out, err := dev.Malloc(8)
	if err != nil {
		return err
	}
	defer dev.Free(out)

	const ka, kb = 3, 5 // what the graph's kernel node writes: ka*i+kb over the second half
	fg, err := dev.NewGraph()
	if err != nil {
		return err
	}
	defer fg.Destroy()
	useDoneNode, err := fg.AddEventWaitNode(useDone)
	if err != nil {
		return err
	}
	allocReadyNode, err := fg.AddEventWaitNode(allocEvent)
	if err != nil {
		return err
	}
	// allocReadyNode orders the kernel node after the alloc node of the
	// other graph.
	kernelNode, err := fg.AddKernelNode(fillParams(x+4*half, n-half, ka, kb), allocReadyNode)
	if err != nil {
		return err
	}
	sumNode, err := fg.AddKernelNode(sumParams(x, out, n), kernelNode, useDoneNode)
	if err != nil {
		return err
	}
	// The free node must follow both the graph's own users and the
	// external ones (through useDoneNode).
	if _, err := fg.AddMemFreeNode(x, sumNode); err != nil {
		return err
	}
	waitAndFreeExec, err := fg.Instantiate(0)
	if err != nil {
		return err
	}
	defer waitAndFreeExec.Destroy()

	got := make([]int64, rounds)
	for r := 1; r <= rounds; r++ {
		a, b := int32(r), int32(100*r)
		steps := []func() error{
			func() error { return s1.Wait(freed) }, // as in (b): after the previous round's free
			func() error { return allocExec.Launch(s1) },
			// Waiting for the event recorded by the graph's record node
			// orders stream 2 after the alloc node.
			func() error { return s2.Wait(allocEvent) },
			func() error { return s2.LaunchKernel(fillParams(x, half, a, b)) },
			func() error { return s2.Record(useDone) },
		}
		if r == 1 {
			steps = append(steps, func() error {
				// Not part of the ordering: wait for the allocating graph and
				// stream 2 only to look at the statistics while the
				// allocation is live.
				if err := s1.Synchronize(); err != nil {
					return err
				}
				if err := useDone.Synchronize(); err != nil {
					return err
				}
				return liveStats(w, dev)
			})
		}
		steps = append(steps,
			// The event wait nodes order the graph after the alloc node and
			// after stream 2's use; the host orders nothing.
			func() error { return waitAndFreeExec.Launch(s3) },
			func() error { return s3.Memcpy(gg.DtoH(gg.Bytes(got[r-1:r]), out)) },
			func() error { return s3.Record(freed) },
		)
		for _, step := range steps {
			if err := step(); err != nil {
				return fmt.Errorf("round %d: %w", r, err)
			}
		}
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	for r := 1; r <= rounds; r++ {
		a, b := int32(r), int32(100*r)
		want := affineSum(a, b, 0, half) + affineSum(ka, kb, 0, n-half)
		if got[r-1] != want {
			return fmt.Errorf("round %d: the freeing graph summed %d, want %d", r, got[r-1], want)
		}
		fmt.Fprintf(w, "  round %d: first half %d*i+%d from stream 2, second half %d*i+%d from the graph's kernel node, sum %d\n",
			r, a, b, ka, kb, got[r-1])
	}
	return freedStats(w, dev)
}

// streamsAndEvents creates three streams and three events.
func streamsAndEvents(dev *gg.Device) ([]*gg.Stream, []*gg.Event, error) {
	var ss []*gg.Stream
	var es []*gg.Event
	for range 3 {
		s, err := dev.NewStream()
		if err != nil {
			return nil, nil, err
		}
		ss = append(ss, s)
		e, err := dev.NewEvent(gg.EventDisableTiming)
		if err != nil {
			return nil, nil, err
		}
		es = append(es, e)
	}
	return ss, es, nil
}

func destroy(ss []*gg.Stream, es []*gg.Event) {
	for _, s := range ss {
		s.Destroy()
	}
	for _, e := range es {
		e.Destroy()
	}
}
