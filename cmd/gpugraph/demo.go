package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// threads is the block size of every demo kernel. The reductions halve it
// step by step, so it must be a power of two; the CUDA sources size their
// shared arrays for it.
const threads = 256

// polys are the polynomials the fan-out branches reduce, as coefficients
// c0..c3 of c0 + c1·x + c2·x² + c3·x³. All are positive on the input range
// [0, 1), so their sums cannot cancel and a relative tolerance is meaningful.
var polys = [][4]float32{
	{1, 0, 0, 0},       // count
	{0, 1, 0, 0},       // sum
	{0, 0, 1, 0},       // sum of squares
	{0, 0, 0, 1},       // sum of cubes
	{1, 2, 1, 0},       // (1+x)²
	{0.5, -1, 1.5, 2},  // mixed signs, still positive on [0, 1)
	{3, 0.25, -2, 1.5}, // ditto
}

// tolerance is the relative error allowed between the device's float32 sums
// and the float64 reference.
const tolerance = 1e-4

// polyPartial evaluates one polynomial over x and reduces it block by block:
// partial[blockIdx] is the sum over the block's elements.
var polyPartial = &gg.Kernel{
	Name:   "poly_partial",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Float32, gg.Float32, gg.Float32, gg.Float32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x := gg.Slice[float32](a.Ptr(0), n)
		partial := gg.Slice[float32](a.Ptr(1), b.GridDim.X)
		c0, c1, c2, c3 := a.Float32(3), a.Float32(4), a.Float32(5), a.Float32(6)
		// The block's shared array; each loop below is one phase between
		// __syncthreads() calls of the CUDA version.
		var shared [threads]float32
		sh := shared[:b.Dim.X]
		for t := range sh {
			v := float32(0)
			if i := b.Idx.X*b.Dim.X + t; i < n {
				xi := x[i]
				v = ((c3*xi+c2)*xi+c1)*xi + c0
			}
			sh[t] = v
		}
		for s := len(sh) / 2; s > 0; s /= 2 {
			for t := 0; t < s; t++ {
				sh[t] += sh[t+s]
			}
		}
		partial[b.Idx.X] = sh[0]
	},
	CUDA: `extern "C" __global__ void poly_partial(const float* x, float* partial, int n,
                                        float c0, float c1, float c2, float c3) {
    __shared__ float sh[256]; // blockDim.x: 256, a power of two
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    float v = 0.0f;
    if (i < n) {
        float xi = x[i];
        v = ((c3 * xi + c2) * xi + c1) * xi + c0;
    }
    sh[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = sh[0];
}
`,
}

// reduceRows sums each row of a rows×cols matrix of partial sums, one block
// per row, accumulating in float64: out[blockIdx] = Σ partial[blockIdx][*].
var reduceRows = &gg.Kernel{
	Name:   "reduce_rows",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		cols := a.Int(2)
		row := gg.Slice[float32](a.Ptr(0), b.GridDim.X*cols)[b.Idx.X*cols:][:cols]
		out := gg.Slice[float32](a.Ptr(1), b.GridDim.X)
		var shared [threads]float64
		sh := shared[:b.Dim.X]
		for t := range sh { // each thread strides over the row
			acc := 0.0
			for j := t; j < cols; j += b.Dim.X {
				acc += float64(row[j])
			}
			sh[t] = acc
		}
		for s := len(sh) / 2; s > 0; s /= 2 {
			for t := 0; t < s; t++ {
				sh[t] += sh[t+s]
			}
		}
		out[b.Idx.X] = float32(sh[0])
	},
	CUDA: `extern "C" __global__ void reduce_rows(const float* partial, float* out, int cols) {
    __shared__ double sh[256]; // blockDim.x: 256, a power of two
    int t = threadIdx.x;
    const float* row = partial + (size_t)blockIdx.x * cols;
    double acc = 0.0;
    for (int j = t; j < cols; j += blockDim.x) acc += row[j];
    sh[t] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = (float)sh[0];
}
`,
}

// demoConfig sizes the demo.
type demoConfig struct {
	N        int    // input length
	Launches int    // graph launches, each with new input
	DOT      string // if set, write the graph here in DOT form
	// Progress is where the progress line goes (a terminal); nil: nowhere.
	Progress io.Writer
}

func defaultDemoConfig() demoConfig { return demoConfig{N: 1 << 20, Launches: 5} }

func demoMain(args []string, stdout, stderr io.Writer) error {
	cfg := defaultDemoConfig()
	fs := newFlagSet("demo", stderr)
	backend := fs.String("backend", gg.BackendHost, "device backend")
	fs.StringVar(&cfg.DOT, "dot", "", "write the graph in DOT form to `file`")
	fs.IntVar(&cfg.N, "n", cfg.N, "input length")
	fs.IntVar(&cfg.Launches, "launches", cfg.Launches, "graph launches")
	quiet := fs.Bool("quiet", false, "no progress line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if showProgress(stderr, *quiet) {
		cfg.Progress = stderr
	}
	return runDemo(stdout, *backend, cfg)
}

// demoBuffers are the demo's device allocations.
type demoBuffers struct {
	x, partial, out gg.DevicePtr
	grid            int // blocks of poly_partial, the columns of partial
}

// runDemo runs the demo workload on a device of backend, checks every launch
// against a CPU reference, and reports to w. It ends with "OK" on success.
func runDemo(w io.Writer, backend string, cfg demoConfig) (err error) {
	switch {
	case cfg.N < 1 || cfg.N > math.MaxInt32:
		return usagef("--n %d: need 1 to %d", cfg.N, math.MaxInt32)
	case cfg.Launches < 1:
		return usagef("--launches %d: need at least 1", cfg.Launches)
	}
	dev, err := openDevice(backend)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dev.Close()) }()

	bufs, err := allocDemo(dev, cfg.N)
	if err != nil {
		return err
	}
	// Host memory the graph's copies reference. The input is refilled in
	// place between launches: copy nodes keep the slice, not its contents.
	x := make([]float32, cfg.N)
	got := make([]float32, len(polys))
	var history [][]float32 // appended by the host node, one entry per launch

	g, err := buildDemoGraph(dev, bufs, x, got, func() {
		history = append(history, slices.Clone(got))
	})
	if err != nil {
		return err
	}
	defer g.Destroy()
	nodes, err := g.Nodes()
	if err != nil {
		return err
	}
	edges, err := g.Edges()
	if err != nil {
		return err
	}
	if cfg.DOT != "" {
		if err := writeDOT(g, cfg.DOT); err != nil {
			return err
		}
	}
	ex, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer ex.Destroy()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()

	p := dev.Properties()
	fmt.Fprintf(w, "device:   %s, backend %s, %d workers\n", p.Name, p.Backend, p.MultiProcessorCount)
	fmt.Fprintf(w, "graph:    %d nodes, %d edges: HtoD -> %d x %s (grid %d x %d) -> %s -> DtoH -> host\n",
		len(nodes), len(edges), len(polys), polyPartial.Name, bufs.grid, threads, reduceRows.Name)
	if cfg.DOT != "" {
		fmt.Fprintf(w, "dot:      %s\n", cfg.DOT)
	}

	prog := startProgress(cfg.Progress, cfg.Progress != nil, "demo", "launches", cfg.Launches)
	defer prog.Stop()
	w = prog.Out(w)
	times := make([]time.Duration, cfg.Launches)
	want := make([][]float64, cfg.Launches)
	for l := range cfg.Launches {
		fillInput(x, uint64(l))
		start := time.Now()
		if err := ex.Launch(s); err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		if err := s.Synchronize(); err != nil {
			return fmt.Errorf("launch %d: %w", l, err)
		}
		times[l] = time.Since(start)
		want[l] = reference(x)
		prog.Add(1)
	}
	if len(history) != cfg.Launches {
		return fmt.Errorf("host node ran %d times for %d launches", len(history), cfg.Launches)
	}
	maxErr, err := checkResults(history, want)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "launches: %d, median %v per launch (min %v, max %v), input refilled before each\n",
		cfg.Launches, median(times).Round(time.Microsecond),
		slices.Min(times).Round(time.Microsecond), slices.Max(times).Round(time.Microsecond))
	printResult(w, history[len(history)-1], want[len(want)-1])
	fmt.Fprintf(w, "checked:  %d sums x %s against float64 CPU reference, max relative error %.2g (tolerance %g)\n",
		len(polys), plural(cfg.Launches, "launch"), maxErr, tolerance)
	fmt.Fprintln(w, "OK")
	return nil
}

// allocDemo allocates the input vector, the partial sums (one row of grid
// columns per polynomial) and the final sums.
func allocDemo(dev *gg.Device, n int) (demoBuffers, error) {
	b := demoBuffers{grid: (n + threads - 1) / threads}
	var err error
	for _, a := range []struct {
		p     *gg.DevicePtr
		elems int
	}{{&b.x, n}, {&b.partial, len(polys) * b.grid}, {&b.out, len(polys)}} {
		if *a.p, err = dev.Malloc(4 * a.elems); err != nil {
			return b, err
		}
	}
	return b, nil // freed by dev.Close
}

// buildDemoGraph builds HtoD -> fan-out of poly_partial kernels -> reduce_rows
// -> DtoH -> host node. x and got are the host ends of the copies.
func buildDemoGraph(dev *gg.Device, b demoBuffers, x, got []float32, record func()) (*gg.Graph, error) {
	g, err := dev.NewGraph()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*gg.Graph, error) {
		g.Destroy()
		return nil, err
	}
	h2d, err := g.AddMemcpyNode(gg.HtoD(b.x, gg.Bytes(x)))
	if err != nil {
		return fail(err)
	}
	branches := make([]*gg.Node, len(polys))
	for k, c := range polys {
		row := b.partial + gg.DevicePtr(4*k*b.grid)
		branches[k], err = g.AddKernelNode(gg.KernelParams{
			Kernel: polyPartial,
			Grid:   gg.Dim1(b.grid),
			Block:  gg.Dim1(threads),
			Args:   []any{b.x, row, len(x), c[0], c[1], c[2], c[3]},
		}, h2d)
		if err != nil {
			return fail(err)
		}
	}
	reduce, err := g.AddKernelNode(gg.KernelParams{
		Kernel: reduceRows,
		Grid:   gg.Dim1(len(polys)),
		Block:  gg.Dim1(threads),
		Args:   []any{b.partial, b.out, b.grid},
	}, branches...)
	if err != nil {
		return fail(err)
	}
	d2h, err := g.AddMemcpyNode(gg.DtoH(gg.Bytes(got), b.out), reduce)
	if err != nil {
		return fail(err)
	}
	if _, err := g.AddHostNode(record, d2h); err != nil {
		return fail(err)
	}
	return g, nil
}

func writeDOT(g *gg.Graph, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := g.WriteDOT(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fillInput refills x in place with values in [0, 1), different per seed.
func fillInput(x []float32, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for i := range x {
		x[i] = r.Float32()
	}
}

// reference computes what the graph computes, in float64 on the CPU.
func reference(x []float32) []float64 {
	sums := make([]float64, len(polys))
	for k, c := range polys {
		c0, c1, c2, c3 := float64(c[0]), float64(c[1]), float64(c[2]), float64(c[3])
		s := 0.0
		for _, v := range x {
			xi := float64(v)
			s += ((c3*xi+c2)*xi+c1)*xi + c0
		}
		sums[k] = s
	}
	return sums
}

// checkResults compares each launch's sums with the reference and returns
// the largest relative error, or an error naming the first mismatch.
func checkResults(got [][]float32, want [][]float64) (float64, error) {
	maxErr := 0.0
	for l := range want {
		for k, w := range want[l] {
			e := math.Abs(float64(got[l][k])-w) / math.Abs(w)
			if !(e <= tolerance) { // also catches NaN
				return e, fmt.Errorf("MISMATCH in launch %d, polynomial %d %v: device %g, CPU %g, relative error %.3g > %g",
					l, k, polys[k], got[l][k], w, e, tolerance)
			}
			maxErr = max(maxErr, e)
		}
	}
	return maxErr, nil
}

func printResult(w io.Writer, got []float32, want []float64) {
	fmt.Fprintln(w, "result of the last launch, Σ p(x) over the input:")
	for k, c := range polys {
		fmt.Fprintf(w, "  %-24s device %-12.7g CPU %.7g\n", polyString(c)+":", got[k], float32(want[k]))
	}
}

// polyString writes c0 + c1·x + c2·x² + c3·x³ the way one would by hand.
func polyString(c [4]float32) string {
	var b strings.Builder
	for p, v := range c {
		if v == 0 {
			continue
		}
		switch {
		case b.Len() == 0 && v < 0:
			b.WriteString("-")
		case b.Len() > 0 && v < 0:
			b.WriteString(" - ")
		case b.Len() > 0:
			b.WriteString(" + ")
		}
		if a := abs(v); a != 1 || p == 0 {
			fmt.Fprintf(&b, "%g", a)
		}
		b.WriteString([]string{"", "x", "x²", "x³"}[p])
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

func abs(v float32) float32 { return float32(math.Abs(float64(v))) }

// median returns the median of ds (the mean of the middle two for an even
// count).
func median[T ~int64 | ~float64](ds []T) T {
	s := slices.Clone(ds)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2
	}
	return s[m]
}
