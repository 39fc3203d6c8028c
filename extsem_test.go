package gpugraph_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// Host unit tests of external semaphores. The conformance scenarios, run on
// the cuda backend too, are in internal/backend/backendtest (extsem.go).

func newSem(t testing.TB, d *gg.Device) *gg.ExternalSemaphore {
	t.Helper()
	s, err := d.NewExternalSemaphore()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sems(s ...*gg.ExternalSemaphore) []*gg.ExternalSemaphore { return s }

// blocked reports whether f is still running a little after it started:
// used to check that something waits, never to order events. The channel
// delivers f's result.
func blocked(f func() error) (chan error, bool) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		done <- err
		return done, false
	case <-time.After(20 * time.Millisecond):
		return done, true
	}
}

// waitingStill reports whether the result of blocked is still pending a
// little later.
func waitingStill(done chan error) bool {
	select {
	case err := <-done:
		done <- err
		return false
	case <-time.After(20 * time.Millisecond):
		return true
	}
}

// waitFor is a wait on a channel from blocked, for within.
func waitFor(done chan error) func() error { return func() error { return <-done } }

func TestExtSemGoSide(t *testing.T) {
	d := open(t)
	s := newSem(t, d)
	if v := must[uint64](t)(s.Value()); v != 0 {
		t.Fatalf("new semaphore at %d", v)
	}
	ok(t, s.Wait(context.Background(), 0)) // reached already
	ok(t, s.Signal(3))
	isCode(t, s.Signal(3), gg.ErrInvalidValue) // must increase, as vkSignalSemaphore
	isCode(t, s.Signal(2), gg.ErrInvalidValue)
	if v := must[uint64](t)(s.Value()); v != 3 {
		t.Fatalf("value %d after a refused signal, want 3", v)
	}
	ok(t, s.Wait(context.Background(), 3))

	done, waiting := blocked(func() error { return s.Wait(context.Background(), 5) })
	if !waiting {
		t.Fatal("Wait(5) returned at value 3")
	}
	ok(t, s.Signal(4))
	if !waitingStill(done) {
		t.Fatal("Wait(5) returned at value 4")
	}
	ok(t, s.Signal(7))
	within(t, "Wait(5) after Signal(7)", waitFor(done))

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := s.Wait(ctx, 100)
	isCode(t, err, gg.ErrNotReady)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait error %v does not match context.DeadlineExceeded", err)
	}
	ok(t, s.Destroy()) // the cancelled wait let go of the semaphore
}

func TestExtSemStreamOrder(t *testing.T) {
	d := open(t)
	a, b := stream(t, d), stream(t, d)
	s := newSem(t, d)
	release := make(chan struct{})
	ok(t, a.LaunchHostFunc(func() { <-release }))
	ok(t, a.SignalExternalSemaphores(sems(s), []uint64{1}))

	var mu sync.Mutex
	var order []string
	note := func(x string) func() { return func() { mu.Lock(); order = append(order, x); mu.Unlock() } }
	// b waits for a's signal; the call returns at once.
	ok(t, b.WaitExternalSemaphores(sems(s), []uint64{1}))
	ok(t, b.LaunchHostFunc(note("b")))
	isCode(t, b.Query(), gg.ErrNotReady)
	if v := must[uint64](t)(s.Value()); v != 0 {
		t.Fatalf("signalled (%d) before the stream's earlier work ran", v)
	}
	ok(t, a.LaunchHostFunc(note("a after signal")))
	close(release)
	within(t, "b.Synchronize", b.Synchronize)
	ok(t, a.Synchronize())
	if v := must[uint64](t)(s.Value()); v != 1 {
		t.Fatalf("value %d, want 1", v)
	}
	if len(order) != 2 {
		t.Fatalf("order %v", order)
	}

	// A stream signal that does not raise the value leaves it.
	ok(t, a.SignalExternalSemaphores(sems(s), []uint64{0}))
	ok(t, a.Synchronize())
	if v := must[uint64](t)(s.Value()); v != 1 {
		t.Fatalf("value %d after signalling 0, want 1", v)
	}
}

// A wait on several semaphores holds the stream until all are reached;
// the arrays are copied when the operation is issued.
func TestExtSemStreamWaitAll(t *testing.T) {
	d := open(t)
	st := stream(t, d)
	x, y := newSem(t, d), newSem(t, d)
	ss, vs := sems(x, y), []uint64{2, 1}
	ok(t, st.WaitExternalSemaphores(ss, vs))
	vs[0], ss[1] = 0, x // changes after the call do not count
	ran := make(chan error, 1)
	ok(t, st.LaunchHostFunc(func() { ran <- nil }))
	ok(t, x.Signal(2))
	if !waitingStill(ran) {
		t.Fatal("the stream went on with y not signalled")
	}
	ok(t, y.Signal(1))
	within(t, "the wait on both", waitFor(ran))
	ok(t, st.Synchronize())
}

func TestExtSemGraphWaitsForGo(t *testing.T) {
	d := open(t)
	st := stream(t, d)
	s := newSem(t, d)
	g := graph(t, d)
	var runs atomic.Int32
	w := must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: sems(s), Values: []uint64{1}}))
	h := must[*gg.Node](t)(g.AddHostNode(func() { runs.Add(1) }, w))
	must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: sems(s), Values: []uint64{10}}, h))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(st))
	isCode(t, st.Query(), gg.ErrNotReady)
	if runs.Load() != 0 {
		t.Fatal("the host node ran before the signal")
	}
	ok(t, s.Signal(1))
	within(t, "the launch", st.Synchronize)
	if runs.Load() != 1 || must[uint64](t)(s.Value()) != 10 {
		t.Fatalf("runs %d, value %d", runs.Load(), must[uint64](t)(s.Value()))
	}
	// The next launch finds the value reached and does not wait.
	ok(t, e.Launch(st))
	within(t, "the second launch", st.Synchronize)
	if runs.Load() != 2 {
		t.Fatalf("runs %d", runs.Load())
	}
}

// Wait nodes hold no worker while they wait: a graph whose many wait nodes
// are released by its own signal node, queued behind them, finishes on a
// pool of any size. Waiting on the pool's goroutines would deadlock it.
func TestExtSemGraphWaitsHoldNoWorker(t *testing.T) {
	d := open(t)
	s := newSem(t, d)
	g := graph(t, d)
	waitP := gg.ExtSemaphoreWaitParams{Semaphores: sems(s), Values: []uint64{1}}
	var ws []*gg.Node
	ws = append(ws, must[*gg.Node](t)(g.AddNode(waitP)))
	must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: sems(s), Values: []uint64{1}}))
	for i := 0; i < 2*runtime.GOMAXPROCS(0)+8; i++ {
		ws = append(ws, must[*gg.Node](t)(g.AddNode(waitP)))
	}
	var joined atomic.Bool
	must[*gg.Node](t)(g.AddHostNode(func() { joined.Store(true) }, ws...))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	// Several streams launch at once, so helpers are scarce.
	var ss []*gg.Stream
	for i := 0; i < 4; i++ {
		c := must[*gg.Exec](t)(g.Instantiate(0))
		st := stream(t, d)
		ok(t, c.Launch(st))
		ss = append(ss, st)
	}
	st := stream(t, d)
	ok(t, e.Launch(st))
	within(t, "graphs whose waits are released by their own signal", func() error {
		for _, x := range append(ss, st) {
			if err := x.Synchronize(); err != nil {
				return err
			}
		}
		return nil
	}, func() { s.Signal(1) })
	if !joined.Load() {
		t.Fatal("the join node did not run")
	}
}

func TestExtSemCaptureMakesNodes(t *testing.T) {
	d := open(t)
	st := stream(t, d)
	a, b := newSem(t, d), newSem(t, d)
	ok(t, st.BeginCapture(gg.CaptureModeGlobal))
	vs := []uint64{5}
	ok(t, st.WaitExternalSemaphores(sems(a), vs))
	vs[0] = 99 // the node keeps 5
	ok(t, st.SignalExternalSemaphores(sems(a, b), []uint64{6, 7}))
	g := must[*gg.Graph](t)(st.EndCapture())
	if v := must[uint64](t)(a.Value()); v != 0 {
		t.Fatalf("capture ran the signal: value %d", v)
	}
	ns := must[[]*gg.Node](t)(g.Nodes())
	if len(ns) != 2 || ns[0].Type() != gg.NodeExtSemasWait || ns[1].Type() != gg.NodeExtSemasSignal {
		t.Fatalf("captured %v", ns)
	}
	if deps := must[[]*gg.Node](t)(ns[1].Dependencies()); len(deps) != 1 || deps[0] != ns[0] {
		t.Fatalf("signal depends on %v", deps)
	}
	wp := must[gg.NodeParams](t)(ns[0].Params()).(gg.ExtSemaphoreWaitParams)
	if len(wp.Semaphores) != 1 || wp.Semaphores[0] != a || wp.Values[0] != 5 {
		t.Fatalf("wait params %+v", wp)
	}
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(st))
	ok(t, a.Signal(5))
	within(t, "captured graph", st.Synchronize)
	if va, vb := must[uint64](t)(a.Value()), must[uint64](t)(b.Value()); va != 6 || vb != 7 {
		t.Fatalf("values %d, %d; want 6, 7", va, vb)
	}
}

func TestExtSemValidation(t *testing.T) {
	d := open(t)
	other := open(t)
	st := stream(t, d)
	live := newSem(t, d)
	dead := newSem(t, d)
	ok(t, dead.Destroy())
	foreign := newSem(t, other)
	for _, c := range []struct {
		name   string
		sems   []*gg.ExternalSemaphore
		values []uint64
		stream *gg.Code // CUDA documents cudaErrorInvalidResourceHandle for the stream calls
		node   *gg.Code // and cudaErrorInvalidValue for graph nodes
	}{
		{"no semaphores", nil, nil, gg.ErrInvalidValue, gg.ErrInvalidValue},
		{"empty arrays", sems(), []uint64{}, gg.ErrInvalidValue, gg.ErrInvalidValue},
		{"fewer values", sems(live, live), []uint64{1}, gg.ErrInvalidValue, gg.ErrInvalidValue},
		{"more values", sems(live), []uint64{1, 2}, gg.ErrInvalidValue, gg.ErrInvalidValue},
		{"no values", sems(live), nil, gg.ErrInvalidValue, gg.ErrInvalidValue},
		{"nil semaphore", sems(live, nil), []uint64{1, 1}, gg.ErrInvalidResourceHandle, gg.ErrInvalidValue},
		{"destroyed semaphore", sems(dead), []uint64{1}, gg.ErrInvalidResourceHandle, gg.ErrInvalidValue},
		{"semaphore of another device", sems(foreign), []uint64{1}, gg.ErrInvalidResourceHandle, gg.ErrInvalidValue},
	} {
		t.Run(c.name, func(t *testing.T) {
			isCode(t, st.SignalExternalSemaphores(c.sems, c.values), c.stream)
			isCode(t, st.WaitExternalSemaphores(c.sems, c.values), c.stream)
			g := graph(t, d)
			_, err := g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: c.sems, Values: c.values})
			isCode(t, err, c.node)
			_, err = g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: c.sems, Values: c.values})
			isCode(t, err, c.node)
			n := must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: sems(live), Values: []uint64{1}}))
			isCode(t, n.SetParams(gg.ExtSemaphoreSignalParams{Semaphores: c.sems, Values: c.values}), c.node)
			p := must[gg.NodeParams](t)(n.Params()).(gg.ExtSemaphoreSignalParams)
			if len(p.Semaphores) != 1 || p.Semaphores[0] != live { // unchanged
				t.Fatalf("params after a refused SetParams: %+v", p)
			}
			if nodes := must[[]*gg.Node](t)(g.Nodes()); len(nodes) != 1 {
				t.Fatalf("%d nodes after refused AddNode calls", len(nodes))
			}
			ok(t, st.Synchronize())
		})
	}
	// A node of one type does not take the other type's params.
	g := graph(t, d)
	n := must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: sems(live), Values: []uint64{1}}))
	isCode(t, n.SetParams(gg.ExtSemaphoreWaitParams{Semaphores: sems(live), Values: []uint64{1}}), gg.ErrInvalidValue)
	// Go-side calls on bad handles.
	var nilSem *gg.ExternalSemaphore
	isCode(t, nilSem.Signal(1), gg.ErrInvalidResourceHandle)
	isCode(t, nilSem.Destroy(), gg.ErrInvalidResourceHandle)
	isCode(t, dead.Signal(1), gg.ErrInvalidResourceHandle)
	isCode(t, dead.Wait(context.Background(), 1), gg.ErrInvalidResourceHandle)
	_, err := dead.Value()
	isCode(t, err, gg.ErrInvalidResourceHandle)
	isCode(t, dead.Destroy(), gg.ErrInvalidResourceHandle)
	//lint:ignore SA1012 a nil context is what is tested
	isCode(t, live.Wait(nil, 1), gg.ErrInvalidValue) //nolint:staticcheck
}

// Destroying a semaphore while work on it is pending is undefined in CUDA;
// the host backend refuses it (ErrIllegalState) and changes nothing.
func TestExtSemDestroyWhileInUse(t *testing.T) {
	d := open(t)
	st := stream(t, d)

	t.Run("stream wait", func(t *testing.T) {
		s := newSem(t, d)
		ok(t, st.WaitExternalSemaphores(sems(s), []uint64{1}))
		isCode(t, s.Destroy(), gg.ErrIllegalState)
		ok(t, s.Signal(1)) // still usable
		ok(t, st.Synchronize())
		ok(t, s.Destroy())
		isCode(t, st.SignalExternalSemaphores(sems(s), []uint64{2}), gg.ErrInvalidResourceHandle)
	})
	t.Run("stream signal", func(t *testing.T) {
		s := newSem(t, d)
		release := make(chan struct{})
		ok(t, st.LaunchHostFunc(func() { <-release }))
		ok(t, st.SignalExternalSemaphores(sems(s), []uint64{1}))
		isCode(t, s.Destroy(), gg.ErrIllegalState)
		close(release)
		ok(t, st.Synchronize())
		ok(t, s.Destroy())
	})
	t.Run("graph launch", func(t *testing.T) {
		s := newSem(t, d)
		g := graph(t, d)
		must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: sems(s), Values: []uint64{1}}))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(st))
		isCode(t, s.Destroy(), gg.ErrIllegalState)
		ok(t, s.Signal(1))
		ok(t, st.Synchronize())
		ok(t, s.Destroy())
		// The executable graph outlives the semaphore, but cannot launch,
		// and the graph cannot be instantiated again.
		isCode(t, e.Launch(st), gg.ErrInvalidResourceHandle)
		_, err := g.Instantiate(0)
		isCode(t, err, gg.ErrInvalidValue)
		var ge *gg.Error
		if !errors.As(err, &ge) || ge.Node == nil || ge.Node.Type() != gg.NodeExtSemasWait {
			t.Fatalf("Instantiate error %v does not name the wait node", err)
		}
	})
	t.Run("Go wait", func(t *testing.T) {
		s := newSem(t, d)
		done, waiting := blocked(func() error { return s.Wait(context.Background(), 1) })
		if !waiting {
			t.Fatal("Wait returned at value 0")
		}
		isCode(t, s.Destroy(), gg.ErrIllegalState)
		ok(t, s.Signal(1))
		within(t, "Wait", waitFor(done))
		ok(t, s.Destroy())
	})
}

// Graph nodes keep copies of their arrays; Params, Clone and SetParams
// work on them like on any node.
func TestExtSemNodeParams(t *testing.T) {
	d := open(t)
	st := stream(t, d)
	a, b := newSem(t, d), newSem(t, d)
	g := graph(t, d)
	ss, vs := sems(a), []uint64{4}
	n := must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: ss, Values: vs}))
	ss[0], vs[0] = b, 9
	p := must[gg.NodeParams](t)(n.Params()).(gg.ExtSemaphoreSignalParams)
	if p.Semaphores[0] != a || p.Values[0] != 4 {
		t.Fatalf("the node shares the caller's arrays: %+v", p)
	}
	p.Values[0] = 8 // nor does it share the returned copy
	if q := must[gg.NodeParams](t)(n.Params()).(gg.ExtSemaphoreSignalParams); q.Values[0] != 4 {
		t.Fatalf("Params returned the node's own array")
	}
	c := must[*gg.Graph](t)(g.Clone())
	cn := must[*gg.Node](t)(c.ClonedNode(n))
	ok(t, n.SetParams(gg.ExtSemaphoreSignalParams{Semaphores: sems(a, b), Values: []uint64{5, 6}}))
	cp := must[gg.NodeParams](t)(cn.Params()).(gg.ExtSemaphoreSignalParams)
	if cn.Type() != gg.NodeExtSemasSignal || len(cp.Semaphores) != 1 || cp.Values[0] != 4 {
		t.Fatalf("clone params %+v", cp)
	}
	ec := must[*gg.Exec](t)(c.Instantiate(0))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, ec.Launch(st))
	ok(t, st.Synchronize())
	if va, vb := must[uint64](t)(a.Value()), must[uint64](t)(b.Value()); va != 4 || vb != 0 {
		t.Fatalf("clone signalled %d, %d", va, vb)
	}
	ok(t, e.Launch(st))
	ok(t, st.Synchronize())
	if va, vb := must[uint64](t)(a.Value()), must[uint64](t)(b.Value()); va != 5 || vb != 6 {
		t.Fatalf("after SetParams signalled %d, %d", va, vb)
	}

	var dot bytes.Buffer
	ok(t, g.WriteDOT(&dot))
	for _, want := range []string{"EXTERNAL_SEMAPHORE_SIGNAL", "2 semaphores", "values [5 6]"} {
		if !strings.Contains(dot.String(), want) {
			t.Errorf("DOT output lacks %q:\n%s", want, dot.String())
		}
	}
}

// Many goroutines signal while streams and graphs wait: run with -race.
func TestExtSemConcurrent(t *testing.T) {
	d := open(t)
	s := newSem(t, d)
	g := graph(t, d)
	var count atomic.Int32
	w := must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: sems(s), Values: []uint64{50}}))
	must[*gg.Node](t)(g.AddHostNode(func() { count.Add(1) }, w))
	var streams []*gg.Stream
	for i := 0; i < 8; i++ {
		st := stream(t, d)
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(st))
		ok(t, st.WaitExternalSemaphores(sems(s), []uint64{uint64(10 * i)}))
		ok(t, st.LaunchHostFunc(func() { count.Add(1) }))
		streams = append(streams, st)
	}
	var wg sync.WaitGroup
	var next atomic.Uint64
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v := next.Add(1)
				if v > 80 {
					return
				}
				s.Signal(v) // losing a race to a larger value is fine
			}
		}()
	}
	wg.Wait()
	within(t, "streams", func() error {
		for _, st := range streams {
			if err := st.Synchronize(); err != nil {
				return err
			}
		}
		return nil
	})
	if count.Load() != 16 {
		t.Fatalf("%d of 16 host functions ran", count.Load())
	}
}
