package gpugraph_test

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// tracked is a user object whose destructor counts its runs and closes
// ran at the first.
type tracked struct {
	*gg.UserObject
	runs atomic.Int32
	ran  chan struct{}
}

func newTracked(t testing.TB, d *gg.Device, refs int, also func()) *tracked {
	t.Helper()
	x := &tracked{ran: make(chan struct{})}
	x.UserObject = must[*gg.UserObject](t)(d.NewUserObject(func() {
		if also != nil {
			also()
		}
		if x.runs.Add(1) == 1 {
			close(x.ran)
		}
	}, refs, gg.UserObjectNoDestructorSync))
	return x
}

// wait waits for the destructor. Destructors run asynchronously and nothing
// in the API waits for them; the timeout only turns a missing run into a
// failure instead of a hang.
func (x *tracked) wait(t testing.TB) {
	t.Helper()
	select {
	case <-x.ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the destructor did not run")
	}
	if n := x.runs.Load(); n != 1 {
		t.Fatalf("the destructor ran %d times", n)
	}
}

// alive fails if the destructor has run. It cannot prove that a destructor
// will not run later, only catch one that ran too early.
func (x *tracked) alive(t testing.TB, when string) {
	t.Helper()
	if n := x.runs.Load(); n != 0 {
		t.Fatalf("%s: the destructor ran (%d times) while references were left", when, n)
	}
}

// The seed's scenario: the caller's reference moves into the graph, the
// executable graph takes its own, and destroying it while its launch is
// still queued defers the release until the launch has finished.
func TestConformanceUserObjectDeferredRelease(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		g := graph(t, d)
		gate := make(chan struct{})
		var mu sync.Mutex
		var order []string
		note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
		must[*gg.Node](t)(g.AddHostNode(func() { <-gate; note("launch") }))
		o := newTracked(t, d, 1, func() { note("destructor") })
		ok(t, g.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, g.Destroy())
		o.alive(t, "after Graph.Destroy")
		ok(t, e.Launch(s))
		ok(t, e.Destroy())
		o.alive(t, "after Exec.Destroy with the launch blocked")
		close(gate)
		ok(t, s.Synchronize())
		o.wait(t)
		mu.Lock()
		defer mu.Unlock()
		if len(order) != 2 || order[0] != "launch" || order[1] != "destructor" {
			t.Fatalf("order %v, want the launch, then the destructor", order)
		}
		// All references are gone: the handle is dead.
		isCode(t, o.Retain(1), gg.ErrInvalidValue)
		isCode(t, o.Release(1), gg.ErrInvalidValue)
	})
}

func TestConformanceUserObjectInvalid(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		fn := func() {}
		for _, c := range []struct {
			name    string
			destroy func()
			refs    int
			flags   gg.UserObjectFlags
		}{
			{"nil destructor", nil, 1, gg.UserObjectNoDestructorSync},
			{"zero refs", fn, 0, gg.UserObjectNoDestructorSync},
			{"negative refs", fn, -1, gg.UserObjectNoDestructorSync},
			{"refs over INT_MAX", fn, math.MaxInt32 + 1, gg.UserObjectNoDestructorSync},
			// CUDA requires the flag; the driver decides on cuda.
			{"no NoDestructorSync", fn, 1, 0},
			{"unknown flag", fn, 1, gg.UserObjectNoDestructorSync | 8},
		} {
			_, err := d.NewUserObject(c.destroy, c.refs, c.flags)
			if err == nil {
				t.Errorf("%s: NewUserObject succeeded", c.name)
				continue
			}
			isCode(t, err, gg.ErrInvalidValue)
		}

		o := newTracked(t, d, 2, nil)
		g, other := graph(t, d), graph(t, d)
		ok(t, g.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove)) // caller 1, graph 1
		for _, c := range []struct {
			name string
			err  error
		}{
			{"Retain(0)", o.Retain(0)},
			{"Release(0)", o.Release(0)},
			{"Release(-1)", o.Release(-1)},
			{"Retain over INT_MAX", o.Retain(math.MaxInt32 + 1)},
			{"Release of more than the caller owns", o.Release(2)},
			{"moving more than the caller owns", g.RetainUserObject(o.UserObject, 2, gg.GraphUserObjectMove)},
			{"graph retain of 0", g.RetainUserObject(o.UserObject, 0, 0)},
			{"graph retain of a nil object", g.RetainUserObject(nil, 1, 0)},
			{"graph release of more than it owns", g.ReleaseUserObject(o.UserObject, 2)},
			{"graph release of an object it does not own", other.ReleaseUserObject(o.UserObject, 1)},
			{"graph release of 0", g.ReleaseUserObject(o.UserObject, 0)},
		} {
			if c.err == nil {
				t.Errorf("%s: succeeded", c.name)
				continue
			}
			isCode(t, c.err, gg.ErrInvalidValue)
		}
		// Nothing changed: the caller still owns 1 and the graph 1.
		ok(t, o.Release(1))
		o.alive(t, "with the graph's reference left")
		isCode(t, o.Release(1), gg.ErrInvalidValue) // the graph's, not the caller's
		ok(t, g.ReleaseUserObject(o.UserObject, 1))
		o.wait(t)
		isCode(t, g.ReleaseUserObject(o.UserObject, 1), gg.ErrInvalidValue)
		isCode(t, g.RetainUserObject(o.UserObject, 1, 0), gg.ErrInvalidValue)
	})
}

// Clone copies every reference with the same multiplicity; the copies are
// the clone's to release.
func TestConformanceUserObjectClone(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		o := newTracked(t, d, 1, nil)
		g := graph(t, d)
		must[*gg.Node](t)(g.AddEmptyNode())
		ok(t, g.RetainUserObject(o.UserObject, 2, 0)) // new references: total 3
		c := must[*gg.Graph](t)(g.Clone())
		ok(t, g.Destroy())
		ok(t, o.Release(1))
		o.alive(t, "with the clone's references left")
		isCode(t, c.ReleaseUserObject(o.UserObject, 3), gg.ErrInvalidValue)
		ok(t, c.ReleaseUserObject(o.UserObject, 1))
		o.alive(t, "with one reference of the clone left")
		ok(t, c.ReleaseUserObject(o.UserObject, 1))
		o.wait(t)
	})
}

// A child graph node's graph owns its own references: adding the node
// copies them, instantiating the parent copies them into the Exec, and
// destroying the node releases them.
func TestConformanceUserObjectChildGraph(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		o := newTracked(t, d, 1, nil)
		child := graph(t, d)
		ran := 0
		must[*gg.Node](t)(child.AddHostNode(func() { ran++ }))
		ok(t, child.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove))
		parent := graph(t, d)
		node := must[*gg.Node](t)(parent.AddChildGraphNode(child))
		ok(t, child.Destroy())
		o.alive(t, "with the embedded graph's reference left")
		// The reference is the child's, not the parent's.
		isCode(t, parent.ReleaseUserObject(o.UserObject, 1), gg.ErrInvalidValue)
		e := must[*gg.Exec](t)(parent.Instantiate(0))
		ok(t, parent.DestroyNode(node))
		o.alive(t, "with the executable graph's reference left")
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		if ran != 1 {
			t.Fatalf("the child graph ran %d times", ran)
		}
		ok(t, e.Destroy())
		o.wait(t)
		ok(t, parent.Destroy())
	})
}

// A destructor may not call the API: every call fails with ErrNotPermitted
// instead of blocking the thread that runs destructors. A goroutine it
// starts may.
func TestConformanceUserObjectDestructorCallsAPI(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		other := newTracked(t, d, 1, nil)
		g := graph(t, d)
		var errs []error
		var fromGoroutine error
		o := newTracked(t, d, 1, func() {
			_, err := d.NewGraph()
			errs = append(errs, err)
			errs = append(errs, s.Synchronize())
			errs = append(errs, s.LaunchHostFunc(func() {}))
			errs = append(errs, other.Release(1))
			errs = append(errs, g.Destroy())
			errs = append(errs, d.Close())
			done := make(chan struct{})
			go func() { fromGoroutine = s.Synchronize(); close(done) }()
			<-done
		})
		ok(t, o.Release(1))
		o.wait(t)
		for i, err := range errs {
			if err == nil {
				t.Errorf("call %d from the destructor succeeded", i)
				continue
			}
			isCode(t, err, gg.ErrNotPermitted)
		}
		ok(t, fromGoroutine)
		// The refused calls changed nothing.
		other.alive(t, "after a refused Release")
		ok(t, other.Release(1))
		other.wait(t)
		ok(t, g.Destroy())
	})
}

// Host unit tests of the rules; internal counts are checked in
// userobject_internal_test.go.

func TestUserObjectDestructorNeverInline(t *testing.T) {
	d := open(t)
	gate := make(chan struct{})
	o := newTracked(t, d, 1, func() { <-gate })
	// If Release ran the destructor on the calling goroutine it would block
	// on gate.
	done := make(chan error, 1)
	go func() { done <- o.Release(1) }()
	select {
	case err := <-done:
		ok(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Release ran the destructor inline")
	}
	// Nor inside a launch's completion: a destructor blocked on gate must
	// not hold up the stream that released the last reference.
	s := stream(t, d)
	o2 := newTracked(t, d, 1, func() { <-gate })
	g := graph(t, d)
	must[*gg.Node](t)(g.AddEmptyNode())
	ok(t, g.RetainUserObject(o2.UserObject, 1, gg.GraphUserObjectMove))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, g.Destroy())
	hold := make(chan struct{})
	ok(t, s.LaunchHostFunc(func() { <-hold }))
	ok(t, e.Launch(s))
	ok(t, e.Destroy())
	close(hold)
	go func() { done <- s.Synchronize() }()
	select {
	case err := <-done:
		ok(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the launch's end ran the destructor inline")
	}
	close(gate)
	o.wait(t)
	o2.wait(t)
}

// Calls made by other goroutines while a destructor runs are not refused.
func TestUserObjectOthersCallWhileDestructorRuns(t *testing.T) {
	d := open(t)
	gate, in := make(chan struct{}), make(chan struct{})
	o := newTracked(t, d, 1, func() { close(in); <-gate })
	ok(t, o.Release(1))
	<-in
	g := must[*gg.Graph](t)(d.NewGraph())
	ok(t, g.Destroy())
	s := stream(t, d)
	ok(t, s.Launch(kA, one, one))
	ok(t, s.Synchronize())
	close(gate)
	o.wait(t)
}

func TestUserObjectDestructorsInOrderOncePerObject(t *testing.T) {
	d := open(t)
	var mu sync.Mutex
	var order []int
	const n = 50
	objs := make([]*tracked, n)
	for i := range objs {
		objs[i] = newTracked(t, d, 1, func() { mu.Lock(); order = append(order, i); mu.Unlock() })
	}
	for _, o := range objs {
		ok(t, o.Release(1))
	}
	for _, o := range objs {
		o.wait(t)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("destructors ran in order %v", order)
		}
	}
}

// A destructor that panics fails the device, as a host function does.
func TestUserObjectDestructorPanics(t *testing.T) {
	d := open(t)
	started, gate := make(chan struct{}), make(chan struct{})
	o := must[*gg.UserObject](t)(d.NewUserObject(func() { close(started); <-gate; panic("boom") }, 1, gg.UserObjectNoDestructorSync))
	ok(t, o.Release(1))
	<-started
	// Destructors run in order, so the next one runs after the panic was
	// recovered and recorded.
	next := newTracked(t, d, 1, nil)
	ok(t, next.Release(1))
	close(gate)
	next.wait(t)
	_, err := d.NewGraph()
	isCode(t, err, gg.ErrLaunchFailure)
}

func TestUserObjectOtherDevice(t *testing.T) {
	d1, d2 := open(t), open(t)
	o := newTracked(t, d1, 1, nil)
	g := graph(t, d2)
	isCode(t, g.RetainUserObject(o.UserObject, 1, 0), gg.ErrInvalidValue)
	isCode(t, g.RetainUserObject(o.UserObject, 1, 2), gg.ErrInvalidValue)
	g1 := graph(t, d1)
	isCode(t, g1.RetainUserObject(o.UserObject, 1, 2), gg.ErrInvalidValue) // unknown flag
	ok(t, o.Release(1))
	o.wait(t)
	var nilObj *gg.UserObject
	isCode(t, nilObj.Retain(1), gg.ErrInvalidValue)
	isCode(t, nilObj.Release(1), gg.ErrInvalidValue)
	isCode(t, g1.RetainUserObject(nil, 1, 0), gg.ErrInvalidValue)
	ok(t, d1.Close())
	_, err := d1.NewUserObject(func() {}, 1, gg.UserObjectNoDestructorSync)
	isCode(t, err, gg.ErrContextIsDestroyed)
}

// Child graph nodes given a new graph drop the old graph's references;
// embedded graphs can own references of their own.
func TestUserObjectEmbeddedGraph(t *testing.T) {
	d := open(t)
	o := newTracked(t, d, 1, nil)
	a := graph(t, d)
	must[*gg.Node](t)(a.AddEmptyNode())
	parent := graph(t, d)
	node := must[*gg.Node](t)(parent.AddChildGraphNode(a))
	emb := must[*gg.Graph](t)(node.ChildGraph())
	ok(t, emb.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove))
	clone := must[*gg.Graph](t)(parent.Clone()) // copies the embedded graph's reference
	e := must[*gg.Exec](t)(parent.Instantiate(0))
	ok(t, node.SetParams(gg.ChildGraphParams{Graph: a})) // the old embedded graph goes
	isCode(t, emb.ReleaseUserObject(o.UserObject, 1), gg.ErrInvalidValue)
	ok(t, clone.Destroy())
	o.alive(t, "with the Exec's reference left")
	ok(t, e.Destroy())
	o.wait(t)
	ok(t, parent.Destroy())
	ok(t, a.Destroy())
}

// A failed AddChildGraphNode keeps nothing of the clone it made.
func TestUserObjectFailedAddChild(t *testing.T) {
	d := open(t)
	o := newTracked(t, d, 1, nil)
	child := graph(t, d)
	ok(t, child.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove))
	parent := graph(t, d)
	foreign := must[*gg.Node](t)(graph(t, d).AddEmptyNode())
	_, err := parent.AddChildGraphNode(child, foreign) // a dependency of another graph
	isCode(t, err, gg.ErrInvalidValue)
	ok(t, child.Destroy())
	o.wait(t)
}

// Many goroutines retaining, releasing, cloning, instantiating, launching
// and destroying: the destructor runs once, after the last release.
func TestUserObjectConcurrent(t *testing.T) {
	d := open(t)
	o := newTracked(t, d, 1, nil)
	g := graph(t, d)
	must[*gg.Node](t)(g.AddEmptyNode())
	ok(t, g.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.NewStream()
			if err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				if err := o.Retain(2); err != nil {
					t.Error(err)
					return
				}
				c, err := g.Clone()
				if err != nil {
					t.Error(err)
					return
				}
				ok := c.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove) == nil
				e, err := c.Instantiate(0)
				if !ok || err != nil {
					t.Error("retain or instantiate failed", err)
					return
				}
				e.Launch(s)
				c.Destroy()
				e.Destroy()
				if err := o.Release(1); err != nil {
					t.Error(err)
					return
				}
			}
			s.Synchronize()
		}()
	}
	wg.Wait()
	o.alive(t, "with the graph's reference left")
	ok(t, g.Destroy())
	o.wait(t)
}
