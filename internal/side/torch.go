package side

// The PyTorch side by side: the cuda backend's captured training step
// (gpugraph train --modes graph) against the same model, batch, optimizer
// and precision in PyTorch (tools/bench/torch_step.py, written out and run
// with the given Python), twice: PyTorch's step captured in a CUDA graph as
// gpugraph's is (graph), and PyTorch at its best (best: torch.compile, the
// fused optimizer, the whole step in one CUDA graph; torch_step.py --best).
// For each repetition, each (model, precision) runs the three sides, each
// in a process of its own, in an order that rotates from one repetition to
// the next; the table gives, per side, the median over the runs of each
// run's median step, and the ratios of those medians.

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	benchsrc "github.com/gpugraph/gpugraph/tools/bench"
)

// TorchModels are the models Torch compares: train.Reference and
// train.Large (gpugraph train --model).
var TorchModels = []string{"reference", "large"}

// Precisions are the GEMM precisions Torch compares (gpugraph train
// --precision, torch_step.py --precision).
var Precisions = []string{"fp32", "tf32", "bf16"}

// TorchConfig is what Torch measures.
type TorchConfig struct {
	Python     string   // a Python with PyTorch and CUDA
	Reps       int      // runs of each side, alternated
	Steps      int      // training steps per run (train --steps)
	Every      int      // timed chunk length (train --every)
	Models     []string // of TorchModels, each once
	Precisions []string // of Precisions, each once
	// GEMM is the gpugraph side's train --gemm (cublas, cublaslt, ...);
	// "" leaves train's default.
	GEMM string
	// GG is the gpugraph side, the command "gpugraph train":
	// DefaultTorchConfig's is this executable's, Self("train").
	GG Command
}

// DefaultTorchConfig returns the defaults: python3, 5 runs of 300 steps,
// timed in chunks of 50, the reference model in FP32.
func DefaultTorchConfig() TorchConfig {
	return TorchConfig{Python: "python3", Reps: 5, Steps: 300, Every: 50, Models: []string{"reference"}, Precisions: []string{"fp32"},
		GG: Self("train")}
}

func (cfg TorchConfig) check() error {
	switch {
	case cfg.Reps < 1 || cfg.Steps < 1 || cfg.Every < 1 || cfg.Every > cfg.Steps:
		return configf("torch: need reps >= 1 and 1 <= every <= steps")
	case cfg.GG.Path == "":
		return configf("torch: no command for the gpugraph side (gpugraph train)")
	case cfg.Python == "":
		return configf("torch: no Python")
	}
	for _, l := range []struct {
		what          string
		list, allowed []string
	}{{"models", cfg.Models, TorchModels}, {"precisions", cfg.Precisions, Precisions}} {
		if len(l.list) == 0 {
			return configf("torch: no %s (want %s)", l.what, strings.Join(l.allowed, ", "))
		}
		for i, x := range l.list {
			if !slices.Contains(l.allowed, x) || slices.Contains(l.list[:i], x) {
				return configf("torch: %s %v: each one of %s, none twice", l.what, l.list, strings.Join(l.allowed, ", "))
			}
		}
	}
	return nil
}

// trainRun is one run of any side, in µs per step.
type trainRun struct {
	wall, gpu float64 // the captured step, wall and device (events around chunks)
	replay    float64 // PyTorch: replays back to back, the step alone on the GPU
	// reserved while training, and the peak of the run (MiB); NaN if not
	// reported
	reservedMiB, peakMiB float64
	kernels              int // kernels per step; 0 if not reported
	fields               map[string]string
}

var (
	ggTrainedRe   = regexp.MustCompile(`(?m)^trained .*, ([\d.]+) (µs|ms|s) per step`)
	ggDeviceRe    = regexp.MustCompile(`(?m)^\s+device time ([\d.]+) (µs|ms|s) per step`)
	ggReservedRe  = regexp.MustCompile(`(?m)peak reserved while training ([\d.]+) MB; peaks overall: allocated [\d.]+ MB, reserved ([\d.]+) MB`)
	ggKernelsRe   = regexp.MustCompile(`(?m)kernels per step: (\d+)`)
	ggStepOpsRe   = regexp.MustCompile(`(?m)^\s+a step: (\d+) kernels`)
	ggPrecisionRe = regexp.MustCompile(`(?m)^\s*precision: (\S+)`)
	ggGEMMRe      = regexp.MustCompile(`(?m)^\s+backend .*, GEMM (.+)$`)
)

// parseGGTrain reads gpugraph train's output: the step times of its
// captured-graph section; the memory it reserved, from its line "peak
// reserved while training N MB; peaks overall: allocated A MB, reserved P
// MB" there (train's MB are MiB, 2^20 bytes); the kernels per step of its
// "kernels per step: N" line, else of the banner's "a step: N kernels"; the
// precision of its "precision: P" line and the GEMM of its banner, if it
// prints them.
func parseGGTrain(out string) (trainRun, error) {
	r := trainRun{reservedMiB: math.NaN(), peakMiB: math.NaN(), fields: map[string]string{}}
	i := strings.Index(out, "== captured graph")
	if i < 0 {
		return r, fmt.Errorf("no captured graph section in the train output")
	}
	head, graph := out[:i], out[i:]
	m, d := ggTrainedRe.FindStringSubmatch(graph), ggDeviceRe.FindStringSubmatch(graph)
	if m == nil || d == nil {
		return r, fmt.Errorf("no step time in the train output")
	}
	r.wall, r.gpu = toMicro(m[1], m[2]), toMicro(d[1], d[2])
	if m := ggReservedRe.FindStringSubmatch(graph); m != nil {
		r.reservedMiB, _ = strconv.ParseFloat(m[1], 64)
		r.peakMiB, _ = strconv.ParseFloat(m[2], 64)
	}
	if m := ggKernelsRe.FindStringSubmatch(out); m != nil {
		r.kernels, _ = strconv.Atoi(m[1])
	} else if m := ggStepOpsRe.FindStringSubmatch(head); m != nil {
		r.kernels, _ = strconv.Atoi(m[1])
	}
	if m := ggPrecisionRe.FindStringSubmatch(out); m != nil {
		r.fields["precision"] = m[1]
	}
	if m := ggGEMMRe.FindStringSubmatch(head); m != nil {
		r.fields["gemm"] = strings.TrimSpace(m[1])
	}
	return r, nil
}

func toMicro(v, unit string) float64 {
	x, _ := strconv.ParseFloat(v, 64) // the regexp admits digits and dots only
	switch unit {
	case "ms":
		x *= 1e3
	case "s":
		x *= 1e6
	}
	return x
}

// parseTorchStep reads torch_step.py's result line: wall_us, gpu_chunk_us
// and gpu_replay_us are required; reserved_mib, max_reserved_mib and
// kernels optional.
func parseTorchStep(out string) (trainRun, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "torch_step ") || strings.Contains(line, "check=") {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields(line)[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		r := trainRun{fields: f, reservedMiB: math.NaN(), peakMiB: math.NaN()}
		for key, dst := range map[string]*float64{"wall_us": &r.wall, "gpu_chunk_us": &r.gpu, "gpu_replay_us": &r.replay} {
			x, err := strconv.ParseFloat(f[key], 64)
			if err != nil {
				return r, fmt.Errorf("torch_step line without %s: %q", key, line)
			}
			*dst = x
		}
		for key, dst := range map[string]*float64{"reserved_mib": &r.reservedMiB, "max_reserved_mib": &r.peakMiB} {
			if x, err := strconv.ParseFloat(f[key], 64); err == nil {
				*dst = x
			}
		}
		if n, err := strconv.Atoi(f["kernels"]); err == nil && n > 0 {
			r.kernels = n
		}
		return r, nil
	}
	return trainRun{}, fmt.Errorf("no torch_step line in the output")
}

// The sides of a case, in the report's order.
const (
	sideGG = iota
	sideGraph
	sideBest
	nSides
)

var sideNames = [nSides]string{"gpugraph", "PyTorch graph", "PyTorch best"}

// torchCase is one (model, precision) and its runs, by side.
type torchCase struct {
	model, precision string
	runs             [nSides][]trainRun
}

// TorchReport is the outcome of Torch: every run of every side of every
// (model, precision). Write prints it as bench --vs torch does.
type TorchReport struct {
	Config TorchConfig
	cases  []*torchCase
}

// Torch runs, cfg.Reps times, for each model and precision, gpugraph's
// captured step and PyTorch's plain CUDA-graph step and PyTorch's best
// (torch_step.py --best), each in a process of its own; the order of the
// three rotates from one repetition to the next. A precision other than
// fp32 is passed to gpugraph train as --precision; when train prints a
// "precision: P" line, P must be the one asked for. Progress notes go to
// progress.
func Torch(cfg TorchConfig, progress io.Writer) (*TorchReport, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gpugraph-torch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "torch_step.py")
	if err := os.WriteFile(script, []byte(benchsrc.TorchStep), 0o644); err != nil {
		return nil, err
	}
	steps, every := strconv.Itoa(cfg.Steps), strconv.Itoa(cfg.Every)
	rep := &TorchReport{Config: cfg}
	for _, model := range cfg.Models {
		for _, prec := range cfg.Precisions {
			rep.cases = append(rep.cases, &torchCase{model: model, precision: prec})
		}
	}
	// One side's run of one case.
	run := func(c *torchCase, side int) error {
		switch side {
		case sideGG:
			args := []string{"--backend", "cuda", "--model", c.model, "--modes", "graph", "--steps", steps, "--every", every}
			if c.precision != "fp32" { // train's default; a build without --precision runs fp32 too
				args = append(args, "--precision", c.precision)
			}
			if cfg.GEMM != "" {
				args = append(args, "--gemm", cfg.GEMM)
			}
			out, err := cfg.GG.run(10*time.Minute, args...)
			if err != nil {
				return err
			}
			r, err := parseGGTrain(out)
			if err == nil && r.fields["precision"] != "" && !strings.EqualFold(r.fields["precision"], c.precision) {
				err = fmt.Errorf("it trained in precision %s, not %s", r.fields["precision"], c.precision)
			}
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", cfg.GG.line(args...), err, out)
			}
			c.runs[side] = append(c.runs[side], r)
		default:
			args := []string{script, "--model", c.model, "--precision", c.precision, "--steps", steps, "--every", every}
			if side == sideBest {
				args = append(args, "--best")
			}
			out, err := runChild(15*time.Minute, nil, cfg.Python, args...)
			if err != nil {
				return err
			}
			r, err := parseTorchStep(out)
			if err == nil {
				best := map[bool]string{false: "0", true: "1"}[side == sideBest]
				for k, want := range map[string]string{"model": c.model, "precision": c.precision, "best": best} {
					if got := r.fields[k]; got != want {
						err = fmt.Errorf("it printed %s=%s, want %s", k, got, want)
					}
				}
			}
			if err != nil {
				return fmt.Errorf("%s %s: %w\n%s", cfg.Python, strings.Join(args, " "), err, out)
			}
			c.runs[side] = append(c.runs[side], r)
		}
		return nil
	}
	for i := range cfg.Reps {
		for _, c := range rep.cases {
			for k := range nSides {
				side := (i + k) % nSides
				t0 := time.Now()
				if err := run(c, side); err != nil {
					return nil, err
				}
				// Each run as it ends: a run of the three sides takes a
				// minute or more (PyTorch's compile), and a log cut short
				// keeps what was measured.
				r := c.runs[side][len(c.runs[side])-1]
				fmt.Fprintf(progress, "bench: torch rep %d/%d %s %s %-13s step %.1f µs, GPU %.1f µs (%.0f s)\n",
					i+1, cfg.Reps, c.model, c.precision, sideNames[side], r.wall, r.gpu, time.Since(t0).Seconds())
			}
		}
	}
	return rep, nil
}

// Write prints the tables: step times and their ratios, then memory and
// kernels, then every run.
func (r *TorchReport) Write(w io.Writer) error {
	_, err := io.WriteString(w, r.String())
	return err
}

func (r *TorchReport) String() string {
	var b strings.Builder
	printTorchTables(&b, r)
	return b.String()
}

// col is the median of f over the runs rs where it is a number; NaN if
// there is none.
func col(rs []trainRun, f func(trainRun) float64) float64 {
	var xs []float64
	for _, r := range rs {
		if x := f(r); !math.IsNaN(x) {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	return median(xs)
}

// num formats x with prec decimals, "-" for NaN.
func num(x float64, prec int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', prec, 64)
}

// kernelsCell is the kernels per step of rs: the value if every run that
// reports one agrees, "a-b" if they differ, "-" if none reports one.
func kernelsCell(rs []trainRun) string {
	var ks []int
	for _, r := range rs {
		if r.kernels > 0 {
			ks = append(ks, r.kernels)
		}
	}
	if len(ks) == 0 {
		return "-"
	}
	lo, hi := slices.Min(ks), slices.Max(ks)
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// caseCell is the first cell of a table's row, left-aligned in a table
// aligned right.
func caseCell(model, precision string) string { return fmt.Sprintf("%-9s  %-9s", model, precision) }

func printTorchTables(w io.Writer, r *TorchReport) {
	cfg := r.Config
	var pt map[string]string // a PyTorch run's fields, for the versions
	gemm := ""
	for _, c := range r.cases {
		if pt == nil && len(c.runs[sideGraph]) > 0 {
			pt = c.runs[sideGraph][0].fields
		}
		if gemm == "" && len(c.runs[sideGG]) > 0 {
			gemm = c.runs[sideGG][0].fields["gemm"]
		}
	}
	fmt.Fprintf(w, "\ntraining step against PyTorch: gpugraph train's captured step (gg), PyTorch's step in a CUDA graph (graph),\n")
	fmt.Fprintf(w, "  PyTorch at its best (best: torch.compile, fused optimizer, the whole step in one CUDA graph); SGD on both sides\n")
	fmt.Fprintf(w, "  %d runs of each side, alternated, each in its own process, %d steps per run; µs per step, median of the runs' medians\n", cfg.Reps, cfg.Steps)
	if pt != nil {
		fmt.Fprintf(w, "  PyTorch: torch %s, CUDA %s, %s\n", pt["torch"], pt["cuda"], pt["device"])
	}
	if gemm != "" {
		fmt.Fprintf(w, "  gpugraph: GEMM %s\n", gemm)
	}
	fmt.Fprintln(w, "  wall: the host's clock around timed chunks of steps (batch copy, replay, loss read back);")
	fmt.Fprintln(w, "  GPU: events on the step's stream around the same chunks; ratios are gg's median over the other side's")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, caseCell("model", "precision")+"\tgg wall\tgg GPU\tgraph wall\tgraph GPU\tbest wall\tbest GPU\tgg/graph wall\tGPU\tgg/best wall\tGPU\tpeak\t")
	type meds struct{ wall, gpu float64 }
	for _, c := range r.cases {
		var m [nSides]meds
		for s := range nSides {
			m[s].wall = col(c.runs[s], func(r trainRun) float64 { return r.wall })
			m[s].gpu = col(c.runs[s], func(r trainRun) float64 { return r.gpu })
		}
		peak := math.NaN()
		if rs := c.runs[sideGraph]; len(rs) > 0 {
			if x, err := strconv.ParseFloat(rs[0].fields["peak_us"], 64); err == nil {
				peak = x
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", caseCell(c.model, c.precision),
			num(m[sideGG].wall, 1), num(m[sideGG].gpu, 1), num(m[sideGraph].wall, 1), num(m[sideGraph].gpu, 1),
			num(m[sideBest].wall, 1), num(m[sideBest].gpu, 1),
			num(m[sideGG].wall/m[sideGraph].wall, 2), num(m[sideGG].gpu/m[sideGraph].gpu, 2),
			num(m[sideGG].wall/m[sideBest].wall, 2), num(m[sideGG].gpu/m[sideBest].gpu, 2), num(peak, 1))
	}
	tw.Flush()
	fmt.Fprintln(w, "  (peak: the step's FLOPs at the precision's H100 SXM dense peak, 67 TFLOP/s FP32, 495 TF32, 989 BF16: a floor, not a target)")

	fmt.Fprintln(w, "\nmemory and kernels: MiB reserved while training, and at the run's peak (medians of the runs); kernels per step")
	fmt.Fprintln(w, "  gg: train's \"peak reserved while training\" and \"peaks overall ... reserved\" of the captured graph (Malloc +")
	fmt.Fprintln(w, "  pool + graph memory); PyTorch: torch.cuda.memory_reserved() after the run and max_memory_reserved() (the caching")
	fmt.Fprintln(w, "  allocator, the graph's pool included); kernels: gg's own count (\"kernels per step\", else the banner's \"a step:")
	fmt.Fprintln(w, "  N kernels\"), PyTorch's from torch.profiler over 3 replays; a-b where runs differ, - where not reported")
	fmt.Fprintln(w)
	fmt.Fprintln(tw, caseCell("model", "precision")+"\tgg MiB\tpeak\tgraph MiB\tpeak\tbest MiB\tpeak\tgg kernels\tgraph kernels\tbest kernels\t")
	for _, c := range r.cases {
		row := []string{caseCell(c.model, c.precision)}
		for s := range nSides {
			row = append(row, num(col(c.runs[s], func(r trainRun) float64 { return r.reservedMiB }), 1),
				num(col(c.runs[s], func(r trainRun) float64 { return r.peakMiB }), 1))
		}
		for s := range nSides {
			row = append(row, kernelsCell(c.runs[s]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()

	fmt.Fprintln(w, "\nruns, in order: µs per step, wall/GPU")
	for _, c := range r.cases {
		for s := range nSides {
			runs := make([]string, len(c.runs[s]))
			for i, x := range c.runs[s] {
				runs[i] = num(x.wall, 1) + "/" + num(x.gpu, 1)
			}
			fmt.Fprintf(w, "  %-9s %-4s %-13s %s\n", c.model, c.precision, sideNames[s], strings.Join(runs, " "))
		}
	}
}
