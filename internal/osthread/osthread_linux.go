package osthread

import "syscall"

// ID identifies the calling goroutine's OS thread (its Linux thread id).
func ID() int64 { return int64(syscall.Gettid()) }
