package side

import (
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ggTrainOut is gpugraph train's output as it is on this branch (no
// precision line): docs/gpu-runs/2026-11-22-train-reference-cuda.txt,
// shortened.
const ggTrainOut = `gpugraph train: 256→1024×4→10 batch 512 sgd lr 0.02 seed 1
  backend cuda (NVIDIA H100 80GB HBM3), 300 steps, 32 batches of synthetic data, GEMM cuBLAS 130100 (libcublas.so.13), FP32
  a step: 34 kernels, 14 step-local buffers, at most 14.0 MB of them live at once

== op by op ==
step   300/300  loss 0.0888  509 µs/step  allocated 45.6 MB (peak 59.6 MB), reserved 77.6 MB (peak 77.6 MB) = Malloc 45.6 MB + pool 32.0 MB + graph 0.0 MB
trained                  loss 0.7064 -> 0.0888, 545 µs per step (median over 6 timed chunks)
                         device time 530 µs per step (events on the stream around each timed chunk's steps, median)
                         peak reserved while training 77.6 MB; peaks overall: allocated 59.6 MB, reserved 99.0 MB

== captured graph, replayed ==
graph capture done       allocated 77.6 MB (peak 91.6 MB), reserved 77.6 MB (peak 109.6 MB) = Malloc 45.6 MB + pool 0.0 MB + graph 32.0 MB
                         71 nodes; graph memory lower bound 14.0 MB
step   300/300  loss 0.0888  419 µs/step  allocated 77.6 MB (peak 77.6 MB), reserved 77.6 MB (peak 77.6 MB) = Malloc 45.6 MB + pool 0.0 MB + graph 32.0 MB
trained                  loss 2.3893 -> 2.0089, 417.2 µs per step (median over 5 timed chunks)
                         device time 0.42 ms per step (events on the stream around each timed chunk's steps, median)
                         peak reserved while training 77.5 MB; peaks overall: allocated 91.6 MB, reserved 109.6 MB
`

func TestParseGGTrain(t *testing.T) {
	r, err := parseGGTrain(ggTrainOut)
	if err != nil || r.wall != 417.2 || r.gpu != 420 {
		t.Fatalf("parseGGTrain = %+v, %v; want wall 417.2, gpu 420 (the captured section, ms read as 1000 µs)", r, err)
	}
	if r.reservedMiB != 77.5 || r.peakMiB != 109.6 || r.kernels != 34 || r.fields["gemm"] != "cuBLAS 130100 (libcublas.so.13), FP32" || r.fields["precision"] != "" {
		t.Errorf("memory %v, peak %v, kernels %d, fields %v; want the captured section's 77.5 and 109.6, the banner's 34 kernels, its GEMM, no precision",
			r.reservedMiB, r.peakMiB, r.kernels, r.fields)
	}
	// The train of the precision work: its lines win over the banner's.
	out := strings.Replace(ggTrainOut, "  a step: 34 kernels", "  precision: bf16\n  a step: 34 kernels", 1) + "kernels per step: 41\n"
	if r, err := parseGGTrain(out); err != nil || r.kernels != 41 || r.fields["precision"] != "bf16" {
		t.Errorf("with the precision and kernels lines: %+v, %v; want 41 kernels, precision bf16", r, err)
	}
	// Without the memory line: unknown, not zero.
	i := strings.LastIndex(ggTrainOut, "                         peak reserved")
	if r, err := parseGGTrain(ggTrainOut[:i]); err != nil || !math.IsNaN(r.reservedMiB) || !math.IsNaN(r.peakMiB) {
		t.Errorf("no memory line: %+v, %v; want NaN", r, err)
	}
	for _, bad := range []string{"", "== op by op ==\ntrained x, 1 µs per step\n", "== captured graph\nno numbers\n"} {
		if _, err := parseGGTrain(bad); err == nil {
			t.Errorf("parseGGTrain(%q) accepted", bad)
		}
	}
}

func TestParseTorchStep(t *testing.T) {
	cases := []struct {
		name, out     string
		ok            bool
		wall, reserve float64
		kernels       int
	}{
		{"result", "noise\ntorch_step model=reference tf32=0 torch=2.11 wall_us=502.5 gpu_chunk_us=501.7 gpu_replay_us=481.3 reserved_mib=60.0 max_reserved_mib=80.5 kernels=40 flops=1.05e+10 fp32_peak_us=156.7\n", true, 502.5, 60, 40},
		{"the old line", "torch_step model=reference tf32=0 torch=2.11 wall_us=502.5 gpu_chunk_us=501.7 gpu_replay_us=481.3 flops=1.05e+10 fp32_peak_us=156.7\n", true, 502.5, math.NaN(), 0},
		{"smoke test line only", "torch_step check=cpu torch=2.11 losses=1,2\n", false, 0, 0, 0},
		{"missing field", "torch_step wall_us=1 gpu_chunk_us=2\n", false, 0, 0, 0},
		{"not a number", "torch_step wall_us=x gpu_chunk_us=2 gpu_replay_us=3\n", false, 0, 0, 0},
		{"nothing", "", false, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseTorchStep(tc.out)
			if (err == nil) != tc.ok || (tc.ok && (r.wall != tc.wall || r.kernels != tc.kernels ||
				r.reservedMiB != tc.reserve && !(math.IsNaN(r.reservedMiB) && math.IsNaN(tc.reserve)))) {
				t.Fatalf("parseTorchStep = %+v, %v; want ok %v, wall %v, reserved %v, kernels %d", r, err, tc.ok, tc.wall, tc.reserve, tc.kernels)
			}
		})
	}
}

func TestTorchConfigCheck(t *testing.T) {
	for name, edit := range map[string]func(*TorchConfig){
		"no reps":           func(c *TorchConfig) { c.Reps = 0 },
		"every over steps":  func(c *TorchConfig) { c.Every = c.Steps + 1 },
		"no steps":          func(c *TorchConfig) { c.Steps = 0 },
		"no gpugraph":       func(c *TorchConfig) { c.GG = Command{} },
		"no python":         func(c *TorchConfig) { c.Python = "" },
		"no models":         func(c *TorchConfig) { c.Models = nil },
		"unknown model":     func(c *TorchConfig) { c.Models = []string{"small"} },
		"model twice":       func(c *TorchConfig) { c.Models = []string{"large", "large"} },
		"no precisions":     func(c *TorchConfig) { c.Precisions = []string{} },
		"unknown precision": func(c *TorchConfig) { c.Precisions = []string{"fp32", "fp16"} },
		"precision twice":   func(c *TorchConfig) { c.Precisions = []string{"bf16", "bf16"} },
	} {
		cfg := DefaultTorchConfig()
		edit(&cfg)
		if _, err := Torch(cfg, &strings.Builder{}); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want a configuration error", name, err)
		}
	}
	cfg := DefaultTorchConfig()
	cfg.Models, cfg.Precisions = TorchModels, Precisions
	if err := cfg.check(); err != nil {
		t.Errorf("every model and precision: %v", err)
	}
}

// fakeTorchSides writes a stand-in gpugraph train and Python into a
// temporary directory. Each logs its arguments to log, one line a run, and
// prints what the real one does, its times from the model, the precision
// and (PyTorch) --best; gg's train prints "precision: P" if precLine.
func fakeTorchSides(t *testing.T, precLine bool) (gg Command, python, log string) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	// µs per step: reference 400, large 4000, less by the precision.
	common := `model=reference prec=fp32 best=0
while [ $# -gt 0 ]; do
  case $1 in
  --model) model=$2; shift ;;
  --precision) prec=$2; shift ;;
  --best) best=1 ;;
  esac
  shift
done
us=400; [ $model = large ] && us=4000
case $prec in tf32) us=$((us / 2)) ;; bf16) us=$((us / 4)) ;; esac
`
	train := "#!/bin/sh\necho \"gg $*\" >> " + log + "\n" + common + `echo "gpugraph train: fake"
echo "  backend cuda (Fake GPU), 300 steps, 32 batches of synthetic data, GEMM fake GEMM, $prec"
` + map[bool]string{true: "echo \"  precision: $prec\"\n", false: ""}[precLine] + `echo "  a step: 34 kernels, 14 step-local buffers, at most 14.0 MB of them live at once"
echo "== captured graph, replayed =="
echo "trained                  loss 2.3 -> 2.0, $us µs per step (median over 5 timed chunks)"
echo "                         device time $((us - 10)) µs per step (events on the stream around each timed chunk's steps, median)"
echo "                         peak reserved while training 77.6 MB; peaks overall: allocated 91.6 MB, reserved 109.6 MB"
`
	py := "#!/bin/sh\nshift\necho \"pt $*\" >> " + log + "\n" + common + `us=$((us * 5 / 4)); mib=80; k=40
[ $best = 1 ] && { us=$((us * 11 / 10)); mib=90; k=20; }
echo "torch_step model=$model precision=$prec best=$best optimizer=sgd torch=2.11.0 cuda=13.0 device=Fake_GPU wall_us=$us.0 gpu_chunk_us=$((us - 5)).0 gpu_replay_us=$((us - 20)).0 reserved_mib=$mib.0 max_reserved_mib=$((mib + 20)).0 kernels=$k peak_us=12.5"
`
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Command{Path: write("gpugraph", train), Args: []string{"train"}}, write("python", py), log
}

func TestTorchFakeSides(t *testing.T) {
	gg, python, log := fakeTorchSides(t, false)
	cfg := TorchConfig{Python: python, Reps: 3, Steps: 300, Every: 50, Models: []string{"reference", "large"}, Precisions: []string{"fp32", "bf16"}, GG: gg}
	var progress strings.Builder
	r, err := Torch(cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	text := r.String()
	t.Logf("\n%s", text)
	var b strings.Builder
	if err := r.Write(&b); err != nil || b.String() != text {
		t.Errorf("Write: %v, and it printed another text than String", err)
	}
	for _, want := range []string{
		"3 runs of each side, alternated, each in its own process, 300 steps per run",
		"PyTorch: torch 2.11.0, CUDA 13.0, Fake_GPU\n  gpugraph: GEMM fake GEMM, fp32\n",
		// gg 400/390, graph 500/495, best 550/545: 0.80 0.79, 0.73 0.72
		"  reference  fp32         400.0   390.0       500.0      495.0      550.0     545.0           0.80  0.79          0.73  0.72  12.5\n",
		"  large      bf16        1000.0   990.0      1250.0     1245.0     1375.0    1370.0           0.80  0.80          0.73  0.72  12.5\n",
		"  reference  fp32         77.6  109.6       80.0  100.0      90.0  110.0          34             40            20\n",
		"  reference fp32 gpugraph      400.0/390.0 400.0/390.0 400.0/390.0\n",
		"  large     bf16 PyTorch best  1375.0/1370.0 1375.0/1370.0 1375.0/1370.0\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(progress.String(), "bench: torch rep 3/3 large bf16 PyTorch graph step 1250.0 µs, GPU 1245.0 µs") {
		t.Errorf("progress: %q", progress.String())
	}
	// The order of the sides rotates by repetition; fp32 goes to train
	// without --precision (a train without the flag runs it), the others
	// with it.
	b2, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b2)), "\n")
	if len(lines) != 3*4*3 {
		t.Fatalf("%d runs, want 36:\n%s", len(lines), b2)
	}
	side := func(l string) string {
		switch {
		case strings.HasPrefix(l, "gg "):
			return "gg"
		case strings.HasSuffix(l, " --best"):
			return "best"
		}
		return "graph"
	}
	for rep, first := range []string{"gg", "graph", "best"} {
		for c := range 4 {
			l := lines[rep*12+c*3]
			if side(l) != first {
				t.Errorf("repetition %d, case %d starts with %q, want %s", rep+1, c, l, first)
			}
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "gg ") {
			if strings.Contains(l, "--precision fp32") || strings.Contains(l, "bf16") != strings.Contains(l, "--precision bf16") {
				t.Errorf("train %q: want --precision for bf16 only", l)
			}
			if !strings.HasPrefix(l, "gg train --backend cuda --model ") || !strings.Contains(l, " --modes graph --steps 300 --every 50") {
				t.Errorf("train %q", l)
			}
		} else if !strings.Contains(l, " --precision ") || !strings.Contains(l, "--steps 300 --every 50") {
			t.Errorf("torch_step %q", l)
		}
	}
}

// A train that prints its precision must print the one asked for.
func TestTorchPrecisionMismatch(t *testing.T) {
	gg, python, _ := fakeTorchSides(t, true)
	cfg := TorchConfig{Python: python, Reps: 1, Steps: 10, Every: 5, Models: []string{"reference"}, Precisions: []string{"tf32"}, GG: gg}
	if _, err := Torch(cfg, &strings.Builder{}); err != nil {
		t.Fatalf("matching precision: %v", err)
	}
	// A train whose default is not fp32 would say so.
	sh, err := os.ReadFile(gg.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gg.Path, []byte(strings.Replace(string(sh), "model=reference prec=fp32", "model=reference prec=tf32", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Precisions = []string{"fp32"}
	if _, err := Torch(cfg, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "it trained in precision tf32, not fp32") {
		t.Fatalf("mismatch: %v", err)
	}
}

// TorchConfig.GEMM goes to gpugraph train as --gemm, and only there.
func TestTorchGEMM(t *testing.T) {
	for _, gemm := range []string{"", "cublaslt"} {
		gg, python, log := fakeTorchSides(t, false)
		cfg := TorchConfig{Python: python, Reps: 1, Steps: 10, Every: 5, Models: []string{"reference"}, Precisions: []string{"bf16"}, GG: gg, GEMM: gemm}
		if _, err := Torch(cfg, io.Discard); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			want := strings.HasPrefix(l, "gg ") && gemm != ""
			if got := strings.Contains(l, "--gemm cublaslt"); got != want || strings.Contains(l, "--gemm") != want {
				t.Errorf("GEMM %q: run %q", gemm, l)
			}
		}
	}
}
