package side

// The PyTorch side by side: the cuda backend's captured training step
// (gpugraph train --model reference, mode graph) against the same model,
// batch, optimizer and precision in PyTorch, captured with torch.cuda.graphs
// (tools/bench/torch_step.py, written out and run with the given Python).
// Each side runs in a process of its own, alternating which goes first,
// Reps times; the table gives medians over the runs of each one's median
// step.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	benchsrc "github.com/gpugraph/gpugraph/tools/bench"
)

// TorchConfig is what Torch measures.
type TorchConfig struct {
	Python string // a Python with PyTorch and CUDA
	Reps   int    // runs of each side, alternated
	Steps  int    // training steps per run (train --steps)
	Every  int    // timed chunk length (train --every)
	// GG is the gpugraph side, the command "gpugraph train":
	// DefaultTorchConfig's is this executable's, Self("train").
	GG Command
}

// DefaultTorchConfig returns the defaults: python3, 5 runs of 300 steps,
// timed in chunks of 50.
func DefaultTorchConfig() TorchConfig {
	return TorchConfig{Python: "python3", Reps: 5, Steps: 300, Every: 50, GG: Self("train")}
}

// trainRun is one run of either side, in µs per step.
type trainRun struct {
	wall, gpu float64 // the captured step, wall and device (events around chunks)
	replay    float64 // PyTorch: replays back to back, the step alone on the GPU
	fields    map[string]string
}

var (
	ggTrainedRe = regexp.MustCompile(`(?m)^trained .*, ([\d.]+) (µs|ms|s) per step`)
	ggDeviceRe  = regexp.MustCompile(`(?m)^\s+device time ([\d.]+) (µs|ms|s) per step`)
)

// parseGGTrain reads the captured-graph section of gpugraph train's output.
func parseGGTrain(out string) (trainRun, error) {
	i := strings.Index(out, "== captured graph")
	if i < 0 {
		return trainRun{}, fmt.Errorf("no captured graph section in the train output")
	}
	out = out[i:]
	m, d := ggTrainedRe.FindStringSubmatch(out), ggDeviceRe.FindStringSubmatch(out)
	if m == nil || d == nil {
		return trainRun{}, fmt.Errorf("no step time in the train output")
	}
	return trainRun{wall: toMicro(m[1], m[2]), gpu: toMicro(d[1], d[2])}, nil
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

// parseTorchStep reads torch_step.py's result line.
func parseTorchStep(out string) (trainRun, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
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
		r := trainRun{fields: f}
		for key, dst := range map[string]*float64{"wall_us": &r.wall, "gpu_chunk_us": &r.gpu, "gpu_replay_us": &r.replay} {
			x, err := strconv.ParseFloat(f[key], 64)
			if err != nil {
				return r, fmt.Errorf("torch_step line without %s: %q", key, line)
			}
			*dst = x
		}
		return r, nil
	}
	return trainRun{}, fmt.Errorf("no torch_step line in the output")
}

// TorchReport is the outcome of Torch: every run of both sides. Write
// prints it as bench --vs torch does.
type TorchReport struct {
	Config TorchConfig
	gg, pt []trainRun
}

// Write prints the table (medians over the runs, each run's values).
func (r *TorchReport) Write(w io.Writer) error {
	_, err := io.WriteString(w, r.String())
	return err
}

func (r *TorchReport) String() string {
	var b strings.Builder
	printTorchTable(&b, r.Config, r.gg, r.pt)
	return b.String()
}

// Torch runs both sides cfg.Reps times, alternating which goes first.
// Progress notes go to progress.
func Torch(cfg TorchConfig, progress io.Writer) (*TorchReport, error) {
	if cfg.Reps < 1 || cfg.Steps < 1 || cfg.Every < 1 || cfg.Every > cfg.Steps {
		return nil, configf("torch: need reps >= 1 and 1 <= every <= steps")
	}
	if cfg.GG.Path == "" {
		return nil, configf("torch: no command for the gpugraph side (gpugraph train)")
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
	ggArgs := []string{"--backend", "cuda", "--model", "reference", "--modes", "graph", "--steps", steps, "--every", every}
	ptArgs := []string{script, "--steps", steps, "--every", every}
	rep := &TorchReport{Config: cfg}
	runGG := func() error {
		out, err := cfg.GG.run(5*time.Minute, ggArgs...)
		if err != nil {
			return err
		}
		r, err := parseGGTrain(out)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", cfg.GG.line(ggArgs...), err, out)
		}
		rep.gg = append(rep.gg, r)
		return nil
	}
	runPT := func() error {
		out, err := runChild(5*time.Minute, nil, cfg.Python, ptArgs...)
		if err != nil {
			return err
		}
		r, err := parseTorchStep(out)
		if err != nil {
			return fmt.Errorf("%s torch_step.py: %w\n%s", cfg.Python, err, out)
		}
		rep.pt = append(rep.pt, r)
		return nil
	}
	for i := range cfg.Reps {
		first, second := runGG, runPT
		if i%2 == 1 {
			first, second = runPT, runGG
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "bench: torch run %d/%d done\n", i+1, cfg.Reps)
	}
	return rep, nil
}

func printTorchTable(w io.Writer, cfg TorchConfig, gg, pt []trainRun) {
	col := func(rs []trainRun, f func(trainRun) float64) (float64, string) {
		xs := make([]float64, len(rs))
		s := make([]string, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
			s[i] = fmt.Sprintf("%.1f", xs[i])
		}
		return median(xs), strings.Join(s, " ")
	}
	f := pt[0].fields
	fmt.Fprintf(w, "\ntraining step against PyTorch: reference model (256→1024×4→10, batch 512, SGD), FP32 without TF32 on both sides\n")
	fmt.Fprintf(w, "  %d runs each, alternated, %d steps per run; µs per step, median of the runs' medians [runs]\n", cfg.Reps, cfg.Steps)
	fmt.Fprintf(w, "  PyTorch: torch %s, CUDA %s, %s\n", f["torch"], f["cuda"], f["device"])
	ggWall, ggWallRuns := col(gg, func(r trainRun) float64 { return r.wall })
	ggGPU, ggGPURuns := col(gg, func(r trainRun) float64 { return r.gpu })
	ptWall, ptWallRuns := col(pt, func(r trainRun) float64 { return r.wall })
	ptGPU, ptGPURuns := col(pt, func(r trainRun) float64 { return r.gpu })
	ptRep, ptRepRuns := col(pt, func(r trainRun) float64 { return r.replay })
	fmt.Fprintf(w, "  %-34s %8.1f  [%s]\n", "gpugraph captured step, wall", ggWall, ggWallRuns)
	fmt.Fprintf(w, "  %-34s %8.1f  [%s]\n", "gpugraph captured step, device", ggGPU, ggGPURuns)
	fmt.Fprintf(w, "  %-34s %8.1f  [%s]\n", "PyTorch CUDA graph step, wall", ptWall, ptWallRuns)
	fmt.Fprintf(w, "  %-34s %8.1f  [%s]\n", "PyTorch CUDA graph step, GPU", ptGPU, ptGPURuns)
	fmt.Fprintf(w, "  %-34s %8.1f  [%s]\n", "PyTorch replays back to back, GPU", ptRep, ptRepRuns)
	fmt.Fprintf(w, "  gpugraph / PyTorch: wall %.2f, device %.2f\n", ggWall/ptWall, ggGPU/ptGPU)
	if peak, err := strconv.ParseFloat(f["fp32_peak_us"], 64); err == nil {
		fmt.Fprintf(w, "  the step's arithmetic (%s FLOPs) at the FP32 peak: %.1f µs; gpugraph's device time at %.0f%% of it, PyTorch's at %.0f%%\n",
			f["flops"], peak, 100*peak/ggGPU, 100*peak/ptGPU)
	}
}
