package main

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// launch --nproc N [--grace D] COMMAND...: starts a job of N processes on
// this machine (times --nnodes machines), as torchrun does: each runs
// COMMAND with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT set (and NCCL_NVLS_ENABLE=0 unless set, and on one
// machine GPUGRAPH_JOB_TOKEN to a random value unless set: a job of several
// machines shares one only if the user sets the same on every machine), so
// coll.InitFromEnv makes it one rank of a communicator. COMMAND is a
// gpugraph command (train, demo, ...) or any program. Output lines carry
// the rank.
//
// launch never waits on a stuck rank. Each rank runs in its own process
// group (on Linux), and launch signals whole groups, so what a rank starts
// (the program under a wrapper script, a shell's background job) goes with
// it. When a rank fails (a non-zero exit or a signal), launch sends SIGTERM
// to every rank's group, the failed one's included, gives them --grace to
// exit, then sends SIGKILL to all of them, and fails naming the rank that
// failed first and how; the ranks it stopped itself are not blamed (of
// ranks failing within 250 ms of each other, as peers of a dead rank do,
// one killed by a signal is blamed first). SIGINT, SIGTERM or SIGHUP to
// launch stops the job the same way, SIGQUIT too but forwarded as SIGQUIT
// (Go ranks dump their goroutines); a second one kills at once. When every
// rank succeeds, what is left in their groups is killed (SIGKILL) too: a
// job's processes do not outlive it. Out of reach: processes that leave
// their group (setsid, GNU timeout), and everything if launch itself is
// killed by SIGKILL.

// launchConfig is what launch was asked for.
type launchConfig struct {
	NProc, NNodes, NodeRank int
	Master                  string // host:port of rank 0's rendezvous; default 127.0.0.1 and a free port
	// Grace is how long the ranks have to exit after SIGTERM, when the job
	// stops, before SIGKILL. 0 kills them at once.
	Grace   time.Duration
	Command []string
}

// defaultGrace is --grace's default.
const defaultGrace = 5 * time.Second

// settleTime is how long launch waits, after a rank fails, for other
// failures that come of the same cause, before it stops the job.
const settleTime = 250 * time.Millisecond

// killWait bounds the wait for processes sent SIGKILL to be gone (one in
// uninterruptible sleep, in a driver call, may take longer: launch then
// returns without it), and the wait for a rank's output after its exit
// (exec.Cmd.WaitDelay: a process out of the group may hold its pipes).
const killWait = time.Second

// selfEnv is added to the environment of ranks that run this binary
// (tests set it to run the command line instead of the tests).
var selfEnv []string

var gpugraphCommands = []string{"train", "demo", "bench", "mem"}

func launchMain(args []string, stdout, stderr io.Writer) error {
	cfg := launchConfig{NProc: 1, NNodes: 1, Grace: defaultGrace}
	fs := newFlagSet("launch", stderr)
	fs.IntVar(&cfg.NProc, "nproc", cfg.NProc, "processes on this machine (one per device)")
	fs.IntVar(&cfg.NNodes, "nnodes", cfg.NNodes, "machines in the job")
	fs.IntVar(&cfg.NodeRank, "node-rank", cfg.NodeRank, "this machine's number, 0 to nnodes-1")
	fs.StringVar(&cfg.Master, "master", cfg.Master, "host:port where rank 0 hands out the communicator's id")
	fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "when a rank fails or launch is interrupted, how long the ranks have to exit after SIGTERM before SIGKILL")
	if err := parseOnly(fs, args); err != nil {
		return err
	}
	cfg.Command = fs.Args()
	return runLaunch(cfg, stdout, stderr)
}

// launchedRank is one process of the job on this machine.
type launchedRank struct {
	c          *exec.Cmd
	rank       int
	outW, errW *io.PipeWriter // the ends exec copies the rank's output into
	exited     bool           // its process has exited (on Linux, maybe not reaped yet)
	reaped     bool
	st         rankStatus
}

// rankExit is the exit of the process of ranks[local].
type rankExit struct {
	local  int
	st     rankStatus
	reaped bool
}

func runLaunch(cfg launchConfig, stdout, stderr io.Writer) error {
	switch {
	case len(cfg.Command) == 0:
		return usagef("no command to launch: give a gpugraph command (%s) or a program after the flags", strings.Join(gpugraphCommands, ", "))
	case cfg.Command[0] == "launch":
		return usagef("the command to launch is launch itself: launch starts every process of this machine's share of the job")
	case cfg.NProc < 1:
		return usagef("--nproc %d: a job needs at least 1 process on each machine", cfg.NProc)
	case cfg.NNodes < 1:
		return usagef("--nnodes %d: a job needs at least 1 machine", cfg.NNodes)
	case cfg.NodeRank < 0 || cfg.NodeRank >= cfg.NNodes:
		return usagef("--node-rank %d: need 0 to --nnodes - 1 (%d)", cfg.NodeRank, cfg.NNodes-1)
	case cfg.NNodes > 1 && cfg.Master == "":
		return usagef("--nnodes %d needs --master host:port (rank 0's machine, reachable from all of them)", cfg.NNodes)
	case cfg.Grace < 0:
		return usagef("--grace %v: negative (0 kills the ranks at once)", cfg.Grace)
	}
	addr, port := "127.0.0.1", ""
	if cfg.Master != "" {
		var err error
		if addr, port, err = net.SplitHostPort(cfg.Master); err != nil {
			return usagef("--master %q: want host:port (%v)", cfg.Master, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return usagef("--master %q: the port must be a number from 1 to 65535", cfg.Master)
		}
		if addr == "" {
			return usagef("--master %q: no host", cfg.Master)
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
	// The job's token (coll.Env.Token): rank 0 hands the communicator's id
	// only to ranks that prove they have it, so a rank of another job at
	// the same address is refused. One the user set is kept: that is how
	// the machines of a job share one. A job of one machine gets a random
	// one. A job of several machines without one runs with the empty token,
	// as torchrun and Slurm jobs do, and launch says so: a random token
	// would differ between the machines, and one derived from what they
	// all are given (--master, the sizes) would be the same for another
	// job at the same --master, so it would tell apart nothing that the
	// address and the world size (which rank 0 checks) do not.
	var tokenEnv []string
	if _, set := os.LookupEnv("GPUGRAPH_JOB_TOKEN"); !set {
		if cfg.NNodes == 1 {
			tokenEnv = []string{"GPUGRAPH_JOB_TOKEN=" + rand.Text()}
		} else {
			fmt.Fprintf(stderr, "gpugraph launch: GPUGRAPH_JOB_TOKEN is not set, so a rank of another job that dials %s could join this one: set the same GPUGRAPH_JOB_TOKEN on every machine of the job (make one with: openssl rand -hex 16)\n", cfg.Master)
		}
	}
	var out sync.Mutex
	ranks := make([]*launchedRank, cfg.NProc)
	var pipes sync.WaitGroup
	for local := range cfg.NProc {
		rank := cfg.NodeRank*cfg.NProc + local
		c := exec.Command(prog, args...)
		c.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(world),
			"LOCAL_RANK="+strconv.Itoa(local), "LOCAL_WORLD_SIZE="+strconv.Itoa(cfg.NProc),
			"MASTER_ADDR="+addr, "MASTER_PORT="+port)
		c.Env = append(c.Env, tokenEnv...)
		if _, set := os.LookupEnv("NCCL_NVLS_ENABLE"); !set {
			// NVLink SHARP multicast is off unless asked for: on shared
			// machines it can put GPUs out of service.
			c.Env = append(c.Env, "NCCL_NVLS_ENABLE=0")
		}
		if self {
			c.Env = append(c.Env, selfEnv...)
		}
		inOwnGroup(c)
		c.WaitDelay = killWait
		prefix := ""
		if world > 1 {
			prefix = fmt.Sprintf("[rank %d] ", rank)
		}
		r := &launchedRank{c: c, rank: rank}
		for i, dst := range []io.Writer{stdout, stderr} {
			pr, pw := io.Pipe()
			if i == 0 {
				c.Stdout, r.outW = pw, pw
			} else {
				c.Stderr, r.errW = pw, pw
			}
			pipes.Go(func() {
				sc := bufio.NewScanner(pr)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				for sc.Scan() {
					out.Lock()
					fmt.Fprintf(dst, "%s%s\n", prefix, sc.Text())
					out.Unlock()
				}
				io.Copy(io.Discard, pr)
			})
		}
		ranks[local] = r
	}
	closePipes := func() {
		for _, r := range ranks {
			r.outW.Close()
			r.errW.Close()
		}
		pipes.Wait()
	}

	// Listen before the first start: a signal in between would kill launch
	// and leave the ranks running. A signal ignored (nohup, a background
	// job of a script) stays ignored.
	sigs := make(chan os.Signal, 1)
	for _, sig := range stopSignals {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	defer signal.Stop(sigs)

	for i, r := range ranks {
		if err := r.c.Start(); err != nil {
			for _, s := range ranks[:i] {
				signalRank(s.c, false, syscall.SIGKILL)
				s.c.Wait()
			}
			closePipes()
			return fmt.Errorf("start rank %d: %w", r.rank, err)
		}
	}
	exits := make(chan rankExit, len(ranks))
	for i, r := range ranks {
		go func() {
			st, reaped := awaitExit(r.c)
			exits <- rankExit{i, st, reaped}
		}()
	}
	running := len(ranks)
	record := func(e rankExit) {
		r := ranks[e.local]
		r.exited, r.reaped, r.st = true, e.reaped, e.st
		running--
	}
	signalAll := func(sig syscall.Signal) {
		for _, r := range ranks {
			signalRank(r.c, r.reaped, sig)
		}
	}

	// Run until every rank has exited, one fails, or launch is signalled.
	var failed []int // ranks that failed on their own, in the order seen
	var interrupted os.Signal
	recordFailed := func(e rankExit) {
		record(e)
		if e.st.failed() {
			failed = append(failed, e.local)
		}
	}
	for running > 0 && len(failed) == 0 && interrupted == nil {
		select {
		case e := <-exits:
			recordFailed(e)
		case interrupted = <-sigs:
		}
	}
	// Ranks fail together: when one dies, its peers fail on the lost
	// connection, and may exit before it is seen to (a wrapper script
	// reports its program's death a moment later). Take the failures of the
	// next moment too, before stopping the others, and blame one killed by
	// a signal over those that exited with an error.
	if len(failed) > 0 && running > 0 {
		settle := time.NewTimer(settleTime)
	settling:
		for running > 0 {
			select {
			case e := <-exits:
				recordFailed(e)
			case interrupted = <-sigs:
				break settling
			case <-settle.C:
				break settling
			}
		}
		settle.Stop()
	}
	first := -1
	if len(failed) > 0 {
		first = failed[0]
		if i := slices.IndexFunc(failed, func(l int) bool { return ranks[l].st.bySignal() }); i >= 0 {
			first = failed[i]
		}
	}

	pgids := make([]int, len(ranks))
	for i, r := range ranks {
		pgids[i] = r.c.Process.Pid
	}
	// live reports whether a process is left in the ranks' groups: a rank,
	// or what it started. A scan of /proc takes some ms on a busy machine,
	// so the next one, at poll, waits 4 times as long, 10 ms at least.
	poll := time.NewTimer(time.Hour)
	poll.Stop() // until a scan
	defer poll.Stop()
	live := func() bool {
		if running > 0 {
			return true
		}
		start := time.Now()
		l := groupsLive(pgids)
		poll.Reset(max(10*time.Millisecond, 4*time.Since(start)))
		return l
	}

	// Stop: SIGTERM to every group (those of ranks that have exited may
	// still hold their orphans), then the grace for them all to be gone.
	var stopped, killed []int // ranks running when the stop began; those still running after the grace
	killedWhy := ""
	if first >= 0 || interrupted != nil {
		fwd := syscall.SIGTERM
		if interrupted == syscall.SIGQUIT && first < 0 {
			fwd = syscall.SIGQUIT
		}
		for _, r := range ranks {
			if !r.exited {
				stopped = append(stopped, r.rank)
			}
		}
		if len(stopped) > 0 {
			var cause string
			if first >= 0 {
				cause = fmt.Sprintf("rank %d failed (%v)", ranks[first].rank, ranks[first].st)
			} else {
				cause = "interrupted by " + osSignalName(interrupted)
			}
			out.Lock()
			fmt.Fprintf(stderr, "gpugraph launch: %s: stopping %s (%s, SIGKILL after %v)\n", cause, rankList(stopped), signalName(fwd), cfg.Grace)
			out.Unlock()
		}
		signalAll(fwd)
		grace := time.NewTimer(cfg.Grace)
		defer grace.Stop()
		killedWhy = fmt.Sprintf("after the %v grace", cfg.Grace)
	stopping:
		for live() {
			select {
			case e := <-exits:
				record(e)
			case <-grace.C:
				break stopping
			case <-sigs:
				killedWhy = "on a second signal"
				break stopping
			case <-poll.C:
			}
		}
		for _, r := range ranks {
			if !r.exited {
				killed = append(killed, r.rank)
			}
		}
	}

	// SIGKILL every group: the ranks left after the grace, and what the
	// ranks left behind, also when they all succeeded: a job's processes
	// do not outlive it (a background job started by a rank that exited 0
	// would otherwise run on, unowned).
	signalAll(syscall.SIGKILL)
	deadline := time.NewTimer(killWait)
	defer deadline.Stop()
killing:
	for live() {
		select {
		case e := <-exits:
			record(e)
		case <-deadline.C:
			break killing
		case <-sigs: // already killing
		case <-poll.C:
		}
	}

	// Reap the ranks that have exited (exec then waits at most WaitDelay
	// for their output), and leave those that could not be killed.
	var reaping sync.WaitGroup
	var alive []string
	for _, r := range ranks {
		switch {
		case !r.exited:
			alive = append(alive, fmt.Sprintf("rank %d (pid %d)", r.rank, r.c.Process.Pid))
		case !r.reaped:
			reaping.Go(func() { r.c.Wait() })
		}
	}
	reaping.Wait()
	closePipes()

	var msg []string
	switch {
	case first >= 0:
		how := "failed"
		if len(ranks) > 1 {
			how = "failed first"
		}
		msg = append(msg, fmt.Sprintf("rank %d of %d %s (%v)", ranks[first].rank, world, how, ranks[first].st))
	case interrupted != nil:
		msg = append(msg, "interrupted by "+osSignalName(interrupted))
	default:
		return nil
	}
	for _, l := range failed {
		if l != first {
			msg = append(msg, fmt.Sprintf("rank %d also failed (%v)", ranks[l].rank, ranks[l].st))
		}
	}
	if s := slices.DeleteFunc(stopped, func(r int) bool { return slices.Contains(killed, r) }); len(s) > 0 {
		msg = append(msg, rankList(s)+" stopped")
	}
	if len(killed) > 0 {
		msg = append(msg, rankList(killed)+" killed "+killedWhy)
	}
	if len(alive) > 0 {
		msg = append(msg, strings.Join(alive, ", ")+" still running after SIGKILL")
	}
	if self && first >= 0 && ranks[first].st == (rankStatus{code: 2}) {
		// A gpugraph command exits 2 for a usage error (its message is
		// above, from the rank): the job's command line is wrong, and the
		// launch exits 2 too.
		return usagef("%s: the %s command line is wrong (its message is above)", strings.Join(msg, "; "), cfg.Command[0])
	}
	return errors.New(strings.Join(msg, "; "))
}

// rankList names ranks: "rank 3", "ranks 0, 1, 2".
func rankList(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	if len(ranks) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}

// rankStatus is how a rank's process ended.
type rankStatus struct {
	code int            // exit status, when sig is 0
	sig  syscall.Signal // the signal that killed it, or 0
}

func (s rankStatus) failed() bool { return s.code != 0 || s.sig != 0 }

// bySignal reports a death by a signal, or an exit status above 128: how
// shells and wrappers report their program's.
func (s rankStatus) bySignal() bool { return s.sig != 0 || s.code > 128 }

func (s rankStatus) String() string {
	if s.sig != 0 {
		return fmt.Sprintf("killed by signal %d, %s", int(s.sig), signalName(s.sig))
	}
	return fmt.Sprintf("exit status %d", s.code)
}

func osSignalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		return signalName(s)
	}
	return sig.String()
}
