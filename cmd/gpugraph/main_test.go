package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/bench"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := runDemo(&out, "host", defaultDemoConfig()); err != nil {
		t.Fatalf("runDemo: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"device:", "11 nodes, 16 edges", "median", "\nOK\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

// TestDemoPartialBlock uses a length that leaves the last block part empty,
// and writes the DOT file.
func TestDemoPartialBlock(t *testing.T) {
	dot := filepath.Join(t.TempDir(), "demo.dot")
	var out bytes.Buffer
	if err := runDemo(&out, "", demoConfig{N: 100_003, Launches: 2, DOT: dot}); err != nil {
		t.Fatalf("runDemo: %v\n%s", err, out.String())
	}
	if !strings.HasSuffix(out.String(), "OK\n") {
		t.Errorf("output does not end in OK:\n%s", out.String())
	}
	b, err := os.ReadFile(dot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("digraph")) || !bytes.Contains(b, []byte("reduce_rows")) {
		t.Errorf("unexpected DOT output:\n%s", b)
	}
}

func TestDemoUnknownBackend(t *testing.T) {
	err := runDemo(&bytes.Buffer{}, "no-such-backend", defaultDemoConfig())
	if !errors.Is(err, gg.ErrInvalidValue) {
		t.Fatalf("runDemo with an unknown backend: got %v, want an error wrapping ErrInvalidValue", err)
	}
}

func TestCheckResults(t *testing.T) {
	want := [][]float64{make([]float64, len(polys))}
	got := [][]float32{make([]float32, len(polys))}
	for k := range polys {
		want[0][k] = float64(k + 1)
		got[0][k] = float32(k + 1)
	}
	if _, err := checkResults(got, want); err != nil {
		t.Fatalf("equal results: %v", err)
	}
	for _, bad := range []float32{float32(len(polys)) * 1.001, float32(math.NaN())} {
		got[0][len(polys)-1] = bad
		if _, err := checkResults(got, want); err == nil || !strings.Contains(err.Error(), "MISMATCH") {
			t.Errorf("last sum %v: got %v, want a mismatch", bad, err)
		}
	}
}

func TestPolyString(t *testing.T) {
	for c, want := range map[[4]float32]string{
		{0, 0, 0, 0}:      "0",
		{1, 2, 1, 0}:      "1 + 2x + x²",
		{0.5, -1, 1.5, 2}: "0.5 - x + 1.5x² + 2x³",
		{0, -1, 0, 0}:     "-x",
	} {
		if got := polyString(c); got != want {
			t.Errorf("polyString(%v) = %q, want %q", c, got, want)
		}
	}
}

func TestBenchTable(t *testing.T) {
	cfg := defaultBenchConfig()
	cfg.Sizes = []int{1, 10}
	cfg.Count = 2
	cfg.Benchtime = "20x"
	cfg.Progress = true // the line, into a buffer
	defer func(d, tick time.Duration) { progressDelay, progressTick = d, tick }(progressDelay, progressTick)
	progressDelay, progressTick = 0, time.Millisecond
	var out bytes.Buffer
	var progress syncBuffer
	if err := runBench(&out, &progress, cfg); err != nil {
		t.Fatalf("runBench: %v", err)
	}
	s := out.String()
	head := []string{"GOMAXPROCS", "go1", "median of 2", "stream ns/op", "per launch of 10 nodes"}
	for _, sh := range bench.Shapes {
		head = append(head, sh.Name+" ns/node")
	}
	for _, want := range head {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 2+2*len(bench.Shapes) {
			rows[f[0]] = true
		}
	}
	if !rows["1"] || !rows["10"] {
		t.Errorf("want table rows for N=1 and N=10:\n%s", s)
	}
	if !strings.Contains(progress.String(), "bench, round") || !strings.Contains(progress.String(), "runs") {
		t.Errorf("progress = %q", progress.String())
	}
}

func TestBenchBadBenchtime(t *testing.T) {
	cfg := defaultBenchConfig()
	cfg.Benchtime = "soon"
	if err := runBench(&bytes.Buffer{}, &bytes.Buffer{}, cfg); err == nil {
		t.Fatal("runBench accepted benchtime \"soon\"")
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median(3,1,2) = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median(4,1,3,2) = %v", m)
	}
}

func TestMemReport(t *testing.T) {
	var out bytes.Buffer
	if err := runMem(&out, "host"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bound MiB", "diamond", "mlp step", "one stream"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}
