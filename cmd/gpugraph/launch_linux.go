package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stopSignals stop the job. SIGHUP and SIGQUIT too: the ranks are not in
// the terminal's foreground process group, so a hangup or a Ctrl-\ reaches
// launch alone, which would die and leave the ranks running.
var stopSignals = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT}

// inOwnGroup makes the rank's process the leader of a new process group,
// which what it starts joins, so that one signal reaches them all.
func inOwnGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalRank sends sig to the rank's process group. A group's id is its
// leader's pid, which cannot be reused while the leader is unreaped:
// awaitExit leaves it a zombie for that, and a group whose leader was
// reaped is not signalled.
func signalRank(c *exec.Cmd, reaped bool, sig syscall.Signal) {
	if reaped {
		return
	}
	unix.Kill(-c.Process.Pid, sig) // ESRCH: nothing left
	if sig != unix.SIGKILL {
		unix.Kill(-c.Process.Pid, unix.SIGCONT) // a stopped process acts on sig once continued
	}
}

// The si_code values of SIGCHLD's siginfo (not in x/sys/unix).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// awaitExit blocks until the rank's process has exited and returns how,
// leaving it unreaped (waitid with WNOWAIT): launch reaps it with c.Wait
// once it is done signalling its group. reaped reports the fallback where
// it had to be reaped at once.
func awaitExit(c *exec.Cmd) (st rankStatus, reaped bool) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, c.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			c.Wait()
			if c.ProcessState == nil {
				return rankStatus{code: -1}, true
			}
			ws := c.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				return rankStatus{sig: ws.Signal()}, true
			}
			return rankStatus{code: ws.ExitStatus()}, true
		}
	}
	// si_status follows si_pid and si_uid in the union, which starts after
	// the three int header fields, aligned for a pointer (x/sys/unix leaves
	// it unnamed).
	const ptr = unsafe.Sizeof(uintptr(0))
	status := *(*int32)(unsafe.Add(unsafe.Pointer(&info), (12+ptr-1)&^(ptr-1)+8))
	switch info.Code {
	case cldKilled, cldDumped:
		return rankStatus{sig: syscall.Signal(status)}, false
	case cldExited:
		return rankStatus{code: int(status)}, false
	}
	return rankStatus{code: -1}, false // not with WEXITED alone
}

// groupsLive reports whether a process other than a zombie is in one of
// the process groups pgids, from /proc (false without it).
func groupsLive(pgids []int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid pgrp ...; comm may hold anything, ')' too.
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if pg, err := strconv.Atoi(string(f[2])); err == nil && slices.Contains(pgids, pg) {
			return true
		}
	}
	return false
}

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return s.String()
}
