// Command capture-forkjoin ports the stream capture example of the CUDA
// guide
// §2.1.2 (cross-stream dependencies and events): stream code that forks
// into a second stream and joins it back is captured into a graph.
//
//	cudaStreamBeginCapture(stream1);
//	kernel_A<<< ..., stream1 >>>(...);
//	// Fork into stream2
//	cudaEventRecord(event1, stream1);
//	cudaStreamWaitEvent(stream2, event1);
//	kernel_B<<< ..., stream1 >>>(...);
//	kernel_C<<< ..., stream2 >>>(...);
//	// Join stream2 back to origin stream (stream1)
//	cudaEventRecord(event2, stream2);
//	cudaStreamWaitEvent(stream1, event2);
//	kernel_D<<< ..., stream1 >>>(...);
//	// End capture in the origin stream
//	cudaStreamEndCapture(stream1, &graph);
//
// The kernels are real: A writes a vector x, B (stream 1) and C (stream 2)
// transform it in parallel into y and z, and D combines y and z into out.
// The captured graph is
//
//	A ──> B ──> D
//	└───> C ───┘
//
// The program prints its nodes and edges, checks that it is structurally
// equal to the same graph built with the explicit API, and launches it
// several times, checking every result against the host.
//
// It then shows the guide's rule: a stream that joined the capture must
// rejoin the origin stream before EndCapture. Without the join, EndCapture
// fails with ErrStreamCaptureUnjoined, returns no graph, and both streams
// leave capture mode anyway.
//
// Last, the same stream code is captured twice, with different kernel
// arguments: the two graphs are structurally equal (the pairing whole-graph
// update relies on), while the same kernels issued to one stream give a
// different structure.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	gg "github.com/gpugraph/gpugraph"
)

const (
	threads  = 256     // block size of every kernel
	n        = 1 << 16 // int32 elements in each vector
	launches = 4       // launches of each executable graph
)

// iotaFrom (kernel A) writes x[i] = *start + i. The start value is read from
// device memory, so the host can change it between launches without
// touching the graph.
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

// axpb (kernel B) writes y[i] = a*x[i] + b.
var axpb = &gg.Kernel{
	Name:   "axpb",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(4)
		x, y := gg.Slice[int32](a.Ptr(0), n), gg.Slice[int32](a.Ptr(1), n)
		k, c := a.Int32(2), a.Int32(3)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				y[i] = k*x[i] + c
			}
		}
	},
	CUDA: `extern "C" __global__ void axpb(const int* x, int* y, int a, int b, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + b;
}`,
}

// squareMod (kernel C) writes z[i] = x[i]² mod m, for x[i] >= 0.
var squareMod = &gg.Kernel{
	Name:   "square_mod",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(3)
		x, z := gg.Slice[int32](a.Ptr(0), n), gg.Slice[int32](a.Ptr(1), n)
		m := int64(a.Int32(2))
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				z[i] = int32(int64(x[i]) * int64(x[i]) % m)
			}
		}
	},
	CUDA: `extern "C" __global__ void square_mod(const int* x, int* z, int m, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) z[i] = (int)((long long)x[i] * x[i] % m);
}`,
}

// combine (kernel D) writes out[i] = y[i] - z[i].
var combine = &gg.Kernel{
	Name:   "combine",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(3)
		y, z, out := gg.Slice[int32](a.Ptr(0), n), gg.Slice[int32](a.Ptr(1), n), gg.Slice[int32](a.Ptr(2), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				out[i] = y[i] - z[i]
			}
		}
	},
	CUDA: `extern "C" __global__ void combine(const int* y, const int* z, int* out, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = y[i] - z[i];
}`,
}

// kernel returns the parameters of a launch of k over n elements, one
// thread per element.
func kernel(k *gg.Kernel, args ...any) gg.KernelParams {
	return gg.KernelParams{Kernel: k, Grid: gg.Dim1((n + threads - 1) / threads), Block: gg.Dim1(threads), Args: args}
}

// coeffs are the scalar arguments of B and C.
type coeffs struct{ a, b, m int32 }

// buffers is the device memory the kernels use, from Device.Malloc: the
// graphs read and write it but do not own it.
type buffers struct{ start, x, y, z, out gg.DevicePtr }

// The four launches of the example, with their arguments.
func (bu *buffers) a() gg.KernelParams         { return kernel(iotaFrom, bu.x, bu.start, n) }
func (bu *buffers) b(k coeffs) gg.KernelParams { return kernel(axpb, bu.x, bu.y, k.a, k.b, n) }
func (bu *buffers) c(k coeffs) gg.KernelParams { return kernel(squareMod, bu.x, bu.z, k.m, n) }
func (bu *buffers) d() gg.KernelParams         { return kernel(combine, bu.y, bu.z, bu.out, n) }

// setStart sets the start value A reads, synchronously.
func (bu *buffers) setStart(dev *gg.Device, v int32) error {
	return dev.Memcpy(gg.HtoD(bu.start, gg.Bytes([]int32{v})))
}

// expected is what D writes when A starts the sequence at start.
func expected(start int32, k coeffs) []int32 {
	out := make([]int32, n)
	for i := range out {
		x := start + int32(i)
		out[i] = (k.a*x + k.b) - int32(int64(x)*int64(x)%int64(k.m))
	}
	return out
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

// env is what every part of the example uses.
type env struct {
	dev         *gg.Device
	s1, s2      *gg.Stream
	fork, join  *gg.Event
	bufs        *buffers
	w           io.Writer
	firstCoeffs coeffs
}

// run runs the example on a host device.
func run(w io.Writer) error {
	dev, err := gg.Open("host")
	if err != nil {
		return err
	}
	defer dev.Close()
	e := &env{dev: dev, w: w, bufs: &buffers{}, firstCoeffs: coeffs{a: 3, b: 7, m: 1009}}
	if e.bufs.start, err = dev.Malloc(4); err != nil {
		return err
	}
	defer dev.Free(e.bufs.start)
	for _, p := range []*gg.DevicePtr{&e.bufs.x, &e.bufs.y, &e.bufs.z, &e.bufs.out} {
		if *p, err = dev.Malloc(4 * n); err != nil {
			return err
		}
		defer dev.Free(*p)
	}
	if e.s1, err = dev.NewStream(); err != nil {
		return err
	}
	defer e.s1.Destroy()
	if e.s2, err = dev.NewStream(); err != nil {
		return err
	}
	defer e.s2.Destroy()
	if e.fork, err = dev.NewEvent(0); err != nil {
		return err
	}
	defer e.fork.Destroy()
	if e.join, err = dev.NewEvent(0); err != nil {
		return err
	}
	defer e.join.Destroy()

	for _, part := range []struct {
		name string
		run  func() error
	}{
		{"fork/join capture", e.captureForkJoin},
		{"capture without the join", e.unjoined},
		{"capturing the same code twice", e.twice},
	} {
		fmt.Fprintln(w, part.name)
		if err := part.run(); err != nil {
			return fmt.Errorf("%s: %w", part.name, err)
		}
	}
	fmt.Fprintln(w, "OK")
	return nil
}

// forkJoin issues the guide's stream code: A in stream 1, a fork into stream
// 2, B in stream 1 and C in stream 2, the join back into stream 1 (unless
// join is false), and D in stream 1. Run inside a capture begun in stream
// 1, it captures a graph; outside one, it would run the work.
func (e *env) forkJoin(k coeffs, join bool) error {
	s1, s2, bu := e.s1, e.s2, e.bufs
	steps := []func() error{
		func() error { return s1.LaunchKernel(bu.a()) },
		// Fork into stream 2: stream 2 joins the capture by waiting on an
		// event recorded in a capturing stream.
		func() error { return s1.Record(e.fork) },
		func() error { return s2.Wait(e.fork) },
		func() error { return s1.LaunchKernel(bu.b(k)) },
		func() error { return s2.LaunchKernel(bu.c(k)) },
	}
	if join {
		// Join stream 2 back to the origin stream.
		steps = append(steps,
			func() error { return s2.Record(e.join) },
			func() error { return s1.Wait(e.join) },
		)
	}
	steps = append(steps, func() error { return s1.LaunchKernel(bu.d()) })
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("step %d of the stream code: %w", i+1, err)
		}
	}
	return nil
}

// capture captures forkJoin(k, true) from stream 1.
func (e *env) capture(k coeffs) (*gg.Graph, error) {
	if err := e.s1.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return nil, err
	}
	if err := e.forkJoin(k, true); err != nil {
		e.s1.EndCapture()
		return nil, err
	}
	return e.s1.EndCapture()
}

// explicit builds the graph of the guide with the explicit API: what the
// capture of forkJoin(k, true) should give.
func (e *env) explicit(k coeffs) (*gg.Graph, error) {
	g, err := e.dev.NewGraph()
	if err != nil {
		return nil, err
	}
	a, err := g.AddKernelNode(e.bufs.a())
	if err != nil {
		return nil, err
	}
	b, err := g.AddKernelNode(e.bufs.b(k), a)
	if err != nil {
		return nil, err
	}
	c, err := g.AddKernelNode(e.bufs.c(k), a)
	if err != nil {
		return nil, err
	}
	if _, err := g.AddKernelNode(e.bufs.d(), b, c); err != nil {
		return nil, err
	}
	return g, nil
}

// captureForkJoin captures the guide's code, prints and checks the graph,
// and launches it.
func (e *env) captureForkJoin() error {
	w, dev, s1, s2, k := e.w, e.dev, e.s1, e.s2, e.firstCoeffs
	// out is zeroed first, to check that the captured work did not run.
	if err := dev.Memset(gg.Memset32(e.bufs.out, 0, n)); err != nil {
		return err
	}
	if err := s1.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return err
	}
	if err := e.forkJoin(k, true); err != nil {
		return err
	}
	// Before EndCapture both streams are in the same capture sequence.
	i1, err := s1.CaptureInfo()
	if err != nil {
		return err
	}
	i2, err := s2.CaptureInfo()
	if err != nil {
		return err
	}
	if i1.Status != gg.CaptureStatusActive || i2.Status != gg.CaptureStatusActive || i1.ID != i2.ID {
		return fmt.Errorf("before EndCapture: stream 1 %+v, stream 2 %+v; want both active in one capture", i1, i2)
	}
	fmt.Fprintf(w, "  before EndCapture: streams 1 and 2 both capturing, capture id %d\n", i1.ID)
	g, err := s1.EndCapture()
	if err != nil {
		return err
	}
	defer g.Destroy()
	if err := bothIdle(s1, s2); err != nil {
		return fmt.Errorf("after EndCapture: %w", err)
	}
	fmt.Fprintln(w, "  after EndCapture: neither stream is capturing")
	got := make([]int32, n)
	if err := dev.Memcpy(gg.DtoH(gg.Bytes(got), e.bufs.out)); err != nil {
		return err
	}
	if slices.ContainsFunc(got, func(v int32) bool { return v != 0 }) {
		return errors.New("the captured work ran during the capture")
	}
	fmt.Fprintln(w, "  captured work did not run (out still zero)")

	fmt.Fprintln(w, "  captured graph:")
	edges, err := describe(w, g)
	if err != nil {
		return err
	}
	want := []string{"iota_from -> axpb", "iota_from -> square_mod", "axpb -> combine", "square_mod -> combine"}
	if !slices.Equal(edges, want) {
		return fmt.Errorf("edges %q, want %q", edges, want)
	}

	h, err := e.explicit(k)
	if err != nil {
		return err
	}
	defer h.Destroy()
	if !gg.StructurallyEqual(g, h) {
		return errors.New("the captured graph differs from the explicit A -> B, C -> D")
	}
	fmt.Fprintln(w, "  StructurallyEqual(captured, explicit A -> {B, C} -> D) = true")

	return e.launchAndCheck(g, k, 1000, "captured graph")
}

// launchAndCheck instantiates g and launches it several times into stream 1,
// each with a new start value, checking out against the host each time.
func (e *env) launchAndCheck(g *gg.Graph, k coeffs, base int32, what string) error {
	exec, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer exec.Destroy()
	got := make([]int32, n)
	for l := int32(1); l <= launches; l++ {
		start := base * l
		if err := e.bufs.setStart(e.dev, start); err != nil {
			return err
		}
		if err := exec.Launch(e.s1); err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		if err := e.s1.Synchronize(); err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		if err := e.dev.Memcpy(gg.DtoH(gg.Bytes(got), e.bufs.out)); err != nil {
			return err
		}
		want := expected(start, k)
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("launch %d (start %d): out[%d] = %d, want %d", l, start, i, got[i], want[i])
		}
		fmt.Fprintf(e.w, "  %s, launch %d: x[i] = %d+i; out = (%d*x%+d) - x²%%%d matches the host: out[0] = %d, out[%d] = %d\n",
			what, l, start, k.a, k.b, k.m, got[0], n-1, got[n-1])
	}
	return nil
}

func firstDiff(got, want []int32) int {
	for i := range want {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

// describe prints g's nodes, each with its dependencies, and returns its
// edges as "from -> to" by kernel name.
func describe(w io.Writer, g *gg.Graph) ([]string, error) {
	nodes, err := g.Nodes()
	if err != nil {
		return nil, err
	}
	for _, nd := range nodes {
		deps, err := nd.Dependencies()
		if err != nil {
			return nil, err
		}
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
	edges, err := g.Edges()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, ed := range edges {
		names = append(names, kernelName(ed.From)+" -> "+kernelName(ed.To))
	}
	fmt.Fprintf(w, "    %d nodes, %d edges: %s\n", len(nodes), len(edges), strings.Join(names, ", "))
	return names, nil
}

func kernelName(nd *gg.Node) string {
	p, err := nd.Params()
	if err != nil {
		return "?"
	}
	if k, ok := p.(gg.KernelParams); ok {
		return k.Kernel.Name
	}
	return nd.Type().String()
}

// bothIdle checks that neither stream is capturing.
func bothIdle(s1, s2 *gg.Stream) error {
	for i, s := range []*gg.Stream{s1, s2} {
		st, err := s.IsCapturing()
		if err != nil {
			return err
		}
		if st != gg.CaptureStatusNone {
			return fmt.Errorf("stream %d capture status %d, want none", i+1, st)
		}
	}
	return nil
}

// unjoined captures the stream code without the join: stream 2's C is not
// joined into stream 1, so EndCapture fails with ErrStreamCaptureUnjoined
// and returns no graph, and both streams leave capture mode.
func (e *env) unjoined() error {
	w, s1, s2 := e.w, e.s1, e.s2
	if err := s1.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return err
	}
	if err := e.forkJoin(e.firstCoeffs, false); err != nil {
		return err
	}
	g, err := s1.EndCapture()
	if !errors.Is(err, gg.ErrStreamCaptureUnjoined) || g != nil {
		return fmt.Errorf("EndCapture without the join: graph %v, error %v; want no graph and ErrStreamCaptureUnjoined", g, err)
	}
	fmt.Fprintf(w, "  EndCapture: %v\n", err)
	if err := bothIdle(s1, s2); err != nil {
		return fmt.Errorf("after the failed EndCapture: %w", err)
	}
	fmt.Fprintln(w, "  after the failed EndCapture, IsCapturing is none for both streams")

	// The streams run ordinary work again: the same code, not captured,
	// runs the kernels (with stream 2 joined, so out is complete when
	// stream 1 is synchronized).
	const start = 42
	if err := e.bufs.setStart(e.dev, start); err != nil {
		return err
	}
	if err := e.forkJoin(e.firstCoeffs, true); err != nil {
		return fmt.Errorf("running the stream code uncaptured: %w", err)
	}
	if err := s1.Synchronize(); err != nil {
		return err
	}
	got := make([]int32, n)
	if err := e.dev.Memcpy(gg.DtoH(gg.Bytes(got), e.bufs.out)); err != nil {
		return err
	}
	if i := firstDiff(got, expected(start, e.firstCoeffs)); i >= 0 {
		return fmt.Errorf("uncaptured run: out[%d] = %d, want %d", i, got[i], expected(start, e.firstCoeffs)[i])
	}
	fmt.Fprintln(w, "  the same stream code then runs uncaptured in both streams, results checked")
	return nil
}

// twice captures the stream code twice, with different kernel arguments:
// the graphs are structurally equal. Issuing the same kernels to stream 1
// alone gives A -> B -> C -> D, which is not.
func (e *env) twice() error {
	w := e.w
	k1, k2 := e.firstCoeffs, coeffs{a: -5, b: 100, m: 97}
	g1, err := e.capture(k1)
	if err != nil {
		return err
	}
	defer g1.Destroy()
	g2, err := e.capture(k2)
	if err != nil {
		return err
	}
	defer g2.Destroy()
	if !gg.StructurallyEqual(g1, g2) {
		return errors.New("two captures of the same stream code differ")
	}
	fmt.Fprintf(w, "  StructurallyEqual(capture with %+v, capture with %+v) = true\n", k1, k2)

	// The same four launches in one stream: a chain.
	if err := e.s1.BeginCapture(gg.CaptureModeGlobal); err != nil {
		return err
	}
	for _, p := range []gg.KernelParams{e.bufs.a(), e.bufs.b(k1), e.bufs.c(k1), e.bufs.d()} {
		if err := e.s1.LaunchKernel(p); err != nil {
			return err
		}
	}
	serial, err := e.s1.EndCapture()
	if err != nil {
		return err
	}
	defer serial.Destroy()
	if gg.StructurallyEqual(g1, serial) {
		return errors.New("the fork/join capture equals the single-stream one")
	}
	fmt.Fprintln(w, "  single-stream capture of the same kernels:")
	if _, err := describe(w, serial); err != nil {
		return err
	}
	fmt.Fprintln(w, "  StructurallyEqual(fork/join capture, single-stream capture) = false")

	// The second capture runs with its own arguments.
	return e.launchAndCheck(g2, k2, 3000, "second capture")
}
