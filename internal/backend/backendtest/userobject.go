package backendtest

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// Tracked is a user object whose destructor counts its runs and closes
// ran at the first.
type Tracked struct {
	*gg.UserObject
	runs atomic.Int32
	ran  chan struct{}
}

// NewTracked returns a Tracked object of refs references whose destructor
// calls also (if not nil) first.
func NewTracked(t testing.TB, d *gg.Device, refs int, also func()) *Tracked {
	t.Helper()
	x := &Tracked{ran: make(chan struct{})}
	x.UserObject = Must[*gg.UserObject](t)(d.NewUserObject(func() {
		if also != nil {
			also()
		}
		if x.runs.Add(1) == 1 {
			close(x.ran)
		}
	}, refs, gg.UserObjectNoDestructorSync))
	return x
}

// Wait waits for the destructor. Destructors run asynchronously and nothing
// in the API waits for them; the timeout only turns a missing run into a
// failure instead of a hang.
func (x *Tracked) Wait(t testing.TB) {
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

// Alive fails if the destructor has run. It cannot prove that a destructor
// will not run later, only catch one that ran too early.
func (x *Tracked) Alive(t testing.TB, when string) {
	t.Helper()
	if n := x.runs.Load(); n != 0 {
		t.Fatalf("%s: the destructor ran (%d times) while references were left", when, n)
	}
}

// The seed's scenario: the caller's reference moves into the graph, the
// executable graph takes its own, and destroying it while its launch is
// still queued defers the release until the launch has finished.
func userObjectDeferredRelease(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	g := NewGraph(t, d)
	gate := make(chan struct{})
	var mu sync.Mutex
	var order []string
	note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
	Must[*gg.Node](t)(g.AddHostNode(func() { <-gate; note("launch") }))
	o := NewTracked(t, d, 1, func() { note("destructor") })
	OK(t, g.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, g.Destroy())
	o.Alive(t, "after Graph.Destroy")
	OK(t, e.Launch(s))
	OK(t, e.Destroy())
	o.Alive(t, "after Exec.Destroy with the launch blocked")
	close(gate)
	OK(t, s.Synchronize())
	o.Wait(t)
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "launch" || order[1] != "destructor" {
		t.Fatalf("order %v, want the launch, then the destructor", order)
	}
	// All references are gone: the handle is dead.
	IsCode(t, o.Retain(1), gg.ErrInvalidValue)
	IsCode(t, o.Release(1), gg.ErrInvalidValue)
}

func userObjectInvalid(t *testing.T, d *gg.Device) {
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
		IsCode(t, err, gg.ErrInvalidValue)
	}

	o := NewTracked(t, d, 2, nil)
	g, other := NewGraph(t, d), NewGraph(t, d)
	OK(t, g.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove)) // caller 1, graph 1
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
		IsCode(t, c.err, gg.ErrInvalidValue)
	}
	// Nothing changed: the caller still owns 1 and the graph 1.
	OK(t, o.Release(1))
	o.Alive(t, "with the graph's reference left")
	IsCode(t, o.Release(1), gg.ErrInvalidValue) // the graph's, not the caller's
	OK(t, g.ReleaseUserObject(o.UserObject, 1))
	o.Wait(t)
	IsCode(t, g.ReleaseUserObject(o.UserObject, 1), gg.ErrInvalidValue)
	IsCode(t, g.RetainUserObject(o.UserObject, 1, 0), gg.ErrInvalidValue)
}

// Clone copies every reference with the same multiplicity; the copies are
// the clone's to release.
func userObjectClone(t *testing.T, d *gg.Device) {
	o := NewTracked(t, d, 1, nil)
	g := NewGraph(t, d)
	Must[*gg.Node](t)(g.AddEmptyNode())
	OK(t, g.RetainUserObject(o.UserObject, 2, 0)) // new references: total 3
	c := Must[*gg.Graph](t)(g.Clone())
	OK(t, g.Destroy())
	OK(t, o.Release(1))
	o.Alive(t, "with the clone's references left")
	IsCode(t, c.ReleaseUserObject(o.UserObject, 3), gg.ErrInvalidValue)
	OK(t, c.ReleaseUserObject(o.UserObject, 1))
	o.Alive(t, "with one reference of the clone left")
	OK(t, c.ReleaseUserObject(o.UserObject, 1))
	o.Wait(t)
}

// A child graph node's graph owns its own references: adding the node
// copies them, instantiating the parent copies them into the Exec, and
// destroying the node releases them.
func userObjectChildGraph(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	o := NewTracked(t, d, 1, nil)
	child := NewGraph(t, d)
	ran := 0
	Must[*gg.Node](t)(child.AddHostNode(func() { ran++ }))
	OK(t, child.RetainUserObject(o.UserObject, 1, gg.GraphUserObjectMove))
	parent := NewGraph(t, d)
	node := Must[*gg.Node](t)(parent.AddChildGraphNode(child))
	OK(t, child.Destroy())
	o.Alive(t, "with the embedded graph's reference left")
	// The reference is the child's, not the parent's.
	IsCode(t, parent.ReleaseUserObject(o.UserObject, 1), gg.ErrInvalidValue)
	e := Must[*gg.Exec](t)(parent.Instantiate(0))
	OK(t, parent.DestroyNode(node))
	o.Alive(t, "with the executable graph's reference left")
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
	if ran != 1 {
		t.Fatalf("the child graph ran %d times", ran)
	}
	OK(t, e.Destroy())
	o.Wait(t)
	OK(t, parent.Destroy())
}

// A destructor may not call the API: every call fails with ErrNotPermitted
// instead of blocking the thread that runs destructors. A goroutine it
// starts may.
func userObjectDestructorCallsAPI(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	other := NewTracked(t, d, 1, nil)
	g := NewGraph(t, d)
	var errs []error
	var fromGoroutine error
	o := NewTracked(t, d, 1, func() {
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
	OK(t, o.Release(1))
	o.Wait(t)
	for i, err := range errs {
		if err == nil {
			t.Errorf("call %d from the destructor succeeded", i)
			continue
		}
		IsCode(t, err, gg.ErrNotPermitted)
	}
	OK(t, fromGoroutine)
	// The refused calls changed nothing.
	other.Alive(t, "after a refused Release")
	OK(t, other.Release(1))
	other.Wait(t)
	OK(t, g.Destroy())
}
