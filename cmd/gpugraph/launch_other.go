//go:build !linux

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// Elsewhere than on Linux launch signals the ranks' processes only, not
// what they start, and learns of their exit by reaping them.

var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

func inOwnGroup(c *exec.Cmd) {}

// signalRank sends sig to the rank's process (os.Process knows when it
// was reaped, and then sends nothing). Where sig cannot be sent (Windows),
// it kills.
func signalRank(c *exec.Cmd, reaped bool, sig syscall.Signal) {
	if sig == syscall.SIGKILL || c.Process.Signal(sig) != nil {
		c.Process.Kill()
	}
}

func awaitExit(c *exec.Cmd) (st rankStatus, reaped bool) {
	c.Wait()
	ps := c.ProcessState
	if ps == nil {
		return rankStatus{code: -1}, true
	}
	if ws, ok := ps.Sys().(interface {
		Signaled() bool
		Signal() syscall.Signal
	}); ok && ws.Signaled() {
		return rankStatus{sig: ws.Signal()}, true
	}
	return rankStatus{code: ps.ExitCode()}, true
}

func groupsLive(pgids []int) bool { return false }

func signalName(s syscall.Signal) string { return s.String() }
