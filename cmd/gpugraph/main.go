// Command gpugraph exercises the gpugraph library from the command line.
//
// Usage:
//
//	gpugraph train [--backend host] [--model small|reference] [--steps N] [--timeline FILE] ...
//	gpugraph demo  [--backend host] [--dot FILE] [--n N] [--launches L]
//	gpugraph bench [--backend host] [--count N] [--benchtime D]
//	gpugraph mem   [--backend host]
//	gpugraph launch --nproc N [--nnodes M --node-rank K --master H:P] COMMAND...
//	gpugraph help
//
// train trains a multi-layer perceptron on a synthetic data set twice, op by
// op on a stream and as a captured graph replayed every step, from the same
// initial parameters on the same batches, and reports loss, memory (in
// PyTorch's terms: allocated and reserved, for the stream-ordered pool and
// graph memory) and step time for both, then a one-line verdict. --timeline
// writes an SVG of the captured step's graph allocations.
//
// demo builds a real workload with the explicit graph API: a host-to-device
// copy of an input vector fans out into parallel kernels that each reduce a
// different polynomial of the input to per-block partial sums, a reduction
// kernel fans them back in, a device-to-host copy and a host node collect the
// result. It instantiates the graph once, launches it several times, checks
// every result against the same computation in plain Go, and prints "OK".
// --dot writes the graph in Graphviz form.
//
// mem builds graphs with memory nodes (chains, diamonds, the seed's
// figures, a training step of a 12-layer perceptron), launches them, and
// prints the graph memory reserved against the lower bound of each.
//
// launch starts a job of several processes, one per device, as torchrun
// does, each with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
// set; train started that way trains data-parallel across the processes
// (NCCL on the cuda backend, TCP between host devices). When a rank fails,
// launch stops every rank's process group (SIGTERM, then SIGKILL after
// --grace) and fails naming the rank that failed first.
//
// bench measures launch overhead: N empty kernels issued one by one into a
// stream against one launch of an N-node graph, for several DAG shapes and
// sizes. Each measurement runs --count times, interleaved so stream and graph
// numbers are taken side by side, and the table reports medians. --benchtime
// takes the syntax of go test -benchtime (a duration, or Nx for a fixed
// number of iterations).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	gg "github.com/gpugraph/gpugraph"
)

const usage = `usage: gpugraph <command> [flags]

commands:
  train  train an MLP op by op and as a captured graph; compare memory and speed
         --backend NAME   device backend (default "host")
         --model NAME     small (64->256x2->10, batch 128) or reference
                          (256->1024x4->10, batch 512) (default "small")
         --optimizer NAME sgd or adam (default: the model's, sgd)
         --steps N        training steps per mode (default 300)
         --every N        report loss and memory every N steps (default 50)
         --warmup N       op-by-op steps before the capture, graph mode (default 3)
         --batch N        samples per step, the global batch (default: the model's)
         --batches N      distinct batches in the data set (default 32)
         --modes LIST     eager,graph, or one of them (default "eager,graph")
         --gemm NAME      auto, kernel or cublas (default "auto": cuBLAS on cuda if found)
         --timeline FILE  write an SVG of the captured step's graph memory to FILE
         --devices N      data-parallel over N devices of one process, checked against
                          one device on the same batches (host devices, or GPUs with NCCL);
                          under gpugraph launch, one device per process
         --sync LIST      data-parallel gradient all-reduce: overlap (per layer, on a second
                          stream, as DDP's buckets), inline, after (one call after backward),
                          or a comma-separated list to compare (default "overlap")
         --timeout D      data-parallel: how long a rank waits for the others before it
                          fails, naming the cause (default 30s)
  demo   run a fan-out/fan-in graph workload end to end and check its result
         --backend NAME   device backend (default "host")
         --dot FILE       also write the graph in Graphviz DOT form to FILE
         --n N            input length (default 1048576)
         --launches L     graph launches (default 5)
  bench  print the stream vs graph launch-overhead table
         --backend NAME   device backend (default "host")
         --count N        runs per measurement; the table shows medians (default 5)
         --benchtime D    time per run, or Nx iterations, as go test -benchtime (default 1s)
         --vs LIST        instead, side by side with references, in interleaved runs, one or
                          more of (comma-separated):
                            taskflow  the host backend against Taskflow on the same DAGs
                                      (--taskflow DIR: a Taskflow tree; the C++ harness is
                                      DIR/side/tfside.cpp or --tfside FILE; needs g++)
                            native    cuda: launch, instantiate and update against the same
                                      driver calls from C (needs gcc and --cuda DIR's headers)
                            torch     cuda: the reference training step against PyTorch with
                                      a CUDA graph (--python P, a Python with PyTorch)
         --threads LIST   taskflow: worker counts (default: every CPU, then 1)
         --reps N         repetitions (taskflow, torch) or rounds (native) (default 5)
         --time S         seconds per run of a side (default: taskflow 1, native 0.3)
  mem    print graph memory reserved against its lower bound, per scenario
         --backend NAME   device backend (default "host")
  launch start a job of several processes, one per device, as torchrun does
         --nproc N        processes on this machine (default 1)
         --nnodes M       machines in the job (default 1), each running launch
         --node-rank K    this machine's number (default 0)
         --master H:P     where rank 0 hands out the communicator's id
                          (default 127.0.0.1 and a free port; needed when M > 1)
         --grace D        when a rank fails or launch is interrupted, how long every
                          rank has after SIGTERM before SIGKILL (default 5s)
         COMMAND...       a gpugraph command (train ...) or a program; each process
                          gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
                          and GPUGRAPH_JOB_TOKEN (random per job on one machine; on
                          several, set the same one on every machine);
                          when one fails, launch ends every rank's process group and
                          exits non-zero naming the rank that failed first
  help   print this message
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes the command line args and returns the exit status: 0 on
// success, 1 on failure, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return 0
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "train":
		err = trainMain(rest, stdout, stderr)
	case "demo":
		err = demoMain(rest, stdout, stderr)
	case "bench":
		err = benchMain(rest, stdout, stderr)
	case "mem":
		err = memMain(rest, stdout, stderr)
	case "launch":
		err = launchMain(rest, stdout, stderr)
	case "tfside": // the Go side of bench --vs taskflow, run as a child
		err = tfsideMain(rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "gpugraph: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		if err != errUsage { // a usage error with its reason, not already printed by the flag set
			fmt.Fprintf(stderr, "gpugraph %s: %v\n\n%s", args[0], err, usage)
		}
		return 2
	default:
		fmt.Fprintf(stderr, "gpugraph %s: %v\n", args[0], err)
		return 1
	}
}

// errUsage reports bad flags, already described to the user by the flag set.
var errUsage = errors.New("usage")

// usageError is a bad flag value, with what is wrong: run prints it and the
// usage, and exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// outputFlags are flags naming a file the command writes: parseFlags checks
// that it can be written before any work starts.
var outputFlags = []string{"timeline", "dot"}

// newFlagSet returns a flag set for a subcommand that reports errors to
// stderr instead of exiting, so run decides the exit status.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gpugraph "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

// parseFlags parses args into fs, refusing stray arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err // -h: usage printed, not a failure
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if f := fs.Lookup("backend"); f != nil {
		if b := f.Value.String(); b != gg.BackendHost && b != gg.BackendCUDA {
			return usagef("unknown backend %q (host, cuda)", b)
		}
	}
	for _, name := range outputFlags {
		if f := fs.Lookup(name); f != nil && f.Value.String() != "" {
			if err := writable(f.Value.String()); err != nil {
				return usagef("--%s: %v", name, err)
			}
		}
	}
	return nil
}

// writable reports whether path can be created or overwritten as a file,
// by creating a scratch file beside it.
func writable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".gpugraph-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
