package driver

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// Fault injection, for tests of error paths: every entry point but the two
// launch fast paths goes through call, which counts the calls and, when
// armed, fails the n-th one from now with a CUresult of the test's choice
// instead of calling the driver.

var fault struct {
	calls atomic.Int64 // calls made through call
	left  atomic.Int64 // calls until the injected failure; 0: disarmed
	code  atomic.Int64

	mu  sync.Mutex
	hit string // the entry point the armed failure hit, since the last InjectFault
	at  string // who called it: the calling functions, innermost first
}

// Calls is the number of driver calls made so far through the binding
// (the launch fast paths excepted).
func Calls() int64 { return fault.calls.Load() }

// InjectFault makes the n-th call from now (n ≥ 1) fail with CUresult code
// (named CUDA_ERROR_INJECTED in the Result); n = 0 disarms. The failure
// happens once.
func InjectFault(n int64, code int) {
	fault.mu.Lock()
	fault.hit, fault.at = "", ""
	fault.mu.Unlock()
	fault.code.Store(int64(code))
	fault.left.Store(n)
}

// Injected returns the name of the entry point whose call the failure
// armed by the last InjectFault hit, or "" if it has not happened.
func Injected() string {
	fault.mu.Lock()
	defer fault.mu.Unlock()
	return fault.hit
}

// InjectedCaller names the functions that made the failed call, innermost
// first (outside this package), so that a test can say which path
// swallowed it.
func InjectedCaller() string {
	fault.mu.Lock()
	defer fault.mu.Unlock()
	return fault.at
}

// injectedAt records that the armed failure hit entry point name.
func injectedAt(name string) {
	var pcs [12]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	var at []string
	for f, more := frames.Next(); more || f.Function != ""; f, more = frames.Next() {
		fn := f.Function[strings.LastIndex(f.Function, "/")+1:]
		if !strings.HasPrefix(fn, "driver.") && len(at) < 6 {
			at = append(at, fn)
		}
		if !more {
			break
		}
	}
	fault.mu.Lock()
	fault.hit, fault.at = name, strings.Join(at, " < ")
	fault.mu.Unlock()
}

// injected reports whether this call is the one to fail.
func injected() bool {
	if fault.left.Load() == 0 {
		return false
	}
	return fault.left.Add(-1) == 0
}
