package sched

import (
	"fmt"
	"runtime"
	"strings"
)

// Panicked is a recovered panic with the place it was raised: the first
// frame of the panicking goroutine's stack outside the runtime (a kernel
// body's own line, not the runtime function that raised it, as for an
// assignment to a nil map or a nil dereference).
type Panicked struct {
	Value any
	Func  string // package-qualified function name; "" if unknown
	File  string
	Line  int
}

// Recovered wraps p, a value just returned by recover(), with its site. It
// must be called by the deferred function that recovered p (or by a
// function that one calls), while the panicking frames are still on the
// stack. A value that is already a *Panicked is returned as it is.
func Recovered(p any) *Panicked {
	if pp, ok := p.(*Panicked); ok {
		return pp
	}
	fn, file, line := PanicSite()
	return &Panicked{Value: p, Func: fn, File: file, Line: line}
}

// PanicSite returns where the panic being recovered was raised: the first
// frame after runtime.gopanic that is not in package runtime. It must be
// called from a deferred function during the panic; it returns zero values
// if there is no panic on the stack.
func PanicSite() (fn, file string, line int) {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	inPanic := false
	for {
		f, more := frames.Next()
		if !inPanic {
			inPanic = f.Function == "runtime.gopanic"
		} else if !strings.HasPrefix(f.Function, "runtime.") && f.Function != "" {
			return f.Function, f.File, f.Line
		}
		if !more {
			return "", "", 0
		}
	}
}

// Where is the site as "file:line (function)", or "" if it is unknown.
func (p *Panicked) Where() string {
	if p.File == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d (%s)", p.File, p.Line, p.Func)
}

func (p *Panicked) String() string {
	if w := p.Where(); w != "" {
		return fmt.Sprintf("%v at %s", p.Value, w)
	}
	return fmt.Sprint(p.Value)
}
