package gpugraph

import (
	"errors"
	"testing"
)

// counts returns o's live references, those of them graphs and executable
// graphs own, and those waiting for a launch.
func (o *UserObject) counts() [3]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return [3]int64{o.refs, o.held, o.pending}
}

func uoOpen(t *testing.T) *Device {
	t.Helper()
	d, err := Open("host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func uoMust[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func uoOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCounts(t *testing.T, when string, o *UserObject, refs, held, pending int64) {
	t.Helper()
	if got, want := o.counts(), [3]int64{refs, held, pending}; got != want {
		t.Fatalf("%s: (refs, held, pending) = %v, want %v", when, got, want)
	}
}

// blocker is a graph whose launch waits until release is called.
func blocker(t *testing.T, d *Device) (*Exec, func()) {
	t.Helper()
	gate := make(chan struct{})
	g := uoMust[*Graph](t)(d.NewGraph())
	uoMust[*Node](t)(g.AddHostNode(func() { <-gate }))
	e := uoMust[*Exec](t)(g.Instantiate(0))
	return e, func() { close(gate) }
}

func TestUserObjectCounts(t *testing.T) {
	d := uoOpen(t)
	o := uoMust[*UserObject](t)(d.NewUserObject(func() {}, 2, UserObjectNoDestructorSync))
	wantCounts(t, "created", o, 2, 0, 0)
	g := uoMust[*Graph](t)(d.NewGraph())
	uoMust[*Node](t)(g.AddEmptyNode())
	uoOK(t, g.RetainUserObject(o, 1, GraphUserObjectMove))
	wantCounts(t, "moved 1", o, 2, 1, 0)
	uoOK(t, g.RetainUserObject(o, 2, 0))
	wantCounts(t, "retained 2 more", o, 4, 3, 0)

	// Failed calls change nothing.
	for _, err := range []error{
		o.Release(2), g.RetainUserObject(o, 2, GraphUserObjectMove), g.ReleaseUserObject(o, 4), o.Retain(0),
	} {
		if !errors.Is(err, ErrInvalidValue) {
			t.Fatalf("got %v, want ErrInvalidValue", err)
		}
	}
	wantCounts(t, "after refused calls", o, 4, 3, 0)

	c := uoMust[*Graph](t)(g.Clone())
	wantCounts(t, "cloned (3 copies)", o, 7, 6, 0)
	parent := uoMust[*Graph](t)(d.NewGraph())
	uoOK(t, parent.RetainUserObject(o, 1, 0))
	node := uoMust[*Node](t)(parent.AddChildGraphNode(g))
	wantCounts(t, "embedded (3 more) and the parent's own 1", o, 11, 10, 0)

	s := uoMust[*Stream](t)(d.NewStream())
	b, release := blocker(t, d)
	uoOK(t, b.Launch(s))
	e := uoMust[*Exec](t)(parent.Instantiate(0))
	wantCounts(t, "instantiated: the parent's 1 and its child's 3", o, 15, 14, 0)
	uoOK(t, e.Launch(s)) // queued behind the blocker
	uoOK(t, e.Destroy())
	wantCounts(t, "Exec destroyed with a launch queued", o, 11, 10, 4)
	release()
	uoOK(t, s.Synchronize())
	wantCounts(t, "after the launch", o, 11, 10, 0)

	uoOK(t, parent.DestroyNode(node))
	wantCounts(t, "child node destroyed", o, 8, 7, 0)
	uoOK(t, parent.Destroy())
	uoOK(t, c.Destroy())
	uoOK(t, g.ReleaseUserObject(o, 3))
	wantCounts(t, "graphs gone", o, 1, 0, 0)
	b.Destroy()
	uoOK(t, o.Release(1))
	wantCounts(t, "released", o, 0, 0, 0)
}

// The hooks of whole-graph and per-node updates.
func TestExecReplaceUserRefs(t *testing.T) {
	d := uoOpen(t)
	mk := func() *UserObject {
		return uoMust[*UserObject](t)(d.NewUserObject(func() {}, 1, UserObjectNoDestructorSync))
	}
	top, inner, deep, fresh := mk(), mk(), mk(), mk()

	// parent (top) -> child node n (inner) -> child node m (deep)
	dg := uoMust[*Graph](t)(d.NewGraph())
	uoMust[*Node](t)(dg.AddEmptyNode())
	uoOK(t, dg.RetainUserObject(deep, 1, 0))
	ig := uoMust[*Graph](t)(d.NewGraph())
	uoMust[*Node](t)(ig.AddChildGraphNode(dg))
	uoOK(t, ig.RetainUserObject(inner, 1, 0))
	parent := uoMust[*Graph](t)(d.NewGraph())
	uoOK(t, parent.RetainUserObject(top, 1, 0))
	n := uoMust[*Node](t)(parent.AddChildGraphNode(ig))
	e := uoMust[*Exec](t)(parent.Instantiate(0))
	// Caller 1 each; parent: top; parent's embedded ig: inner, and its
	// embedded dg: deep; the Exec one of each; ig, dg themselves one more.
	wantCounts(t, "top", top, 3, 2, 0)
	wantCounts(t, "inner", inner, 4, 3, 0)
	wantCounts(t, "deep", deep, 5, 4, 0)

	// Per-node update of n with a graph holding fresh, while a launch of e
	// is queued: inner's and deep's Exec references wait for it.
	s := uoMust[*Stream](t)(d.NewStream())
	b, release := blocker(t, d)
	uoOK(t, b.Launch(s))
	uoOK(t, e.Launch(s))
	fg := uoMust[*Graph](t)(d.NewGraph())
	uoMust[*Node](t)(fg.AddChildGraphNode(dg)) // deep again, one level down
	uoOK(t, fg.RetainUserObject(fresh, 2, 0))
	e.replaceChildUserRefs(n, fg)
	wantCounts(t, "top after replacing n", top, 3, 2, 0)
	wantCounts(t, "inner after replacing n", inner, 3, 2, 1)
	wantCounts(t, "deep after replacing n", deep, 6, 5, 1) // fg's embedded copy + the Exec's new one
	wantCounts(t, "fresh after replacing n", fresh, 5, 4, 0)
	release()
	uoOK(t, s.Synchronize())
	wantCounts(t, "inner after the launch", inner, 3, 2, 0)
	wantCounts(t, "deep after the launch", deep, 6, 5, 0)

	// Replacing again finds the groups under n, at any depth.
	empty := uoMust[*Graph](t)(d.NewGraph())
	e.replaceChildUserRefs(n, empty)
	wantCounts(t, "fresh after emptying n", fresh, 3, 2, 0)
	wantCounts(t, "deep after emptying n", deep, 5, 4, 0)
	wantCounts(t, "top after emptying n", top, 3, 2, 0)

	// Whole-graph update with a graph whose child node pairs with n.
	wg := uoMust[*Graph](t)(d.NewGraph())
	wn := uoMust[*Node](t)(wg.AddChildGraphNode(fg)) // its embedded graph holds fresh x2
	e.replaceUserRefs(wg, func(x *Node) *Node {
		if x == wn {
			return n
		}
		return nil
	})
	wantCounts(t, "top after the whole-graph update", top, 2, 1, 0)
	wantCounts(t, "fresh after the whole-graph update", fresh, 7, 6, 0) // fg 2, wg's embedded 2, Exec 2
	e.replaceChildUserRefs(n, empty)
	wantCounts(t, "fresh after emptying the paired node", fresh, 5, 4, 0)
	uoOK(t, e.Destroy())
	// The caller's, dg's, and those of the graphs embedded in ig, parent's
	// ig, fg and wg's fg: the Exec holds none.
	wantCounts(t, "deep after Exec.Destroy", deep, 6, 5, 0)
	wantCounts(t, "top after Exec.Destroy", top, 2, 1, 0)
}

// BenchmarkDeviceCheck is the cost every API call pays for the destructor
// check (one atomic load while no destructor runs).
func BenchmarkDeviceCheck(b *testing.B) {
	d, err := Open("host")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.Run("idle", func(b *testing.B) {
		for b.Loop() {
			if d.check("bench") != nil {
				b.Fatal("check failed")
			}
		}
	})
	// While some destructor runs, calls from other goroutines look up
	// their thread.
	b.Run("destructor running", func(b *testing.B) {
		gate, in := make(chan struct{}), make(chan struct{})
		o, _ := d.NewUserObject(func() { close(in); <-gate }, 1, UserObjectNoDestructorSync)
		o.Release(1)
		<-in
		defer close(gate)
		for b.Loop() {
			if d.check("bench") != nil {
				b.Fatal("check failed")
			}
		}
	})
}
