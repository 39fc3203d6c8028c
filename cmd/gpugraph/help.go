package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"
)

// command is one gpugraph command: what the overview says of it, and its
// own help (gpugraph help NAME, gpugraph NAME -h).
type command struct {
	name    string
	args    string // what follows "gpugraph NAME" in its usage line
	summary string // one line, for the overview
	help    string // what it does, its flags and which go together
	main    func(args []string, stdout, stderr io.Writer) error
	hidden  bool // run by gpugraph itself, not listed
}

// commands are gpugraph's commands, in the overview's order (set in init:
// their mains refer to lookupCommand through the flag sets).
var commands []command

func init() {
	commands = []command{
		{name: "train", args: "[flags]", main: trainMain,
			summary: "train an MLP op by op and as a captured graph; compare memory and speed",
			help:    trainHelp},
		{name: "demo", args: "[flags]", main: demoMain,
			summary: "run a fan-out/fan-in graph workload end to end and check its result",
			help:    demoHelp},
		{name: "bench", args: "[flags]", main: benchMain,
			summary: "measure launch overhead: kernels issued to a stream against one graph launch",
			help:    benchHelp},
		{name: "mem", args: "[flags]", main: memMain,
			summary: "print the graph memory reserved against its lower bound, per scenario",
			help:    memHelp},
		{name: "launch", args: "[flags] COMMAND [ARG...]", main: launchMain,
			summary: "start a job of several processes, one per device, as torchrun does",
			help:    launchHelp},
		{name: "version", args: "", main: versionMain,
			summary: "print gpugraph's version and the commit it was built from",
			help:    "Prints the module version, the commit it was built from (with its time, and\n\"modified\" if the tree had changes), the Go version and the platform.\n"},
		{name: "help", args: "[COMMAND]",
			summary: "print this overview, or a command's help",
			help:    "Prints the overview of the commands, or with a command's name, that command's\nusage and flags (as gpugraph COMMAND -h does).\n"},
		{name: "tfside", args: "[flags]", main: tfsideMain, hidden: true,
			summary: "the Go side of bench --vs taskflow, run as a child process",
			help:    "The Go side of bench --vs taskflow: bench runs it as a child process.\n"},
	}
}

// lookupCommand returns the command named name, or nil.
func lookupCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// exitRule is the one exit-status rule of every command.
const exitRule = `exit status: 0 when the command succeeded; 1 when it failed while running (the
error is printed); 2 for a usage error: an unknown command or flag, a value out
of range, or flags that do not go together (one line says which and why).
`

// printOverview prints the short global help.
func printOverview(w io.Writer) {
	fmt.Fprint(w, `gpugraph exercises the gpugraph library, the CUDA Graphs model in Go, on the
host backend (pure Go, no GPU needed) or on an NVIDIA GPU (--backend cuda).

usage: gpugraph COMMAND [flags]

commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
		}
	}
	tw.Flush()
	fmt.Fprint(w, `
gpugraph help COMMAND, or gpugraph COMMAND -h, prints a command's flags.
gpugraph --version is gpugraph version.

`+exitRule)
}

// printCommandHelp prints c's usage line and help.
func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n%s", usageLine(c), c.help, exitRule)
}

func usageLine(c *command) string {
	return strings.TrimSpace("gpugraph " + c.name + " " + c.args)
}

// helpMain is gpugraph help [COMMAND].
func helpMain(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		printOverview(stdout)
		return nil
	case isHelpArg(args[0]):
		return flag.ErrHelp
	case len(args) > 1:
		return usagef("help takes one command, have %q", args)
	}
	c := lookupCommand(args[0])
	if c == nil {
		return usagef("unknown command %q (%s)", args[0], commandNames())
	}
	printCommandHelp(stdout, c)
	return nil
}

// commandNames lists the commands, for messages.
func commandNames() string {
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	return strings.Join(names, ", ")
}

// versionMain prints the version from the build information.
func versionMain(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionString(debug.ReadBuildInfo()))
	return nil
}

// versionString says which gpugraph this is: the module version ("(devel)"
// when built from a checkout), the commit, its time and whether the tree
// was modified (when the build recorded them), Go and the platform.
func versionString(bi *debug.BuildInfo, ok bool) string {
	version, commit, when, modified := "(devel)", "unknown", "", false
	if ok && bi != nil {
		if v := bi.Main.Version; v != "" {
			version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	s := fmt.Sprintf("gpugraph %s, commit %s", version, commit)
	var notes []string
	if when != "" {
		notes = append(notes, when)
	}
	if modified {
		notes = append(notes, "modified")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s + fmt.Sprintf(", %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// isHelpArg reports whether arg asks for help.
func isHelpArg(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

const trainHelp = `Trains a multi-layer perceptron on a synthetic data set twice, op by op on a
stream and as a captured graph replayed every step, from the same initial
parameters on the same batches, and reports loss, memory (allocated and
reserved, as PyTorch counts them) and step time for both, then a verdict.
With --devices N (N >= 2), or started by gpugraph launch, it trains
data-parallel instead (the step captured per rank, gradients all-reduced) and
checks the result against one device on the same batches.

flags:
  --backend NAME   host or cuda (default host)
  --model NAME     small (64->256x2->10, batch 128), reference
                   (256->1024x4->10, batch 512) or large (1024->4096x4->1000,
                   batch 2048: GEMM-bound on a GPU, tens of seconds a step on
                   the host backend) (default small)
  --optimizer NAME sgd or adam (default: the model's, sgd)
  --precision P    fp32, tf32 (GEMM inputs rounded to TF32) or bf16 (mixed
                   precision: bf16 weights and activations in the GEMMs, FP32
                   master weights, optimizer and loss) (default fp32)
  --steps N        training steps per mode, at least 1 (default 300)
  --every N        report loss and memory every N steps, at least 1 (default 50)
  --warmup N       steps op by op before the capture, 0 to steps-1 (default 3)
  --batch N        samples per step, the global batch (default: the model's)
  --batches N      distinct batches in the data set, at least 1 (default 32)
  --modes LIST     eager, graph, or both comma-separated (default eager,graph)
  --gemm NAME      auto, kernel, cublas or cublaslt (default auto: cuBLAS on
                   cuda if found); cublaslt fuses bias, ReLU and their
                   gradients into cuBLASLt's GEMM epilogues (about 3n
                   kernels a step for n layers, not 6n; one device)
  --timeline FILE  write an SVG of the captured step's graph memory to FILE
  --profile N      after training, time each piece of the captured step
                   (GEMMs, elementwise kernels, all-reduces, waits) on the
                   device over N replays and print it, per rank (default 0:
                   none; each piece includes about 3 µs for its timing event)
  --save FILE      write the trained model (the last mode's weights) and the
                   batch sizes to serve it at to FILE (examples/serve reads it)
  --devices N      data-parallel over N devices of this process (host devices,
                   or GPUs with NCCL), checked against one device (default 1)
  --sync LIST      data-parallel gradient all-reduce: overlap (per layer, on a
                   second stream, as DDP's buckets), inline, after (one call
                   after backward), or a comma-separated list to compare
                   (default overlap)
  --timeout D      data-parallel: how long a rank waits for the others before
                   it fails, naming the cause (default 30s)
  --quiet          no progress line (shown on stderr when it is a terminal)

which flags go together:
  --warmup, --timeline and --profile need graph in --modes.
  --devices N with N >= 2, or a rank of gpugraph launch, trains data-parallel:
  its step is always captured, so --modes and --timeline do not apply; --sync
  and --timeout apply only there, and --save does not. Under gpugraph launch each process has one
  device: --devices is 1. The ranks must divide --batch. The host backend has
  at most 64 devices; --gemm cublas and cublaslt need --backend cuda, and
  cublaslt trains on one device only.
`

const demoHelp = `Builds a workload with the explicit graph API: a host-to-device copy of an
input vector fans out into parallel kernels that each reduce a polynomial of
the input to per-block partial sums, a reduction kernel fans them back in, a
device-to-host copy and a host node collect the result. The graph is
instantiated once and launched several times; every result is checked
against plain Go, and the command prints "OK".

flags:
  --backend NAME   host or cuda (default host)
  --n N            input length, 1 to 2147483647 (default 1048576)
  --launches L     graph launches, at least 1 (default 5)
  --dot FILE       also write the graph in Graphviz DOT form to FILE
  --quiet          no progress line (shown on stderr when it is a terminal)
`

const benchHelp = `Measures launch overhead: N empty kernels issued one by one into a stream
against one launch of an N-node graph, for several DAG shapes and sizes. Each
measurement runs --count times, interleaved so that stream and graph numbers
are taken side by side; the table reports medians.

flags:
  --backend NAME   host or cuda (default host)
  --count N        runs per measurement, at least 1; the table shows medians
                   (default 5)
  --benchtime D    time per run (a duration such as 1s or 200ms), or Nx for N
                   iterations, as go test -benchtime (default 1s)
  --quiet          no progress line (shown on stderr when it is a terminal)
  --vs LIST        instead of the table, side by side with references, in
                   interleaved runs; one or more of, comma-separated:
                     taskflow  the host backend against Taskflow on the same
                               DAGs (needs --taskflow DIR and g++)
                     native    cuda: launch, instantiate and update against the
                               same driver calls from C (needs gcc and the
                               CUDA headers of --cuda DIR)
                     torch     cuda: the captured training step against
                               PyTorch's step in a CUDA graph and PyTorch at
                               its best (torch.compile, fused optimizer, the
                               whole step in a CUDA graph), per --model and
                               --precision (needs --python P)
  --taskflow DIR   taskflow: a Taskflow tree (DIR/taskflow/taskflow.hpp)
  --tfside FILE    taskflow: the C++ harness (default DIR/side/tfside.cpp)
  --threads LIST   taskflow: worker counts, each at least 1 (default: every
                   CPU, then 1)
  --body LIST      taskflow: node bodies, comma-separated (default atomic):
                     atomic    one shared atomic increment, in every mode,
                               and the empty body in mode graph
                     work:NS   NS ns of arithmetic per node (calibrated once
                               by the C++ side, the same iterations for
                               both), mode graph; adds each side's speedup
                               (the body's serial time / time per node), the
                               ideal, min(threads, nodes / critical path),
                               and gpugraph's speedup over the ideal
  --time S         taskflow, native: seconds per run of a side, 0 for the
                   default (taskflow 1, native 0.3)
  --reps N         repetitions (taskflow, torch) or rounds (native), at least 1
                   (default 5)
  --cuda DIR       native: the CUDA toolkit, for the C loops' headers
  --python P       torch: a Python with PyTorch
  --model LIST     torch: reference and/or large, comma-separated (default
                   reference)
  --precision LIST torch: fp32, tf32 and/or bf16, comma-separated (default
                   fp32)
  --gemm NAME      torch: the GEMM of gpugraph's step, as train --gemm (auto,
                   kernel, cublas or cublaslt; default: train's)

which flags go together:
  --count and --benchtime are the table's; the flags from --taskflow on are
  --vs's, each for the sides named beside it. native and torch need
  --backend cuda; taskflow measures the host backend.
`

const memHelp = `Builds graphs with memory nodes (chains, diamonds, a training step of a
12-layer perceptron and others), launches them, and prints the graph memory
reserved against the lower bound of each: the most their allocations can hold
at once under some valid order.

flags:
  --backend NAME   host or cuda (default host)
`

const launchHelp = `Starts a job of several processes, one per device, as torchrun does. Each
process runs COMMAND (a gpugraph command such as train, or any program) with
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
GPUGRAPH_JOB_TOKEN set; gpugraph train started this way trains data-parallel
across the processes (NCCL on the cuda backend, TCP between host devices).
Output lines carry the rank. When a rank fails, launch stops every rank's
process group (SIGTERM, then SIGKILL after --grace) and fails naming the rank
that failed first.

flags (before COMMAND; what follows COMMAND is COMMAND's):
  --nproc N        processes on this machine, at least 1 (default 1)
  --nnodes M       machines in the job, at least 1 (default 1), each running
                   gpugraph launch
  --node-rank K    this machine's number, 0 to M-1 (default 0)
  --master H:P     where rank 0 hands out the communicator's id (default
                   127.0.0.1 and a free port; needed when M > 1)
  --grace D        when a rank fails or launch is interrupted, how long every
                   rank has after SIGTERM before SIGKILL, 0 or more (default 5s)

GPUGRAPH_JOB_TOKEN is random per job on one machine; a job of several machines
needs the same one set on every machine.
`
