package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
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
	Model     string // "small" or "reference"
	Optimizer string // "" keeps the preset's
	Steps     int
	Every     int
	Warmup    int
	Batches   int // distinct batches in the data set, cycled
	Modes     string
	Timeline  string
	GEMM      string // "auto", "kernel" or "cublas"
	Live      bool   // redraw a progress line in place (a terminal)
	Devices   int    // data-parallel over this many devices (traindp.go); 0 or 1: one device
	Sync      string // data-parallel: gradient all-reduce modes, comma-separated
	Batch     int    // the global batch; 0 keeps the model's
	// Timeout bounds the data-parallel ranks' waits for each other
	// (coll.WithTimeout): a rank that died fails the others after it.
	Timeout time.Duration
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
	cfg := trainConfig{Backend: "host", Model: "small", Steps: 300, Every: 50, Warmup: 3, Batches: 32,
		Modes: "eager,graph", GEMM: "auto", Sync: "overlap", Live: isTerminal(stdout), Timeout: coll.DefaultTimeout}
	fs := newFlagSet("train", stderr)
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "device backend")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "small or reference")
	fs.StringVar(&cfg.Optimizer, "optimizer", cfg.Optimizer, "sgd or adam")
	fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "training steps per mode")
	fs.IntVar(&cfg.Every, "every", cfg.Every, "report every N steps")
	fs.IntVar(&cfg.Warmup, "warmup", cfg.Warmup, "op-by-op steps before the capture")
	fs.IntVar(&cfg.Batches, "batches", cfg.Batches, "distinct batches in the data set")
	fs.StringVar(&cfg.Modes, "modes", cfg.Modes, "eager,graph")
	fs.StringVar(&cfg.GEMM, "gemm", cfg.GEMM, "auto, kernel or cublas")
	fs.StringVar(&cfg.Timeline, "timeline", cfg.Timeline, "SVG file for the graph memory timeline")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "samples per step (the global batch; default: the model's)")
	fs.IntVar(&cfg.Devices, "devices", cfg.Devices, "data-parallel over N devices of one process, compared with one device")
	fs.StringVar(&cfg.Sync, "sync", cfg.Sync, "data-parallel gradient all-reduce: overlap, inline, after, or a list")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "data-parallel: how long a rank waits for the others before failing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.Timeout <= 0 {
		return usagef("--timeout %v: the ranks need time to wait for each other", cfg.Timeout)
	}
	// Started as a rank of a job (gpugraph launch, torchrun, Slurm)?
	if env, ok, err := coll.EnvFromOS(); err != nil {
		return usagef("%v", err)
	} else if ok {
		return runDistributed(stdout, cfg, env)
	}
	if cfg.Devices > 1 {
		return runDataParallel(stdout, cfg, cfg.Devices)
	}
	return runTrain(stdout, cfg)
}

func runTrain(w io.Writer, cfg trainConfig) (err error) {
	tc, err := trainPreset(cfg)
	if err != nil {
		return err
	}
	if cfg.Steps < 1 || cfg.Every < 1 || cfg.Warmup < 0 || cfg.Warmup >= cfg.Steps || cfg.Batches < 1 {
		return usagef("need steps >= 1, every >= 1, 0 <= warmup < steps, batches >= 1")
	}
	modes := strings.Split(cfg.Modes, ",")
	for _, m := range modes {
		if m != "eager" && m != "graph" {
			return usagef("unknown mode %q (eager, graph)", m)
		}
	}
	dev, err := gg.Open(cfg.Backend)
	if err != nil {
		return fmt.Errorf("open device: %w", err)
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
	gemm, gemmName, closeGEMM, err := pickGEMM(dev, cfg.GEMM)
	if err != nil {
		return err
	}
	defer closeGEMM()
	ds, err := train.NewDataset(tc, cfg.Batches)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "gpugraph train: %v\n  backend %s (%s), %d steps, %d batches of synthetic data, GEMM %s\n",
		tc, cfg.Backend, dev.Properties().Name, cfg.Steps, cfg.Batches, gemmName)
	if cfg.Backend == "host" { // kernels' blocks run on one worker per core
		fmt.Fprintf(w, "  host: %d workers\n", dev.Properties().MultiProcessorCount)
	}
	peak, _ := tc.StepBytes()
	kernels, allocs := tc.StepOps()
	fmt.Fprintf(w, "  a step: %d kernels, %d step-local buffers, at most %s of them live at once\n", kernels, allocs, mib(uint64(peak)))

	var results []modeResult
	for _, mode := range modes {
		r, err := trainMode(w, dev, s, tc, ds, gemm, cfg, mode)
		if err != nil {
			return fmt.Errorf("%s mode: %w", mode, err)
		}
		results = append(results, r)
		if err := cleanup(dev, s); err != nil {
			return err
		}
	}
	if len(results) == 2 {
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
	default:
		return tc, usagef("unknown model %q (small, reference)", cfg.Model)
	}
	switch {
	case cfg.Batch > 0:
		tc.Batch = cfg.Batch
	case cfg.Batch < 0:
		return tc, usagef("--batch %d: negative", cfg.Batch)
	}
	if cfg.Optimizer != "" {
		tc.Optimizer = cfg.Optimizer
		if cfg.Optimizer == train.Adam {
			tc.LR = 1e-3
		}
	}
	if err := tc.Validate(); err != nil {
		return tc, usagef("%v", err)
	}
	return tc, nil
}

// trainMode trains a fresh model in one mode and reports as it goes. It
// leaves the device as it found it: everything freed, pools trimmed, peaks
// reset.
func trainMode(w io.Writer, dev *gg.Device, s *gg.Stream, tc train.Config, ds *train.Dataset, gemm train.GEMM, cfg trainConfig, mode string) (r modeResult, err error) {
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
		}
		if err := s.Synchronize(); err != nil {
			return r, err
		}
		mem(fmt.Sprintf("after %d warm-up steps", cfg.Warmup))
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
	prog := newProgress(w, cfg.Live, cfg.Steps)
	for step < cfg.Steps {
		start, n := time.Now(), min(cfg.Every-step%cfg.Every, cfg.Steps-step)
		recorded := timed && s.Record(evStart) == nil
		for range n {
			if err := run(); err != nil {
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
		prog.report(step, loss, dt/time.Duration(n), memLine(ms))
	}
	prog.done()
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
	return r, nil
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
	fmt.Fprintf(w, "\nverdict: the captured graph steps in %s vs %s op by op (%.2f× faster), reserves at most %s vs %s while training (%.2f×)%s, %s (%.4f vs %.4f; parameters differ by at most %.2g)\n",
		fmtDur(graph.stepTime), fmtDur(eager.stepTime), speed, mib(graph.reserved), mib(eager.reserved), mem, why, same,
		graph.finalLoss, eager.finalLoss, maxParam)
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

// progress reports training: a line redrawn in place on a terminal, or one
// line per report otherwise (logs, pipes, tests).
type progress struct {
	w     io.Writer
	live  bool
	total int
}

func newProgress(w io.Writer, live bool, total int) *progress {
	return &progress{w: w, live: live, total: total}
}

func (p *progress) report(step int, loss float32, per time.Duration, mem string) {
	if !p.live {
		fmt.Fprintf(p.w, "step %5d/%d  loss %.4f  %s/step  %s\n", step, p.total, loss, fmtDur(per), mem)
		return
	}
	const width = 30
	done := width * step / p.total
	fmt.Fprintf(p.w, "\r[%s%s] step %d/%d  loss %.4f  %s/step  %s\x1b[K", strings.Repeat("=", done),
		strings.Repeat(" ", width-done), step, p.total, loss, fmtDur(per), mem)
}

func (p *progress) done() {
	if p.live {
		fmt.Fprintln(p.w)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
