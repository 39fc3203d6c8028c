// Command while-loop runs an iterative solver to convergence inside one
// graph launch, with the conditional WHILE node of the CUDA guide (CUDA
// 12.4+): the graph repeats a Jacobi sweep of the 1D Laplace equation until
// the largest change of a sweep falls below a tolerance, and the decision to
// go on is taken on the device, each iteration, by a kernel that sets the
// loop's conditional handle. The host launches once and reads the answer;
// it never sees the iterations.
//
//	init ──> WHILE [ sweep u→v ──> sweep v→u ──> change ──> check ]
//
// init sets the initial guess (0 inside, boundary values 0 and 1); the
// sweeps replace every inner point by the mean of its neighbours; change
// writes each block's largest |u-v|; check takes the largest of those,
// counts the iteration and sets the handle to 0 once the change is below the
// tolerance (or after too many iterations). The handle's default, 1,
// assigned at every launch, enters the loop: a do-while, as in the CUDA
// sample's simpleDoWhileGraph. The solution is the straight line from 0 to
// 1, which the program checks, and it checks the iteration count against
// the same loop run on the host.
//
// It then builds the same graph the way the CUDA sample capturedWhileGraph
// does, from stream code: the conditional node is inserted into a capture
// (CaptureInfo, AddNode, UpdateCaptureDependencies) and its body is filled
// by capturing into it (BeginCaptureToGraph). The two graphs are
// structurally equal and give the same answer.
package main

import (
	"fmt"
	"io"
	"math"
	"os"

	gg "github.com/gpugraph/gpugraph"
)

const (
	n       = 32 // points, boundaries included
	threads = 8  // block size; n is a multiple of it
	blocks  = n / threads
	tol     = 1e-9   // stop when no point changes by more than this in a sweep
	maxIter = 100000 // and in any case after this many iterations
)

// initGuess sets u to 0 inside and to the boundary values 0 and 1.
var initGuess = &gg.Kernel{
	Name:   "init_guess",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(1)
		u := gg.Slice[float64](a.Ptr(0), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				u[i] = 0
				if i == n-1 {
					u[i] = 1
				}
			}
		}
	},
	CUDA: `extern "C" __global__ void init_guess(double* u, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) u[i] = i == n - 1 ? 1.0 : 0.0;
}`,
}

// sweep is one Jacobi sweep: dst[i] = (src[i-1] + src[i+1]) / 2 inside,
// boundaries copied.
var sweep = &gg.Kernel{
	Name:   "sweep",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		dst, src := gg.Slice[float64](a.Ptr(0), n), gg.Slice[float64](a.Ptr(1), n)
		for t := 0; t < b.Dim.X; t++ {
			i := b.Idx.X*b.Dim.X + t
			switch {
			case i == 0 || i == n-1:
				dst[i] = src[i]
			case i < n:
				dst[i] = (src[i-1] + src[i+1]) * 0.5
			}
		}
	},
	CUDA: `extern "C" __global__ void sweep(double* dst, const double* src, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i == 0 || i == n - 1) dst[i] = src[i];
	else if (i < n) dst[i] = (src[i - 1] + src[i + 1]) * 0.5;
}`,
}

// change writes, for each block, the largest |u[i]-v[i]| over its points.
var change = &gg.Kernel{
	Name:   "change",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(3)
		u, v := gg.Slice[float64](a.Ptr(0), n), gg.Slice[float64](a.Ptr(1), n)
		m := 0.0
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				m = math.Max(m, math.Abs(u[i]-v[i]))
			}
		}
		gg.Slice[float64](a.Ptr(2), b.GridDim.X)[b.Idx.X] = m
	},
	CUDA: `extern "C" __global__ void change(const double* u, const double* v, double* partial, int n) {
	extern __shared__ double s[];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	s[threadIdx.x] = i < n ? fabs(u[i] - v[i]) : 0.0;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k /= 2) {
		if (threadIdx.x < k) s[threadIdx.x] = fmax(s[threadIdx.x], s[threadIdx.x + k]);
		__syncthreads();
	}
	if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}`,
}

// check reduces the blocks' changes into state[1], counts the iteration in
// state[0], and sets the loop's handle to whether to go on.
var check = &gg.Kernel{
	Name:   "check",
	Params: []gg.ParamType{gg.Uint64, gg.Pointer, gg.Int32, gg.Pointer, gg.Float64, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		partial := gg.Slice[float64](a.Ptr(1), a.Int(2))
		state := gg.Slice[float64](a.Ptr(3), 2)
		m := 0.0
		for _, p := range partial {
			m = math.Max(m, p)
		}
		state[0]++
		state[1] = m
		more := uint32(0)
		if m > a.Float64(4) && state[0] < float64(a.Int(5)) {
			more = 1
		}
		b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), more)
	},
	CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void check(cudaGraphConditionalHandle h, const double* partial, int blocks,
		double* state, double tol, int max_iter) {
	double m = 0;
	for (int i = 0; i < blocks; i++) m = fmax(m, partial[i]);
	state[0] += 1;
	state[1] = m;
	cudaGraphSetConditional(h, m > tol && state[0] < max_iter);
}`,
}

// buffers is the device memory the solver works in.
type buffers struct {
	u, v    gg.DevicePtr // the solution and the sweep's scratch copy, n doubles each
	partial gg.DevicePtr // one largest change per block
	state   gg.DevicePtr // iterations, last change (doubles)
}

func launch(k *gg.Kernel, grid, shared int, args ...any) gg.KernelParams {
	return gg.KernelParams{Kernel: k, Grid: gg.Dim1(grid), Block: gg.Dim1(threads), SharedMem: shared, Args: args}
}

// body returns the loop body's kernels in order, for the loop with handle h.
func (b buffers) body(h gg.ConditionalHandle) []gg.KernelParams {
	return []gg.KernelParams{
		launch(sweep, blocks, 0, b.v, b.u, n),
		launch(sweep, blocks, 0, b.u, b.v, n),
		launch(change, blocks, 8*threads, b.u, b.v, b.partial, n),
		{Kernel: check, Grid: gg.Dim1(1), Block: gg.Dim1(1), Args: []any{h, b.partial, blocks, b.state, tol, maxIter}},
	}
}

// buildExplicit builds the solver graph with the graph API.
func buildExplicit(dev *gg.Device, b buffers) (*gg.Graph, error) {
	g, err := dev.NewGraph()
	if err != nil {
		return nil, err
	}
	h, err := g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault)
	if err != nil {
		return nil, err
	}
	first, err := g.AddKernelNode(launch(initGuess, blocks, 0, b.u, n))
	if err != nil {
		return nil, err
	}
	reset, err := g.AddMemsetNode(gg.Memset8(b.state, 0, 16), first)
	if err != nil {
		return nil, err
	}
	loop, err := g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 1}, reset)
	if err != nil {
		return nil, err
	}
	bodies, err := loop.ConditionalBodies()
	if err != nil {
		return nil, err
	}
	var prev []*gg.Node
	for _, k := range b.body(h) {
		node, err := bodies[0].AddKernelNode(k, prev...)
		if err != nil {
			return nil, err
		}
		prev = []*gg.Node{node}
	}
	return g, nil
}

// buildCaptured builds the same graph from stream code: the conditional
// node is inserted into the capture of s, and its body is captured from
// another stream.
func buildCaptured(dev *gg.Device, b buffers) (*gg.Graph, error) {
	s, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Destroy()
	if err := s.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return nil, err
	}
	fail := func(err error) (*gg.Graph, error) {
		s.EndCapture()
		return nil, err
	}
	if err := s.LaunchKernel(launch(initGuess, blocks, 0, b.u, n)); err != nil {
		return fail(err)
	}
	if err := s.Memset(gg.Memset8(b.state, 0, 16)); err != nil {
		return fail(err)
	}
	// cudaStreamGetCaptureInfo: the graph being built and the nodes the
	// next work depends on.
	info, err := s.CaptureInfo()
	if err != nil {
		return fail(err)
	}
	h, err := info.Graph.ConditionalHandleCreate(1, gg.ConditionalAssignDefault)
	if err != nil {
		return fail(err)
	}
	loop, err := info.Graph.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 1}, info.Dependencies...)
	if err != nil {
		return fail(err)
	}
	// Work captured after this depends on the loop.
	if err := s.UpdateCaptureDependencies([]*gg.Node{loop}, gg.SetCaptureDependencies); err != nil {
		return fail(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		return nil, err
	}

	bodies, err := loop.ConditionalBodies()
	if err != nil {
		return nil, err
	}
	bs, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	defer bs.Destroy()
	if err := bs.BeginCaptureToGraph(bodies[0], nil, gg.CaptureModeGlobal); err != nil {
		return nil, err
	}
	for _, k := range b.body(h) {
		if err := bs.LaunchKernel(k); err != nil {
			bs.EndCapture()
			return nil, err
		}
	}
	if _, err := bs.EndCapture(); err != nil {
		return nil, err
	}
	return g, nil
}

// reference runs the same iteration on the host and returns the iteration
// count and the last change.
func reference() (int, float64) {
	u, v := make([]float64, n), make([]float64, n)
	u[n-1] = 1
	for it := 1; ; it++ {
		for _, p := range [][2][]float64{{v, u}, {u, v}} {
			dst, src := p[0], p[1]
			dst[0], dst[n-1] = src[0], src[n-1]
			for i := 1; i < n-1; i++ {
				dst[i] = (src[i-1] + src[i+1]) * 0.5
			}
		}
		m := 0.0
		for i := range u {
			m = math.Max(m, math.Abs(u[i]-v[i]))
		}
		if !(m > tol && it < maxIter) {
			return it, m
		}
	}
}

// solve launches e launches times and checks every answer.
func solve(w io.Writer, dev *gg.Device, e *gg.Exec, b buffers, launches int, what string) error {
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	wantIter, wantChange := reference()
	for l := 0; l < launches; l++ {
		if err := e.Launch(s); err != nil {
			return err
		}
		u, state := make([]float64, n), make([]float64, 2)
		if err := s.Memcpy(gg.DtoH(gg.Bytes(u), b.u)); err != nil {
			return err
		}
		if err := s.Memcpy(gg.DtoH(gg.Bytes(state), b.state)); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		worst := 0.0
		for i, x := range u {
			worst = math.Max(worst, math.Abs(x-float64(i)/(n-1)))
		}
		if int(state[0]) != wantIter || state[1] != wantChange {
			return fmt.Errorf("%s, launch %d: %v iterations, last change %g; the host loop takes %d, last change %g",
				what, l+1, state[0], state[1], wantIter, wantChange)
		}
		if worst > 1e-6 {
			return fmt.Errorf("%s, launch %d: the solution is %g away from the exact one", what, l+1, worst)
		}
		fmt.Fprintf(w, "%s, launch %d: converged in %d iterations (last change %.2g), error %.2g\n",
			what, l+1, int(state[0]), state[1], worst)
	}
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	dev, err := gg.Open("host")
	if err != nil {
		return err
	}
	defer dev.Close()
	var b buffers
	for _, p := range []struct {
		ptr  *gg.DevicePtr
		size int
	}{{&b.u, 8 * n}, {&b.v, 8 * n}, {&b.partial, 8 * blocks}, {&b.state, 16}} {
		if *p.ptr, err = dev.Malloc(p.size); err != nil {
			return err
		}
		defer dev.Free(*p.ptr)
	}

	explicit, err := buildExplicit(dev, b)
	if err != nil {
		return fmt.Errorf("graph API: %v", err)
	}
	e, err := explicit.Instantiate(0)
	if err != nil {
		return err
	}
	if err := solve(w, dev, e, b, 3, "graph API"); err != nil {
		return err
	}
	e.Destroy()

	captured, err := buildCaptured(dev, b)
	if err != nil {
		return fmt.Errorf("capture: %v", err)
	}
	if !gg.StructurallyEqual(explicit, captured) {
		return fmt.Errorf("the captured graph differs from the one built with the graph API")
	}
	fmt.Fprintln(w, "the captured graph is structurally equal to the one built with the graph API")
	e, err = captured.Instantiate(0)
	if err != nil {
		return err
	}
	defer e.Destroy()
	if err := solve(w, dev, e, b, 1, "capture"); err != nil {
		return err
	}
	fmt.Fprintln(w, "OK")
	return nil
}
