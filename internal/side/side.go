package side

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// ErrConfig is what every configuration error of the harnesses is
// (errors.Is): a value out of range, a missing setting. The gpugraph
// command reports these as usage errors (exit 2).
var ErrConfig = errors.New("side: invalid configuration")

type configError struct{ msg string }

func (e configError) Error() string        { return e.msg }
func (e configError) Is(target error) bool { return target == ErrConfig }

// configf returns a configuration error saying what is wrong.
func configf(format string, args ...any) error { return configError{fmt.Sprintf(format, args...)} }

// Command is a program to run as one side of a comparison: Path with Args
// first, then the harness's arguments, and Env added to the environment.
// The gpugraph sides are this executable with a command name, such as
// Self("tfside").
type Command struct {
	Path string
	Args []string
	Env  []string
}

// Self is this executable run with args (a gpugraph command's name) first.
// Path is empty if the executable cannot be found; the harnesses then
// refuse the configuration.
func Self(args ...string) Command {
	p, _ := os.Executable()
	return Command{Path: p, Args: args}
}

// run runs c with args after c.Args, within timeout, and returns its
// standard output (runChild).
func (c Command) run(timeout time.Duration, args ...string) (string, error) {
	return runChild(timeout, c.Env, c.Path, append(slices.Clone(c.Args), args...)...)
}

// line is c's command line with args, for messages.
func (c Command) line(args ...string) string {
	return strings.Join(append(append([]string{c.Path}, c.Args...), args...), " ")
}

// runChild runs prog with the environment plus env, within timeout, and
// returns its standard output; the error names the command and carries its
// standard error.
func runChild(timeout time.Duration, env []string, prog string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, prog, args...)
	c.Env = append(os.Environ(), env...)
	c.WaitDelay = 5 * time.Second // a grandchild holding the pipes cannot hang us
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %v", timeout)
		}
		return "", fmt.Errorf("%s %s: %w\n%s%s", prog, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String(), nil
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2
	}
	return s[m]
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "model unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "model unknown"
}

// buildRevision is the module and the commit this executable was built
// from, as far as the build recorded it.
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, modified := "unknown revision", ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = " (modified)"
		}
	}
	return bi.Main.Path + " @ " + rev + modified
}

// raceNote flags a build with the race detector, whose Go side is many
// times slower.
func raceNote() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return ", built with -race (the Go side is slowed down)"
			}
		}
	}
	return ""
}
