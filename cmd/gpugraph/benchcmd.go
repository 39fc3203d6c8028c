package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/bench"
	"github.com/gpugraph/gpugraph/internal/side"
)

// benchConfig selects what the bench command measures.
type benchConfig struct {
	Backend   string
	Sizes     []int
	Shapes    []bench.Shape
	Count     int    // runs per measurement; the table shows medians
	Benchtime string // per run, in go test -benchtime syntax: "1s", "100x"
	Progress  bool   // show the progress line (on a terminal)
}

func defaultBenchConfig() benchConfig {
	return benchConfig{Backend: gg.BackendHost, Sizes: bench.Sizes, Shapes: bench.Shapes, Count: 5, Benchtime: "1s"}
}

func benchMain(args []string, stdout, stderr io.Writer) error {
	cfg := defaultBenchConfig()
	fs := newFlagSet("bench", stderr)
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "device backend")
	fs.IntVar(&cfg.Count, "count", cfg.Count, "runs per measurement")
	fs.StringVar(&cfg.Benchtime, "benchtime", cfg.Benchtime, "time per run, or Nx iterations")
	vs := fs.String("vs", "", "side by side with references: taskflow, native, torch (comma-separated)")
	tf := side.DefaultTaskflowConfig("")
	tf.GoSide.Env = selfEnv
	fs.StringVar(&tf.Dir, "taskflow", "", "a Taskflow tree (DIR/taskflow/taskflow.hpp)")
	fs.StringVar(&tf.Harness, "tfside", "", "the C++ harness (default DIR/side/tfside.cpp)")
	bodies := fs.String("body", "atomic", "node bodies for taskflow: atomic and/or work:NS, comma-separated")
	threads := fs.String("threads", "", "worker counts for taskflow, space- or comma-separated (default: every CPU, then 1)")
	reps := fs.Int("reps", 5, "repetitions or rounds of each side")
	secs := fs.Float64("time", 0, "seconds per run of a side (default: taskflow 1, native 0.3)")
	nat := side.DefaultNativeConfig()
	fs.StringVar(&nat.CUDA, "cuda", nat.CUDA, "the CUDA toolkit, for the C loops (native)")
	pt := side.DefaultTorchConfig()
	pt.GG.Env = selfEnv
	fs.StringVar(&pt.Python, "python", pt.Python, "a Python with PyTorch (torch)")
	models := fs.String("model", strings.Join(pt.Models, ","), "models for torch: reference and/or large, comma-separated")
	precisions := fs.String("precision", strings.Join(pt.Precisions, ","), "precisions for torch: fp32, tf32 and/or bf16, comma-separated")
	fs.StringVar(&pt.GEMM, "gemm", "", "torch: gpugraph train's --gemm (auto, kernel, cublas or cublaslt)")
	quiet := fs.Bool("quiet", false, "no progress line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := setFlags(fs)
	// The flags of --vs, and the sides each is for.
	vsFlags := []struct{ name, sides string }{
		{"taskflow", "taskflow"}, {"tfside", "taskflow"}, {"threads", "taskflow"}, {"body", "taskflow"},
		{"time", "taskflow,native"}, {"reps", "taskflow,native,torch"},
		{"cuda", "native"}, {"python", "torch"}, {"model", "torch"}, {"precision", "torch"}, {"gemm", "torch"},
	}
	if *vs == "" {
		for _, f := range vsFlags {
			if set[f.name] {
				return usagef("--%s applies to --vs %s only", f.name, orList(strings.Split(f.sides, ",")))
			}
		}
		if err := checkBenchtime(cfg.Benchtime); err != nil {
			return err
		}
		cfg.Progress = showProgress(stderr, *quiet)
		return runBench(stdout, stderr, cfg)
	}
	sides, err := oneOfList("vs", *vs, "taskflow", "native", "torch")
	if err != nil {
		return err
	}
	for _, name := range []string{"count", "benchtime"} {
		if set[name] {
			return usagef("--%s is the launch-overhead table's: it does not apply with --vs (--reps and --time are --vs's)", name)
		}
	}
	for _, f := range vsFlags {
		if set[f.name] && !slices.ContainsFunc(sides, func(s string) bool { return slices.Contains(strings.Split(f.sides, ","), s) }) {
			return usagef("--%s applies to --vs %s, not to --vs %s", f.name, orList(strings.Split(f.sides, ",")), *vs)
		}
	}
	cuda := slices.Contains(sides, "native") || slices.Contains(sides, "torch")
	switch {
	case slices.Contains(sides, "native") && cfg.Backend != gg.BackendCUDA:
		return usagef("--vs native needs --backend cuda (it compares the cuda backend with the driver's calls from C)")
	case slices.Contains(sides, "torch") && cfg.Backend != gg.BackendCUDA:
		return usagef("--vs torch needs --backend cuda (it compares training on a GPU with PyTorch's)")
	case !cuda && set["backend"] && cfg.Backend != gg.BackendHost:
		return usagef("--backend %s does not apply with --vs taskflow: it measures the host backend", cfg.Backend)
	case slices.Contains(sides, "taskflow") && tf.Dir == "":
		return usagef("--vs taskflow needs --taskflow DIR, a Taskflow tree")
	case *reps < 1:
		return usagef("--reps %d: need at least 1", *reps)
	case *secs < 0 || math.IsNaN(*secs):
		return usagef("--time %g: need more than 0 seconds (0: the default)", *secs)
	}
	tf.Reps, nat.Rounds, pt.Reps = *reps, *reps, *reps
	if *secs != 0 {
		tf.Time, nat.Time = *secs, *secs
	}
	if pt.Models, err = oneOfList("model", *models, side.TorchModels...); err != nil {
		return err
	}
	if pt.Precisions, err = oneOfList("precision", *precisions, side.Precisions...); err != nil {
		return err
	}
	if set["gemm"] {
		if err := checkGEMMName(pt.GEMM); err != nil {
			return err
		}
	}
	if tf.Bodies, err = side.ParseBodies(*bodies); err != nil {
		return usagef("--body %q: %v", *bodies, err)
	}
	if *threads != "" {
		tf.Threads = nil
		for _, f := range strings.FieldsFunc(*threads, func(r rune) bool { return r == ',' || r == ' ' }) {
			n, err := strconv.Atoi(f)
			switch {
			case err != nil:
				return usagef("--threads %q: %q is not a whole number", *threads, f)
			case n < 1:
				return usagef("--threads %q: each count needs to be at least 1", *threads)
			case slices.Contains(tf.Threads, n):
				return usagef("--threads %q names %d twice", *threads, n)
			}
			tf.Threads = append(tf.Threads, n)
		}
		if len(tf.Threads) == 0 {
			return usagef("--threads %q: no worker counts", *threads)
		}
	}
	// The sides report what they are doing on stderr, on a terminal; the
	// PyTorch side's runs take minutes each, so it reports each run's
	// result there in any case (unless --quiet).
	notes := io.Discard
	if showProgress(stderr, *quiet) || (*vs == "torch" && !*quiet) {
		notes = stderr
	}
	for _, s := range sides {
		var r interface{ Write(io.Writer) error }
		var err error
		switch s {
		case "taskflow":
			r, err = side.Taskflow(tf, notes)
		case "native":
			err = withDevice(cfg.Backend, func(d *gg.Device) error {
				var err error
				r, err = side.Native(d, nat, notes)
				return err
			})
		case "torch":
			r, err = side.Torch(pt, notes)
		}
		if err == nil {
			err = r.Write(stdout)
		}
		if err != nil {
			return fromSide(err)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// fromSide makes the side-by-side harnesses' configuration errors usage
// errors.
func fromSide(err error) error {
	if errors.Is(err, side.ErrConfig) {
		return usageError{err.Error()}
	}
	return err
}

// tfsideMain is the hidden command "gpugraph tfside [flags]": the Go side
// of bench --vs taskflow (side.TFSide), run as a child process.
func tfsideMain(args []string, stdout, stderr io.Writer) error {
	cfg := side.DefaultTFSideConfig()
	fs := newFlagSet("tfside", stderr)
	cfg.Flags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return fromSide(side.TFSide(stdout, cfg))
}

// checkBenchtime checks --benchtime: a positive duration, or Nx with N at
// least 1.
func checkBenchtime(d string) error {
	if n, ok := strings.CutSuffix(d, "x"); ok {
		if k, err := strconv.Atoi(n); err == nil && k >= 1 {
			return nil
		}
	} else if t, err := time.ParseDuration(d); err == nil && t > 0 {
		return nil
	}
	return usagef("--benchtime %q: want a duration such as 1s or 200ms, or Nx for N iterations (N at least 1)", d)
}

// withDevice runs fn on a device of backend, closed after.
func withDevice(backend string, fn func(*gg.Device) error) error {
	d, err := openDevice(backend)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(d)
}

// sample is one run of one benchmark.
type sample struct {
	nsPerOp   float64 // one batch of stream launches, or one graph launch
	nsPerNode float64
	nodes     int // nodes per op, from the two above (the wavefront rounds N to a square)
}

// measurements holds every run: stream[size] and graph[size][shape].
type measurements struct {
	stream [][]sample
	graph  [][][]sample
	queued [][][]sample // graph launched bench.Queue times per wait
}

// runBench measures and prints the launch-overhead table to w, with progress
// notes to progress.
func runBench(w, progress io.Writer, cfg benchConfig) error {
	switch {
	case cfg.Count < 1:
		return usagef("--count %d: need at least 1", cfg.Count)
	case len(cfg.Sizes) == 0:
		return usagef("no graph sizes to measure")
	}
	if err := checkBenchtime(cfg.Benchtime); err != nil {
		return err
	}
	restore, err := setBenchtime(cfg.Benchtime)
	if err != nil {
		return err
	}
	defer restore()
	return withDevice(cfg.Backend, func(dev *gg.Device) error {
		// One unit per benchmark run: each size's stream run and, per
		// shape, its graph and queued runs, every round.
		p := startProgress(progress, cfg.Progress, "bench", "runs", cfg.Count*len(cfg.Sizes)*(1+2*len(cfg.Shapes)))
		defer p.Stop()
		w := p.Out(w)
		printBenchHeader(w, dev, cfg)
		m, err := measure(dev, p, cfg)
		if err != nil {
			return err
		}
		return printBenchTable(w, cfg, m)
	})
}

// setBenchtime makes testing.Benchmark run each benchmark for d, through the
// test.benchtime flag it reads, and returns a function restoring the old
// value (testing.Benchmark has no other way to take it).
func setBenchtime(d string) (restore func(), err error) {
	testing.Init() // registers test.benchtime; a no-op inside a test binary
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return nil, errors.New("testing package has no test.benchtime flag")
	}
	old := f.Value.String()
	if err := f.Value.Set(d); err != nil {
		return nil, fmt.Errorf("benchtime %q: %v", d, err)
	}
	return func() { f.Value.Set(old) }, nil
}

func printBenchHeader(w io.Writer, dev *gg.Device, cfg benchConfig) {
	p := dev.Properties()
	fmt.Fprintln(w, "gpugraph bench: launch overhead with empty kernels")
	fmt.Fprintln(w, "  stream: N kernel launches into a stream + Synchronize; graph: one launch of an N-node graph + Synchronize;")
	fmt.Fprintf(w, "  queued: %d launches of the graph + Synchronize\n", bench.Queue)
	fmt.Fprintf(w, "date:   %s\n", time.Now().Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(w, "device: %s, backend %s\n", p.Name, p.Backend)
	fmt.Fprintf(w, "go:     %s %s/%s, GOMAXPROCS %d, %d CPUs\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(w, "runs:   median of %d, benchtime %s each\n\n", cfg.Count, cfg.Benchtime)
}

// measure runs every benchmark cfg.Count times. Each round takes the stream
// and graph measurements of a size back to back, so slow drifts of the
// machine affect both alike.
func measure(dev *gg.Device, p *progress, cfg benchConfig) (measurements, error) {
	m := measurements{
		stream: make([][]sample, len(cfg.Sizes)),
		graph:  make([][][]sample, len(cfg.Sizes)),
		queued: make([][][]sample, len(cfg.Sizes)),
	}
	// One stream for every measurement, as in the native reference (see
	// bench.StreamLaunches for why it matters on a GPU).
	stream, err := dev.NewStream()
	if err != nil {
		return m, err
	}
	defer stream.Destroy()
	for i := range m.graph {
		m.graph[i] = make([][]sample, len(cfg.Shapes))
		m.queued[i] = make([][]sample, len(cfg.Shapes))
	}
	for r := range cfg.Count {
		p.SetLabel(fmt.Sprintf("bench, round %d/%d", r+1, cfg.Count))
		for i, n := range cfg.Sizes {
			s, err := run1(bench.Name("stream", n), bench.StreamLaunches(stream, n))
			if err != nil {
				return m, err
			}
			m.stream[i] = append(m.stream[i], s)
			p.Add(1)
			for j, shape := range cfg.Shapes {
				s, err := run1(bench.Name("graph-"+shape.Name, n), bench.GraphLaunch(stream, shape, n))
				if err != nil {
					return m, err
				}
				m.graph[i][j] = append(m.graph[i][j], s)
				p.Add(1)
				if s, err = run1(bench.Name("queued-"+shape.Name, n), bench.GraphLaunchQueued(stream, shape, n, bench.Queue)); err != nil {
					return m, err
				}
				m.queued[i][j] = append(m.queued[i][j], s)
				p.Add(1)
			}
		}
	}
	return m, nil
}

// run1 runs one benchmark once.
func run1(name string, f func(*testing.B)) (sample, error) {
	r := testing.Benchmark(f)
	if r.N == 0 { // testing.Benchmark discards the failure message
		return sample{}, fmt.Errorf("benchmark %s failed", name)
	}
	s := sample{nsPerOp: float64(r.T.Nanoseconds()) / float64(r.N), nsPerNode: r.Extra["ns/node"]}
	if s.nsPerNode > 0 {
		s.nodes = int(math.Round(s.nsPerOp / s.nsPerNode))
	}
	return s, nil
}

// printBenchTable prints, per size, the stream cost per launch and, per
// shape, the graph cost per node and its ratio to the stream cost; then the
// time of one launch of the 10-node graphs.
func printBenchTable(w io.Writer, cfg benchConfig, m measurements) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"N", "stream ns/op"}
	for _, s := range cfg.Shapes {
		head = append(head, s.Name+" ns/node", "ratio")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for i, n := range cfg.Sizes {
		st := median(nsPerNode(m.stream[i]))
		row := []string{fmt.Sprint(n), fmt.Sprintf("%.0f", st)}
		for j := range cfg.Shapes {
			g := median(nsPerNode(m.graph[i][j]))
			row = append(row, fmt.Sprintf("%.0f", g), fmt.Sprintf("%.2f", g/st))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "  (ratio: graph ns/node over stream ns/op, of medians; below 1 means the graph launches a node for less)")

	// Queued: the engine's own cost per node, the wake-up spread out.
	fmt.Fprintf(w, "\nqueued: %d launches of the graph, then one Synchronize (ns/node, medians)\n", bench.Queue)
	head = []string{"N"}
	for _, s := range cfg.Shapes {
		head = append(head, s.Name, "vs one")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for i, n := range cfg.Sizes {
		row := []string{fmt.Sprint(n)}
		for j := range cfg.Shapes {
			q, one := median(nsPerNode(m.queued[i][j])), median(nsPerNode(m.graph[i][j]))
			row = append(row, fmt.Sprintf("%.0f", q), fmt.Sprintf("%.2f", q/one))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "  (vs one: queued ns/node over one launch + Synchronize ns/node)")
	printTenNode(w, cfg, m)
	return nil
}

// printTenNode prints the per-launch time of the 10-node graphs, if 10 is
// one of the sizes.
func printTenNode(w io.Writer, cfg benchConfig, m measurements) {
	i := -1
	for k, n := range cfg.Sizes {
		if n == 10 {
			i = k
		}
	}
	if i < 0 {
		return
	}
	fmt.Fprintln(w, "\nper launch of 10 nodes (median µs, including Synchronize):")
	fmt.Fprintf(w, "  %-10s %8.2f  (10 launches + Synchronize)\n", "stream", median(nsPerOp(m.stream[i]))/1e3)
	for j, s := range cfg.Shapes {
		note := ""
		if nodes := m.graph[i][j][0].nodes; nodes != 10 {
			note = fmt.Sprintf("  (%d nodes)", nodes)
		}
		fmt.Fprintf(w, "  %-10s %8.2f%s\n", s.Name, median(nsPerOp(m.graph[i][j]))/1e3, note)
	}
}

func nsPerNode(ss []sample) []float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.nsPerNode
	}
	return v
}

func nsPerOp(ss []sample) []float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.nsPerOp
	}
	return v
}
