package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/coll"
	"github.com/gpugraph/gpugraph/internal/footprint"
	"github.com/gpugraph/gpugraph/internal/train"
)

// train: the story of seed 004 in Go. The same MLP training step runs op by
// op on a stream (eager mode) and then captured once into a graph and
// replayed every step (graph mode), from the same initial parameters on the
// same batches. Each mode prints memory like PyTorch's memory_allocated and
// memory_reserved after model set-up, after the static inputs, after
// capture, and every --every steps; then the step time of both, and a
// one-line verdict.

type trainConfig struct {
	Backend   string
	Model     string // "small", "reference" or "large"
	Optimizer string // "" keeps the preset's
	Precision string // "fp32" (or ""), "tf32" or "bf16"
	Steps     int
	Every     int
	Warmup    int
	Batches   int // distinct batches in the data set, cycled
	Modes     string
	Timeline  string
	GEMM      string // "auto", "kernel" or "cublas"
	Devices   int    // data-parallel over this many devices (traindp.go); 0 or 1: one device
	Sync      string // data-parallel: gradient all-reduce modes, comma-separated
	Profile   int    // replays of the captured step timed piece by piece (0: none)
	Batch     int    // the global batch; 0 keeps the model's
	// Timeout bounds the data-parallel ranks' waits for each other
	// (coll.WithTimeout): a rank that died fails the others after it.
	Timeout time.Duration
	// Progress is where the progress line goes (a terminal); nil: nowhere.
	Progress io.Writer
	// Save is the file the trained model is written to (train.Checkpoint,
	// with the default serving batch sizes); "": none.
	Save string
}

// modeResult is what one mode measured.
type modeResult struct {
	name       string
	losses     []float32 // at every report
	finalLoss  float32
	stepTime   time.Duration // median per-step time over the timed chunks
	deviceTime time.Duration // likewise, between events recorded on the stream around each chunk's steps; 0 if not measured
	reserved   uint64        // peak reserved (Malloc + pool + graph) while training, warm-up and capture excluded
	peak       uint64        // peak reserved (pool + graph) over the whole mode, warm-up included
	allocated  uint64        // peak allocated (pool + graph)
	graphBytes uint64        // graph memory reserved (graph mode)
	bound      int64         // lower bound of the captured step's graph memory
	params     []float32
}

func trainMain(args []string, stdout, stderr io.Writer) error {
	cfg := trainConfig{Backend: "host", Model: "small", Precision: train.FP32, Steps: 300, Every: 50, Warmup: 3, Batches: 32,
		Modes: "eager,graph", GEMM: "auto", Sync: "overlap", Devices: 1, Timeout: coll.DefaultTimeout}
	fs := newFlagSet("train", stderr)
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "device backend")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "small, reference or large")
	fs.StringVar(&cfg.Optimizer, "optimizer", cfg.Optimizer, "sgd or adam")
	fs.StringVar(&cfg.Precision, "precision", cfg.Precision, "fp32, tf32 or bf16")
	fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "training steps per mode")
	fs.IntVar(&cfg.Every, "every", cfg.Every, "report every N steps")
	fs.IntVar(&cfg.Warmup, "warmup", cfg.Warmup, "op-by-op steps before the capture")
	fs.IntVar(&cfg.Batches, "batches", cfg.Batches, "distinct batches in the data set")
	fs.StringVar(&cfg.Modes, "modes", cfg.Modes, "eager,graph")
	fs.StringVar(&cfg.GEMM, "gemm", cfg.GEMM, "auto, kernel, cublas or cublaslt")
	fs.StringVar(&cfg.Timeline, "timeline", cfg.Timeline, "SVG file for the graph memory timeline")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "samples per step (the global batch; default: the model's)")
	fs.IntVar(&cfg.Devices, "devices", cfg.Devices, "data-parallel over N devices of one process, compared with one device")
	fs.StringVar(&cfg.Sync, "sync", cfg.Sync, "data-parallel gradient all-reduce: overlap, inline, after, or a list")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "data-parallel: how long a rank waits for the others before failing")
	fs.IntVar(&cfg.Profile, "profile", cfg.Profile, "time each piece of the captured step on the device over N replays and print it (per rank)")
	fs.StringVar(&cfg.Save, "save", cfg.Save, "write the trained model (weights and serving batch sizes) to FILE")
	quiet := fs.Bool("quiet", false, "no progress line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// Started as a rank of a job (gpugraph launch, torchrun, Slurm)?
	env, inJob, err := coll.EnvFromOS()
	if err != nil {
		return usagef("the environment of a job (RANK, WORLD_SIZE, ...): %v", err)
	}
	var job *coll.Env
	if inJob {
		job = &env
	}
	if err := checkTrain(cfg, setFlags(fs), job); err != nil {
		return err
	}
	// The progress line: on a terminal, and in a job for rank 0 only.
	if showProgress(stderr, *quiet) && (job == nil || job.Rank == 0) {
		cfg.Progress = stderr
	}
	switch {
	case job != nil:
		return runDistributed(stdout, cfg, env)
	case cfg.Devices > 1:
		return runDataParallel(stdout, cfg, cfg.Devices)
	}
	return runTrain(stdout, cfg)
}

// checkTrain checks train's flags, each and against the others. set names
// the flags given on the command line (nil: none, as for a configuration
// made in Go); job is the job this process is a rank of, or nil.
func checkTrain(cfg trainConfig, set map[string]bool, job *coll.Env) error {
	dflt := func(name string) string {
		if set[name] {
			return ""
		}
		return " (the default)"
	}
	switch {
	case cfg.Steps < 1:
		return usagef("--steps %d: need at least 1", cfg.Steps)
	case cfg.Every < 1:
		return usagef("--every %d: need at least 1", cfg.Every)
	case cfg.Batches < 1:
		return usagef("--batches %d: need at least 1", cfg.Batches)
	case cfg.Batch < 0 || set["batch"] && cfg.Batch < 1:
		return usagef("--batch %d: need at least 1", cfg.Batch)
	case cfg.Devices < 0 || set["devices"] && cfg.Devices < 1:
		return usagef("--devices %d: need at least 1", cfg.Devices)
	case cfg.Profile < 0:
		return usagef("--profile %d: need 0 (no profile) or more replays", cfg.Profile)
	case cfg.Timeout < 0 || set["timeout"] && cfg.Timeout == 0:
		return usagef("--timeout %v: the ranks need time to wait for each other", cfg.Timeout)
	case checkGEMMName(cfg.GEMM) != nil:
		return checkGEMMName(cfg.GEMM)
	case cfg.GEMM == "cublas" && cfg.Backend != gg.BackendCUDA:
		return usagef("--gemm cublas needs --backend cuda (cuBLAS runs on a GPU)")
	case cfg.GEMM == "cublaslt" && cfg.Backend != gg.BackendCUDA:
		return usagef("--gemm cublaslt needs --backend cuda (cuBLASLt runs on a GPU)")
	case set["precision"] && cfg.Precision == "": // "" is fp32 only in a configuration made in Go
		return usagef("unknown --precision \"\" (want %s, %s or %s)", train.FP32, train.TF32, train.BF16)
	}
	tc, err := trainPreset(cfg) // --model, --optimizer, --batch
	if err != nil {
		return err
	}
	modes, err := oneOfList("modes", cfg.Modes, "eager", "graph")
	if err != nil {
		return err
	}
	if _, err := parseSync(cfg.Sync); err != nil {
		return err
	}
	graph := slices.Contains(modes, "graph")
	dp := job != nil || cfg.Devices > 1
	if dp {
		how, ranks := fmt.Sprintf("--devices %d", cfg.Devices), cfg.Devices
		if job != nil {
			how, ranks = "a rank of a job (gpugraph launch)", job.World
		}
		switch {
		case job != nil && cfg.Devices > 1:
			return usagef("--devices %d: in a job started by gpugraph launch each process trains on one device (launch --nproc sets how many)", cfg.Devices)
		case set["modes"]:
			return usagef("--modes does not apply with %s: data-parallel training always replays a captured step (after --warmup steps op by op)", how)
		case cfg.Timeline != "":
			return usagef("--timeline does not apply with %s: it draws one device's captured step (train without --devices for it)", how)
		case job == nil && cfg.Backend == gg.BackendHost && cfg.Devices > maxHostDevices:
			return usagef("--devices %d: the host backend has at most %d devices", cfg.Devices, maxHostDevices)
		case cfg.Save != "":
			return usagef("--save does not apply with %s yet: train on one device to save a model", how)
		case cfg.GEMM == "cublaslt":
			return usagef("--gemm cublaslt does not apply with %s: the fused step does not sync gradients (use --gemm cublas)", how)
		case tc.Batch%ranks != 0:
			return usagef("--batch %d%s: %d ranks do not divide it (each rank trains on an equal share)", tc.Batch, dflt("batch"), ranks)
		}
	} else {
		const dpOnly = "applies to data-parallel training only: add --devices N (N >= 2) or run under gpugraph launch"
		switch {
		case set["sync"]:
			return usagef("--sync %s", dpOnly)
		case set["timeout"]:
			return usagef("--timeout %s", dpOnly)
		case cfg.Timeline != "" && !graph:
			return usagef("--timeline draws the captured step: it needs graph in --modes (have %q)", cfg.Modes)
		case cfg.Profile > 0 && !graph:
			return usagef("--profile times the captured step: it needs graph in --modes (have %q)", cfg.Modes)
		case set["warmup"] && !graph:
			return usagef("--warmup counts the steps before the capture: it needs graph in --modes (have %q)", cfg.Modes)
		}
	}
	if (dp || graph) && (cfg.Warmup < 0 || cfg.Warmup >= cfg.Steps) {
		return usagef("--warmup %d%s: need 0 to --steps - 1 (%d)", cfg.Warmup, dflt("warmup"), cfg.Steps-1)
	}
	return nil
}

// precisionWords says what a precision computes in, for the banner.
func precisionWords(p string) string {
	switch p {
	case train.TF32:
		return "tf32 (GEMM inputs rounded to TF32, FP32 sums; everything else FP32)"
	case train.BF16:
		return "bf16 (GEMMs on bf16 weights and activations with FP32 sums; FP32 master weights, optimizer, loss and bias gradients)"
	}
	return "fp32"
}

// kernelNodes counts the kernel nodes among nodes.
func kernelNodes(nodes []*gg.Node) int {
	n := 0
	for _, nd := range nodes {
		if nd.Type() == gg.NodeKernel {
			n++
		}
	}
	return n
}

// maxHostDevices is how many devices the host backend can have
// (gg.SetHostDeviceCount).
const maxHostDevices = 64

func runTrain(w io.Writer, cfg trainConfig) (err error) {
	if err := checkTrain(cfg, nil, nil); err != nil {
		return err
	}
	tc, err := trainPreset(cfg)
	if err != nil {
		return err
	}
	modes := strings.Split(cfg.Modes, ",")
	prog := startProgress(cfg.Progress, cfg.Progress != nil, "train", "steps", cfg.Steps*len(modes))
	defer prog.Stop()
	w = prog.Out(w)
	dev, err := openDevice(cfg.Backend)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dev.Close()) }()
	// The pool keeps what a step frees for the next one, as PyTorch's caching
	// allocator does, instead of returning it at every synchronize.
	if err := dev.DefaultMemPool().SetReleaseThreshold(math.MaxUint64); err != nil {
		return err
	}
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	gemm, gemmName, closeGEMM, err := pickGEMM(dev, cfg.GEMM, tc.Precision)
	if err != nil {
		return err
	}
	defer closeGEMM()
	fused, fusedName, closeFused, err := pickFused(dev, cfg.GEMM, tc.Precision)
	if err != nil {
		return err
	}
	defer closeFused()
	switch {
	case fused != nil && tc.Precision == train.BF16:
		gemmName = fusedName + "; every dW GEMM fused too"
	case fused != nil:
		gemmName = fusedName + "; the other dW GEMMs " + gemmName
	}
	ds, err := train.NewDataset(tc, cfg.Batches)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "gpugraph train: %v\n  backend %s (%s), %s, %s of synthetic data, GEMM %s\n",
		tc, cfg.Backend, dev.Properties().Name, plural(cfg.Steps, "step"), plural(cfg.Batches, "batch"), gemmName)
	fmt.Fprintf(w, "  precision: %s\n", precisionWords(tc.Precision))
	if cfg.Backend == "host" { // kernels' blocks run on one worker per core
		fmt.Fprintf(w, "  host: kernels' blocks run on %d workers, one per core\n", dev.Properties().MultiProcessorCount)
	}
	peak, _ := tc.StepBytes()
	kernels, allocs := tc.StepOps()
	if fused != nil {
		peak, _ = tc.FusedStepBytes(fused.AuxBytes)
		kernels, allocs = tc.FusedStepOps()
	}
	fmt.Fprintf(w, "  a step: %d kernels, %d step-local buffers, at most %s of them live at once\n", kernels, allocs, mib(uint64(peak)))

	var results []modeResult
	for _, mode := range modes {
		prog.SetLabel("train, " + mode)
		r, err := trainMode(w, prog, dev, s, tc, ds, gemm, fused, cfg, mode)
		if err != nil {
			return fmt.Errorf("%s mode: %w", mode, err)
		}
		results = append(results, r)
		if err := cleanup(dev, s); err != nil {
			return err
		}
	}
	if cfg.Save != "" {
		last := results[len(results)-1]
		if err := train.SaveCheckpoint(cfg.Save, train.Checkpoint{Config: tc, Params: last.params, Keys: train.ServeKeys(512)}); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
		fmt.Fprintf(w, "saved the model trained %s to %s\n", last.name, cfg.Save)
	}
	if len(results) == 2 {
		if modes[0] == "graph" {
			results[0], results[1] = results[1], results[0]
		}
		verdict(w, results[0], results[1])
	}
	return nil
}

func trainPreset(cfg trainConfig) (train.Config, error) {
	var tc train.Config
	switch cfg.Model {
	case "small":
		tc = train.Small()
	case "reference":
		tc = train.Reference()
	case "large":
		tc = train.Large()
	default:
		return tc, usagef("unknown --model %q (want small, reference or large)", cfg.Model)
	}
	switch cfg.Precision {
	case "", train.FP32, train.TF32, train.BF16:
		tc.Precision = cfg.Precision
	default:
		return tc, usagef("unknown --precision %q (want %s, %s or %s)", cfg.Precision, train.FP32, train.TF32, train.BF16)
	}
	switch {
	case cfg.Batch > 0:
		tc.Batch = cfg.Batch
	case cfg.Batch < 0:
		return tc, usagef("--batch %d: need at least 1", cfg.Batch)
	}
	switch cfg.Optimizer {
	case "", train.SGD, train.Adam:
	default:
		return tc, usagef("unknown --optimizer %q (want %s or %s)", cfg.Optimizer, train.SGD, train.Adam)
	}
	if cfg.Optimizer != "" {
		tc.Optimizer = cfg.Optimizer
		if cfg.Optimizer == train.Adam {
			tc.LR = 1e-3
		}
	}
	if err := tc.Validate(); err != nil {
		// The presets are valid: what --batch made of one is not.
		detail := err.Error()
		if e := (*gg.Error)(nil); errors.As(err, &e) {
			detail = e.Detail
		}
		return tc, usagef("--batch %d: too large (%s)", tc.Batch, detail)
	}
	return tc, nil
}

// trainMode trains a fresh model in one mode and reports as it goes. It
// leaves the device as it found it: everything freed, pools trimmed, peaks
// reset.
func trainMode(w io.Writer, prog *progress, dev *gg.Device, s *gg.Stream, tc train.Config, ds *train.Dataset, gemm train.GEMM, fused train.FusedGEMM, cfg trainConfig, mode string) (r modeResult, err error) {
	title := map[string]string{"eager": "op by op", "graph": "captured graph, replayed"}[mode]
	fmt.Fprintf(w, "\n== %s ==\n", title)
	r.name = title
	mem := func(what string) {
		st, _ := dev.MemoryStats()
		r.peak = max(r.peak, peakReserved(st))
		r.allocated = max(r.allocated, peakAllocated(st))
		fmt.Fprintf(w, "%-24s %s\n", what, memLine(st))
	}
	if err := s.Synchronize(); err != nil {
		return r, err
	}
	mem("before")
	m, err := train.NewModel(s, tc)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, m.Destroy()) }()
	if gemm != nil {
		m.GEMM = gemm
	}
	m.Fused = fused
	if err := s.Synchronize(); err != nil {
		return r, err
	}
	mem("model ready")
	st, err := train.NewStatic(s, tc)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, st.Free(s)) }()
	if err := s.Synchronize(); err != nil {
		return r, err
	}
	mem("static inputs")

	step := 0
	eager := func() error {
		if err := st.Load(s, ds, step%ds.Batches()); err != nil {
			return err
		}
		step++
		return m.Step(s, st.X, st.Y, st.Loss)
	}
	run := eager
	if mode == "graph" {
		// Warm-up steps run op by op (kernels compile, the library
		// initialises); they are real steps of the training.
		for step < cfg.Warmup {
			if err := eager(); err != nil {
				return r, err
			}
			if err := countStep(prog, s, dev); err != nil {
				return r, err
			}
		}
		if err := s.Synchronize(); err != nil {
			return r, err
		}
		if !hostStepCount(dev) {
			prog.Add(cfg.Warmup)
		}
		mem("after " + plural(cfg.Warmup, "warm-up step"))
		// The warm-up's step-local buffers are cached in the stream-ordered
		// pool; graph mode does not need them: give them back.
		if err := dev.DefaultMemPool().TrimTo(0); err != nil {
			return r, err
		}
		c, err := gg.Capture(s, func(s *gg.Stream) error { return m.Step(s, st.X, st.Y, st.Loss) }, gg.CaptureOptions{})
		if err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, c.Destroy()) }()
		if err := c.Exec().Upload(s); err != nil { // map its memory now, so the report shows it
			return r, err
		}
		if err := s.Synchronize(); err != nil {
			return r, err
		}
		mem("graph capture done")
		if r.bound, _, err = footprint.LowerBound(c.Graph()); err != nil {
			return r, err
		}
		nodes, _ := c.Graph().Nodes()
		fmt.Fprintf(w, "%-24s %d nodes; graph memory lower bound %s\n", "", len(nodes), mib(uint64(r.bound)))
		fmt.Fprintf(w, "%-24s kernels per step: %d (the captured graph's kernel nodes)\n", "", kernelNodes(nodes))
		run = func() error {
			if err := st.Load(s, ds, step%ds.Batches()); err != nil {
				return err
			}
			step++
			return c.Replay()
		}
		defer func() {
			if err == nil && cfg.Timeline != "" {
				err = writeTimeline(cfg.Timeline, c, tc, uint64(r.bound))
				if err == nil {
					fmt.Fprintf(w, "%-24s %s\n", "timeline written", cfg.Timeline)
				}
			}
		}()
	}

	// Training: chunks of --every steps, timed between synchronizations.
	// Peaks from here on are the training's own.
	if err := dev.ResetPeakMemory(); err != nil {
		return r, err
	}
	var perStep, devStep []float64
	// Device (GPU) time: events recorded on s before a chunk's first step
	// and after its last, read once the chunk is done. Best effort: a
	// failure only drops the device-time line.
	evStart, evEnd, timed := timingEvents(dev)
	defer func() {
		if timed {
			evStart.Destroy()
			evEnd.Destroy()
		}
	}()
	for step < cfg.Steps {
		start, n := time.Now(), min(cfg.Every-step%cfg.Every, cfg.Steps-step)
		recorded := timed && s.Record(evStart) == nil
		for range n {
			if err := run(); err != nil {
				return r, err
			}
			if err := countStep(prog, s, dev); err != nil {
				return r, err
			}
		}
		recorded = recorded && s.Record(evEnd) == nil
		loss, err := st.ReadLoss(s) // synchronizes
		if err != nil {
			return r, err
		}
		dt := time.Since(start)
		perStep = append(perStep, dt.Seconds()/float64(n))
		if recorded {
			if gt, err := gg.ElapsedTime(evStart, evEnd); err == nil {
				devStep = append(devStep, gt.Seconds()/float64(n))
			}
		}
		r.losses = append(r.losses, loss)
		r.finalLoss = loss
		ms, _ := dev.MemoryStats()
		r.reserved = max(r.reserved, peakReserved(ms))
		r.peak = max(r.peak, peakReserved(ms))
		r.allocated = max(r.allocated, peakAllocated(ms))
		if !hostStepCount(dev) {
			prog.Add(n)
		}
		fmt.Fprintf(w, "step %5d/%d  loss %.4f  %s/step  %s\n", step, cfg.Steps, loss, fmtDur(dt/time.Duration(n)), memLine(ms))
	}
	if math.IsNaN(float64(r.finalLoss)) {
		return r, fmt.Errorf("the loss is NaN")
	}
	slices.Sort(perStep)
	r.stepTime = time.Duration(perStep[len(perStep)/2] * float64(time.Second))
	if len(devStep) == len(perStep) {
		slices.Sort(devStep)
		r.deviceTime = time.Duration(devStep[len(devStep)/2] * float64(time.Second))
	}
	ms, _ := dev.MemoryStats()
	r.graphBytes = ms.GraphReservedPeak
	if r.params, err = m.ReadParams(s); err != nil {
		return r, err
	}
	fmt.Fprintf(w, "%-24s loss %.4f -> %.4f, %s per step (median over %d timed chunks)\n", "trained",
		r.losses[0], r.finalLoss, fmtDur(r.stepTime), len(perStep))
	if r.deviceTime > 0 {
		fmt.Fprintf(w, "%-24s device time %s per step (events on the stream around each timed chunk's steps, median)\n", "",
			fmtDur(r.deviceTime))
	}
	fmt.Fprintf(w, "%-24s peak reserved while training %s; peaks overall: allocated %s, reserved %s\n", "",
		mib(r.reserved), mib(r.allocated), mib(r.peak))
	if mode == "graph" && cfg.Profile > 0 {
		// After everything above is read: the profiled replays train on.
		err = profileOne(w, m, s, st, ds, cfg.Profile, r.stepTime)
	}
	return r, err
}

// profileOne times the pieces of the one-device step (--profile n).
func profileOne(w io.Writer, m *train.Model, s *gg.Stream, st *train.Static, ds *train.Dataset, n int, plain time.Duration) (err error) {
	p := &stepProfile{}
	defer func() { err = errors.Join(err, p.destroy()) }()
	m.Mark = p.Mark
	c, err := gg.Capture(s, func(s *gg.Stream) error { return m.Step(s, st.X, st.Y, st.Loss) }, gg.CaptureOptions{})
	m.Mark = nil
	if err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	defer func() { err = errors.Join(err, c.Destroy()) }()
	for k := range n + 1 {
		if err := st.Load(s, ds, k%ds.Batches()); err != nil {
			return err
		}
		if err := c.Replay(); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if k > 0 { // the first replay warms up
			if err := p.sample(); err != nil {
				return fmt.Errorf("--profile: %w", err)
			}
		}
	}
	p.report(w, "step profile, one device", plain)
	return nil
}

// timingEvents makes the two events that time the chunks of a mode on the
// device; ok is false if either could not be made.
func timingEvents(dev *gg.Device) (start, end *gg.Event, ok bool) {
	start, err := dev.NewEvent(0)
	if err != nil {
		return nil, nil, false
	}
	if end, err = dev.NewEvent(0); err != nil {
		start.Destroy()
		return nil, nil, false
	}
	return start, end, true
}

// cleanup frees what a mode left cached, so the next mode starts from zero.
func cleanup(dev *gg.Device, s *gg.Stream) error {
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := dev.DefaultMemPool().TrimTo(0); err != nil {
		return err
	}
	if err := dev.TrimGraphMem(); err != nil {
		return err
	}
	return dev.ResetPeakMemory()
}

func verdict(w io.Writer, eager, graph modeResult) {
	speed := eager.stepTime.Seconds() / graph.stepTime.Seconds()
	mem := float64(graph.reserved) / float64(max(eager.reserved, 1))
	diff := math.Abs(float64(eager.finalLoss - graph.finalLoss))
	maxParam := 0.0
	for i := range min(len(eager.params), len(graph.params)) {
		maxParam = max(maxParam, math.Abs(float64(eager.params[i]-graph.params[i])))
	}
	same := "same final loss"
	if diff > 1e-3*math.Max(1, math.Abs(float64(eager.finalLoss))) {
		same = "DIFFERENT final loss"
	}
	why := ""
	if graph.reserved > eager.reserved && graph.reserved-eager.reserved <= 2*granule {
		// Two allocators each round up to whole granules where one did.
		why = fmt.Sprintf(" [graph memory is mapped in %s granules: the step's buffers need %s]", mib(granule), mib(uint64(graph.bound)))
	}
	fmt.Fprintf(w, "\nverdict: the captured graph steps in %s vs %s op by op (%s), reserves at most %s vs %s while training (%.2f×)%s, %s (%.4f vs %.4f; parameters differ by at most %.2g)\n",
		fmtDur(graph.stepTime), fmtDur(eager.stepTime), speedWords(speed), mib(graph.reserved), mib(eager.reserved), mem, why, same,
		graph.finalLoss, eager.finalLoss, maxParam)
}

// speedWords says how a time compares with another, given their ratio
// other/time: "1.62× faster", "1.15× slower" (a ratio of 0.87), "as fast"
// within the 0.5% that the two decimals do not show.
func speedWords(ratio float64) string {
	switch {
	case math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio <= 0:
		return "not comparable"
	case math.Abs(ratio-1) < 0.005:
		return "as fast"
	case ratio > 1:
		return fmt.Sprintf("%.2f× faster", ratio)
	}
	return fmt.Sprintf("%.2f× slower", 1/ratio)
}

// granule is the unit device memory is reserved in on the host backend
// (the driver's is at least as coarse).
const granule = 2 << 20

// memLine prints memory as PyTorch does (allocated, reserved, their peaks),
// with where the reserved memory is: Malloc (parameters, static buffers),
// the stream-ordered pool, graph memory.
func memLine(st gg.MemoryStats) string {
	return fmt.Sprintf("allocated %s (peak %s), reserved %s (peak %s) = Malloc %s + pool %s + graph %s",
		mib(st.TotalAllocated()), mib(peakAllocated(st)), mib(st.TotalReserved()), mib(peakReserved(st)),
		mib(st.Malloc), mib(st.Reserved), mib(st.GraphReserved))
}

func peakAllocated(st gg.MemoryStats) uint64 {
	return st.Malloc + st.AllocatedPeak + st.GraphAllocatedPeak
}
func peakReserved(st gg.MemoryStats) uint64 {
	return st.Malloc + st.ReservedPeak + st.GraphReservedPeak
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// countStep counts a step queued on s on the progress line when the step
// is done: on the host backend by a host function after it (steps take
// milliseconds there, and the line moves step by step); on a GPU, where
// a host function between steps would cost more than it tells, the
// caller counts each chunk of steps when it has synchronized.
func countStep(p *progress, s *gg.Stream, dev *gg.Device) error {
	if p == nil || !hostStepCount(dev) {
		return nil
	}
	return s.LaunchHostFunc(func() { p.Add(1) })
}

// hostStepCount reports whether countStep counts each step on dev.
func hostStepCount(dev *gg.Device) bool { return dev.Properties().Backend == gg.BackendHost }
