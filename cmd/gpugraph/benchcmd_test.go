package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestBenchVsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--vs", "nothing"},
		{"bench", "--vs", "taskflow"}, // no --taskflow
		{"bench", "--vs", "torch"},    // host backend
		{"bench", "--vs", "native"},   // host backend
		{"bench", "--vs", "taskflow", "--taskflow", "x", "--threads", "a"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", args, code, errOut.String())
		}
	}
}

func TestBenchVsTorchUsage(t *testing.T) {
	for args, want := range map[string]string{
		"bench --vs torch --backend cuda --precision fp16":      `unknown --precision "fp16" (want fp32, tf32 or bf16, or a comma-separated list of them)`,
		"bench --vs torch --backend cuda --precision fp32,fp32": `--precision "fp32,fp32" names fp32 twice`,
		"bench --vs torch --backend cuda --precision tf32,":     `unknown --precision ""`,
		"bench --vs torch --backend cuda --model small":         `unknown --model "small" (want reference or large`,
		"bench --vs torch --backend cuda --model large,large":   `names large twice`,
		"bench --precision bf16":                                "--precision applies to --vs torch only",
		"bench --model large":                                   "--model applies to --vs torch only",
		"bench --vs taskflow --taskflow x --precision bf16":     "--precision applies to --vs torch, not to --vs taskflow",
		"bench --vs torch --precision bf16":                     "--vs torch needs --backend cuda",
	} {
		var out, errOut bytes.Buffer
		if code := run(strings.Fields(args), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: exit %d, %q; want 2 (usage) and %q", args, code, errOut.String(), want)
		}
	}
}

// The hidden tfside command: its flags reach side.TFSide, and what that
// refuses is a usage error.
func TestTfsideMain(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-threads", "1", "-shapes", "chain10", "-mode", "batch", "-body", "work", "-batch", "10",
		"-reps", "2", "-firstrep", "4", "-warmup", "0.01", "-time", "0.02", "-work", "70", "-iters", "37"}
	if err := tfsideMain(args, &out, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		for _, w := range []string{"impl=gpugraph mode=batch shape=chain10 nodes=10 threads=1 body=work rep=" + string(rune('4'+i)) + " ",
			" check=ok work_ns=70 work_iters=37 serial_ns_per_node="} {
			if !strings.Contains(l, w) {
				t.Errorf("line %q lacks %q", l, w)
			}
		}
	}
	for _, args := range [][]string{
		{"-mode", "async"},
		{"-body", "sleep"},
		{"-work", "0"},
		{"-iters", "-1"},
		{"-threads", "0"},
		{"-batch", "0"},
		{"-reps", "0"},
		{"-time", "0"},
		{"-warmup", "-1"},
		{"-shapes", "chain10,chain20"},
		{"-frobnicate"},
		{"-threads", "x"},
		{"chain10"},
	} {
		var out bytes.Buffer
		if err := tfsideMain(args, &out, &out); !errors.Is(err, errUsage) {
			t.Errorf("tfside %v: %v, want a usage error", args, err)
		}
	}
}
