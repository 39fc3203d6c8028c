package sched

import "runtime"

// spinPause yields the processor for a moment while a worker polls for work.
func spinPause() { runtime.Gosched() }
