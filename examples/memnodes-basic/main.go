// Command memnodes-basic ports the CUDA guide's graph memory example of the
// graph node APIs: a graph allocates memory with an alloc node, kernels a, b and c ordered after the
// alloc node use it, and a free node ordered after every use releases it:
//
//	alloc ──> a ──> b ──> free
//	          └───> c ───┘
//
// Kernel a writes a sequence into the allocation, b and c reduce its two
// halves into output buffers allocated with Device.Malloc, and the graph is
// launched several times, each launch checked against the host.
//
// It also shows the address rules of the guide's chapter: the alloc node's
// address is fixed when the node is created and stays the same across
// launches and instantiations; a later alloc node may reuse the address of
// an allocation only if it is ordered after that allocation's free node.
//
// The device is opened in checking mode (gpugraph.WithMemCheck), so a kernel
// touching graph memory outside the allocation's lifetime would fail with
// ErrIllegalAddress instead of silently reading another allocation's data:
// the orderings here are checked, not only claimed.
package main

import (
	"fmt"
	"io"
	"os"

	gg "github.com/gpugraph/gpugraph"
)

const (
	threads = 256     // block size of every kernel; a power of two (the reductions halve it)
	n       = 1 << 16 // int64 elements in the graph allocation (512 KiB)
	half    = n / 2   // b reduces x[:half], c reduces x[half:]
	blocks  = 8       // blocks of each reduction; each writes one partial sum
)

// iotaFrom writes x[i] = *start + i. The start value is read from device
// memory, so the host can change it between launches without touching the
// graph.
var iotaFrom = &gg.Kernel{
	Name:   "iota_from",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[int64](a.Ptr(0), n)
		start := gg.Slice[int64](a.Ptr(1), 1)[0]
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				x[i] = start + int64(i)
			}
		}
	},
	CUDA: `extern "C" __global__ void iota_from(long long* x, const long long* start, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = *start + i;
}`,
}

// sumSquares writes partial[blockIdx.x] = the sum of x[i]² over the block's
// share of x[:n] (a grid-stride loop, then a tree reduction in shared memory).
var sumSquares = &gg.Kernel{
	Name:   "sum_squares_partial",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[int64](a.Ptr(0), n)
		gg.Slice[int64](a.Ptr(1), b.GridDim.X)[b.Idx.X] = reduceBlock(b, n, func(i int) int64 { return x[i] * x[i] })
	},
	CUDA: reductionCUDA("sum_squares_partial", "x[i] * x[i]"),
}

// sum writes partial[blockIdx.x] = the sum of x[i] over the block's share of
// x[:n].
var sum = &gg.Kernel{
	Name:   "sum_partial",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[int64](a.Ptr(0), n)
		gg.Slice[int64](a.Ptr(1), b.GridDim.X)[b.Idx.X] = reduceBlock(b, n, func(i int) int64 { return x[i] })
	},
	CUDA: reductionCUDA("sum_partial", "x[i]"),
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
	return `extern "C" __global__ void ` + name + `(const long long* x, long long* partial, int n) {
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
	if err := basic(w, dev); err != nil {
		return err
	}
	if err := reuse(w, dev); err != nil {
		return err
	}
	fmt.Fprintln(w, "OK")
	return nil
}

// basic builds the graph of the guide's example, launches it several times from
// two successive instantiations, and checks every result and the address.
func basic(w io.Writer, dev *gg.Device) error {
	// Device memory the graph reads and writes but does not own: the start
	// of the sequence, and one partial sum per block for b and for c.
	start, err := dev.Malloc(8)
	if err != nil {
		return err
	}
	out1, err := dev.Malloc(8 * blocks)
	if err != nil {
		return err
	}
	out2, err := dev.Malloc(8 * blocks)
	if err != nil {
		return err
	}
	defer dev.Free(start)
	defer dev.Free(out1)
	defer dev.Free(out2)

	g, err := dev.NewGraph()
	if err != nil {
		return err
	}
	defer g.Destroy()
	// cudaGraphAddMemAllocNode: the address comes back with the node.
	allocNode, x, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 8 * n})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "alloc node: %d bytes at %#x\n", 8*n, uint64(x))
	a, err := g.AddKernelNode(kernel(iotaFrom, n/threads, x, start, n), allocNode)
	if err != nil {
		return err
	}
	b, err := g.AddKernelNode(kernel(sumSquares, blocks, x, out1, half), a)
	if err != nil {
		return err
	}
	c, err := g.AddKernelNode(kernel(sum, blocks, x+8*half, out2, n-half), a)
	if err != nil {
		return err
	}
	// b and c use the allocation, so the free node depends on both; the
	// dependency of b on a makes it depend on a indirectly.
	if _, err := g.AddMemFreeNode(x, b, c); err != nil {
		return err
	}
	// The guide's kernel d (after c, not before the free) and kernel e (not
	// after the alloc node) must not touch the allocation, so they are left
	// out here: in checking mode they would fail with ErrIllegalAddress,
	// depending on how they happened to be scheduled.

	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()

	// A graph with memory nodes can have one executable graph at a time, so
	// the second instantiation comes after the first is destroyed.
	launch := 0
	for inst := 1; inst <= 2; inst++ {
		exec, err := g.Instantiate(0)
		if err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			launch++
			v := int64(1000 * launch)
			if err := dev.Memcpy(gg.HtoD(start, gg.Bytes([]int64{v}))); err != nil {
				return err
			}
			if err := exec.Launch(s); err != nil {
				return err
			}
			if err := s.Synchronize(); err != nil {
				return err
			}
			sq, sm, err := readSums(dev, out1, out2)
			if err != nil {
				return err
			}
			wantSq, wantSm := expected(v)
			if sq != wantSq || sm != wantSm {
				return fmt.Errorf("launch %d (start %d): b gave %d, c gave %d; want %d and %d", launch, v, sq, sm, wantSq, wantSm)
			}
			// The address is a property of the node, fixed for its life.
			p, err := allocNode.Params()
			if err != nil {
				return err
			}
			if got := p.(gg.MemAllocParams).Ptr; got != x {
				return fmt.Errorf("launch %d: alloc node address %#x, was %#x", launch, uint64(got), uint64(x))
			}
			fmt.Fprintf(w, "instantiation %d, launch %d: alloc node at %#x; a: x[i] = %d+i; b: sum x² (first half) = %d; c: sum x (second half) = %d\n",
				inst, launch, uint64(p.(gg.MemAllocParams).Ptr), v, sq, sm)
		}
		if err := exec.Destroy(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "alloc node address unchanged across %d launches and 2 instantiations\n", launch)
	return nil
}

// readSums copies the partial sums of b and c to the host and adds them up.
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

// expected is what b and c compute when a starts the sequence at v.
func expected(v int64) (sq, sm int64) {
	for i := int64(0); i < n; i++ {
		if x := v + i; i < half {
			sq += x * x
		} else {
			sm += x
		}
	}
	return sq, sm
}

// reuse builds the graphs of the guide's address reuse example:
//
//	alloc 1 ──> fill ──> copy out ──> free 1 ─┬─> alloc 2 ──> fill ──> copy out ──> free 2
//	                                          └─> alloc 3 ──> fill ──> copy out ──> free 3
//
// Alloc 2 is ordered after free 1, so it may reuse allocation 1's address,
// and does. Alloc 3 is ordered after free 1 too, but not after free 2: its
// lifetime may overlap allocation 2's, which sits at that address, so it
// needs a new one. The launch checks that each allocation kept its own data.
func reuse(w io.Writer, dev *gg.Device) error {
	const size = 1 << 20 // bytes per allocation
	const m = size / 8   // int64 elements
	// Each allocation is filled with a sequence starting at its own value.
	starts, err := dev.Malloc(3 * 8)
	if err != nil {
		return err
	}
	defer dev.Free(starts)
	if err := dev.Memcpy(gg.HtoD(starts, gg.Bytes([]int64{1e6, 2e6, 3e6}))); err != nil {
		return err
	}
	g, err := dev.NewGraph()
	if err != nil {
		return err
	}
	defer g.Destroy()
	var ptrs [3]gg.DevicePtr
	var frees [3]*gg.Node
	host := [3][]int64{make([]int64, m), make([]int64, m), make([]int64, m)}
	for k := range 3 {
		var deps []*gg.Node
		if k > 0 {
			deps = append(deps, frees[0]) // allocs 2 and 3 both follow free 1
		}
		allocNode, p, err := g.AddMemAllocNode(gg.MemAllocParams{Size: size}, deps...)
		if err != nil {
			return err
		}
		fill, err := g.AddKernelNode(kernel(iotaFrom, m/threads, p, starts+gg.DevicePtr(8*k), m), allocNode)
		if err != nil {
			return err
		}
		cp, err := g.AddMemcpyNode(gg.DtoH(gg.Bytes(host[k]), p), fill)
		if err != nil {
			return err
		}
		if frees[k], err = g.AddMemFreeNode(p, cp); err != nil {
			return err
		}
		ptrs[k] = p
	}
	fmt.Fprintf(w, "reuse: alloc 1 at %#x, alloc 2 (after free 1) at %#x, alloc 3 (after free 1, not free 2) at %#x\n",
		uint64(ptrs[0]), uint64(ptrs[1]), uint64(ptrs[2]))
	if ptrs[1] != ptrs[0] {
		return fmt.Errorf("alloc 2, ordered after free 1, did not reuse allocation 1's address")
	}
	if ptrs[2] < ptrs[1]+size && ptrs[1] < ptrs[2]+size {
		return fmt.Errorf("alloc 3, not ordered after free 2, overlaps allocation 2")
	}

	exec, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer exec.Destroy()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	if err := exec.Launch(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	for k := range 3 {
		v := int64(k+1) * 1e6
		for i, got := range host[k] {
			if got != v+int64(i) {
				return fmt.Errorf("allocation %d element %d is %d, want %d", k+1, i, got, v+int64(i))
			}
		}
	}
	fmt.Fprintln(w, "reuse: allocations 2 and 3 live at the same time and kept their own data")
	return nil
}
