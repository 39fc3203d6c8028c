package driver

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// A driver-call trace: every entry point called through this package's
// methods (FastCall, for callers that time the driver alone, is not), its
// argument words before the call and its CUresult after, in call order. It is what
// a C reproduction of a driver fault needs (which calls, in which order,
// on which handles), and costs one atomic load per call while off.
//
// GPUGRAPH_DRIVER_TRACE=FILE, read once when the first Driver loads,
// writes it to FILE; TraceTo starts or stops it from code.

type tracer struct {
	mu     sync.Mutex
	w      *bufio.Writer
	c      io.Closer // nil for a writer the caller owns
	n      uint64
	closed bool // TraceTo replaced it: a call in flight writes nothing more
}

var trace atomic.Pointer[tracer]

var traceEnv sync.Once

// traceFromEnv starts the trace GPUGRAPH_DRIVER_TRACE names, once.
func traceFromEnv() {
	traceEnv.Do(func() {
		path := os.Getenv("GPUGRAPH_DRIVER_TRACE")
		if path == "" {
			return
		}
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gpugraph: GPUGRAPH_DRIVER_TRACE: %v (no trace)\n", err)
			return
		}
		trace.Store(&tracer{w: bufio.NewWriter(f), c: f})
	})
}

// TraceTo writes every later driver call to w (nil stops the trace), after
// flushing the trace it replaces.
func TraceTo(w io.Writer) {
	var t *tracer
	if w != nil {
		t = &tracer{w: bufio.NewWriter(w)}
	}
	if old := trace.Swap(t); old != nil {
		old.close()
	}
}

func (t *tracer) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.w.Flush()
	if t.c != nil {
		t.c.Close()
	}
}

// begin records a call about to be made, its number, entry point and
// argument words in hex, and returns its number for end; the line is
// flushed before the call, so a call that ends the process is in the trace.
func (t *tracer) begin(name string, args []uintptr) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0
	}
	t.n++
	fmt.Fprintf(t.w, "%d %s", t.n, name)
	for _, a := range args {
		fmt.Fprintf(t.w, " %#x", a)
	}
	t.w.WriteByte('\n')
	t.w.Flush()
	return t.n
}

// end records call n's CUresult (0 is CUDA_SUCCESS).
func (t *tracer) end(n uint64, r uintptr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || n == 0 {
		return
	}
	fmt.Fprintf(t.w, "%d = %d\n", n, uint32(r))
	t.w.Flush()
}
