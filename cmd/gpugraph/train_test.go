package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugraph/gpugraph/internal/train"
)

func trainTestConfig() trainConfig {
	return trainConfig{Backend: "host", Model: "small", Steps: 40, Every: 20, Warmup: 3, Batches: 8,
		Modes: "eager,graph", GEMM: "auto", Sync: "overlap"}
}

// Both modes train the same model on the same batches: the loss falls and
// ends the same, and the report has seed 004's memory lines.
func TestTrain(t *testing.T) {
	var out bytes.Buffer
	cfg := trainTestConfig()
	cfg.Timeline = filepath.Join(t.TempDir(), "step.svg")
	if err := runTrain(&out, cfg); err != nil {
		t.Fatalf("runTrain: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"== op by op ==", "== captured graph, replayed ==", "model ready", "static inputs",
		"graph capture done", "lower bound", "verdict:", "same final loss"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	b, err := os.ReadFile(cfg.Timeline)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("<svg")) && !bytes.HasPrefix(b, []byte("<?xml")) {
		t.Errorf("timeline is not an SVG: %.80s", b)
	}
}

func TestTrainRejects(t *testing.T) {
	for _, c := range []func(*trainConfig){
		func(c *trainConfig) { c.Model = "huge" },
		func(c *trainConfig) { c.Modes = "eager,lazy" },
		func(c *trainConfig) { c.Steps = 0 },
		func(c *trainConfig) { c.Warmup = c.Steps },
		func(c *trainConfig) { c.GEMM = "magic" },
		func(c *trainConfig) { c.Optimizer = "rmsprop" },
		func(c *trainConfig) { c.Precision = "fp8" },
		func(c *trainConfig) { c.Model = "large"; c.Batch = 1 << 20 },
	} {
		cfg := trainTestConfig()
		c(&cfg)
		if err := runTrain(&bytes.Buffer{}, cfg); !errors.Is(err, errUsage) {
			t.Errorf("%+v: got %v, want a usage error", cfg, err)
		}
	}
}

// train --devices: data-parallel replicas on 2 and 4 host devices, their
// gradients all-reduced inside the captured step, train as one device on
// the same global batches (runDataParallel fails otherwise).
func TestTrainDataParallel(t *testing.T) {
	for _, n := range []int{2, 4} {
		var out bytes.Buffer
		cfg := trainTestConfig()
		cfg.Devices = n
		cfg.Sync = "overlap,inline,after"
		if err := runDataParallel(&out, cfg, n); err != nil {
			t.Fatalf("%d devices: %v\n%s", n, err, out.String())
		}
		if s := out.String(); strings.Count(s, "train as one") != 3 || !strings.Contains(s, "device 1 (rank 1):") || !strings.Contains(s, "side by side") {
			t.Errorf("%d devices: output lacks the verdict or the per-device memory:\n%s", n, s)
		}
	}
	var out bytes.Buffer
	if err := runDataParallel(&out, trainTestConfig(), 3); !errors.Is(err, errUsage) {
		t.Errorf("3 devices for a batch of 128: %v, want a usage error", err)
	}
}

// --profile times the pieces of the captured step: on one device, and per
// rank of a data-parallel job with its sync stream, every piece a row in
// step order, each stream's pieces one after another.
func TestTrainProfile(t *testing.T) {
	for _, c := range []struct {
		name    string
		devices int
		want    []string
	}{
		{"one device", 0, []string{"step profile, one device", "fwd GEMM L0", "bwd dW GEMM+SGD L0", "bwd ReLU'+db L0", "update", "by kind:"}},
		{"two ranks", 2, []string{"step profile, rank 0", "step profile, rank 1", "sync   all-reduce L0", "wait for sync stream", "by kind:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := trainTestConfig()
			cfg.Modes, cfg.Profile = "graph", 3
			var err error
			if c.devices > 0 {
				cfg.Devices = c.devices
				err = runDataParallel(&out, cfg, c.devices)
			} else {
				err = runTrain(&out, cfg)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			s := out.String()
			for _, want := range c.want {
				if !strings.Contains(s, want) {
					t.Errorf("output lacks %q:\n%s", want, s)
				}
			}
		})
	}
}

// The rows of a profile: each piece starts where its stream's previous
// mark was, the sync stream's first at the step's start.
func TestStepProfileRows(t *testing.T) {
	p := &stepProfile{
		marks: []profMark{{what: "start"}, {what: "a"}, {what: "wait x", side: true}, {what: "b"}, {what: "ar x", side: true}},
		times: [][]float64{{0, 0, 0}, {3, 1, 2}, {4, 4, 4}, {6, 5, 7}, {9, 8, 10}},
	}
	got := p.rows()
	want := []profRow{{"a", false, 0, 2}, {"wait x", true, 0, 4}, {"b", false, 2, 6}, {"ar x", true, 4, 9}}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Every precision trains on the host, op by op and captured, to the same
// final loss in both modes; the banner names the precision, and the
// captured graph has the kernels Config.StepOps counts (the package's own
// GEMM: one kernel each).
func TestTrainPrecisions(t *testing.T) {
	for _, p := range train.Precisions {
		for _, opt := range []string{train.SGD, train.Adam} {
			t.Run(p+"/"+opt, func(t *testing.T) {
				var out bytes.Buffer
				cfg := trainTestConfig()
				cfg.Precision, cfg.Optimizer, cfg.Steps = p, opt, 20
				if err := runTrain(&out, cfg); err != nil {
					t.Fatalf("%v\n%s", err, out.String())
				}
				tc, err := trainPreset(cfg)
				if err != nil {
					t.Fatal(err)
				}
				kernels, _ := tc.StepOps()
				s := out.String()
				for _, want := range []string{"precision: " + p, fmt.Sprintf("kernels per step: %d (", kernels), "same final loss"} {
					if !strings.Contains(s, want) {
						t.Errorf("output lacks %q:\n%s", want, s)
					}
				}
			})
		}
	}
}

// The presets: large is the GEMM-bound model, and --precision reaches the
// configuration.
func TestTrainPresets(t *testing.T) {
	cfg := trainTestConfig()
	cfg.Model, cfg.Precision = "large", train.BF16
	tc, err := trainPreset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := train.Large()
	want.Precision = train.BF16
	if tc != want {
		t.Fatalf("--model large --precision bf16: %+v, want %+v", tc, want)
	}
}
