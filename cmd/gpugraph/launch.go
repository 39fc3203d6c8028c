package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
)

// launch --nproc N COMMAND...: starts a job of N processes on this machine
// (times --nnodes machines), as torchrun does: each runs COMMAND with
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set (and NCCL_NVLS_ENABLE=0 unless set), so
// coll.InitFromEnv makes it one rank of a communicator. COMMAND is a gpugraph command (train, demo, ...) or any
// program. Output lines carry the rank. When a rank fails the others are
// stopped, and launch fails naming it.

// launchConfig is what launch was asked for.
type launchConfig struct {
	NProc, NNodes, NodeRank int
	Master                  string // host:port of rank 0's rendezvous; default 127.0.0.1 and a free port
	Command                 []string
}

// selfEnv is added to the environment of ranks that run this binary
// (tests set it to run the command line instead of the tests).
var selfEnv []string

var gpugraphCommands = []string{"train", "demo", "bench", "mem"}

func launchMain(args []string, stdout, stderr io.Writer) error {
	cfg := launchConfig{NProc: 1, NNodes: 1}
	fs := newFlagSet("launch", stderr)
	fs.IntVar(&cfg.NProc, "nproc", cfg.NProc, "processes on this machine (one per device)")
	fs.IntVar(&cfg.NNodes, "nnodes", cfg.NNodes, "machines in the job")
	fs.IntVar(&cfg.NodeRank, "node-rank", cfg.NodeRank, "this machine's number, 0 to nnodes-1")
	fs.StringVar(&cfg.Master, "master", cfg.Master, "host:port where rank 0 hands out the communicator's id")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	cfg.Command = fs.Args()
	return runLaunch(cfg, stdout, stderr)
}

func runLaunch(cfg launchConfig, stdout, stderr io.Writer) error {
	switch {
	case len(cfg.Command) == 0:
		return usagef("no command to launch")
	case cfg.NProc < 1 || cfg.NNodes < 1 || cfg.NodeRank < 0 || cfg.NodeRank >= cfg.NNodes:
		return usagef("--nproc %d --nnodes %d --node-rank %d", cfg.NProc, cfg.NNodes, cfg.NodeRank)
	case cfg.NNodes > 1 && cfg.Master == "":
		return usagef("a job of %d machines needs --master host:port (reachable from all of them)", cfg.NNodes)
	}
	addr, port := "127.0.0.1", ""
	if cfg.Master != "" {
		var err error
		if addr, port, err = net.SplitHostPort(cfg.Master); err != nil {
			return usagef("--master %q: %v", cfg.Master, err)
		}
	} else {
		// A free port on the loopback address: the job is on this machine.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		ln.Close()
	}
	prog, args := cfg.Command[0], cfg.Command[1:]
	self := slices.Contains(gpugraphCommands, prog)
	if self {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		prog, args = exe, cfg.Command
	}
	world := cfg.NProc * cfg.NNodes
	var out sync.Mutex
	cmds := make([]*exec.Cmd, cfg.NProc)
	var pipes sync.WaitGroup
	for local := range cfg.NProc {
		rank := cfg.NodeRank*cfg.NProc + local
		c := exec.Command(prog, args...)
		c.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(world),
			"LOCAL_RANK="+strconv.Itoa(local), "LOCAL_WORLD_SIZE="+strconv.Itoa(cfg.NProc),
			"MASTER_ADDR="+addr, "MASTER_PORT="+port)
		if _, set := os.LookupEnv("NCCL_NVLS_ENABLE"); !set {
			// NVLink SHARP multicast is off unless asked for: on shared
			// machines it can put GPUs out of service.
			c.Env = append(c.Env, "NCCL_NVLS_ENABLE=0")
		}
		if self {
			c.Env = append(c.Env, selfEnv...)
		}
		prefix := ""
		if world > 1 {
			prefix = fmt.Sprintf("[rank %d] ", rank)
		}
		for i, dst := range []io.Writer{stdout, stderr} {
			r, w := io.Pipe()
			if i == 0 {
				c.Stdout = w
			} else {
				c.Stderr = w
			}
			pipes.Go(func() {
				sc := bufio.NewScanner(r)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				for sc.Scan() {
					out.Lock()
					fmt.Fprintf(dst, "%s%s\n", prefix, sc.Text())
					out.Unlock()
				}
				io.Copy(io.Discard, r)
			})
		}
		cmds[local] = c
	}
	for i, c := range cmds {
		if err := c.Start(); err != nil {
			for _, s := range cmds[:i] {
				s.Process.Kill()
			}
			closePipes(cmds)
			pipes.Wait()
			return fmt.Errorf("start rank %d: %w", cfg.NodeRank*cfg.NProc+i, err)
		}
	}
	// Wait for every rank; the first failure stops the others.
	type exit struct {
		local int
		err   error
	}
	exits := make(chan exit, len(cmds))
	for i, c := range cmds {
		go func() {
			err := c.Wait()
			c.Stdout.(*io.PipeWriter).Close()
			c.Stderr.(*io.PipeWriter).Close()
			exits <- exit{i, err}
		}()
	}
	var first error
	for range cmds {
		e := <-exits
		if e.err != nil && first == nil {
			first = fmt.Errorf("rank %d of %d: %v", cfg.NodeRank*cfg.NProc+e.local, world, e.err)
			for _, c := range cmds {
				c.Process.Signal(syscall.SIGTERM)
			}
		}
	}
	pipes.Wait()
	return first
}

func closePipes(cmds []*exec.Cmd) {
	for _, c := range cmds {
		c.Stdout.(*io.PipeWriter).Close()
		c.Stderr.(*io.PipeWriter).Close()
	}
}
