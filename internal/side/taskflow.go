package side

// The Taskflow side by side: gpugraph's host backend against Taskflow
// (https://github.com/taskflow/taskflow), a C++ task-graph executor, on the
// same DAG shapes, the same machine and the same worker counts, in
// interleaved runs. Taskflow is the yardstick of a CPU task graph: the host
// backend runs a graph of kernel nodes the way Taskflow runs a tf::Taskflow,
// so its cost per node says how much the CUDA model's bookkeeping costs on top
// of a plain task scheduler.
//
// The measurement is shared/bench/taskflow/side's (run.sh, tfside.go,
// tfside.cpp), brought into gpugraph so that one run needs no copy of the
// module, no separately built Go program and no Python: TFSide is tfside.go
// (the hidden "gpugraph tfside"), Taskflow is run.sh. The C++ side stays the
// harness's tfside.cpp, compiled here. Each side runs in a
// process of its own, started fresh for every worker count, because the host
// backend sizes its worker pool from GOMAXPROCS once per process.

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// tfShape is a DAG of the side-by-side probe given as predecessor lists:
// preds[i] are the nodes i depends on, all < i. tfside.cpp builds the same
// shapes with tf::Task::precede.
type tfShape struct {
	name  string
	preds [][]int
	chain bool // the op-by-op modes (stream, async) run only chains
}

// tfShapes are the probe's shapes, in the order the harness runs and the
// table prints them.
var tfShapes = []tfShape{
	{"chain1000", tfChain(1000), true},
	{"wavefront32x32", tfWavefront(32), false},
	{"fanout1x1000x1", tfFanout(1000), false},
	{"tree10", tfTree(10), false},
	{"chain10", tfChain(10), true},
}

func tfChain(n int) [][]int {
	p := make([][]int, n)
	for i := 1; i < n; i++ {
		p[i] = []int{i - 1}
	}
	return p
}

// tfWavefront is a side×side grid, each cell after its left and upper
// neighbours.
func tfWavefront(side int) [][]int {
	p := make([][]int, side*side)
	for r := range side {
		for c := range side {
			var d []int
			if c > 0 {
				d = append(d, r*side+c-1) // left
			}
			if r > 0 {
				d = append(d, (r-1)*side+c) // up
			}
			p[r*side+c] = d
		}
	}
	return p
}

// tfFanout is one node, width nodes after it, and one node after them all.
func tfFanout(width int) [][]int {
	p := make([][]int, width+2)
	mid := make([]int, width)
	for i := 1; i <= width; i++ {
		p[i] = []int{0}
		mid[i-1] = i
	}
	p[width+1] = mid
	return p
}

// tfTree is a binary tree of the given depth, each node after its parent.
func tfTree(depth int) [][]int {
	n := 1<<depth - 1
	p := make([][]int, n)
	for i := 1; i < n; i++ {
		p[i] = []int{(i - 1) / 2}
	}
	return p
}

func tfShapeNamed(name string) (tfShape, bool) {
	i := slices.IndexFunc(tfShapes, func(s tfShape) bool { return s.name == name })
	if i < 0 {
		return tfShape{}, false
	}
	return tfShapes[i], true
}

func tfShapeNames() string {
	names := make([]string, len(tfShapes))
	for i, s := range tfShapes {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// The node bodies, package-level as in tfside.go and tfside.cpp: the atomic
// body increments one shared counter (checked after each repetition:
// counter == runs*nodes), the empty body does nothing, the work body runs
// tfWork for tfsideWorkIters rounds and adds the result to its node's slot
// (the node index is the kernel's one argument; checked after each
// repetition: every slot == runs * that node's result).
var (
	tfsideCounter atomic.Int64
	tfsideAtomic  = &gg.Kernel{Name: "inc", Go: func(gg.Block, gg.Args) { tfsideCounter.Add(1) }}
	tfsideEmpty   = &gg.Kernel{Name: "empty", Go: func(gg.Block, gg.Args) {}}
	tfsideWork    = &gg.Kernel{Name: "work", Params: []gg.ParamType{gg.Int64}, Go: func(_ gg.Block, a gg.Args) { tfsideWorkBody(a.Int(0)) }}

	tfsideSlots     []tfSlot // tfsideSlots[i]: node i's
	tfsideWorkIters int
	tfsideSink      uint64 // keeps calibration results alive
)

// tfWork is the work body's arithmetic: iters rounds of xorshift64 on a
// local, a serial dependency chain, the loop of tfside.go's work and
// tfside.cpp's work (keep the three the same: both sides must do the same
// work for the same iteration count). Not inlined, so every node runs this
// exact code.
//
//go:noinline
func tfWork(x uint64, iters int) uint64 {
	for j := 0; j < iters; j++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// tfSlot holds one node's results, alone on its cache line.
type tfSlot struct {
	sum uint64
	_   [56]byte
}

func tfsideWorkBody(i int) { tfsideSlots[i].sum += tfWork(uint64(i)+1, tfsideWorkIters) }

// tfCalibrate returns the iterations of tfWork that take about ns
// nanoseconds: double them until a call takes 10 ms (fastest of 3), then
// scale. (tfside.go's calibrate; bench --vs taskflow calibrates with the C++
// side's instead, once, and gives both sides its count.)
func tfCalibrate(ns int) int {
	for k := 1024; ; k *= 2 {
		best := time.Hour
		for range 3 {
			t := time.Now()
			tfsideSink = tfWork(1, k)
			best = min(best, time.Since(t))
		}
		if best >= 10*time.Millisecond {
			return max(1, int(math.Round(float64(ns)*float64(k)/float64(best.Nanoseconds()))))
		}
	}
}

// tfSerialNs is the time of one work body alone on this goroutine: calls on
// nodes 0, 1, ... in turn, doubling their number until they take 20 ms.
func tfSerialNs() float64 {
	for calls := 16; ; calls *= 2 {
		i := 0
		t := time.Now()
		for range calls {
			tfsideWorkBody(i)
			if i++; i == len(tfsideSlots) {
				i = 0
			}
		}
		if el := time.Since(t); el >= 20*time.Millisecond {
			return float64(el.Nanoseconds()) / float64(calls)
		}
	}
}

// TFSideConfig is what TFSide measures: the flags of the command "gpugraph
// tfside" (-threads, -shapes, -body, -work, -iters, -mode, -batch, -reps,
// -firstrep, -warmup, -time, -info, -calibrate), which are those of the C++
// harness tfside.cpp; Taskflow runs both sides with the same ones.
type TFSideConfig struct {
	Threads int      // GOMAXPROCS, the host backend's worker count
	Shapes  []string // shape names; nil: all
	// Body is the node body: atomic (a shared counter, checked), empty, or
	// work (Iters rounds of the work loop, each node's result checked;
	// Iters 0: calibrated here to WorkNs ns).
	Body          string
	WorkNs, Iters int
	Mode          string // graph, batch, or stream (chain shapes only)
	Batch         int    // launches per Synchronize in mode batch
	Reps          int    // repetitions per shape
	FirstRep      int    // label of the first repetition
	Warmup, Time  float64
	// Info prints the Go version and GOMAXPROCS, Calibrate the iterations
	// for WorkNs, instead of measuring.
	Info, Calibrate bool
}

// Flags defines the flags of "gpugraph tfside" on fs, bound to c's fields,
// with c's values as their defaults: the C++ harness's flags, which
// Taskflow gives both sides. -shapes takes a comma-separated list of shape
// names, or all.
func (c *TFSideConfig) Flags(fs *flag.FlagSet) {
	fs.IntVar(&c.Threads, "threads", c.Threads, "GOMAXPROCS (worker count)")
	fs.Var((*shapeList)(&c.Shapes), "shapes", "comma-separated shape names, or all")
	fs.StringVar(&c.Body, "body", c.Body, "node body: atomic (shared counter, checked), empty, or work (-work ns of arithmetic, checked)")
	fs.IntVar(&c.WorkNs, "work", c.WorkNs, "nanoseconds per work body (for calibration)")
	fs.IntVar(&c.Iters, "iters", c.Iters, "iterations per work body (0: calibrate to -work)")
	fs.BoolVar(&c.Calibrate, "calibrate", c.Calibrate, "print the iterations for -work and exit")
	fs.StringVar(&c.Mode, "mode", c.Mode, "graph, batch, or stream (chain shapes only)")
	fs.IntVar(&c.Batch, "batch", c.Batch, "launches per Synchronize in mode batch")
	fs.IntVar(&c.Reps, "reps", c.Reps, "repetitions per shape")
	fs.IntVar(&c.FirstRep, "firstrep", c.FirstRep, "label of the first repetition")
	fs.Float64Var(&c.Warmup, "warmup", c.Warmup, "warm-up seconds per repetition")
	fs.Float64Var(&c.Time, "time", c.Time, "timed seconds per repetition")
	fs.BoolVar(&c.Info, "info", c.Info, "print the Go version and GOMAXPROCS and exit")
}

// shapeList is the value of -shapes: nil for all.
type shapeList []string

func (l *shapeList) String() string {
	if l == nil || *l == nil {
		return "all"
	}
	return strings.Join(*l, ",")
}

func (l *shapeList) Set(v string) error {
	*l = nil
	if v != "all" {
		*l = strings.Split(v, ",")
	}
	return nil
}

func (l *shapeList) Get() any { return []string(*l) }

// DefaultTFSideConfig returns tfside.go's defaults.
func DefaultTFSideConfig() TFSideConfig {
	return TFSideConfig{Threads: runtime.NumCPU(), Body: "atomic", WorkNs: 1000, Mode: "graph", Batch: 100, Reps: 1, FirstRep: 1, Warmup: 0.2, Time: 1}
}

// TFSide is the Go side of the Taskflow harness, run by the hidden command
// "gpugraph tfside": the same output lines as
// shared/bench/taskflow/side/tfside.go, one per (shape, repetition):
//
//	impl=gpugraph mode=graph shape=chain1000 nodes=1000 threads=2 body=atomic rep=1 runs=... ns_per_run=... ns_per_node=... check=ok
//
// Body work: each node runs Iters rounds of tfWork (0: calibrated here to
// WorkNs ns), and its result is checked; the lines add work_ns, work_iters
// and serial_ns_per_node, the body alone timed on one goroutine before the
// device opens (speedup = serial_ns_per_node / ns_per_node). Calibrate
// prints work_ns=NS work_iters=N for WorkNs and returns.
//
// Mode graph: one Exec.Launch + Stream.Synchronize per run of an
// instantiated graph of kernel nodes (grid 1, block 1), as Taskflow's
// executor.run(taskflow).wait(). Mode batch: Batch Exec.Launch calls, then
// one Stream.Synchronize; a run is one launch (Taskflow's
// executor.run_n(taskflow, batch).wait()). Mode stream (chain shapes only):
// one Stream.Launch per node, then one Stream.Synchronize per run (Taskflow's
// mode async: one dependent async task per node).
//
// Timing, identical in tfside.cpp: run for Warmup seconds (untimed),
// estimate the time of one run from that, then time runs = Time / estimate
// runs back to back, reading the clock only before and after.
//
// It sets GOMAXPROCS to Threads before opening the host device, whose
// worker pool is sized from it once per process: the numbers mean what they
// say in a fresh process, as Taskflow starts one. GOMAXPROCS is restored on
// return.
func TFSide(stdout io.Writer, cfg TFSideConfig) error {
	if cfg.Threads < 1 {
		return configf("-threads %d: need at least 1", cfg.Threads)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.Threads))
	if cfg.Info {
		fmt.Fprintf(stdout, "go %s %s/%s GOMAXPROCS=%d NumCPU=%d\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
		return nil
	}
	if cfg.WorkNs < 1 || cfg.Iters < 0 {
		return configf("-work %d -iters %d: need work at least 1 and iters 0 or more", cfg.WorkNs, cfg.Iters)
	}
	if cfg.Calibrate {
		fmt.Fprintf(stdout, "work_ns=%d work_iters=%d\n", cfg.WorkNs, tfCalibrate(cfg.WorkNs))
		return nil
	}
	var k *gg.Kernel
	switch cfg.Body {
	case "atomic":
		k = tfsideAtomic
	case "empty":
		k = tfsideEmpty
	case "work":
		k = tfsideWork
	default:
		return configf("-body %q: atomic, empty or work", cfg.Body)
	}
	switch {
	case cfg.Mode != "graph" && cfg.Mode != "batch" && cfg.Mode != "stream":
		return configf("-mode %q: graph, batch or stream", cfg.Mode)
	case cfg.Batch < 1 || cfg.Reps < 1:
		return configf("-batch %d -reps %d: need at least 1", cfg.Batch, cfg.Reps)
	case !(cfg.Time > 0) || !(cfg.Warmup >= 0):
		return configf("-time %g -warmup %g: need time > 0 and warmup >= 0", cfg.Time, cfg.Warmup)
	}
	for _, name := range cfg.Shapes {
		if _, ok := tfShapeNamed(name); !ok {
			return configf("-shapes: unknown shape %q (%s, or all)", name, tfShapeNames())
		}
	}

	workCols := "" // appended to each line
	if cfg.Body == "work" {
		// Iterations, slots for the largest shape, and the body's time
		// alone, all before the device's workers start.
		tfsideWorkIters = cfg.Iters
		if tfsideWorkIters == 0 {
			tfsideWorkIters = tfCalibrate(cfg.WorkNs)
		}
		most := 0
		for _, sh := range tfShapes {
			most = max(most, len(sh.preds))
		}
		tfsideSlots = make([]tfSlot, most)
		workCols = fmt.Sprintf(" work_ns=%d work_iters=%d serial_ns_per_node=%.2f", cfg.WorkNs, tfsideWorkIters, tfSerialNs())
	}

	d, err := gg.Open(gg.BackendHost)
	if err != nil {
		return fmt.Errorf("open device: %w", err)
	}
	defer d.Close()
	if got := d.Properties().MultiProcessorCount; got != cfg.Threads {
		return fmt.Errorf("device has %d workers, want %d", got, cfg.Threads)
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()

	// The harness runs the shapes in its own order whatever the order of
	// Shapes.
	for _, sh := range tfShapes {
		if cfg.Shapes != nil && !slices.Contains(cfg.Shapes, sh.name) || cfg.Mode == "stream" && !sh.chain {
			continue
		}
		if err := tfsideShape(stdout, d, s, sh, k, cfg.Mode, cfg.Body, workCols, cfg.Batch, cfg.FirstRep, cfg.Reps, cfg.Warmup, cfg.Time); err != nil {
			return fmt.Errorf("%s, mode %s: %w", sh.name, cfg.Mode, err)
		}
	}
	return nil
}

// tfsideShape times reps repetitions of one shape and prints their lines,
// each ending in workCols.
func tfsideShape(out io.Writer, d *gg.Device, s *gg.Stream, sh tfShape, k *gg.Kernel, mode, body, workCols string, batch, firstRep, reps int, warmup, target float64) error {
	n := len(sh.preds)
	one := gg.Dim1(1)
	args := make([][]any, n) // the work kernel's argument: the node index
	var result []uint64      // the work body's result of each node, for the check
	if body == "work" {
		result = make([]uint64, n)
		for i := range args {
			args[i] = []any{int64(i)}
			result[i] = tfWork(uint64(i)+1, tfsideWorkIters)
		}
	}
	var run func() error
	perCall := 1 // graph runs per call of run
	if mode == "stream" {
		run = func() error {
			for i := range n {
				if err := s.Launch(k, one, one, args[i]...); err != nil {
					return fmt.Errorf("stream launch: %w", err)
				}
			}
			return s.Synchronize()
		}
	} else {
		g, err := d.NewGraph()
		if err != nil {
			return err
		}
		defer g.Destroy()
		nodes := make([]*gg.Node, n)
		for i, ps := range sh.preds {
			deps := make([]*gg.Node, len(ps))
			for j, p := range ps {
				deps[j] = nodes[p]
			}
			if nodes[i], err = g.AddKernelNode(gg.KernelParams{Kernel: k, Grid: one, Block: one, Args: args[i]}, deps...); err != nil {
				return err
			}
		}
		ex, err := g.Instantiate(0)
		if err != nil {
			return err
		}
		defer ex.Destroy()
		run = func() error {
			if err := ex.Launch(s); err != nil {
				return fmt.Errorf("launch: %w", err)
			}
			return s.Synchronize()
		}
		if mode == "batch" {
			perCall = batch
			run = func() error {
				for range perCall {
					if err := ex.Launch(s); err != nil {
						return fmt.Errorf("launch: %w", err)
					}
				}
				return s.Synchronize()
			}
		}
	}
	for r := firstRep; r < firstRep+reps; r++ {
		// Warm up, and estimate the time of one run.
		w := 0
		start := time.Now()
		for time.Since(start).Seconds() < warmup || w < 3 {
			if err := run(); err != nil {
				return err
			}
			w++
		}
		est := time.Since(start).Seconds() / float64(w)
		calls := max(1, int(target/est))
		runs := calls * perCall

		tfsideCounter.Store(0)
		clear(tfsideSlots)
		t0 := time.Now()
		for range calls {
			if err := run(); err != nil {
				return err
			}
		}
		el := time.Since(t0)
		check := "n/a"
		switch body {
		case "atomic":
			if got, want := tfsideCounter.Load(), int64(runs)*int64(n); got == want {
				check = "ok"
			} else {
				check = fmt.Sprintf("FAIL(%d!=%d)", got, want)
			}
		case "work":
			bad := 0
			for i, want := range result {
				if tfsideSlots[i].sum != uint64(runs)*want {
					bad++
				}
			}
			if check = "ok"; bad > 0 {
				check = fmt.Sprintf("FAIL(%d_of_%d_nodes)", bad, n)
			}
		}
		perRun := float64(el.Nanoseconds()) / float64(runs)
		fmt.Fprintf(out, "impl=gpugraph mode=%s shape=%s nodes=%d threads=%d body=%s rep=%d runs=%d ns_per_run=%.1f ns_per_node=%.2f check=%s%s\n",
			mode, sh.name, n, runtime.GOMAXPROCS(0), body, r, runs, perRun, perRun/float64(n), check, workCols)
	}
	return nil
}

// tfSample is one impl= line of either side: one repetition of one shape.
// Lines of the work body add workNs, workIters and serialNs (the body alone
// on one thread, ns).
type tfSample struct {
	impl, mode, shape, body, check string
	nodes, threads, rep, runs      int
	nsPerRun, nsPerNode            float64
	workNs, workIters              int
	serialNs                       float64
}

// parseTFSamples reads the output of either side: every non-blank line must
// be an impl= line. A failed counter check is an error quoting the line.
func parseTFSamples(r io.Reader) ([]tfSample, error) {
	var out []tfSample
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		s, err := parseTFSample(line)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// parseTFSample parses one line such as
//
//	impl=taskflow mode=graph shape=chain10 nodes=10 threads=2 body=atomic rep=1 runs=400 ns_per_run=5000.0 ns_per_node=500.00 check=ok
//
// with work_ns, work_iters and serial_ns_per_node required after body=work.
func parseTFSample(line string) (tfSample, error) {
	bad := func(format string, a ...any) (tfSample, error) {
		return tfSample{}, fmt.Errorf("malformed line %q: %s", line, fmt.Sprintf(format, a...))
	}
	kv := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			return bad("%q is not key=value", f)
		}
		if _, dup := kv[k]; dup {
			return bad("%s given twice", k)
		}
		kv[k] = v
	}
	var s tfSample
	for _, f := range []struct {
		key  string
		dst  *string
		alts []string
	}{
		{"impl", &s.impl, []string{"gpugraph", "taskflow"}},
		{"mode", &s.mode, []string{"graph", "batch", "stream", "async"}},
		{"shape", &s.shape, nil},
		{"body", &s.body, []string{"atomic", "empty", "work"}},
		{"check", &s.check, nil},
	} {
		v, ok := kv[f.key]
		if !ok {
			return bad("no %s", f.key)
		}
		if f.alts != nil && !slices.Contains(f.alts, v) {
			return bad("%s=%s: want one of %s", f.key, v, strings.Join(f.alts, ", "))
		}
		*f.dst = v
	}
	for _, f := range []struct {
		key string
		dst *int
		min int
	}{{"nodes", &s.nodes, 1}, {"threads", &s.threads, 1}, {"rep", &s.rep, 0}, {"runs", &s.runs, 1}} {
		v, err := strconv.Atoi(kv[f.key])
		if err != nil || v < f.min {
			return bad("%s=%q: want an integer >= %d", f.key, kv[f.key], f.min)
		}
		*f.dst = v
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"ns_per_run", &s.nsPerRun}, {"ns_per_node", &s.nsPerNode}} {
		v, err := strconv.ParseFloat(kv[f.key], 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return bad("%s=%q: want a positive number", f.key, kv[f.key])
		}
		*f.dst = v
	}
	if s.body == "work" {
		for _, f := range []struct {
			key string
			dst *int
		}{{"work_ns", &s.workNs}, {"work_iters", &s.workIters}} {
			v, err := strconv.Atoi(kv[f.key])
			if err != nil || v < 1 {
				return bad("%s=%q: want an integer >= 1 with body=work", f.key, kv[f.key])
			}
			*f.dst = v
		}
		v, err := strconv.ParseFloat(kv["serial_ns_per_node"], 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return bad("serial_ns_per_node=%q: want a positive number with body=work", kv["serial_ns_per_node"])
		}
		s.serialNs = v
	}
	sh, ok := tfShapeNamed(s.shape)
	if !ok {
		return bad("unknown shape %q (%s)", s.shape, tfShapeNames())
	}
	if s.nodes != len(sh.preds) {
		return bad("%s has %d nodes, not %d", s.shape, len(sh.preds), s.nodes)
	}
	switch {
	case strings.HasPrefix(s.check, "FAIL"):
		return tfSample{}, fmt.Errorf("counter check failed: %s", line) // or the work body's result check
	case s.check != "ok" && s.check != "n/a":
		return bad("check=%s: want ok, n/a or FAIL(...)", s.check)
	}
	return s, nil
}

// tfModePair pairs each side's modes: Taskflow's async is the op-by-op
// analogue of a stream.
var tfModePair = map[string]string{"graph": "graph", "batch": "batch", "stream": "op-by-op", "async": "op-by-op"}

var tfModeOrder = []string{"graph", "batch", "op-by-op"}

// tfRow is a line of the table: both sides' samples of one measurement.
// body is the sample's body, work:NS for the work body of NS ns.
type tfRow struct {
	threads, workNs    int
	body, mode, shape  string
	gpugraph, taskflow []tfSample
}

// tfBodyLabel is a sample's body as the table and --body spell it.
func tfBodyLabel(s tfSample) string {
	if s.body == "work" {
		return "work:" + strconv.Itoa(s.workNs)
	}
	return s.body
}

// tfCriticalPath is the number of nodes on the longest path of a shape.
func tfCriticalPath(preds [][]int) int {
	depth := make([]int, len(preds)) // preds are all < i
	most := 0
	for i, ps := range preds {
		depth[i] = 1
		for _, p := range ps {
			depth[i] = max(depth[i], depth[p]+1)
		}
		most = max(most, depth[i])
	}
	return most
}

// tfIdeal is the speedup a perfect scheduler reaches on a shape with the
// given workers: the lesser of the workers and the shape's nodes over its
// critical path.
func tfIdeal(threads int, shape string) float64 {
	sh, _ := tfShapeNamed(shape)
	return min(float64(threads), float64(len(sh.preds))/float64(tfCriticalPath(sh.preds)))
}

// printTFTable prints the medians of the samples as run.sh's summary does:
// one line per worker count, body, mode and shape (most workers first, then
// by body, mode and the shapes' order), ns per run, ns per node with its
// range over the repetitions, and the ratio of the two sides' median ns per
// node; "-" where a side has no sample. With samples of the work body it
// adds, as tools/gpu/tfside.sh's summary, each side's speedup (median
// serial_ns_per_node / median ns_per_node), the ideal one (tfIdeal) and
// gpugraph's over the ideal, on the rows of the work body.
func printTFTable(w io.Writer, samples []tfSample) {
	ok, failed := 0, 0
	work := false
	bodyWidth := len("atomic")
	var rows []*tfRow
	for _, s := range samples {
		switch s.check {
		case "ok":
			ok++
		case "n/a":
		default:
			failed++
		}
		mode, body := tfModePair[s.mode], tfBodyLabel(s)
		work = work || s.body == "work"
		bodyWidth = max(bodyWidth, len(body))
		i := slices.IndexFunc(rows, func(r *tfRow) bool {
			return r.threads == s.threads && r.body == body && r.mode == mode && r.shape == s.shape
		})
		if i < 0 {
			rows = append(rows, &tfRow{threads: s.threads, workNs: s.workNs, body: body, mode: mode, shape: s.shape})
			i = len(rows) - 1
		}
		if s.impl == "gpugraph" {
			rows[i].gpugraph = append(rows[i].gpugraph, s)
		} else {
			rows[i].taskflow = append(rows[i].taskflow, s)
		}
	}
	shapeOrder := func(name string) int {
		return slices.IndexFunc(tfShapes, func(s tfShape) bool { return s.name == name })
	}
	slices.SortFunc(rows, func(a, b *tfRow) int {
		if a.threads != b.threads {
			return b.threads - a.threads
		}
		if c := strings.Compare(a.body, b.body); c != 0 {
			if a.workNs > 0 && b.workNs > 0 {
				return a.workNs - b.workNs // work:1000 before work:5000 and work:10000
			}
			return c
		}
		if c := slices.Index(tfModeOrder, a.mode) - slices.Index(tfModeOrder, b.mode); c != 0 {
			return c
		}
		return shapeOrder(a.shape) - shapeOrder(b.shape)
	})

	fmt.Fprintf(w, "%d samples; counter checks: %d ok, %d failed\n", len(samples), ok, failed)
	speedupHead := ""
	if work {
		fmt.Fprintln(w, "gg x, tf x: speedup, the body's serial time / time per node (medians); ideal: min(threads, nodes / critical path)")
		speedupHead = fmt.Sprintf(" | %5s %5s %5s %8s", "gg x", "tf x", "ideal", "gg/ideal")
	}
	fmt.Fprintf(w, "%7s %-*s %-8s %-15s %3s | %15s %8s %15s | %15s %8s %15s | %6s%s\n",
		"threads", bodyWidth, "body", "mode", "shape", "n", "gpugraph ns/run", "ns/node", "(min-max)", "taskflow ns/run", "ns/node", "(min-max)", "gg/tf", speedupHead)
	for _, r := range rows {
		ratio := fmt.Sprintf("%6s", "-")
		both := r.gpugraph != nil && r.taskflow != nil
		if both {
			ratio = fmt.Sprintf("%6.2f", median(tfNsPerNode(r.gpugraph))/median(tfNsPerNode(r.taskflow)))
		}
		n := len(r.gpugraph)
		if n == 0 {
			n = len(r.taskflow)
		}
		speedup := ""
		if work {
			speedup = fmt.Sprintf(" | %5s %5s %5s %8s", "-", "-", "-", "-")
			if r.workNs > 0 {
				ideal := tfIdeal(r.threads, r.shape)
				gx, tx := tfSpeedup(r.gpugraph), tfSpeedup(r.taskflow)
				cell := func(x float64) string {
					if math.IsNaN(x) {
						return "-"
					}
					return fmt.Sprintf("%.2f", x)
				}
				speedup = fmt.Sprintf(" | %5s %5s %5.1f %8s", cell(gx), cell(tx), ideal, cell(gx/ideal))
			}
		}
		fmt.Fprintf(w, "%7d %-*s %-8s %-15s %3d | %s | %s | %s%s\n", r.threads, bodyWidth, r.body, r.mode, r.shape, n, tfCols(r.gpugraph), tfCols(r.taskflow), ratio, speedup)
	}
}

// tfSpeedup is one side's speedup on work samples: the median serial time
// of the body over the median time per node; NaN without samples.
func tfSpeedup(ss []tfSample) float64 {
	if len(ss) == 0 {
		return math.NaN()
	}
	serial := make([]float64, len(ss))
	for i, s := range ss {
		serial[i] = s.serialNs
	}
	return median(serial) / median(tfNsPerNode(ss))
}

// tfCols is one side's columns: median ns/run, median ns/node (min-max).
func tfCols(ss []tfSample) string {
	if len(ss) == 0 {
		return fmt.Sprintf("%15s %8s %15s", "-", "-", "")
	}
	perRun := make([]float64, len(ss))
	for i, s := range ss {
		perRun[i] = s.nsPerRun
	}
	nodes := tfNsPerNode(ss)
	return fmt.Sprintf("%15.0f %8.1f %15s", median(perRun), median(nodes), fmt.Sprintf("(%.1f-%.1f)", slices.Min(nodes), slices.Max(nodes)))
}

func tfNsPerNode(ss []tfSample) []float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.nsPerNode
	}
	return v
}

// TaskflowConfig is what Taskflow measures: run.sh's settings. Harness, CXX
// and Threads left empty take their defaults; the numbers must be set
// (DefaultTaskflowConfig has run.sh's).
type TaskflowConfig struct {
	Dir     string  // a Taskflow tree: Dir/taskflow/taskflow.hpp (required)
	Harness string  // the C++ harness; default Dir/side/tfside.cpp
	CXX     string  // C++ compiler, default "g++"
	Threads []int   // worker counts, default {runtime.NumCPU(), 1}
	Reps    int     // interleaved repetitions, default 5
	Time    float64 // timed seconds per shape per repetition, default 1
	Warmup  float64 // default 0.2
	Batch   int     // launches per wait in mode batch, default 100
	// Bodies are the node bodies, default {atomic}: atomic runs every mode
	// with the atomic body and mode graph with the empty one, as run.sh;
	// each work:NS runs mode graph with NS ns of work per node.
	Bodies []Body
	// GoSide is the gpugraph side, the command "gpugraph tfside" (TFSide):
	// DefaultTaskflowConfig's is this executable's, Self("tfside").
	GoSide Command
}

// Body is a node body of bench --vs taskflow: atomic, or work of NS
// nanoseconds per node.
type Body struct {
	Name string // atomic or work
	NS   int    // work only
}

func (b Body) String() string {
	if b.Name == "work" {
		return "work:" + strconv.Itoa(b.NS)
	}
	return b.Name
}

// ParseBodies parses a list of bodies (bench --body): atomic and/or work:NS
// (NS ns of work per node, at least 1), comma- or space-separated, each
// once. Its errors say what is wrong with the list, not naming it.
func ParseBodies(list string) ([]Body, error) {
	var out []Body
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		b := Body{Name: f}
		if ns, ok := strings.CutPrefix(f, "work:"); ok {
			n, err := strconv.Atoi(ns)
			if err != nil || n < 1 {
				return nil, configf("%q needs a whole number of ns, at least 1 (such as work:1000)", f)
			}
			b = Body{Name: "work", NS: n}
		} else if f != "atomic" {
			return nil, configf("unknown body %q (want atomic or work:NS, NS ns of work per node)", f)
		}
		if slices.Contains(out, b) {
			return nil, configf("names %s twice", b)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, configf("no bodies")
	}
	return out, nil
}

// DefaultTaskflowConfig returns run.sh's defaults for the tree dir.
func DefaultTaskflowConfig(dir string) TaskflowConfig {
	return TaskflowConfig{Dir: dir, CXX: "g++", Threads: defaultTFThreads(), Reps: 5, Time: 1, Warmup: 0.2, Batch: 100, Bodies: []Body{{Name: "atomic"}},
		GoSide: Self("tfside")}
}

// defaultTFThreads is every CPU, then one worker (once on one CPU).
func defaultTFThreads() []int {
	if n := runtime.NumCPU(); n > 1 {
		return []int{n, 1}
	}
	return []int{1}
}

// withDefaults fills in the defaults and checks the values.
func (cfg TaskflowConfig) withDefaults() (TaskflowConfig, error) {
	if cfg.Dir == "" {
		return cfg, configf("no Taskflow directory given")
	}
	if cfg.GoSide.Path == "" {
		return cfg, configf("no command for the gpugraph side (gpugraph tfside)")
	}
	if cfg.Harness == "" {
		cfg.Harness = filepath.Join(cfg.Dir, "side", "tfside.cpp")
	}
	if cfg.CXX == "" {
		cfg.CXX = "g++"
	}
	if len(cfg.Threads) == 0 {
		cfg.Threads = defaultTFThreads()
	}
	if len(cfg.Bodies) == 0 {
		cfg.Bodies = []Body{{Name: "atomic"}}
	}
	for i, b := range cfg.Bodies {
		if b.Name != "atomic" && (b.Name != "work" || b.NS < 1) || slices.Contains(cfg.Bodies[:i], b) {
			return cfg, configf("bodies %v: each atomic or work:NS with NS at least 1, none twice", cfg.Bodies)
		}
	}
	for i, t := range cfg.Threads {
		if t < 1 || slices.Contains(cfg.Threads[:i], t) {
			return cfg, configf("thread counts %v: each at least 1, none twice", cfg.Threads)
		}
	}
	switch {
	case cfg.Reps < 1:
		return cfg, configf("%d repetitions: need at least 1", cfg.Reps)
	case !(cfg.Time > 0):
		return cfg, configf("time %g s: need more than 0", cfg.Time)
	case !(cfg.Warmup >= 0):
		return cfg, configf("warm-up %g s: need 0 or more", cfg.Warmup)
	case cfg.Batch < 1:
		return cfg, configf("batch %d: need at least 1", cfg.Batch)
	}
	return cfg, nil
}

// tfConfig is one of run.sh's CONFIGS: Taskflow's mode, ours, and the
// body (work: its ns).
type tfConfig struct {
	cppMode, goMode string
	body            Body
}

// tfConfigs are the configurations of the bodies, in their order: atomic
// is run.sh's (every mode, and mode graph with the empty body), work:NS is
// mode graph, as tools/gpu/tfside.sh's.
func tfConfigs(bodies []Body) []tfConfig {
	var out []tfConfig
	for _, b := range bodies {
		if b.Name == "atomic" {
			out = append(out,
				tfConfig{"graph", "graph", b},
				tfConfig{"batch", "batch", b},
				tfConfig{"async", "stream", b},
				tfConfig{"graph", "graph", Body{Name: "empty"}})
		} else {
			out = append(out, tfConfig{"graph", "graph", b})
		}
	}
	return out
}

// tfCalibrated reads "work_ns=NS work_iters=N", the output of the C++
// side's -calibrate -work NS.
func tfCalibrated(out string, ns int) (int, error) {
	var gotNs, iters int
	if n, err := fmt.Sscanf(strings.TrimSpace(out), "work_ns=%d work_iters=%d", &gotNs, &iters); n != 2 || err != nil || gotNs != ns || iters < 1 {
		return 0, fmt.Errorf("calibrating %d ns: the C++ side printed %q, want work_ns=%d work_iters=N (N >= 1)", ns, out, ns)
	}
	return iters, nil
}

// TaskflowReport is the outcome of Taskflow: the machine, the settings and
// every sample of both sides. Write prints it as bench --vs taskflow does.
type TaskflowReport struct {
	Config   TaskflowConfig // with its defaults filled in
	Date     time.Time
	CPUs     int
	CPU      string      // the processor's model
	Project  string      // the module and commit of this executable
	Info     string      // the C++ side's -info line: Taskflow's version
	Go       string      // the Go version, the platform, a -race build
	CXX      string      // the first line of the compiler's --version
	CXXFlags []string    // the C++ side's compile flags
	Iters    map[int]int // the work bodies' iterations, by ns
	samples  []tfSample
}

// Write prints the machine and settings, then the table of medians
// (printTFTable).
func (r *TaskflowReport) Write(w io.Writer) error {
	_, err := io.WriteString(w, r.String())
	return err
}

func (r *TaskflowReport) String() string {
	var b strings.Builder
	cfg := r.Config
	threads := strings.Trim(fmt.Sprint(cfg.Threads), "[]")
	fmt.Fprintln(&b, "gpugraph side by side with Taskflow: the host backend against tf::Executor on the same DAGs")
	fmt.Fprintf(&b, "date:     %s\n", r.Date.UTC().Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(&b, "cpu:      %d CPUs, %s\n", r.CPUs, r.CPU)
	fmt.Fprintf(&b, "project:  %s\n", r.Project)
	fmt.Fprintf(&b, "taskflow: %s, %s\n", cfg.Dir, r.Info)
	fmt.Fprintf(&b, "go:       %s\n", r.Go)
	fmt.Fprintf(&b, "cxx:      %s\n", r.CXX)
	fmt.Fprintf(&b, "flags:    %s %s; go: this executable (gpugraph tfside)\n", cfg.CXX, strings.Join(r.CXXFlags, " "))
	fmt.Fprintf(&b, "runs:     %d reps, threads {%s}, %gs warm-up + %gs timed per shape per rep, batch %d\n",
		cfg.Reps, threads, cfg.Warmup, cfg.Time, cfg.Batch)
	if len(r.Iters) > 0 {
		bodies := make([]string, len(cfg.Bodies))
		for i, body := range cfg.Bodies {
			bodies[i] = body.String()
			if body.Name == "work" {
				bodies[i] += fmt.Sprintf(" = %d iterations", r.Iters[body.NS])
			}
		}
		fmt.Fprintf(&b, "bodies:   %s (work: calibrated once by tfside-cpp, the same count for both sides)\n", strings.Join(bodies, ", "))
	}
	fmt.Fprintln(&b)
	printTFTable(&b, r.samples)
	return b.String()
}

// Taskflow compiles the C++ harness (CXX -std=c++20 -O2 -pthread -I Dir,
// into a temporary directory it removes), then, as run.sh does, runs for
// each repetition, each worker count and each of tfConfigs the C++ program
// and the gpugraph side (cfg.GoSide, GOMAXPROCS set), alternating which goes
// first by repetition, so that slow drifts of the machine affect both
// alike. A work body's iterations are calibrated once, by the C++ side
// (-calibrate -work NS), and both sides get that count (-work NS -iters N).
// Progress notes go to progress. A failed counter check, a failed child or
// a malformed line is an error; a configuration it refuses is ErrConfig.
func Taskflow(cfg TaskflowConfig, progress io.Writer) (*TaskflowReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hpp := filepath.Join(cfg.Dir, "taskflow", "taskflow.hpp")
	if _, err := os.Stat(hpp); err != nil {
		return nil, fmt.Errorf("not a Taskflow tree: %w", err)
	}
	if _, err := os.Stat(cfg.Harness); err != nil {
		return nil, fmt.Errorf("C++ harness: %w", err)
	}
	tmp, err := os.MkdirTemp("", "gpugraph-tfside-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	r := &TaskflowReport{Config: cfg, Date: time.Now(), CPUs: runtime.NumCPU(), CPU: cpuModel(), Project: buildRevision(),
		Go:       fmt.Sprintf("%s %s/%s%s", runtime.Version(), runtime.GOOS, runtime.GOARCH, raceNote()),
		CXXFlags: []string{"-std=c++20", "-O2", "-pthread"}, Iters: map[int]int{}}
	cpp := filepath.Join(tmp, "tfside-cpp")
	fmt.Fprintf(progress, "tfside: compiling %s\n", cfg.Harness)
	if _, err := runChild(10*time.Minute, nil, cfg.CXX, append(slices.Clone(r.CXXFlags), "-I"+cfg.Dir, cfg.Harness, "-o", cpp)...); err != nil {
		return nil, fmt.Errorf("compiling the C++ harness: %w", err)
	}
	info, err := runChild(time.Minute, nil, cpp, "-info")
	if err != nil {
		return nil, err
	}
	r.Info = strings.TrimSpace(info)
	cxxVersion, err := runChild(time.Minute, nil, cfg.CXX, "--version")
	if err != nil {
		return nil, err
	}
	r.CXX, _, _ = strings.Cut(cxxVersion, "\n")

	for _, b := range cfg.Bodies {
		if b.Name != "work" {
			continue
		}
		out, err := runChild(time.Minute, nil, cpp, "-calibrate", "-work", strconv.Itoa(b.NS))
		if err != nil {
			return nil, err
		}
		if r.Iters[b.NS], err = tfCalibrated(out, b.NS); err != nil {
			return nil, err
		}
	}

	cppSide := Command{Path: cpp}
	for rep := 1; rep <= cfg.Reps; rep++ {
		for _, t := range cfg.Threads {
			for _, c := range tfConfigs(cfg.Bodies) {
				common := []string{"-threads", strconv.Itoa(t), "-body", c.body.Name, "-firstrep", strconv.Itoa(rep),
					"-time", tfFloat(cfg.Time), "-warmup", tfFloat(cfg.Warmup), "-batch", strconv.Itoa(cfg.Batch)}
				if c.body.Name == "work" {
					common = append(common, "-work", strconv.Itoa(c.body.NS), "-iters", strconv.Itoa(r.Iters[c.body.NS]))
				}
				it := r.Iters[c.body.NS]
				goSide := cfg.GoSide
				goSide.Env = append([]string{"GOMAXPROCS=" + strconv.Itoa(t)}, goSide.Env...)
				sides := []func() ([]tfSample, error){
					func() ([]tfSample, error) {
						return tfSide(cfg, t, "taskflow", c.cppMode, c.body, it, cppSide, append([]string{"-mode", c.cppMode}, common...)...)
					},
					func() ([]tfSample, error) {
						return tfSide(cfg, t, "gpugraph", c.goMode, c.body, it, goSide, append([]string{"-mode", c.goMode}, common...)...)
					},
				}
				if rep%2 == 0 {
					slices.Reverse(sides)
				}
				for _, side := range sides {
					ss, err := side()
					if err != nil {
						return nil, err
					}
					r.samples = append(r.samples, ss...)
				}
			}
		}
		fmt.Fprintf(progress, "tfside: rep %d/%d done\n", rep, cfg.Reps)
	}
	return r, nil
}

// tfSide runs one side's program for one worker count and mode, and checks
// that it printed one line per shape of the mode, of that side, mode, body
// (work: its ns and iters) and worker count.
func tfSide(cfg TaskflowConfig, threads int, impl, mode string, body Body, iters int, prog Command, args ...string) ([]tfSample, error) {
	want := 0
	for _, sh := range tfShapes {
		if sh.chain || mode == "graph" || mode == "batch" {
			want++
		}
	}
	// Warm-up and timing per shape, its minimum of 3 runs, start-up: a
	// generous bound that still stops a hung child.
	timeout := time.Minute + time.Duration(20*float64(want)*(cfg.Time+cfg.Warmup)*float64(time.Second))
	cmdline := prog.line(args...)
	out, err := prog.run(timeout, args...)
	if err != nil {
		return nil, err
	}
	ss, err := parseTFSamples(strings.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmdline, err)
	}
	if len(ss) != want {
		return nil, fmt.Errorf("%s: %d lines, want one per shape, %d", cmdline, len(ss), want)
	}
	for _, s := range ss {
		if s.impl != impl || s.mode != mode || s.body != body.Name || s.threads != threads {
			return nil, fmt.Errorf("%s: printed impl=%s mode=%s body=%s threads=%d, want %s %s %s %d",
				cmdline, s.impl, s.mode, s.body, s.threads, impl, mode, body.Name, threads)
		}
		if body.Name == "work" && (s.workNs != body.NS || s.workIters != iters) {
			return nil, fmt.Errorf("%s: printed work_ns=%d work_iters=%d, want %d %d", cmdline, s.workNs, s.workIters, body.NS, iters)
		}
	}
	return ss, nil
}

// tfFloat formats seconds for both programs' flag parsers.
func tfFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
