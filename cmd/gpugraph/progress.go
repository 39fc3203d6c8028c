package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress is the line a long command shows on a terminal: what it is
// doing, how far it is, and the time left at the rate so far, redrawn in
// place (\r) a few times a second on stderr. A nil *progress, what
// startProgress returns when the line is off, does nothing.
type progress struct {
	w     io.Writer
	unit  string // what is counted: "steps", "runs"
	total int64
	done  atomic.Int64
	start time.Time

	mu       sync.Mutex
	label    string
	drawn    bool // the line is on the screen
	midLine  bool // the last output through Out did not end its line
	stop     chan struct{}
	stopped  sync.WaitGroup
	stopOnce sync.Once
}

// progressDelay is how long a command runs before its progress line shows:
// quick commands print none. progressTick is how often it is redrawn.
var (
	progressDelay = time.Second
	progressTick  = 250 * time.Millisecond
)

// showProgress reports whether a command shows a progress line on stderr:
// when stderr is a terminal, not a dumb one, and --quiet was not given.
func showProgress(stderr io.Writer, quiet bool) bool {
	return !quiet && isTerminal(stderr) && os.Getenv("TERM") != "dumb"
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminalFile(f)
}

// startProgress starts the line for total units of work on w, or returns
// nil when on is false.
func startProgress(w io.Writer, on bool, label, unit string, total int) *progress {
	if !on || total < 1 {
		return nil
	}
	p := &progress{w: w, unit: unit, total: int64(total), start: time.Now(), label: label, stop: make(chan struct{})}
	p.stopped.Go(func() {
		delay := time.NewTimer(progressDelay)
		defer delay.Stop()
		select {
		case <-delay.C:
		case <-p.stop:
			return
		}
		tick := time.NewTicker(progressTick)
		defer tick.Stop()
		for {
			p.draw()
			select {
			case <-tick.C:
			case <-p.stop:
				return
			}
		}
	})
	return p
}

// Add counts n units done. It may be called from any goroutine (a host
// function on a stream, say).
func (p *progress) Add(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

// SetLabel says what is being done now.
func (p *progress) SetLabel(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.label = label
	p.mu.Unlock()
}

// Out returns a writer for the command's other output to the same
// terminal: each write first clears the progress line, which the next tick
// redraws below it.
func (p *progress) Out(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return progressOut{p, w}
}

type progressOut struct {
	p *progress
	w io.Writer
}

func (o progressOut) Write(b []byte) (int, error) {
	o.p.mu.Lock()
	defer o.p.mu.Unlock()
	o.p.clearLocked()
	if len(b) > 0 {
		o.p.midLine = b[len(b)-1] != '\n'
	}
	return o.w.Write(b)
}

// Stop clears the line for good.
func (p *progress) Stop() {
	if p == nil {
		return
	}
	p.stopOnce.Do(func() { close(p.stop) })
	p.stopped.Wait()
	p.mu.Lock()
	p.clearLocked()
	p.mu.Unlock()
}

func (p *progress) clearLocked() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.midLine {
		return // a line of output is being written: wait for its end
	}
	fmt.Fprint(p.w, "\r"+p.line(time.Since(p.start))+"\x1b[K")
	p.drawn = true
}

// line is the progress line after elapsed: label, bar, count, percentage,
// elapsed time and, once some work is done, the time left.
func (p *progress) line(elapsed time.Duration) string {
	done := min(p.done.Load(), p.total)
	const width = 20
	fill := int(width * done / p.total)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s [%s%s] %d/%d %s %3d%%  %s", p.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		done, p.total, p.unit, 100*done/p.total, clock(elapsed))
	if done > 0 && done < p.total {
		left := time.Duration(float64(elapsed) * float64(p.total-done) / float64(done))
		fmt.Fprintf(&b, ", about %s left", clock(left))
	}
	return b.String()
}

// clock writes d as m:ss, or h:mm:ss.
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
