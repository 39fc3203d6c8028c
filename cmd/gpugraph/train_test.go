package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
