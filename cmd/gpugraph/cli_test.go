package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// cliCase is one command line and what it must do: its exit status, and
// text its stdout and stderr must hold.
type cliCase struct {
	args   string            // split on spaces; "<dir>" is a scratch directory
	code   int               // exit status
	stdout string            // in stdout ("" for anything)
	stderr string            // in stderr, for a usage error in its first line
	env    map[string]string // set for the run (a rank of a job)
}

// small makes a training run quick: a small batch and few steps.
const small = "--batch 16 --batches 2 --steps 3 --every 3 --warmup 1"

// cliCases are every command with good and bad arguments. Good runs are
// kept tiny: the table runs under -race in CI.
var cliCases = []cliCase{
	// The overview and each command's help: exit 0, to stdout.
	{args: "", code: 0, stdout: "commands:"},
	{args: "help", code: 0, stdout: "exit status: 0"},
	{args: "-h", code: 0, stdout: "commands:"},
	{args: "--help", code: 0, stdout: "commands:"},
	{args: "help train", code: 0, stdout: "usage: gpugraph train [flags]"},
	{args: "train -h", code: 0, stdout: "usage: gpugraph train [flags]"},
	{args: "train --help", code: 0, stdout: "--timeline FILE"},
	{args: "train --steps 5 -h", code: 0, stdout: "usage: gpugraph train [flags]"},
	{args: "help demo", code: 0, stdout: "usage: gpugraph demo [flags]"},
	{args: "demo -h", code: 0, stdout: "--launches L"},
	{args: "help bench", code: 0, stdout: "usage: gpugraph bench [flags]"},
	{args: "bench --help", code: 0, stdout: "--benchtime D"},
	{args: "help mem", code: 0, stdout: "usage: gpugraph mem [flags]"},
	{args: "mem -h", code: 0, stdout: "usage: gpugraph mem [flags]"},
	{args: "help launch", code: 0, stdout: "usage: gpugraph launch [flags] COMMAND [ARG...]"},
	{args: "launch -h", code: 0, stdout: "--nproc N"},
	{args: "help version", code: 0, stdout: "usage: gpugraph version"},
	{args: "version -h", code: 0, stdout: "usage: gpugraph version"},
	{args: "help help", code: 0, stdout: "usage: gpugraph help [COMMAND]"},
	{args: "help -h", code: 0, stdout: "usage: gpugraph help [COMMAND]"},
	{args: "version", code: 0, stdout: "gpugraph "},
	{args: "--version", code: 0, stdout: ", commit "},

	// Commands and help: usage errors.
	{args: "frob", code: 2, stderr: `gpugraph: unknown command "frob" (train, demo, bench, mem, launch, version, help)`},
	{args: "--frob", code: 2, stderr: `unknown command "--frob"`},
	{args: "help frob", code: 2, stderr: `gpugraph help: unknown command "frob"`},
	{args: "help train demo", code: 2, stderr: "help takes one command"},
	{args: "version now", code: 2, stderr: `unexpected argument "now"`},
	{args: "--version now", code: 2, stderr: `gpugraph version: unexpected argument "now"`},

	// train: good runs (stderr stays empty: no progress line off a terminal).
	{args: "train " + small, code: 0, stdout: "verdict: the captured graph steps in"},
	{args: "train --quiet --modes graph,eager " + small, code: 0, stdout: "verdict: the captured graph steps in"},
	{args: "train --modes eager --batch 16 --batches 2 --steps 2 --every 1", code: 0, stdout: "== op by op =="},
	{args: "train --modes graph --timeline <dir>/t.svg " + small, code: 0, stdout: "timeline written"},
	{args: "train --modes graph --save <dir>/m.ckpt " + small, code: 0, stdout: "saved the model trained captured graph, replayed to"},
	{args: "train --save <dir>/nosuchdir/m.ckpt " + small, code: 1, stderr: "--save: "},
	{args: "train --devices 2 --save <dir>/m.ckpt", code: 2, stderr: "--save does not apply with --devices 2"},
	{args: "train --devices 1 --optimizer adam " + small, code: 0, stdout: "adam"},
	{args: "train --precision bf16 " + small, code: 0, stdout: "precision: bf16 ("},
	{args: "train --precision tf32 --optimizer adam --modes graph " + small, code: 0, stdout: "kernels per step: 18"},
	{args: "train --precision fp32 --devices 2 --sync inline " + small, code: 0, stdout: "precision: fp32"},
	{args: "train --precision bf16 --optimizer adam --devices 2 --sync overlap,inline,after " + small, code: 0, stdout: "2 ranks train as one device"},
	{args: "train --devices 2 --sync inline,after --timeout 10s " + small, code: 0, stdout: "2 ranks train as one device"},
	// train: flags out of range.
	{args: "train --devices 0", code: 2, stderr: "--devices 0: need at least 1"},
	{args: "train --devices -1", code: 2, stderr: "--devices -1: need at least 1"},
	{args: "train --devices 65 --batch 130", code: 2, stderr: "--devices 65: the host backend has at most 64 devices"},
	{args: "train --steps 0", code: 2, stderr: "--steps 0: need at least 1"},
	{args: "train --steps -5", code: 2, stderr: "--steps -5: need at least 1"},
	{args: "train --every 0", code: 2, stderr: "--every 0: need at least 1"},
	{args: "train --batches 0", code: 2, stderr: "--batches 0: need at least 1"},
	{args: "train --batch 0", code: 2, stderr: "--batch 0: need at least 1"},
	{args: "train --batch -3", code: 2, stderr: "--batch -3: need at least 1"},
	{args: "train --batch 100000000", code: 2, stderr: "--batch 100000000: too large"},
	{args: "train --warmup -1", code: 2, stderr: "--warmup -1: need 0 to --steps - 1 (299)"},
	{args: "train --steps 5 --warmup 5", code: 2, stderr: "--warmup 5: need 0 to --steps - 1 (4)"},
	{args: "train --steps 2", code: 2, stderr: "--warmup 3 (the default): need 0 to --steps - 1 (1)"},
	{args: "train --timeout 0s --devices 2", code: 2, stderr: "--timeout 0s: the ranks need time"},
	{args: "train --timeout -1s --devices 2", code: 2, stderr: "--timeout -1s"},
	// train: values not known.
	{args: "train --optimizer nosuch", code: 2, stderr: `unknown --optimizer "nosuch" (want sgd or adam)`},
	{args: "train --model nosuch", code: 2, stderr: `gpugraph train: unknown --model "nosuch" (want small, reference or large)`},
	{args: "train --precision fp16", code: 2, stderr: `gpugraph train: unknown --precision "fp16" (want fp32, tf32 or bf16)`},
	{args: "train --precision ", code: 2, stderr: `unknown --precision ""`},
	{args: "train --model large --batch 1000000", code: 2, stderr: "--batch 1000000: too large"},
	{args: "train --backend nope", code: 2, stderr: `unknown --backend "nope" (want host or cuda)`},
	{args: "train --modes eager,lazy", code: 2, stderr: `unknown --modes "lazy" (want eager or graph`},
	{args: "train --modes graph,graph", code: 2, stderr: `--modes "graph,graph" names graph twice`},
	{args: "train --modes ", code: 2, stderr: `unknown --modes ""`},
	{args: "train --gemm magic", code: 2, stderr: `unknown --gemm "magic" (want auto, kernel, cublas or cublaslt)`},
	{args: "train --sync never --devices 2", code: 2, stderr: `unknown --sync "never" (want overlap, inline or after`},
	{args: "train --sync inline,inline --devices 2", code: 2, stderr: "names inline twice"},
	// train: flags that do not go with the rest.
	{args: "train --devices 2 --modes eager --timeline <dir>/t.svg", code: 2, stderr: "--modes does not apply with --devices 2"},
	{args: "train --devices 2 --timeline <dir>/t.svg", code: 2, stderr: "--timeline does not apply with --devices 2"},
	{args: "train --devices 3", code: 2, stderr: "--batch 128 (the default): 3 ranks do not divide it"},
	{args: "train --sync inline", code: 2, stderr: "--sync applies to data-parallel training only"},
	{args: "train --devices 1 --sync after", code: 2, stderr: "--sync applies to data-parallel training only"},
	{args: "train --timeout 5s", code: 2, stderr: "--timeout applies to data-parallel training only"},
	{args: "train --modes eager --warmup 2", code: 2, stderr: "--warmup counts the steps before the capture: it needs graph in --modes"},
	{args: "train --modes eager --timeline <dir>/t.svg", code: 2, stderr: "--timeline draws the captured step: it needs graph in --modes"},
	{args: "train --modes eager --profile 3", code: 2, stderr: "--profile times the captured step: it needs graph in --modes"},
	{args: "train --profile -1", code: 2, stderr: "--profile -1: need 0"},
	{args: "train --gemm cublas", code: 2, stderr: "--gemm cublas needs --backend cuda"},
	{args: "train --gemm cublaslt", code: 2, stderr: "--gemm cublaslt needs --backend cuda"},
	{args: "train --gemm cublaslt --precision bf16", code: 2, stderr: "--gemm cublaslt needs --backend cuda"},
	{args: "train --backend cuda --gemm cublaslt --devices 2", code: 2, stderr: "--gemm cublaslt does not apply with --devices 2"},
	// train as a rank of a job: one device, always captured.
	{args: "train --devices 2", code: 2, stderr: "--devices 2: in a job started by gpugraph launch each process trains on one device",
		env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}},
	{args: "train --modes graph", code: 2, stderr: "--modes does not apply with a rank of a job",
		env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}},
	{args: "train --timeline <dir>/t.svg", code: 2, stderr: "--timeline does not apply with a rank of a job",
		env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}},
	{args: "train", code: 2, stderr: "the environment of a job (RANK, WORLD_SIZE, ...)",
		env: map[string]string{"RANK": "x", "WORLD_SIZE": "2"}},
	// train: the command line itself.
	{args: "train --bogus", code: 2, stderr: "gpugraph train: unknown flag --bogus"},
	{args: "train --steps x", code: 2, stderr: `invalid value "x" for --steps: want a whole number`},
	{args: "train --devices 2 --timeout soon", code: 2, stderr: "for --timeout: want a duration"},
	{args: "train extra", code: 2, stderr: `unexpected argument "extra"`},
	{args: "train --timeline /nonexistent-dir/t.svg", code: 2, stderr: "gpugraph train: --timeline: cannot write /nonexistent-dir/t.svg"},
	{args: "train --timeline .", code: 2, stderr: "is a directory"},

	// demo.
	{args: "demo --n 1000 --launches 2 --dot <dir>/d.dot", code: 0, stdout: "\nOK\n"},
	{args: "demo --quiet --n 300 --launches 1", code: 0, stdout: "\nOK\n"},
	{args: "demo --n 0", code: 2, stderr: "--n 0: need 1 to 2147483647"},
	{args: "demo --n -1", code: 2, stderr: "--n -1: need 1 to 2147483647"},
	{args: "demo --n 3000000000", code: 2, stderr: "--n 3000000000: need 1 to 2147483647"},
	{args: "demo --launches 0", code: 2, stderr: "--launches 0: need at least 1"},
	{args: "demo --backend nope", code: 2, stderr: `gpugraph demo: unknown --backend "nope" (want host or cuda)`},
	{args: "demo --dot /nonexistent-dir/d.dot", code: 2, stderr: "gpugraph demo: --dot: cannot write /nonexistent-dir/d.dot"},
	{args: "demo --bogus", code: 2, stderr: "unknown flag --bogus"},
	{args: "demo now", code: 2, stderr: `unexpected argument "now"`},

	// bench.
	{args: "bench --count 1 --benchtime 1x", code: 0, stdout: "stream ns/op"},
	{args: "bench --count 0", code: 2, stderr: "gpugraph bench: --count 0: need at least 1"},
	{args: "bench --benchtime nosuch", code: 2, stderr: `--benchtime "nosuch": want a duration such as 1s or 200ms, or Nx`},
	{args: "bench --benchtime 0x", code: 2, stderr: `--benchtime "0x"`},
	{args: "bench --benchtime -1s", code: 2, stderr: `--benchtime "-1s"`},
	{args: "bench --threads 2", code: 2, stderr: "--threads applies to --vs taskflow only"},
	{args: "bench --reps 3", code: 2, stderr: "--reps applies to --vs taskflow, native or torch only"},
	{args: "bench --python python3", code: 2, stderr: "--python applies to --vs torch only"},
	{args: "bench --vs nothing", code: 2, stderr: `unknown --vs "nothing" (want taskflow, native or torch`},
	{args: "bench --vs taskflow,taskflow --taskflow x", code: 2, stderr: "names taskflow twice"},
	{args: "bench --vs taskflow", code: 2, stderr: "--vs taskflow needs --taskflow DIR"},
	{args: "bench --vs torch", code: 2, stderr: "--vs torch needs --backend cuda"},
	{args: "bench --gemm cublas", code: 2, stderr: "--gemm applies to --vs torch only"},
	{args: "bench --vs torch --backend cuda --gemm cuda", code: 2, stderr: `unknown --gemm "cuda" (want auto, kernel, cublas or cublaslt)`},
	{args: "bench --vs native", code: 2, stderr: "--vs native needs --backend cuda"},
	{args: "bench --vs taskflow --taskflow x --backend cuda", code: 2, stderr: "--backend cuda does not apply with --vs taskflow"},
	{args: "bench --vs taskflow --taskflow x --count 3", code: 2, stderr: "--count is the launch-overhead table's: it does not apply with --vs"},
	{args: "bench --vs taskflow --taskflow x --python p", code: 2, stderr: "--python applies to --vs torch, not to --vs taskflow"},
	{args: "bench --vs taskflow --taskflow x --threads a", code: 2, stderr: `--threads "a": "a" is not a whole number`},
	{args: "bench --vs taskflow --taskflow x --threads 0", code: 2, stderr: "each count needs to be at least 1"},
	{args: "bench --vs taskflow --taskflow x --threads 2,2", code: 2, stderr: "names 2 twice"},
	{args: "bench --vs taskflow --taskflow x --reps 0", code: 2, stderr: "--reps 0: need at least 1"},
	{args: "bench --vs taskflow --taskflow x --time -1", code: 2, stderr: "--time -1: need more than 0 seconds"},
	{args: "bench --body work:1000", code: 2, stderr: "--body applies to --vs taskflow only"},
	{args: "bench --vs taskflow --taskflow x --body sleep", code: 2, stderr: `--body "sleep": unknown body "sleep" (want atomic or work:NS`},
	{args: "bench --vs taskflow --taskflow x --body work:0", code: 2, stderr: `--body "work:0": "work:0" needs a whole number of ns, at least 1`},
	{args: "bench --vs taskflow --taskflow x --body atomic,atomic", code: 2, stderr: "names atomic twice"},
	{args: "bench --count x", code: 2, stderr: `invalid value "x" for --count: want a whole number`},

	// mem.
	{args: "mem", code: 0, stdout: "bound MiB"},
	{args: "mem --backend nope", code: 2, stderr: `gpugraph mem: unknown --backend "nope"`},
	{args: "mem extra", code: 2, stderr: `unexpected argument "extra"`},

	// launch.
	{args: "launch --nproc 2 train " + small, code: 0, stdout: "[rank 0] verdict: 2 ranks train as one device"},
	{args: "launch train " + small, code: 0, stdout: "in a job of 1 process:"},
	{args: "launch --nproc 2 demo --n 500 --launches 1", code: 0, stdout: "[rank 1] OK"},
	{args: "launch --nproc 0 train", code: 2, stderr: "gpugraph launch: --nproc 0: a job needs at least 1 process on each machine"},
	{args: "launch --nproc -2 train", code: 2, stderr: "--nproc -2: a job needs at least 1 process"},
	{args: "launch --nproc x train", code: 2, stderr: `invalid value "x" for --nproc: want a whole number`},
	{args: "launch --nnodes 0 train", code: 2, stderr: "--nnodes 0: a job needs at least 1 machine"},
	{args: "launch --node-rank 1 train", code: 2, stderr: "--node-rank 1: need 0 to --nnodes - 1 (0)"},
	{args: "launch --nnodes 2 train", code: 2, stderr: "--nnodes 2 needs --master host:port"},
	{args: "launch --master 127.0.0.1 train", code: 2, stderr: `--master "127.0.0.1": want host:port`},
	{args: "launch --master 127.0.0.1:0 train", code: 2, stderr: "the port must be a number from 1 to 65535"},
	{args: "launch --master :29500 train", code: 2, stderr: `--master ":29500": no host`},
	{args: "launch --grace -1s train", code: 2, stderr: "--grace -1s: negative"},
	{args: "launch", code: 2, stderr: "gpugraph launch: no command to launch"},
	{args: "launch launch train", code: 2, stderr: "the command to launch is launch itself"},
	{args: "launch --bogus train", code: 2, stderr: "unknown flag --bogus"},
	// A rank's usage error fails the job (exit 1), naming the rank, and
	// the rank's own message reaches the user.
	// A rank's usage error is the job's: the ranks' messages, then launch's two lines.
	{args: "launch --nproc 2 train --devices 0", code: 2, stderr: "the train command line is wrong (its message is above)"},
	{args: "launch /nonexistent-program", code: 1, stderr: "gpugraph launch: start rank 0"},
}

// TestCLI runs every command line of cliCases through run, as main does,
// and checks the exit status and messages: a usage error is two lines on
// stderr, what is wrong and where the help is, never a CUDA error code;
// help goes to stdout; a good run writes nothing on stderr (no progress
// line off a terminal).
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range cliCases {
		name := "gpugraph " + tc.args
		if tc.env != nil {
			name += " (in a job)"
		}
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if tc.env == nil {
				for _, k := range []string{"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"} {
					if _, ok := os.LookupEnv(k); ok {
						t.Skipf("%s is set: the test runs as a rank of a job", k)
					}
				}
			}
			var args []string
			if tc.args != "" {
				args = strings.Split(strings.ReplaceAll(tc.args, "<dir>", dir), " ")
			}
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(args, &stdout, &stderr)
			out, errs := stdout.String(), stderr.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			if !strings.Contains(out, tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, out)
			}
			if strings.Contains(out+errs, "seed 00") {
				t.Errorf("output names a design document the user does not have:\n%s%s", out, errs)
			}
			if strings.Contains(errs, "cudaError") {
				t.Errorf("a CLI error phrased as a CUDA error:\n%s", errs)
			}
			switch tc.code {
			case 0:
				if errs != "" && !strings.HasPrefix(tc.args, "launch") {
					t.Errorf("a good run wrote on stderr:\n%s", errs)
				}
			case 2:
				lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
				if strings.HasPrefix(tc.args, "launch") && len(lines) > 2 && strings.HasPrefix(lines[0], "[rank ") {
					lines = lines[len(lines)-2:] // after the ranks' own messages
				}
				if len(lines) != 2 || !strings.Contains(lines[0], tc.stderr) || !strings.HasPrefix(lines[1], "usage: gpugraph ") ||
					!strings.Contains(lines[1], "see gpugraph help") {
					t.Errorf("stderr is not the two lines of a usage error, the first with %q:\n%s", tc.stderr, errs)
				}
				if out != "" {
					t.Errorf("a usage error wrote on stdout:\n%s", out)
				}
			default:
				if !strings.Contains(errs, tc.stderr) {
					t.Errorf("stderr lacks %q:\n%s", tc.stderr, errs)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Logf("took %v", d)
			}
		})
	}
}

// TestCLINoGPU: with no GPU the cuda backend says why it cannot start,
// not that it has 0 devices.
func TestCLINoGPU(t *testing.T) {
	if n, err := gg.DeviceCount(gg.BackendCUDA); err == nil && n > 0 {
		t.Skip("a GPU is here")
	}
	for _, args := range [][]string{
		{"train", "--backend", "cuda", "--devices", "2"},
		{"train", "--backend", "cuda", "--steps", "2", "--warmup", "1"},
		// The fused step takes every precision: the flags pass, the backend cannot start.
		{"train", "--backend", "cuda", "--gemm", "cublaslt", "--precision", "bf16", "--steps", "2", "--warmup", "1"},
		{"demo", "--backend", "cuda"},
		{"mem", "--backend", "cuda"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		errs := stderr.String()
		if code != 1 || strings.Contains(errs, "<nil>") || strings.Contains(errs, "has 0 devices") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant exit 1 and one line saying why the backend cannot start", args, code, errs)
		}
	}
}

// TestHelp: the overview is short and lists the commands and the exit
// rule; each command's help is its own (help CMD, CMD -h and CMD --help
// print the same), and holds no other command's flags.
func TestHelp(t *testing.T) {
	var overview bytes.Buffer
	if code := run([]string{"help"}, &overview, &bytes.Buffer{}); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	if n := strings.Count(overview.String(), "\n"); n > 25 {
		t.Errorf("the overview has %d lines, want at most 25:\n%s", n, overview.String())
	}
	for _, c := range commands {
		if c.hidden {
			if strings.Contains(overview.String(), c.name) {
				t.Errorf("the overview lists the internal command %s", c.name)
			}
			continue
		}
		if !strings.Contains(overview.String(), "\n  "+c.name+" ") {
			t.Errorf("the overview does not list %s:\n%s", c.name, overview.String())
		}
		var want bytes.Buffer
		run([]string{"help", c.name}, &want, &bytes.Buffer{})
		if !strings.HasPrefix(want.String(), "usage: gpugraph "+c.name) || !strings.Contains(want.String(), "exit status: 0") {
			t.Errorf("help %s:\n%s", c.name, want.String())
		}
		for _, other := range []string{"--nproc", "--launches", "--benchtime", "--modes"} {
			if strings.Contains(want.String(), other) && !strings.Contains(c.help, other) {
				t.Errorf("help %s shows %s, another command's flag", c.name, other)
			}
		}
		if c.name == "help" {
			continue
		}
		for _, h := range []string{"-h", "--help"} {
			var got bytes.Buffer
			if code := run([]string{c.name, h}, &got, &bytes.Buffer{}); code != 0 || got.String() != want.String() {
				t.Errorf("%s %s: exit %d, and not the same as help %s:\n%s", c.name, h, code, c.name, got.String())
			}
		}
	}
}

// Every flag a command defines is in its help.
func TestHelpListsFlags(t *testing.T) {
	for _, c := range commands {
		if c.hidden || c.main == nil {
			continue
		}
		// -h stops a command at its flags: the flag set is made, nothing runs.
		fs := captureFlagSet(t, c)
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(c.help, "--"+f.Name+" ") && !strings.Contains(c.help, "--"+f.Name+"\n") {
				t.Errorf("help %s does not describe --%s", c.name, f.Name)
			}
		})
	}
}

func TestVersionString(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-26T05:07:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got := versionString(bi, true); !strings.HasPrefix(got, "gpugraph v1.2.3, commit abc123 (2026-11-26T05:07:00Z, modified), go") {
		t.Errorf("versionString = %q", got)
	}
	if got := versionString(nil, false); !strings.HasPrefix(got, "gpugraph (devel), commit unknown, go") {
		t.Errorf("versionString without build info = %q", got)
	}
	bi = &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	if got := versionString(bi, true); !strings.HasPrefix(got, "gpugraph (devel), commit unknown, go") {
		t.Errorf("versionString without VCS = %q", got)
	}
}

func TestWording(t *testing.T) {
	for ratio, want := range map[float64]string{1.62: "1.62× faster", 0.87: "1.15× slower", 1.001: "as fast", 0.5: "2.00× slower"} {
		if got := speedWords(ratio); got != want {
			t.Errorf("speedWords(%v) = %q, want %q", ratio, got, want)
		}
	}
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "process", "1 process"}, {2, "process", "2 processes"}, {1, "rank", "1 rank"}, {4, "rank", "4 ranks"}, {0, "device", "0 devices"}} {
		if got := plural(c.n, c.noun); got != c.want {
			t.Errorf("plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}

// The progress line: drawn with \r after the delay, with the time left;
// cleared before other output to the terminal and at the end; nothing at
// all when off.
func TestProgress(t *testing.T) {
	defer func(d, tick time.Duration) { progressDelay, progressTick = d, tick }(progressDelay, progressTick)
	progressDelay, progressTick = 0, time.Millisecond
	var term syncBuffer
	p := startProgress(&term, true, "train", "steps", 10)
	p.Add(4)
	waitFor(t, func() bool { return strings.Contains(term.String(), "4/10 steps") })
	if s := term.String(); !strings.Contains(s, "\r") || !strings.Contains(s, "left") || !strings.Contains(s, " 40%") {
		t.Errorf("progress line %q: want \\r, 40%% and the time left", s)
	}
	fmt2 := p.Out(&term)
	fmt2.Write([]byte("a report line\n"))
	if s := term.String(); !strings.HasSuffix(s, "\r\x1b[Ka report line\n") {
		t.Errorf("output through Out does not clear the line first: %q", s)
	}
	p.Stop()
	if s := term.String(); !strings.HasSuffix(s, "\r\x1b[K") && !strings.HasSuffix(s, "a report line\n") {
		t.Errorf("Stop leaves the line: %q", s)
	}
	var off bytes.Buffer
	q := startProgress(&off, false, "x", "steps", 10)
	q.Add(1)
	q.SetLabel("y")
	if w := q.Out(&off); w != &off {
		t.Errorf("Out of an off progress line wraps the writer")
	}
	q.Stop()
	if off.Len() != 0 {
		t.Errorf("an off progress line wrote %q", off.String())
	}
	if got := clock(75 * time.Minute); got != "1:15:00" {
		t.Errorf("clock(75m) = %q", got)
	}
}

// A file, a pipe or /dev/null is no terminal: no progress line there.
func TestNotATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, x := range []any{f, w, &bytes.Buffer{}} {
		if isTerminal(x.(interface{ Write([]byte) (int, error) })) {
			t.Errorf("isTerminal(%T) = true", x)
		}
	}
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer null.Close()
		if isTerminal(null) && runtime.GOOS == "linux" {
			t.Errorf("isTerminal(%s) = true", os.DevNull)
		}
	}
	if showProgress(&bytes.Buffer{}, false) {
		t.Errorf("showProgress on a buffer")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// captureFlagSet returns the flag set c's main makes, stopped by -h.
func captureFlagSet(t *testing.T, c command) *flag.FlagSet {
	t.Helper()
	var fs *flag.FlagSet
	parsing = func(f *flag.FlagSet) { fs = f }
	defer func() { parsing = nil }()
	if err := c.main([]string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) || fs == nil {
		t.Fatalf("%s -h: %v", c.name, err)
	}
	return fs
}
