package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	var out, progress bytes.Buffer
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
	if !strings.Contains(progress.String(), "round 2/2") {
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

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, 0, "usage:", ""},
		{[]string{"help"}, 0, "usage:", ""},
		{[]string{"frob"}, 2, "", "usage:"},
		{[]string{"demo", "--bogus"}, 2, "", "usage:"},
		{[]string{"demo", "--backend", "nope"}, 2, "", `gpugraph demo: unknown backend "nope" (host, cuda)`},
		{[]string{"mem", "--backend", "nope"}, 2, "", `unknown backend "nope"`},
		{[]string{"bench", "--count", "0"}, 2, "", "gpugraph bench: need count >= 1"},
		{[]string{"demo", "--n", "-1"}, 2, "", "gpugraph demo: need 1 <= n"},
		{[]string{"demo", "--dot", "/nonexistent-dir/d.dot"}, 2, "", "gpugraph demo: --dot: cannot write /nonexistent-dir/d.dot"},
		{[]string{"train", "--model", "nosuch"}, 2, "", `gpugraph train: unknown model "nosuch" (small, reference)`},
		{[]string{"train", "--steps", "-5"}, 2, "", "gpugraph train: need steps >= 1"},
		{[]string{"train", "--optimizer", "rmsprop"}, 2, "", "gpugraph train: "},
		{[]string{"train", "--modes", "eager,lazy"}, 2, "", `unknown mode "lazy"`},
		{[]string{"train", "--sync", "never", "--devices", "2"}, 2, "", `unknown --sync mode "never"`},
		{[]string{"train", "--timeline", "/nonexistent-dir/t.svg"}, 2, "", "gpugraph train: --timeline: cannot write /nonexistent-dir/t.svg"},
		{[]string{"train", "--timeline", "."}, 2, "", "is a directory"},
		{[]string{"train", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"launch", "--nproc", "0", "demo"}, 2, "", "gpugraph launch: --nproc 0"},
		{[]string{"launch"}, 2, "", "gpugraph launch: no command to launch"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code == 2 && !strings.Contains(stderr.String(), "usage: gpugraph") {
			t.Errorf("run(%q): exit 2 without the usage:\n%s", tc.args, stderr.String())
		}
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, stdout with %q, stderr with %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
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
