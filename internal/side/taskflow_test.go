package side

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestParseTFSample(t *testing.T) {
	good := "impl=taskflow mode=async shape=chain10 nodes=10 threads=2 body=atomic rep=3 runs=400 ns_per_run=5000.0 ns_per_node=500.00 check=ok"
	s, err := parseTFSample(good)
	want := tfSample{impl: "taskflow", mode: "async", shape: "chain10", body: "atomic", check: "ok",
		nodes: 10, threads: 2, rep: 3, runs: 400, nsPerRun: 5000, nsPerNode: 500}
	if err != nil || s != want {
		t.Fatalf("parseTFSample(%q) = %+v, %v; want %+v", good, s, err, want)
	}
	work := strings.Replace(good, "body=atomic", "body=work", 1) + " work_ns=5000 work_iters=2660 serial_ns_per_node=4950.5"
	want.body, want.workNs, want.workIters, want.serialNs = "work", 5000, 2660, 4950.5
	if s, err := parseTFSample(work); err != nil || s != want {
		t.Fatalf("parseTFSample(%q) = %+v, %v; want %+v", work, s, err, want)
	}
	replace := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	for _, tc := range []struct{ name, line, err string }{
		{"empty body", replace("body=atomic", "body=empty"), ""},
		{"n/a check", replace("check=ok", "check=n/a"), ""},
		{"gpugraph stream", replace("impl=taskflow mode=async", "impl=gpugraph mode=stream"), ""},
		{"extra field", good + " note=x", ""},
		{"failed check", replace("check=ok", "check=FAIL(3999!=4000)"), "counter check failed: " + replace("check=ok", "check=FAIL(3999!=4000)")},
		{"not key=value", good + " stray", `"stray" is not key=value`},
		{"empty value", replace("rep=3", "rep="), `"rep=" is not key=value`},
		{"key twice", good + " rep=4", "rep given twice"},
		{"no check", replace(" check=ok", ""), "no check"},
		{"no impl", replace("impl=taskflow ", ""), "no impl"},
		{"other impl", replace("impl=taskflow", "impl=tbb"), "impl=tbb"},
		{"unknown mode", replace("mode=async", "mode=eager"), "mode=eager"},
		{"unknown body", replace("body=atomic", "body=sleep"), "body=sleep"},
		{"unknown shape", replace("shape=chain10", "shape=chain20"), `unknown shape "chain20"`},
		{"wrong node count", replace("nodes=10", "nodes=11"), "chain10 has 10 nodes, not 11"},
		{"bad int", replace("runs=400", "runs=4e2"), `runs="4e2"`},
		{"no runs", replace("runs=400", "runs=0"), `runs="0"`},
		{"no threads", replace("threads=2", "threads=0"), `threads="0"`},
		{"bad float", replace("ns_per_node=500.00", "ns_per_node=fast"), `ns_per_node="fast"`},
		{"negative time", replace("ns_per_run=5000.0", "ns_per_run=-1"), `ns_per_run="-1"`},
		{"NaN", replace("ns_per_run=5000.0", "ns_per_run=NaN"), `ns_per_run="NaN"`},
		{"bad check", replace("check=ok", "check=maybe"), "check=maybe"},
		{"work body", replace("body=atomic", "body=work") + " work_ns=1000 work_iters=532 serial_ns_per_node=990.03", ""},
		{"work without iters", replace("body=atomic", "body=work") + " work_ns=1000 serial_ns_per_node=990.03", `work_iters=""`},
		{"work without serial", replace("body=atomic", "body=work") + " work_ns=1000 work_iters=532", `serial_ns_per_node=""`},
		{"work of 0 ns", replace("body=atomic", "body=work") + " work_ns=0 work_iters=532 serial_ns_per_node=9", `work_ns="0"`},
		{"failed work check", replace("check=ok", "check=FAIL(3_of_10_nodes)"), "counter check failed"},
		{"not a sample", "rep 1/5 done", `"rep" is not key=value`},
	} {
		_, err := parseTFSample(tc.line)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.err)
		case tc.err != "" && !strings.Contains(err.Error(), tc.line):
			t.Errorf("%s: error %q does not quote the line", tc.name, err)
		}
	}
}

func TestParseTFSamples(t *testing.T) {
	in := "\nimpl=gpugraph mode=graph shape=tree10 nodes=1023 threads=1 body=empty rep=1 runs=9 ns_per_run=2.0 ns_per_node=1.00 check=n/a\n\n" +
		"impl=gpugraph mode=graph shape=tree10 nodes=1023 threads=1 body=empty rep=2 runs=9 ns_per_run=2.0 ns_per_node=1.00 check=n/a\n"
	ss, err := parseTFSamples(strings.NewReader(in))
	if err != nil || len(ss) != 2 || ss[1].rep != 2 {
		t.Fatalf("got %+v, %v; want 2 samples", ss, err)
	}
	if _, err := parseTFSamples(strings.NewReader(in + "tfside: device has 2 workers, want 1\n")); err == nil || !strings.Contains(err.Error(), "malformed line") {
		t.Fatalf("a stray line: got %v, want a malformed line", err)
	}
}

// tfRaw are samples of both sides; tfTable is what run.sh's summary prints
// for them (run through its python).
const tfRaw = `impl=gpugraph mode=graph shape=chain10 nodes=10 threads=1 body=atomic rep=1 runs=100 ns_per_run=1000.0 ns_per_node=100.00 check=ok
impl=gpugraph mode=graph shape=chain10 nodes=10 threads=1 body=atomic rep=2 runs=100 ns_per_run=3000.0 ns_per_node=300.00 check=ok
impl=gpugraph mode=graph shape=chain10 nodes=10 threads=1 body=atomic rep=3 runs=100 ns_per_run=2000.0 ns_per_node=200.00 check=ok
impl=taskflow mode=graph shape=chain10 nodes=10 threads=1 body=atomic rep=1 runs=100 ns_per_run=500.0 ns_per_node=50.00 check=ok
impl=taskflow mode=graph shape=chain10 nodes=10 threads=1 body=atomic rep=2 runs=100 ns_per_run=1500.0 ns_per_node=150.00 check=ok
impl=gpugraph mode=stream shape=chain1000 nodes=1000 threads=2 body=atomic rep=1 runs=10 ns_per_run=10000.0 ns_per_node=10.00 check=ok
impl=taskflow mode=async shape=chain1000 nodes=1000 threads=2 body=atomic rep=1 runs=10 ns_per_run=20000.0 ns_per_node=20.00 check=ok
impl=taskflow mode=graph shape=chain10 nodes=10 threads=2 body=atomic rep=1 runs=100 ns_per_run=1234.5 ns_per_node=123.45 check=ok
impl=gpugraph mode=graph shape=chain1000 nodes=1000 threads=2 body=empty rep=1 runs=10 ns_per_run=5000.0 ns_per_node=5.00 check=n/a
impl=gpugraph mode=batch shape=tree10 nodes=1023 threads=2 body=atomic rep=1 runs=1000 ns_per_run=30690.0 ns_per_node=30.00 check=ok
impl=taskflow mode=batch shape=tree10 nodes=1023 threads=2 body=atomic rep=1 runs=1000 ns_per_run=10230.0 ns_per_node=10.00 check=ok
impl=gpugraph mode=graph shape=chain1000 nodes=1000 threads=2 body=atomic rep=1 runs=10 ns_per_run=80000.0 ns_per_node=80.00 check=ok
impl=taskflow mode=graph shape=chain1000 nodes=1000 threads=2 body=atomic rep=1 runs=10 ns_per_run=60000.0 ns_per_node=60.00 check=ok
impl=gpugraph mode=graph shape=wavefront32x32 nodes=1024 threads=2 body=atomic rep=1 runs=10 ns_per_run=102400.0 ns_per_node=100.00 check=ok
impl=gpugraph mode=graph shape=wavefront32x32 nodes=1024 threads=2 body=atomic rep=2 runs=10 ns_per_run=51200.0 ns_per_node=50.00 check=ok
impl=taskflow mode=graph shape=wavefront32x32 nodes=1024 threads=2 body=atomic rep=1 runs=10 ns_per_run=40960.0 ns_per_node=40.00 check=ok
`

const tfTable = `16 samples; counter checks: 15 ok, 0 failed
threads body   mode     shape             n | gpugraph ns/run  ns/node       (min-max) | taskflow ns/run  ns/node       (min-max) |  gg/tf
      2 atomic graph    chain1000         1 |           80000     80.0     (80.0-80.0) |           60000     60.0     (60.0-60.0) |   1.33
      2 atomic graph    wavefront32x32    2 |           76800     75.0    (50.0-100.0) |           40960     40.0     (40.0-40.0) |   1.88
      2 atomic graph    chain10           1 |               -        -                 |            1234    123.5   (123.5-123.5) |      -
      2 atomic batch    tree10            1 |           30690     30.0     (30.0-30.0) |           10230     10.0     (10.0-10.0) |   3.00
      2 atomic op-by-op chain1000         1 |           10000     10.0     (10.0-10.0) |           20000     20.0     (20.0-20.0) |   0.50
      2 empty  graph    chain1000         1 |            5000      5.0       (5.0-5.0) |               -        -                 |      -
      1 atomic graph    chain10           3 |            2000    200.0   (100.0-300.0) |            1000    100.0    (50.0-150.0) |   2.00
`

func TestPrintTFTable(t *testing.T) {
	ss, err := parseTFSamples(strings.NewReader(tfRaw))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printTFTable(&out, ss)
	if out.String() != tfTable {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), tfTable)
	}
	// The count of failed checks, for samples that did not come through
	// the parser.
	out.Reset()
	printTFTable(&out, append(ss[:1:1], tfSample{impl: "taskflow", mode: "graph", shape: "chain10", body: "atomic", check: "FAIL(1!=2)", nodes: 10, threads: 1, runs: 1, nsPerRun: 1, nsPerNode: 1}))
	if first, _, _ := strings.Cut(out.String(), "\n"); first != "2 samples; counter checks: 1 ok, 1 failed" {
		t.Fatalf("got %q", first)
	}
}

// TFSide in this process: lines that parse, for every mode and body. (The
// numbers are a fresh process's only: see TFSide.)
func TestTFSide(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, tc := range []struct{ mode, body, check string }{
		{"graph", "atomic", "ok"},
		{"batch", "atomic", "ok"},
		{"stream", "atomic", "ok"},
		{"graph", "empty", "n/a"},
		{"graph", "work", "ok"},
		{"batch", "work", "ok"},
		{"stream", "work", "ok"},
	} {
		var out bytes.Buffer
		cfg := TFSideConfig{Threads: 1, Shapes: []string{"chain10"}, Mode: tc.mode, Body: tc.body, Batch: 10,
			Reps: 2, FirstRep: 4, Warmup: 0.01, Time: 0.02, WorkNs: 70, Iters: 37}
		if err := TFSide(&out, cfg); err != nil {
			t.Fatalf("%s %s: %v", tc.mode, tc.body, err)
		}
		ss, err := parseTFSamples(&out)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.mode, tc.body, err)
		}
		if len(ss) != 2 {
			t.Fatalf("%s %s: %d lines, want 2", tc.mode, tc.body, len(ss))
		}
		for i, s := range ss {
			if s.impl != "gpugraph" || s.mode != tc.mode || s.shape != "chain10" || s.threads != 1 || s.body != tc.body || s.rep != 4+i || s.check != tc.check {
				t.Errorf("%s %s: got %+v", tc.mode, tc.body, s)
			}
			if tc.body == "work" && (s.workNs != 70 || s.workIters != 37 || !(s.serialNs > 0)) {
				t.Errorf("%s work: got %+v, want work_ns=70 work_iters=37 and a serial time", tc.mode, s)
			}
			if tc.mode == "batch" && s.runs%10 != 0 {
				t.Errorf("batch of 10: %d runs", s.runs)
			}
		}
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Fatalf("GOMAXPROCS %d after tfside, was %d", got, procs)
		}
	}
	// The stream mode runs only chains.
	var out bytes.Buffer
	one := DefaultTFSideConfig()
	one.Threads = 1
	cfg := one
	cfg.Shapes, cfg.Mode, cfg.Time = []string{"tree10"}, "stream", 0.01
	if err := TFSide(&out, cfg); err != nil || out.Len() != 0 {
		t.Fatalf("stream of a tree: %v, %q; want nothing", err, out.String())
	}
	out.Reset()
	cfg = one
	cfg.Info = true
	if err := TFSide(&out, cfg); err != nil || !strings.HasPrefix(out.String(), "go "+runtime.Version()+" ") || !strings.Contains(out.String(), "GOMAXPROCS=1 ") {
		t.Fatalf("Info: %v, %q", err, out.String())
	}
	out.Reset()
	cfg = one
	cfg.Calibrate, cfg.WorkNs = true, 200
	if err := TFSide(&out, cfg); err != nil || !strings.HasPrefix(out.String(), "work_ns=200 work_iters=") {
		t.Fatalf("Calibrate: %v, %q", err, out.String())
	}
	// The loop's arithmetic is xorshift64's (13, 7, 17), as tfside.cpp's:
	// one round from 1, worked out by hand.
	if x := tfWork(1, 1); x != 1082269761 {
		t.Errorf("tfWork(1, 1) = %d, want 1082269761", x)
	}
}

func TestTFSideConfig(t *testing.T) {
	for name, edit := range map[string]func(*TFSideConfig){
		"mode async":   func(c *TFSideConfig) { c.Mode = "async" },
		"body sleep":   func(c *TFSideConfig) { c.Body = "sleep" },
		"work 0":       func(c *TFSideConfig) { c.WorkNs = 0 },
		"iters -1":     func(c *TFSideConfig) { c.Iters = -1 },
		"threads 0":    func(c *TFSideConfig) { c.Threads = 0 },
		"batch 0":      func(c *TFSideConfig) { c.Batch = 0 },
		"reps 0":       func(c *TFSideConfig) { c.Reps = 0 },
		"time 0":       func(c *TFSideConfig) { c.Time = 0 },
		"time NaN":     func(c *TFSideConfig) { c.Time = math.NaN() },
		"warmup -1":    func(c *TFSideConfig) { c.Warmup = -1 },
		"shape absent": func(c *TFSideConfig) { c.Shapes = []string{"chain10", "chain20"} },
	} {
		cfg := DefaultTFSideConfig()
		cfg.Threads = 1
		edit(&cfg)
		var out bytes.Buffer
		if err := TFSide(&out, cfg); !errors.Is(err, ErrConfig) || out.Len() != 0 {
			t.Errorf("%s: %v, %q; want a configuration error and no output", name, err, out.String())
		}
	}
}

func TestTaskflowConfigUsage(t *testing.T) {
	dir := t.TempDir()
	for name, edit := range map[string]func(*TaskflowConfig){
		"no dir":           func(c *TaskflowConfig) { c.Dir = "" },
		"no repetitions":   func(c *TaskflowConfig) { c.Reps = 0 },
		"no time":          func(c *TaskflowConfig) { c.Time = 0 },
		"NaN time":         func(c *TaskflowConfig) { c.Time = math.NaN() },
		"negative warm-up": func(c *TaskflowConfig) { c.Warmup = -0.1 },
		"no batch":         func(c *TaskflowConfig) { c.Batch = 0 },
		"no workers":       func(c *TaskflowConfig) { c.Threads = []int{2, 0} },
		"workers twice":    func(c *TaskflowConfig) { c.Threads = []int{1, 1} },
		"body twice":       func(c *TaskflowConfig) { c.Bodies = []Body{{"work", 9}, {"work", 9}} },
		"work of 0 ns":     func(c *TaskflowConfig) { c.Bodies = []Body{{"work", 0}} },
		"empty body":       func(c *TaskflowConfig) { c.Bodies = []Body{{Name: "empty"}} },
		"no gpugraph side": func(c *TaskflowConfig) { c.GoSide = Command{} },
	} {
		cfg := DefaultTaskflowConfig(dir)
		edit(&cfg)
		if _, err := Taskflow(cfg, &bytes.Buffer{}); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want a configuration error", name, err)
		}
	}
	cfg, err := TaskflowConfig{Dir: dir, Reps: 1, Time: 1, Batch: 1, GoSide: Self("tfside")}.withDefaults()
	if err != nil || cfg.CXX != "g++" || cfg.Harness != filepath.Join(dir, "side", "tfside.cpp") || len(cfg.Threads) == 0 || cfg.Threads[0] != runtime.NumCPU() ||
		len(cfg.Bodies) != 1 || cfg.Bodies[0].String() != "atomic" {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
}

func TestParseTFBodies(t *testing.T) {
	for list, want := range map[string]string{
		"atomic":                  "[atomic]",
		"atomic,work:1000":        "[atomic work:1000]",
		"work:5000 atomic":        "[work:5000 atomic]",
		"work:1000,work:5000,":    "[work:1000 work:5000]",
		"atomic,work:1000,work:5": "[atomic work:1000 work:5]",
	} {
		bs, err := ParseBodies(list)
		if err != nil || fmt.Sprint(bs) != want {
			t.Errorf("ParseBodies(%q) = %v, %v; want %s", list, bs, err, want)
		}
	}
	for list, want := range map[string]string{
		"sleep":            `unknown body "sleep" (want atomic or work:NS`,
		"empty":            `unknown body "empty"`,
		"work":             `unknown body "work"`,
		"work:":            `"work:" needs a whole number of ns, at least 1`,
		"work:0":           `"work:0" needs a whole number`,
		"work:1us":         `"work:1us" needs a whole number`,
		"atomic,atomic":    `names atomic twice`,
		"work:10,work:10":  "names work:10 twice",
		",":                `no bodies`,
		"atomic,work:-5,x": `"work:-5" needs`,
	} {
		if _, err := ParseBodies(list); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseBodies(%q): %v, want a configuration error with %q", list, err, want)
		}
	}
	// The configurations: atomic is run.sh's four, work is mode graph.
	var got []string
	for _, c := range tfConfigs([]Body{{"work", 1000}, {Name: "atomic"}}) {
		got = append(got, c.cppMode+"/"+c.goMode+"/"+c.body.String())
	}
	if want := "graph/graph/work:1000 graph/graph/atomic batch/batch/atomic async/stream/atomic graph/graph/empty"; strings.Join(got, " ") != want {
		t.Errorf("tfConfigs: %v", got)
	}
	if n, err := tfCalibrated("work_ns=1000 work_iters=532\n", 1000); n != 532 || err != nil {
		t.Errorf("tfCalibrated: %d, %v", n, err)
	}
	for _, out := range []string{"", "work_ns=5000 work_iters=532", "work_ns=1000 work_iters=0", "work_iters=532"} {
		if _, err := tfCalibrated(out, 1000); err == nil || !strings.Contains(err.Error(), "calibrating 1000 ns") {
			t.Errorf("tfCalibrated(%q): %v, want an error", out, err)
		}
	}
}

// fakeTaskflow makes a Taskflow tree with a harness, and a stand-in C++
// compiler that "compiles" it into a shell script printing harnessOut
// (exiting 1 if fail). The compiler fails, printing its arguments, when
// harnessOut is "".
func fakeTaskflow(t *testing.T, harnessOut string, fail bool) TaskflowConfig {
	t.Helper()
	harness := "[ \"$1\" = -info ] && { echo 'taskflow 4.1.0, fake'; exit 0; }\ncat <<'EOF'\n" + harnessOut + "EOF\n"
	if fail {
		harness += "echo 'harness broke' >&2; exit 1\n"
	}
	if harnessOut == "" {
		harness = ""
	}
	return fakeCompiler(t, harness)
}

// fakeCompiler makes a Taskflow tree with a harness, and a stand-in C++
// compiler that "compiles" it into the shell script harness, or fails,
// printing its arguments, when harness is "". The configuration runs one
// repetition of one worker, briefly; its gpugraph side is this test binary
// as gpugraph tfside (TestMain).
func fakeCompiler(t *testing.T, harness string) TaskflowConfig {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	write := func(path, text string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "taskflow", "taskflow.hpp"), "", 0o644)
	write(filepath.Join(dir, "side", "tfside.cpp"), "", 0o644)
	compile := "[ \"$1\" = --version ] && { echo 'fakecxx 1.0'; exit 0; }\n" +
		"while [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n" +
		"cat > \"$out\" <<'HARNESS'\n#!/bin/sh\n" + harness + "HARNESS\nchmod +x \"$out\"\n"
	if harness == "" {
		compile = "echo \"tfside.cpp:1: error: no good ($*)\" >&2; exit 1\n"
	}
	cxx := filepath.Join(dir, "fakecxx")
	write(cxx, "#!/bin/sh\n"+compile, 0o755)
	cfg := DefaultTaskflowConfig(dir)
	cfg.CXX, cfg.Threads, cfg.Reps, cfg.Time, cfg.Warmup = cxx, []int{1}, 1, 0.01, 0
	cfg.GoSide = testGoSide(t)
	return cfg
}

// fakeCPPSide is a C++ harness in sh: the flags of tfside.cpp, and for
// each shape of the mode a line of that mode, body, worker count and
// repetition, 100 ns per node; -calibrate -work NS gives NS/2 iterations.
const fakeCPPSide = `mode=graph threads=1 body=atomic rep=1 work=1000 iters=0 cal=
while [ $# -gt 0 ]; do
  case $1 in
  -info) echo 'taskflow 4.1.0, fake'; exit 0 ;;
  -calibrate) cal=1 ;;
  -mode) mode=$2; shift ;;
  -threads) threads=$2; shift ;;
  -body) body=$2; shift ;;
  -firstrep) rep=$2; shift ;;
  -work) work=$2; shift ;;
  -iters) iters=$2; shift ;;
  esac
  shift
done
[ -n "$cal" ] && { echo "work_ns=$work work_iters=$((work / 2))"; exit 0; }
check=ok; [ $body = empty ] && check=n/a
extra=; [ $body = work ] && extra=" work_ns=$work work_iters=$iters serial_ns_per_node=$work.0"
for s in chain1000:1000 wavefront32x32:1024 fanout1x1000x1:1002 tree10:1023 chain10:10; do
  name=${s%%:*} n=${s##*:}
  if [ $mode = async ]; then case $name in chain*) ;; *) continue ;; esac; fi
  echo "impl=taskflow mode=$mode shape=$name nodes=$n threads=$threads body=$body rep=$rep runs=10 ns_per_run=$((n * 100)).0 ns_per_node=100.00 check=$check$extra"
done
`

// The whole comparison with a stand-in C++ side and the real gpugraph
// side (this test binary as gpugraph tfside, in processes of its own).
func TestTaskflowFakeCPP(t *testing.T) {
	cfg := fakeCompiler(t, fakeCPPSide)
	cfg.Reps = 2
	var progress bytes.Buffer
	r, err := Taskflow(cfg, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	checkTaskflowReport(t, r, cfg.Dir, 2)
	if !strings.Contains(progress.String(), "tfside: rep 2/2 done") {
		t.Errorf("progress notes: %q", progress.String())
	}
	cfg.Reps, cfg.Bodies = 1, []Body{{"work", 300}}
	if r, err = Taskflow(cfg, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !strings.Contains(r.String(), "bodies:   work:300 = 150 iterations (work: calibrated once by tfside-cpp") {
		t.Errorf("no calibration line:\n%s", r)
	}
	checkTaskflowWork(t, r)
}

// checkTaskflowReport checks the report of the atomic body, reps
// repetitions of one worker: the header, and every shape of every mode
// with both sides.
func checkTaskflowReport(t *testing.T, r *TaskflowReport, dir string, reps int) {
	t.Helper()
	t.Logf("\n%s", r)
	text := r.String()
	for _, w := range []string{"taskflow: " + dir + ", taskflow ", fmt.Sprintf("runs:     %d reps, threads {1}, %gs warm-up + %gs timed per shape per rep, batch 100", reps, r.Config.Warmup, r.Config.Time),
		fmt.Sprintf("%d samples; counter checks: %d ok, 0 failed", 34*reps, 24*reps)} {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil || b.String() != text {
		t.Errorf("Write: %v, and it printed another text than String", err)
	}
	_, table, _ := strings.Cut(text, "gg/tf\n")
	rows := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(rows) != 17 {
		t.Fatalf("%d rows, want 5 graph + 5 batch + 2 op-by-op + 5 empty", len(rows))
	}
	for _, row := range rows {
		if strings.HasSuffix(row, "-") || !strings.HasPrefix(row, "      1 ") {
			t.Errorf("row %q: want both sides, one worker", row)
		}
	}
}

// checkTaskflowWork checks the report of the body work:300: mode graph,
// the speedup columns on every shape's row.
func checkTaskflowWork(t *testing.T, r *TaskflowReport) {
	t.Helper()
	t.Logf("\n%s", r)
	text := r.String()
	for _, w := range []string{"bodies:   work:300 = ", "10 samples; counter checks: 10 ok, 0 failed", "gg/ideal\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	_, table, _ := strings.Cut(text, "gg/ideal\n")
	rows := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5 shapes of mode graph", len(rows))
	}
	for _, row := range rows {
		if !strings.HasPrefix(row, "      1 work:300 graph") || strings.Contains(row, " - ") || strings.HasSuffix(row, "-") {
			t.Errorf("row %q: want both sides' speedups, one worker", row)
		}
	}
}

// The C++ side runs first in the first repetition, so its failures are
// found before the Go side runs.
func TestTaskflowErrors(t *testing.T) {
	fail := "impl=taskflow mode=graph shape=chain10 nodes=10 threads=1 body=atomic rep=1 runs=10 ns_per_run=9.0 ns_per_node=0.90 check=FAIL(99!=100)"
	one := "impl=taskflow mode=graph shape=chain10 nodes=10 threads=1 body=atomic rep=1 runs=10 ns_per_run=9.0 ns_per_node=0.90 check=ok"
	var lines strings.Builder
	for _, sh := range tfShapes {
		lines.WriteString(strings.ReplaceAll(strings.ReplaceAll(one, "chain10", sh.name), "nodes=10", "nodes="+strconv.Itoa(len(sh.preds))) + "\n")
	}
	for _, tc := range []struct {
		name, out string
		fail      bool
		want      []string
	}{
		{"compiler fails", "", false, []string{"compiling the C++ harness", "fakecxx", "no good (-std=c++20 -O2 -pthread -I"}},
		{"failed check", fail + "\n", false, []string{"counter check failed: " + fail, "-mode graph"}},
		{"malformed line", "tfside: starting\n", false, []string{"malformed line \"tfside: starting\"", "tfside-cpp -mode graph"}},
		{"one line", one + "\n", false, []string{"1 lines, want one per shape, 5"}},
		{"harness fails", lines.String(), true, []string{"tfside-cpp -mode graph", "exit status 1", "harness broke"}},
		{"other worker count", strings.ReplaceAll(lines.String(), "threads=1", "threads=2"), false, []string{"threads=2, want taskflow graph atomic 1"}},
	} {
		cfg := fakeTaskflow(t, tc.out, tc.fail)
		var progress bytes.Buffer
		_, err := Taskflow(cfg, &progress)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
	}
}

func TestTaskflowMissingFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultTaskflowConfig(dir)
	_, err := Taskflow(cfg, &bytes.Buffer{})
	if err == nil || errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), filepath.Join(dir, "taskflow", "taskflow.hpp")) {
		t.Fatalf("no Taskflow: got %v, want an error naming taskflow.hpp", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "taskflow"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "taskflow", "taskflow.hpp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Taskflow(cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "side", "tfside.cpp")) {
		t.Fatalf("no harness: got %v, want an error naming side/tfside.cpp", err)
	}
}

// The whole comparison, with the real Taskflow and compiler, when
// GG_TASKFLOW_DIR names a Taskflow tree with side/tfside.cpp (as
// shared/bench/taskflow): compiling takes seconds.
func TestTaskflowEndToEnd(t *testing.T) {
	dir := os.Getenv("GG_TASKFLOW_DIR")
	if dir == "" {
		t.Skip("GG_TASKFLOW_DIR is not set: set it to a Taskflow tree with side/tfside.cpp (shared/bench/taskflow) to run the comparison")
	}
	if _, err := os.Stat(filepath.Join(dir, "side", "tfside.cpp")); err != nil {
		t.Skipf("GG_TASKFLOW_DIR=%s has no side/tfside.cpp: %v", dir, err)
	}
	cfg := DefaultTaskflowConfig(dir)
	cfg.Reps, cfg.Threads, cfg.Time, cfg.Warmup, cfg.GoSide = 1, []int{1}, 0.02, 0.01, testGoSide(t)
	var progress bytes.Buffer
	r, err := Taskflow(cfg, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	checkTaskflowReport(t, r, dir, 1)

	// The work body: calibrated by the C++ side, mode graph, the speedup
	// columns on every shape's row.
	cfg.Bodies = []Body{{"work", 300}}
	if r, err = Taskflow(cfg, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	checkTaskflowWork(t, r)
}

// tfWorkRaw are samples of the work body, with an atomic one; tfWorkTable
// is their table: speedup = serial / ns per node (medians), ideal =
// min(threads, nodes / critical path): 2 on wavefront32x32 (16.3 at
// most) with 2 workers, 1 on chain10.
const tfWorkRaw = `impl=gpugraph mode=graph shape=wavefront32x32 nodes=1024 threads=2 body=work rep=1 runs=10 ns_per_run=1024000.0 ns_per_node=1000.00 check=ok work_ns=1000 work_iters=500 serial_ns_per_node=1000.00
impl=gpugraph mode=graph shape=wavefront32x32 nodes=1024 threads=2 body=work rep=2 runs=10 ns_per_run=512000.0 ns_per_node=500.00 check=ok work_ns=1000 work_iters=500 serial_ns_per_node=1000.00
impl=gpugraph mode=graph shape=wavefront32x32 nodes=1024 threads=2 body=work rep=3 runs=10 ns_per_run=614400.0 ns_per_node=600.00 check=ok work_ns=1000 work_iters=500 serial_ns_per_node=900.00
impl=taskflow mode=graph shape=wavefront32x32 nodes=1024 threads=2 body=work rep=1 runs=10 ns_per_run=563200.0 ns_per_node=550.00 check=ok work_ns=1000 work_iters=500 serial_ns_per_node=1100.00
impl=taskflow mode=graph shape=chain10 nodes=10 threads=2 body=work rep=1 runs=10 ns_per_run=50000.0 ns_per_node=5000.00 check=ok work_ns=5000 work_iters=2500 serial_ns_per_node=4000.00
impl=gpugraph mode=graph shape=chain10 nodes=10 threads=2 body=work rep=1 runs=10 ns_per_run=55000.0 ns_per_node=5500.00 check=ok work_ns=10000 work_iters=5000 serial_ns_per_node=11000.00
impl=gpugraph mode=graph shape=chain10 nodes=10 threads=2 body=atomic rep=1 runs=100 ns_per_run=1000.0 ns_per_node=100.00 check=ok
impl=taskflow mode=graph shape=chain10 nodes=10 threads=2 body=atomic rep=1 runs=100 ns_per_run=500.0 ns_per_node=50.00 check=ok
`

const tfWorkTable = `8 samples; counter checks: 8 ok, 0 failed
gg x, tf x: speedup, the body's serial time / time per node (medians); ideal: min(threads, nodes / critical path)
threads body       mode     shape             n | gpugraph ns/run  ns/node       (min-max) | taskflow ns/run  ns/node       (min-max) |  gg/tf |  gg x  tf x ideal gg/ideal
      2 atomic     graph    chain10           1 |            1000    100.0   (100.0-100.0) |             500     50.0     (50.0-50.0) |   2.00 |     -     -     -        -
      2 work:1000  graph    wavefront32x32    3 |          614400    600.0  (500.0-1000.0) |          563200    550.0   (550.0-550.0) |   1.09 |  1.67  2.00   2.0     0.83
      2 work:5000  graph    chain10           1 |               -        -                 |           50000   5000.0 (5000.0-5000.0) |      - |     -  0.80   1.0        -
      2 work:10000 graph    chain10           1 |           55000   5500.0 (5500.0-5500.0) |               -        -                 |      - |  2.00     -   1.0     2.00
`

func TestPrintTFTableWork(t *testing.T) {
	ss, err := parseTFSamples(strings.NewReader(tfWorkRaw))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printTFTable(&out, ss)
	if out.String() != tfWorkTable {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), tfWorkTable)
	}
	for shape, want := range map[string]float64{"chain1000": 1, "chain10": 1, "wavefront32x32": 1024.0 / 63, "fanout1x1000x1": 1002.0 / 3, "tree10": 1023.0 / 10} {
		if got := tfIdeal(1000, shape); math.Abs(got-want) > 1e-9 {
			t.Errorf("tfIdeal(1000, %s) = %g, want %g", shape, got, want)
		}
	}
}
