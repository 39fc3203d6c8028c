// Command gpugraph exercises the gpugraph library from the command line.
//
// Usage:
//
//	gpugraph train  [--backend host|cuda] [--model small|reference] [--steps N] [--devices N] ...
//	gpugraph demo   [--backend host|cuda] [--n N] [--launches L] [--dot FILE]
//	gpugraph bench  [--backend host|cuda] [--count N] [--benchtime D] [--vs LIST ...]
//	gpugraph mem    [--backend host|cuda]
//	gpugraph launch [--nproc N] [--nnodes M --node-rank K --master H:P] COMMAND...
//	gpugraph version
//	gpugraph help [COMMAND]
//
// gpugraph help COMMAND, or gpugraph COMMAND -h, prints the command's flags
// and which of them go together.
//
// train trains a multi-layer perceptron on a synthetic data set twice, op by
// op on a stream and as a captured graph replayed every step, from the same
// initial parameters on the same batches, and reports loss, memory (in
// PyTorch's terms: allocated and reserved, for the stream-ordered pool and
// graph memory) and step time for both, then a one-line verdict. --timeline
// writes an SVG of the captured step's graph allocations. With --devices N,
// or started by launch, it trains data-parallel.
//
// demo builds a real workload with the explicit graph API: a host-to-device
// copy of an input vector fans out into parallel kernels that each reduce a
// different polynomial of the input to per-block partial sums, a reduction
// kernel fans them back in, a device-to-host copy and a host node collect the
// result. It instantiates the graph once, launches it several times, checks
// every result against the same computation in plain Go, and prints "OK".
// --dot writes the graph in Graphviz form.
//
// mem builds graphs with memory nodes (chains, diamonds, a training step of
// a 12-layer perceptron and others), launches them, and prints the graph
// memory reserved against the lower bound of each.
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
//
// Commands that run for more than a moment show a progress line with the
// time left on stderr when it is a terminal (--quiet turns it off).
//
// Exit status: 0 on success, 1 when the command fails while running, 2 for
// a usage error (an unknown command or flag, a value out of range, or flags
// that do not go together).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes the command line args and returns the exit status, by one
// rule for every command: 0 on success, 1 on a failure while running, 2
// on bad usage (an unknown command or flag, a value out of range, flags
// that do not go together). A usage error prints one line saying what is
// wrong and one pointing at the command's help, not the whole manual.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printOverview(stdout)
		return 0
	}
	name, rest := args[0], args[1:]
	var err error
	switch {
	case name == "help" || isHelpArg(name):
		err = helpMain(rest, stdout)
	case name == "--version" || name == "-version":
		name = "version"
		err = versionMain(rest, stdout, stderr)
	default:
		c := lookupCommand(name)
		if c == nil {
			fmt.Fprintf(stderr, "gpugraph: unknown command %q (%s)\nusage: gpugraph COMMAND [flags]; see gpugraph help\n", name, commandNames())
			return 2
		}
		name = c.name
		err = c.main(rest, stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		printCommandHelp(stdout, lookupCommand(name))
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "gpugraph %s: %v\nusage: %s; see gpugraph help %s\n", name, err, usageLine(lookupCommand(name)), name)
		return 2
	default:
		fmt.Fprintf(stderr, "gpugraph %s: %v\n", name, err)
		return 1
	}
}

// errUsage is what every usage error is (errors.Is): run exits 2.
var errUsage = errors.New("usage")

// usageError is a bad command line, with what is wrong: run prints it and
// a pointer to the command's help, and exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// outputFlags are flags naming a file the command writes: parseFlags checks
// that it can be written before any work starts.
var outputFlags = []string{"timeline", "dot"}

// newFlagSet returns a flag set for a subcommand that reports errors as
// usage errors instead of printing them or exiting, so run decides what
// is printed and the exit status.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gpugraph "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parsing, when set (by a test), sees every flag set before it parses.
var parsing func(*flag.FlagSet)

// parseOnly parses args into fs: -h and --help return flag.ErrHelp (run
// prints the command's help), a bad flag a usage error saying why.
func parseOnly(fs *flag.FlagSet, args []string) error {
	if parsing != nil {
		parsing(fs)
	}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return err
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return usagef("unknown flag --%s", strings.TrimLeft(f, "-"))
	}
	// "invalid value "x" for flag -steps: parse error": say what is wanted.
	if i := strings.Index(msg, " for flag -"); i >= 0 && strings.HasSuffix(msg, ": parse error") {
		name := strings.TrimSuffix(msg[i+len(" for flag -"):], ": parse error")
		if f := fs.Lookup(name); f != nil {
			want := "a number"
			switch f.Value.(flag.Getter).Get().(type) {
			case int, int64, uint, uint64:
				want = "a whole number"
			case time.Duration:
				want = "a duration such as 30s or 2m"
			case bool:
				want = "true or false"
			}
			return usagef("%s for --%s: want %s", msg[:i], name, want)
		}
	}
	return usagef("%s", msg)
}

// parseFlags parses args into fs, refusing stray arguments, an unknown
// --backend and output files that cannot be written.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseOnly(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if isHelpArg(fs.Arg(0)) {
			return flag.ErrHelp
		}
		return usagef("unexpected argument %q (flags come first: %s takes no arguments)", fs.Arg(0), fs.Name())
	}
	if f := fs.Lookup("backend"); f != nil {
		if b := f.Value.String(); b != gg.BackendHost && b != gg.BackendCUDA {
			return usagef("unknown --backend %q (want host or cuda)", b)
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

// setFlags returns the flags given on the command line, by name.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// oneOfList splits a comma-separated list of flag values, each one of
// allowed and none twice.
func oneOfList(flagName, list string, allowed ...string) ([]string, error) {
	items := strings.Split(list, ",")
	for i, it := range items {
		if !slices.Contains(allowed, it) {
			return nil, usagef("unknown --%s %q (want %s, or a comma-separated list of them)", flagName, it, orList(allowed))
		}
		if slices.Contains(items[:i], it) {
			return nil, usagef("--%s %q names %s twice", flagName, list, it)
		}
	}
	return items, nil
}

// orList writes "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
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

// openDevice opens a device of backend; its error says that the backend
// could not start, and why (no driver, no GPU, ...).
func openDevice(backend string, opts ...gg.Option) (*gg.Device, error) {
	d, err := gg.Open(backend, opts...)
	if err != nil {
		return nil, fmt.Errorf("the %s backend cannot start: %w", backend, err)
	}
	return d, nil
}

// plural writes n and noun, the noun in the plural unless n is 1:
// "1 rank", "2 ranks", "3 processes".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	if strings.HasSuffix(noun, "s") || strings.HasSuffix(noun, "sh") || strings.HasSuffix(noun, "ch") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
