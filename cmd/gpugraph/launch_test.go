package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
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
	if err != nil || !strings.Contains(out.String(), "in a job of 1 process:") || !strings.Contains(out.String(), "1 rank trains as one device") {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
}

// Processes on host devices train data-parallel over TCP (loopback),
// checked against one device by rank 0: nothing assumes two.
func TestLaunchHostAcrossProcesses(t *testing.T) {
	for _, n := range []int{2, 4} {
		var out, errOut bytes.Buffer
		err := runLaunch(launchConfig{NProc: n, NNodes: 1, Command: []string{"train", "--steps", "20", "--every", "10", "--warmup", "1"}}, &out, &errOut)
		if err != nil || !strings.Contains(out.String(), fmt.Sprintf("in a job of %d processes", n)) || !strings.Contains(out.String(), "train as one device") {
			t.Fatalf("%d processes: %v\n%s%s", n, err, out.String(), errOut.String())
		}
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

// Every rank of a job on one machine gets the same random job token, a
// token the user set is kept, and two jobs get two tokens.
func TestLaunchJobToken(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	tokens := func() []string {
		var out, errOut bytes.Buffer
		if err := runLaunch(launchConfig{NProc: 3, NNodes: 1, Command: []string{"sh", "-c", "echo token=$GPUGRAPH_JOB_TOKEN"}}, &out, &errOut); err != nil {
			t.Fatal(err, errOut.String())
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			_, tok, _ := strings.Cut(l, "token=")
			got = append(got, tok)
		}
		return got
	}
	t.Setenv("GPUGRAPH_JOB_TOKEN", "")
	os.Unsetenv("GPUGRAPH_JOB_TOKEN")
	a, b := tokens(), tokens()
	if len(a) != 3 || a[0] == "" || a[1] != a[0] || a[2] != a[0] || b[0] == a[0] {
		t.Fatalf("job 1's ranks got %q, job 2's %q: want one non-empty token per job", a, b)
	}
	t.Setenv("GPUGRAPH_JOB_TOKEN", "mine")
	if c := tokens(); c[0] != "mine" || c[2] != "mine" {
		t.Fatalf("with GPUGRAPH_JOB_TOKEN=mine the ranks got %q", c)
	}
}

func TestLaunchUsage(t *testing.T) {
	for name, cfg := range map[string]launchConfig{
		"no command":            {NProc: 1, NNodes: 1},
		"no processes":          {NProc: 0, NNodes: 1, Command: []string{"demo"}},
		"node rank of range":    {NProc: 1, NNodes: 2, NodeRank: 2, Master: "127.0.0.1:1", Command: []string{"demo"}},
		"machines, no master":   {NProc: 1, NNodes: 2, Command: []string{"demo"}},
		"master without a port": {NProc: 1, NNodes: 1, Master: "127.0.0.1", Command: []string{"demo"}},
		"negative grace":        {NProc: 1, NNodes: 1, Grace: -time.Second, Command: []string{"demo"}},
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

// needProcs skips a test that needs sh and /proc (Linux, where launch
// signals process groups).
func needProcs(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process groups and /proc: Linux only")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
}

// newMarker returns digits unique to this run, to mark its processes (in
// their command lines or environments) for markedPids. It kills what is
// left of them when the test ends.
func newMarker(t *testing.T) string {
	m := fmt.Sprintf("%d%09d", os.Getpid(), rand.IntN(1e9))
	t.Cleanup(func() { killMarked(m) })
	return m
}

// markedPids lists the processes, zombies aside, whose command line or
// environment holds marker.
func markedPids(marker string) []int {
	var pids []int
	names, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range names {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} { // both empty for a zombie
			if b, err := os.ReadFile(dir + "/" + f); err == nil && bytes.Contains(b, []byte(marker)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func killMarked(marker string) {
	for _, pid := range markedPids(marker) {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}

// checkNoneLeft fails the test if a process of marker is alive.
func checkNoneLeft(t *testing.T, marker string) {
	t.Helper()
	if pids := markedPids(marker); len(pids) > 0 {
		var ps []string
		for _, pid := range pids {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			ps = append(ps, fmt.Sprintf("%d %q", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
		t.Errorf("processes left behind:\n%s", strings.Join(ps, "\n"))
	}
}

// syncBuffer is a bytes.Buffer for output read while launch may still write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launchResult is what runLaunch returned, after how long, and its output.
type launchResult struct {
	err         error
	took        time.Duration
	out, errOut string
}

// launchBounded runs runLaunch and returns once it does. If it is still
// running after limit, it fails the test and kills the processes of marker
// (which ends a launch that works at all).
func launchBounded(t *testing.T, cfg launchConfig, limit time.Duration, marker string) launchResult {
	t.Helper()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- runLaunch(cfg, &out, &errOut) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		t.Errorf("launch still running after %v; killing its processes", limit)
		killMarked(marker)
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("launch still running after its processes were killed\n%s%s", out.String(), errOut.String())
		}
	}
	return launchResult{err, time.Since(start), out.String(), errOut.String()}
}

// A failing rank stops the job within the grace, and no process of the job
// outlives launch: not the other ranks, not what any rank started, whether
// it failed, was stopped or succeeded. The error blames the rank that
// failed first, not those launch stopped.
func TestLaunchStopsJob(t *testing.T) {
	needProcs(t)
	const short = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		// script is run by sh -c; %[1]s: a sleep of 21 s whose argument is
		// the test's marker; %[2]s: a file name for ranks to meet at.
		script  string
		grace   time.Duration
		want    []string // in the error; none: launch succeeds
		notWant string
		min     time.Duration // at least this long
		max     time.Duration // at most this long (default grace + 2s)
	}{{
		// The issue: launch took 21 s and left the sleep running.
		name:   "rank exits 3",
		script: `if [ $RANK = 1 ]; then exit 3; fi; %[1]s`,
		grace:  defaultGrace,
		want:   []string{"rank 1 of 2 failed first (exit status 3); rank 0 stopped"},
		max:    2 * time.Second, // rank 0 goes at SIGTERM: no waiting out the grace
	}, {
		name:   "failed rank's background job",
		script: `%[1]s & if [ $RANK = 1 ]; then exit 3; fi; wait`,
		grace:  short,
		want:   []string{"rank 1 of 2 failed first (exit status 3); rank 0 stopped"},
	}, {
		// Rank 0 exits 0 at once; its background job goes when rank 1 fails.
		name:    "successful rank's background job, another fails",
		script:  `%[1]s & if [ $RANK = 1 ]; then sleep 0.3; exit 3; fi`,
		grace:   short,
		want:    []string{"rank 1 of 2 failed first (exit status 3)"},
		notWant: "rank 0",
	}, {
		name:   "successful ranks' background jobs",
		script: `%[1]s & echo started`,
		grace:  short,
	}, {
		name: "rank ignores SIGTERM",
		script: `if [ $RANK = 1 ]; then
				i=0; while [ ! -e %[2]s ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; exit 3
			fi
			trap '' TERM; touch %[2]s; %[1]s`,
		grace: short,
		want:  []string{"rank 1 of 2 failed first (exit status 3); rank 0 killed after the 500ms grace"},
		min:   short,
	}, {
		// Rank 0 fails when rank 1 is gone, and exits before rank 1 is
		// seen to: blamed is rank 1, killed by a signal.
		name: "peer fails on the lost rank",
		script: `if [ $RANK = 1 ]; then touch %[2]s; sleep 0.05; kill -9 $$; fi
			i=0; while [ ! -e %[2]s ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; exit 1`,
		grace: short,
		want:  []string{"rank 1 of 2 failed first (killed by signal 9, SIGKILL); rank 0 also failed (exit status 1)"},
	}, {
		name:   "rank killed by a signal",
		script: `if [ $RANK = 1 ]; then kill -9 $$; fi; %[1]s`,
		grace:  short,
		want:   []string{"rank 1 of 2 failed first (killed by signal 9, SIGKILL); rank 0 stopped"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newMarker(t)
			script := fmt.Sprintf(tc.script, "sleep 21.0"+m, filepath.Join(t.TempDir(), "ready"))
			max := tc.max
			if max == 0 {
				max = tc.grace + 2*time.Second
			}
			r := launchBounded(t, launchConfig{NProc: 2, NNodes: 1, Grace: tc.grace, Command: []string{"sh", "-c", script}}, max+10*time.Second, m)
			t.Logf("launch returned after %v: %v", r.took.Round(time.Millisecond), r.err)
			switch {
			case len(tc.want) == 0 && r.err != nil:
				t.Errorf("got %v, want success", r.err)
			case len(tc.want) > 0 && r.err == nil:
				t.Errorf("launch succeeded, want %q", tc.want)
			}
			for _, w := range tc.want {
				if r.err != nil && !strings.Contains(r.err.Error(), w) {
					t.Errorf("got %q, want %q in it", r.err, w)
				}
			}
			if tc.notWant != "" && r.err != nil && strings.Contains(r.err.Error(), tc.notWant) {
				t.Errorf("got %q, want no %q in it", r.err, tc.notWant)
			}
			if r.took < tc.min || r.took > max {
				t.Errorf("launch took %v, want %v to %v", r.took, tc.min, max)
			}
			checkNoneLeft(t, m)
			if t.Failed() {
				t.Logf("stdout:\n%sstderr:\n%s", r.out, r.errOut)
			}
		})
	}
}

// A signal to launch stops the job: SIGTERM to the ranks (SIGQUIT for
// SIGQUIT), SIGKILL after the grace, or at a second signal, to the one that
// ignores it; launch exits non-zero.
func TestLaunchInterrupted(t *testing.T) {
	needProcs(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const short = 500 * time.Millisecond
	for _, tc := range []struct {
		name     string
		sigs     []syscall.Signal // sent 100 ms apart
		grace    time.Duration
		want     string // the end of launch's stderr
		min, max time.Duration
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, short,
			"interrupted by SIGTERM; rank 0 stopped; rank 1 killed after the 500ms grace", short, short + 2*time.Second},
		{"SIGINT", []syscall.Signal{syscall.SIGINT}, short,
			"interrupted by SIGINT; rank 0 stopped; rank 1 killed after the 500ms grace", short, short + 2*time.Second},
		// Rank 1 ignores SIGTERM only: SIGQUIT ends it.
		{"SIGQUIT", []syscall.Signal{syscall.SIGQUIT}, defaultGrace,
			"interrupted by SIGQUIT; ranks 0, 1 stopped", 0, 2 * time.Second},
		{"second signal", []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}, defaultGrace,
			"interrupted by SIGTERM; rank 0 stopped; rank 1 killed on a second signal", 100 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newMarker(t)
			// ulimit: no core files from SIGQUIT.
			script := fmt.Sprintf(`ulimit -c 0; if [ $RANK = 1 ]; then trap '' TERM; fi; echo ready; sleep 21.0%s`, m)
			cmd := exec.Command(exe, "launch", "--nproc", "2", "--grace", tc.grace.String(), "sh", "-c", script)
			cmd.Env = append(os.Environ(), "GPUGRAPH_TEST_AS_MAIN=1")
			var errOut syncBuffer
			cmd.Stderr = &errOut
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill() // a launch that hangs
			ready := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(stdout)
				for n := 0; sc.Scan(); {
					if strings.HasSuffix(sc.Text(), "] ready") {
						if n++; n == 2 {
							close(ready)
						}
					}
				}
			}()
			select {
			case <-ready:
			case <-time.After(20 * time.Second):
				t.Fatalf("ranks not ready after 20s\n%s", errOut.String())
			}
			exited := make(chan error, 1)
			start := time.Now()
			for i, sig := range tc.sigs {
				if i > 0 {
					time.Sleep(100 * time.Millisecond)
				}
				cmd.Process.Signal(sig)
			}
			go func() { exited <- cmd.Wait() }()
			select {
			case err = <-exited:
			case <-time.After(tc.max + 10*time.Second):
				t.Errorf("launch still running %v after %v", time.Since(start), tc.sigs)
				cmd.Process.Kill()
				err = <-exited
			}
			took := time.Since(start)
			t.Logf("launch exited (%v) %v after %s:\n%s", err, took.Round(time.Millisecond), signalName(tc.sigs[0]), errOut.String())
			if cmd.ProcessState.ExitCode() != 1 {
				t.Errorf("launch: %v, want exit status 1", err)
			}
			if took < tc.min || took > tc.max {
				t.Errorf("launch took %v after %s, want %v to %v", took, signalName(tc.sigs[0]), tc.min, tc.max)
			}
			if want := "gpugraph launch: " + tc.want + "\n"; !strings.HasSuffix(errOut.String(), want) {
				t.Errorf("stderr does not end in %q", want)
			}
			checkNoneLeft(t, m)
		})
	}
}

// lineWatch is an io.Writer that keeps what is written to it and closes
// matched at the first line that matches re.
type lineWatch struct {
	re      *regexp.Regexp
	matched chan struct{}
	mu      sync.Mutex
	all     bytes.Buffer
	line    []byte // the last line, unfinished
	seen    bool
}

func newLineWatch(re *regexp.Regexp) *lineWatch {
	return &lineWatch{re: re, matched: make(chan struct{})}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	for _, b := range p {
		if b != '\n' {
			w.line = append(w.line, b)
			continue
		}
		if !w.seen && w.re.Match(w.line) {
			w.seen = true
			close(w.matched)
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// killMidTraining runs launch --nproc 2 (--grace 2s) of train --backend
// backend --steps 100000 --every 50 extraArgs..., this test binary as
// gpugraph, each rank's training process a background job of an sh
// wrapper (so launch reaches it only through the rank's process group).
// Once rank 0 has reported a step, it kills rank 1's training process
// (SIGKILL), and checks that launch fails within the grace + 2s, naming
// rank 1 as failing first, and leaves no process of the job behind.
func killMidTraining(t *testing.T, backend string, extraArgs ...string) {
	t.Helper()
	needProcs(t)
	const (
		grace     = 2 * time.Second
		afterKill = grace + 2*time.Second // the bound on launch's return, from the kill
		firstStep = 3 * time.Minute       // rendezvous, NCCL, capture: generous
	)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := newMarker(t)
	// The mark, with the rank, is in the environment of the training
	// process only; the wrappers have m in their command line.
	script := `GPUGRAPH_TEST_AS_MAIN=1 GPUGRAPH_TEST_MARK=` + m + `-$RANK "$0" train --backend ` + backend +
		` --steps 100000 --every 50 "$@" & wait $!`
	cfg := launchConfig{NProc: 2, NNodes: 1, Grace: grace, Command: append([]string{"sh", "-c", script, exe}, extraArgs...)}
	steps := newLineWatch(regexp.MustCompile(`^\[rank 0\] +[0-9]+ `))
	var errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- runLaunch(cfg, steps, &errOut) }()
	// finish fails the test and ends a launch still running, by killing
	// its processes.
	finish := func(format string, args ...any) {
		t.Helper()
		killMarked(m)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf(format+"\nstdout:\n%sstderr:\n%s", append(args, steps.String(), errOut.String())...)
	}
	select {
	case <-steps.matched:
	case err := <-done:
		t.Fatalf("launch ended before rank 0 reported a step: %v\nstdout:\n%sstderr:\n%s", err, steps.String(), errOut.String())
	case <-time.After(firstStep):
		finish("rank 0 reported no step in %v", firstStep)
	}
	victim := markedPids("GPUGRAPH_TEST_MARK=" + m + "-1\x00")
	if len(victim) != 1 {
		finish("rank 1's training process: found pids %v, want one", victim)
	}
	p, err := os.FindProcess(victim[0])
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		finish("kill rank 1's training process %d: %v", victim[0], err)
	}
	killed := time.Now()
	select {
	case err = <-done:
	case <-time.After(afterKill + 10*time.Second):
		finish("launch still running %v after rank 1's training process was killed", time.Since(killed))
	}
	took := time.Since(killed)
	t.Logf("launch returned %v after the kill: %v", took.Round(time.Millisecond), err)
	if took > afterKill {
		t.Errorf("launch returned %v after the kill, want at most %v", took, afterKill)
	}
	if err == nil || !strings.Contains(err.Error(), "rank 1 of 2 failed first") {
		t.Errorf("got %v, want rank 1 named as failing first", err)
	}
	checkNoneLeft(t, m)
	if t.Failed() {
		t.Logf("stdout:\n%sstderr:\n%s", steps.String(), errOut.String())
	}
}

// A rank killed in the middle of training: launch ends the job within the
// grace and names it, on host (TCP between the processes) and on two GPUs
// (NCCL; the survivor's waits are bounded by --timeout as well).
func TestLaunchKillRankMidTrainingHost(t *testing.T) {
	killMidTraining(t, "host", "--warmup", "1")
}

func TestLaunchKillRankMidTrainingCUDA(t *testing.T) {
	if n, err := gg.DeviceCount("cuda"); err != nil || n < 2 {
		t.Skipf("needs 2 GPUs (have %d: %v)", n, err)
	}
	killMidTraining(t, "cuda", "--warmup", "1", "--timeout", "5s")
}
