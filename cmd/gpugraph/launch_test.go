package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestMain lets launch run this test binary as the gpugraph command: the
// ranks it starts get selfAsMain in their environment.
func TestMain(m *testing.M) {
	if os.Getenv("GPUGRAPH_TEST_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	selfEnv = []string{"GPUGRAPH_TEST_AS_MAIN=1"}
	os.Exit(m.Run())
}

func TestLaunchTrainOneRank(t *testing.T) {
	var out, errOut bytes.Buffer
	err := runLaunch(launchConfig{NProc: 1, NNodes: 1, Command: []string{"train", "--steps", "20", "--every", "10", "--warmup", "1"}}, &out, &errOut)
	if err != nil || !strings.Contains(out.String(), "in a job of 1 processes") || !strings.Contains(out.String(), "train as one device") {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
}

// Two processes on host devices: every rank is refused with the reason,
// and launch fails naming a rank.
func TestLaunchHostAcrossProcessesRefused(t *testing.T) {
	var out, errOut bytes.Buffer
	err := runLaunch(launchConfig{NProc: 2, NNodes: 1, Command: []string{"train", "--steps", "20"}}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "of 2") {
		t.Fatalf("got %v, want a failed rank named", err)
	}
	if !strings.Contains(errOut.String(), "needs the cuda backend (NCCL)") || !strings.Contains(errOut.String(), "[rank ") {
		t.Fatalf("stderr lacks the refusal, prefixed by its rank:\n%s", errOut.String())
	}
}

func TestLaunchProgramEnv(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	t.Setenv("NCCL_NVLS_ENABLE", "") // restored after the test
	os.Unsetenv("NCCL_NVLS_ENABLE")  // launch sets it to 0 for the ranks
	var out, errOut bytes.Buffer
	err := runLaunch(launchConfig{NProc: 3, NNodes: 2, NodeRank: 1, Master: "127.0.0.1:29999",
		Command: []string{"sh", "-c", "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR:$MASTER_PORT ${NCCL_NVLS_ENABLE-unset}"}}, &out, &errOut)
	if err != nil {
		t.Fatal(err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	want := []string{"[rank 3] 3 6 0 3 127.0.0.1:29999 0", "[rank 4] 4 6 1 3 127.0.0.1:29999 0", "[rank 5] 5 6 2 3 127.0.0.1:29999 0"}
	if !slices.Equal(lines, want) {
		t.Fatalf("got %q, want %q", lines, want)
	}
	// A failing rank fails the launch.
	err = runLaunch(launchConfig{NProc: 2, NNodes: 1, Command: []string{"sh", "-c", "exit $RANK"}}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "rank 1 of 2") {
		t.Fatalf("got %v, want rank 1's failure", err)
	}
}

func TestLaunchUsage(t *testing.T) {
	for name, cfg := range map[string]launchConfig{
		"no command":            {NProc: 1, NNodes: 1},
		"no processes":          {NProc: 0, NNodes: 1, Command: []string{"demo"}},
		"node rank of range":    {NProc: 1, NNodes: 2, NodeRank: 2, Master: "127.0.0.1:1", Command: []string{"demo"}},
		"machines, no master":   {NProc: 1, NNodes: 2, Command: []string{"demo"}},
		"master without a port": {NProc: 1, NNodes: 1, Master: "127.0.0.1", Command: []string{"demo"}},
	} {
		var out bytes.Buffer
		if err := runLaunch(cfg, &out, &out); !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	if code := run([]string{"launch", "--nproc", "x"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("launch --nproc x: exit %d, want 2", code)
	}
}
