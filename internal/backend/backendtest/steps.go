package backendtest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// steps runs a scenario one bounded step at a time, for scenarios that
// hold streams with host functions: on a driver, a call made while a
// stream is held can wait, in the call, for the held work (loading a
// kernel at its first launch may synchronize the context), and the test
// would then never reach the line that releases it. So every call runs on
// a goroutine of its own and must return within stepLimit. One that does
// not releases every held stream (a call waiting for held work can then
// return), waits up to stepLimit again and fails the test, naming the
// step and saying whether the release let it return. Each step is logged
// with its time, so one run on a GPU tells what the driver did.
//
// The step's function runs on another goroutine: it must not call t (it
// returns an error instead).
type steps struct {
	t     *testing.T
	n     int
	limit time.Duration

	mu   sync.Mutex
	held []*held // held streams not yet released
}

// stepLimit bounds each step; a step that should return at once takes
// microseconds on a GPU and on host.
const stepLimit = 15 * time.Second

// heldFor is how long a call that must wait for held work is watched
// before the stream is released: one that does not wait returns in
// microseconds.
const heldFor = 200 * time.Millisecond

func newSteps(t *testing.T) *steps {
	st := &steps{t: t, limit: stepLimit}
	t.Cleanup(func() { st.releaseAll() }) // at the latest, before the device closes
	return st
}

// held is a stream held by a host function until released.
type held struct {
	name    string
	ch      chan struct{}
	started chan struct{}
	once    sync.Once
}

func (h *held) release() { h.once.Do(func() { close(h.ch) }) }

func (h *held) running() bool {
	select {
	case <-h.started:
		return true
	default:
		return false
	}
}

// call is a step's call under way.
type call struct {
	name  string
	n     int
	start time.Time
	done  chan error
}

// start begins step name: f on a goroutine of its own.
func (st *steps) start(name string, f func() error) *call {
	st.n++
	c := &call{name: name, n: st.n, start: time.Now(), done: make(chan error, 1)}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				c.done <- fmt.Errorf("panic: %v", p)
			}
		}()
		c.done <- f()
	}()
	return c
}

// wait waits for c within the step limit, or fails the test as the type's
// doc says. It returns c's error, logged.
func (st *steps) wait(c *call) error {
	st.t.Helper()
	select {
	case err := <-c.done:
		st.t.Logf("step %d, %s: %s (%v)", c.n, c.name, result(err), time.Since(c.start).Round(time.Microsecond))
		return err
	case <-time.After(st.limit):
	}
	names := st.releaseAll()
	select {
	case err := <-c.done:
		st.t.Fatalf("step %d, %s: did not return within %v; it returned %s %v after %s was released (it waited for held work)",
			c.n, c.name, st.limit, result(err), time.Since(c.start).Round(time.Millisecond), names)
	case <-time.After(st.limit):
		st.t.Fatalf("step %d, %s: did not return within %v, nor within %v after %s was released",
			c.n, c.name, st.limit, st.limit, names)
	}
	return nil
}

// do runs step name and fails the test if it fails.
func (st *steps) do(name string, f func() error) {
	st.t.Helper()
	if err := st.wait(st.start(name, f)); err != nil {
		st.t.Fatalf("step %d, %s: %v", st.n, name, err)
	}
}

// code runs step name, which must fail with want; a mismatch is reported
// and the scenario goes on.
func (st *steps) code(name string, want *gg.Code, f func() error) {
	st.t.Helper()
	err := st.wait(st.start(name, f))
	if !errors.Is(err, want) {
		st.t.Errorf("step %d, %s: got %v, want %s", st.n, name, err, want.Name())
	}
}

// hold holds s (named name) with a host function until the returned
// release, or the end of the test, or a step that times out. Only one
// stream is held at a time: a driver may run the host functions of
// independent streams one after another (cudaLaunchHostFunc), so a
// second held function might never start.
func (st *steps) hold(name string, s *gg.Stream) (release func()) {
	st.t.Helper()
	st.mu.Lock()
	if len(st.held) > 0 {
		st.mu.Unlock()
		st.t.Fatalf("scenario holds %s while %s is held", name, st.held[0].name)
	}
	st.mu.Unlock()
	h := &held{name: name, ch: make(chan struct{}), started: make(chan struct{})}
	st.mu.Lock()
	st.held = append(st.held, h) // before the call: a step that times out releases it
	st.mu.Unlock()
	var once sync.Once
	st.do("hold "+name+" with a host function", func() error {
		return s.LaunchHostFunc(func() {
			once.Do(func() { close(h.started) })
			<-h.ch
		})
	})
	return func() {
		st.t.Helper()
		st.t.Logf("release %s (its host function had started: %v)", name, h.running())
		st.mu.Lock()
		for i, x := range st.held {
			if x == h {
				st.held = append(st.held[:i], st.held[i+1:]...)
				break
			}
		}
		st.mu.Unlock()
		h.release()
	}
}

// releaseAll releases every held stream and names them.
func (st *steps) releaseAll() string {
	st.mu.Lock()
	hs := st.held
	st.held = nil
	st.mu.Unlock()
	var names []string
	for _, h := range hs {
		names = append(names, fmt.Sprintf("%s (its host function had started: %v)", h.name, h.running()))
		h.release()
	}
	if len(names) == 0 {
		return "nothing held"
	}
	return strings.Join(names, ", ")
}

// waits starts step name, a call that must wait for held work: it must not
// return within heldFor. It returns the call, to wait for after the
// release; a call that returned early is reported, and nil is returned.
func (st *steps) waits(name, why string, f func() error) *call {
	st.t.Helper()
	c := st.start(name, f)
	select {
	case err := <-c.done:
		st.t.Errorf("step %d, %s: returned %s after %v, before the held work ran (%s)",
			c.n, name, result(err), time.Since(c.start).Round(time.Microsecond), why)
		return nil
	case <-time.After(heldFor):
		st.t.Logf("step %d, %s: still waiting after %v, as it should", c.n, name, heldFor)
		return c
	}
}

// finish waits for c, from waits, once the held work may run; c may be
// nil.
func (st *steps) finish(c *call) {
	st.t.Helper()
	if c == nil {
		return
	}
	if err := st.wait(c); err != nil {
		st.t.Fatalf("step %d, %s: %v", c.n, c.name, err)
	}
}

// poll calls f until it returns nil, failing the test if it still
// returns ErrNotReady after the step limit (why says what that means) or
// fails otherwise.
func (st *steps) poll(name, why string, f func() error) {
	st.t.Helper()
	st.n++
	start := time.Now()
	for {
		c := &call{name: name, n: st.n, start: time.Now(), done: make(chan error, 1)}
		go func() { c.done <- f() }()
		var err error
		select {
		case err = <-c.done:
		case <-time.After(st.limit):
			names := st.releaseAll()
			st.t.Fatalf("step %d, %s: one call did not return within %v (released %s)", st.n, name, st.limit, names)
		}
		switch {
		case err == nil:
			st.t.Logf("step %d, %s: ok (%v)", st.n, name, time.Since(start).Round(time.Microsecond))
			return
		case !errors.Is(err, gg.ErrNotReady):
			st.t.Fatalf("step %d, %s: %v", st.n, name, err)
		case time.Since(start) > st.limit:
			names := st.releaseAll()
			st.t.Fatalf("step %d, %s: still not ready after %v (%s); released %s", st.n, name, st.limit, why, names)
		}
		time.Sleep(time.Millisecond)
	}
}

// read returns n uint32s at p, read by Device.Memcpy (which waits for all
// work on the device), as a step.
func (st *steps) read(d *gg.Device, p gg.DevicePtr, n int) []uint32 {
	st.t.Helper()
	b := make([]byte, 4*n)
	st.do(fmt.Sprintf("read %d words (Device.Memcpy)", n), func() error { return d.Memcpy(gg.DtoH(b, p)) })
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
	}
	return out
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
