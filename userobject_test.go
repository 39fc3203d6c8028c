package gpugraph_test

import (
	"sync"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

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
	o.Wait(t)
	o2.Wait(t)
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
	o.Wait(t)
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
		o.Wait(t)
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
	next.Wait(t)
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
	o.Wait(t)
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
	o.Alive(t, "with the Exec's reference left")
	ok(t, e.Destroy())
	o.Wait(t)
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
	o.Wait(t)
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
	o.Alive(t, "with the graph's reference left")
	ok(t, g.Destroy())
	o.Wait(t)
}
