package gpugraph

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/osthread"
)

// UserObjectFlags modify NewUserObject (cudaUserObjectFlags).
type UserObjectFlags uint

// UserObjectNoDestructorSync acknowledges that the destructor cannot be
// waited for through the API (cudaUserObjectNoDestructorSync). CUDA defines
// no other flag and requires this one: without it NewUserObject fails with
// ErrInvalidValue.
const UserObjectNoDestructorSync UserObjectFlags = 1

// GraphUserObjectFlags modify Graph.RetainUserObject
// (cudaUserObjectRetainFlags).
type GraphUserObjectFlags uint

// GraphUserObjectMove transfers references the caller owns to the graph
// instead of creating new ones: the total count does not change
// (cudaGraphUserObjectMove).
const GraphUserObjectMove GraphUserObjectFlags = 1

// maxRefCount is the largest count one call takes: CUDA's counts must be
// nonzero and not larger than INT_MAX.
const maxRefCount = math.MaxInt32

// UserObject (cudaUserObject_t) ties the lifetime of a resource that
// asynchronous work uses to that work: a UserObject is a reference count and
// a destructor. References are owned by the caller, by graphs and by
// executable graphs; the destructor runs once, when the last reference is
// released.
//
//   - Graph.RetainUserObject gives a graph references, new ones or (with
//     GraphUserObjectMove) the caller's own; Graph.ReleaseUserObject takes
//     them back.
//   - Clone copies every reference the graph owns, with the same
//     multiplicity; a child graph node's graph owns its own references
//     (they belong to the child, not the parent); Instantiate copies the
//     references of the graph and of every graph embedded in it into the
//     Exec.
//   - Graph.Destroy releases the graph's references. Exec.Destroy releases
//     the Exec's, but if a launch of it is still queued or running, only
//     once that launch has finished.
//   - The destructor runs asynchronously, on a goroutine of the device,
//     never inside an API call. There is no way to wait for it: signal
//     from it (close a channel) if you need to. It may not call the API:
//     every call made from a destructor fails with ErrNotPermitted, as
//     CUDA forbids it; hand such work to another goroutine.
//
// As in CUDA, releasing references you do not own is an error: the caller
// owns the references it created or retained and has not released or moved
// into a graph. Unlike CUDA, where it is undefined behaviour, over-releasing
// is refused here with ErrInvalidValue, changing nothing. Once all the
// references are released (those of destroyed executable graphs still
// waiting for a launch aside), the handle is dead and every call on it fails
// with ErrInvalidValue.
//
// Its methods are safe for concurrent use.
type UserObject struct {
	dev     *Device
	destroy func()
	be      backend.UserObject // the driver's object (backend.UserObjects); nil where this package counts

	mu      sync.Mutex
	refs    int64 // live references: the caller's, the graphs' and the live executable graphs'
	held    int64 // of refs, those owned by graphs and executable graphs
	pending int64 // references of destroyed executable graphs, released when their launch ends (host)
	done    bool  // the destructor is scheduled (host)
}

// userObjectState is a device's part: its destructor queue, drained by one
// goroutine at a time, in order.
type userObjectState struct {
	used    atomic.Bool // a user object was made on the device: graphs may hold references
	mu      sync.Mutex
	queue   []func()
	running bool
	live    map[*UserObject]bool // objects this package counts, not yet destroyed
}

// NewUserObject creates a user object with the destructor destroy and
// initialRefs references, owned by the caller (cudaUserObjectCreate). flags
// must be UserObjectNoDestructorSync.
func (d *Device) NewUserObject(destroy func(), initialRefs int, flags UserObjectFlags) (*UserObject, error) {
	const op = "Device.NewUserObject"
	if err := d.check(op); err != nil {
		return nil, err
	}
	if destroy == nil {
		return nil, newErr(op, ErrInvalidValue, "nil destructor")
	}
	if err := checkRefCount(op, initialRefs); err != nil {
		return nil, err
	}
	o := &UserObject{dev: d, destroy: destroy, refs: int64(initialRefs)}
	if uo, ok := d.be.(backend.UserObjects); ok {
		// The driver checks the flags (and decides what a missing
		// NoDestructorSync means); where this package keeps the objects,
		// it mirrors that below.
		if err := d.newDriverUserObject(uo, op, o, initialRefs, flags); err != nil {
			return nil, err
		}
	} else if flags != UserObjectNoDestructorSync {
		return nil, newErr(op, ErrInvalidValue, "flags %#x: UserObjectNoDestructorSync is required and the only flag", uint(flags))
	} else {
		d.uobj.mu.Lock()
		if d.uobj.live == nil {
			d.uobj.live = map[*UserObject]bool{}
		}
		d.uobj.live[o] = true
		d.uobj.mu.Unlock()
	}
	d.uobj.used.Store(true)
	return o, nil
}

func checkRefCount(opName string, n int) error {
	if n < 1 || n > maxRefCount {
		return newErr(opName, ErrInvalidValue, "count %d: must be nonzero and at most %d", n, maxRefCount)
	}
	return nil
}

// checkLocked validates o for op while o.mu is held.
func (o *UserObject) checkLocked(opName string) error {
	if o.refs == 0 {
		return newErr(opName, ErrInvalidValue, "all references to the user object are released")
	}
	return nil
}

// lockFor checks a call on o that takes n references and locks o.mu; on
// error o is left unlocked.
func (o *UserObject) lockFor(opName string, n int) error {
	if o == nil {
		return newErr(opName, ErrInvalidValue, "nil user object")
	}
	if err := o.dev.check(opName); err != nil {
		return err
	}
	if err := checkRefCount(opName, n); err != nil {
		return err
	}
	o.mu.Lock()
	if err := o.checkLocked(opName); err != nil {
		o.mu.Unlock()
		return err
	}
	return nil
}

// Retain adds n references, owned by the caller (cudaUserObjectRetain).
func (o *UserObject) Retain(n int) error {
	const op = "UserObject.Retain"
	if err := o.lockFor(op, n); err != nil {
		return err
	}
	defer o.mu.Unlock()
	if o.be != nil {
		if err := o.driverRetain(op, n); err != nil {
			return err
		}
	}
	o.refs += int64(n)
	return nil
}

// Release releases n references the caller owns (cudaUserObjectRelease).
// The destructor is scheduled if no reference is left.
func (o *UserObject) Release(n int) error {
	const op = "UserObject.Release"
	if err := o.lockFor(op, n); err != nil {
		return err
	}
	defer o.mu.Unlock()
	if own := o.refs - o.held; int64(n) > own {
		return newErr(op, ErrInvalidValue, "releasing %d references; the caller owns %d (graphs own the other %d)", n, own, o.held)
	}
	if o.be != nil {
		if err := o.driverRelease(op, n); err != nil {
			return err
		}
	}
	o.refs -= int64(n)
	o.settledLocked()
	return nil
}

// RetainUserObject gives the graph n references to o
// (cudaGraphRetainUserObject): new ones, or with GraphUserObjectMove n of
// the caller's own.
func (g *Graph) RetainUserObject(o *UserObject, n int, flags GraphUserObjectFlags) error {
	const op = "Graph.RetainUserObject"
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if err := g.checkUserObject(op, o, n); err != nil {
		return err
	}
	if o.be == nil && flags&^GraphUserObjectMove != 0 {
		return newErr(op, ErrInvalidValue, "unknown flags %#x", uint(flags))
	}
	move := flags&GraphUserObjectMove != 0
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.checkLocked(op); err != nil {
		return err
	}
	if own := o.refs - o.held; move && int64(n) > own {
		return newErr(op, ErrInvalidValue, "moving %d references; the caller owns %d", n, own)
	}
	if o.be != nil {
		if _, ok := g.be.(graphUserObjects); !ok {
			return newErr(op, ErrNotSupported, "this embedded graph has no native handle on the cuda backend")
		}
		if err := g.driverRetainUserObject(op, o, n, flags); err != nil {
			return err
		}
	}
	if !move {
		o.refs += int64(n)
	}
	o.held += int64(n)
	if g.uobjs == nil {
		g.uobjs = map[*UserObject]int64{}
	}
	g.uobjs[o] += int64(n)
	return nil
}

// ReleaseUserObject releases n of the references the graph owns to o
// (cudaGraphReleaseUserObject). Releasing more than the graph owns fails
// with ErrInvalidValue.
func (g *Graph) ReleaseUserObject(o *UserObject, n int) error {
	const op = "Graph.ReleaseUserObject"
	if err := g.lock(op); err != nil {
		return err
	}
	defer g.mu.Unlock()
	if err := g.checkUserObject(op, o, n); err != nil {
		return err
	}
	if have := g.uobjs[o]; int64(n) > have {
		return newErr(op, ErrInvalidValue, "releasing %d references; the graph owns %d", n, have)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.be != nil {
		if _, ok := g.be.(graphUserObjects); !ok {
			return newErr(op, ErrNotSupported, "this embedded graph has no native handle on the cuda backend")
		}
		if err := g.driverReleaseUserObject(op, o, n); err != nil {
			return err
		}
	}
	if g.uobjs[o] -= int64(n); g.uobjs[o] == 0 {
		delete(g.uobjs, o)
	}
	o.refs -= int64(n)
	o.held -= int64(n)
	o.settledLocked()
	return nil
}

func (g *Graph) checkUserObject(opName string, o *UserObject, n int) error {
	switch {
	case o == nil:
		return newErr(opName, ErrInvalidValue, "nil user object")
	case o.dev != g.dev:
		return newErr(opName, ErrInvalidValue, "user object belongs to another device")
	}
	return checkRefCount(opName, n)
}

// settledLocked schedules the destructor once no reference is left, live or
// pending. On cuda the driver counts for itself and calls back instead.
func (o *UserObject) settledLocked() {
	if o.refs != 0 || o.pending != 0 || o.done || o.be != nil {
		return
	}
	o.done = true
	s := &o.dev.uobj
	s.mu.Lock()
	delete(s.live, o)
	s.mu.Unlock()
	o.dev.scheduleDestructor(o.destroy)
}

// releaseAll ends every user object this package counts for the device,
// at Close: the references of the caller, of graphs and of executable
// graphs all die with the device, so each destructor runs. (The driver's
// objects are the backend's to release.)
func (s *userObjectState) releaseAll() {
	s.mu.Lock()
	objs := make([]*UserObject, 0, len(s.live))
	for o := range s.live {
		objs = append(objs, o)
	}
	s.mu.Unlock()
	for _, o := range objs {
		o.mu.Lock()
		o.refs, o.held, o.pending = 0, 0, 0
		o.settledLocked()
		o.mu.Unlock()
	}
}

// Graph-owned references.

// takeUserObjectsLocked copies g's references for a new owner (a clone or an
// executable graph): it counts them on the objects and returns them. g must
// be locked; its references keep the objects alive.
func (g *Graph) takeUserObjectsLocked() map[*UserObject]int64 {
	if len(g.uobjs) == 0 {
		return nil
	}
	refs := make(map[*UserObject]int64, len(g.uobjs))
	for o, n := range g.uobjs {
		o.mu.Lock()
		o.refs += n
		o.held += n
		o.mu.Unlock()
		refs[o] = n
	}
	return refs
}

// takeUserObjectsDeepLocked is takeUserObjectsLocked for g and every graph
// embedded in it, summed; g must be locked.
func (g *Graph) takeUserObjectsDeepLocked(into map[*UserObject]int64) map[*UserObject]int64 {
	for o, n := range g.takeUserObjectsLocked() {
		if into == nil {
			into = map[*UserObject]int64{}
		}
		into[o] += n
	}
	for _, n := range g.nodes {
		if n.child != nil {
			n.child.mu.Lock()
			into = n.child.takeUserObjectsDeepLocked(into)
			n.child.mu.Unlock()
		}
	}
	return into
}

// releaseUserObjectsLocked releases the references g owns; g must be
// locked. It is idempotent, so racing releases of one graph are harmless.
func (g *Graph) releaseUserObjectsLocked() {
	refs := g.uobjs
	g.uobjs = nil
	releaseRefs(refs)
}

// releaseUserObjects releases the references of g and of the graphs
// embedded in it.
func (g *Graph) releaseUserObjects() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releaseUserObjectsLocked()
	for _, n := range g.nodes {
		if n.child != nil {
			n.child.releaseUserObjects()
		}
	}
}

// destroyEmbedded destroys the graph of a child graph node that is destroyed
// or given another graph: the graph belongs to the node, and its references
// go with it.
func (g *Graph) destroyEmbedded() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.destroyLocked()
	g.mu.Unlock()
}

// releaseIfOrphan releases the references of a clone made for a child graph
// node, unless the node now holds it: the call that made it failed.
func releaseIfOrphan(c *Graph) {
	if p := c.parent; p != nil {
		p.g.mu.Lock()
		kept := !p.dead && contains(p.g.nodes, p) && p.child == c
		p.g.mu.Unlock()
		if kept {
			return
		}
	}
	c.releaseUserObjects()
}

// copyUserObjectsNative gives a clone made by the driver (cudaClone) the
// references the driver copied: g's own, and those of its child graph nodes'
// graphs. Graphs embedded deeper have no Go view there, so their references
// are counted on the embedded graph that has one. g must be locked.
func (c *Graph) copyUserObjectsNative(g *Graph) {
	c.uobjs = g.takeUserObjectsLocked()
	for _, n := range g.nodes {
		if n.child == nil {
			continue
		}
		if m := c.clonedBy[n]; m != nil && m.child != nil {
			n.child.mu.Lock()
			m.child.uobjs = n.child.takeUserObjectsDeepLocked(nil)
			n.child.mu.Unlock()
		}
	}
}

func releaseRefs(refs map[*UserObject]int64) {
	for o, n := range refs {
		o.mu.Lock()
		o.refs -= n
		o.held -= n
		o.settledLocked()
		o.mu.Unlock()
	}
}

// Exec-owned references.

// execUserRefs are the references an executable graph owns, grouped by the
// graph they were copied from, so that updating one child graph node
// replaces the references of that child only.
type execUserRefs struct {
	has    atomic.Bool // groups is not empty: Destroy looks at nothing else
	mu     sync.Mutex
	groups map[*Node]*refGroup // by child graph node; nil: the instantiated graph itself
}

type refGroup struct {
	path []*Node // the keys of the child graph nodes enclosing this one, outermost first
	refs map[*UserObject]int64
}

// takeUserRefs copies into e the references of g and of every graph
// embedded in it (Instantiate).
func (e *Exec) takeUserRefs(g *Graph) {
	if !g.dev.uobj.used.Load() {
		return
	}
	u := &e.users
	u.mu.Lock()
	defer u.mu.Unlock()
	u.takeLocked(g, nil, nil, nil)
}

// takeLocked copies g's references as group key, within path, and those of
// its embedded graphs as groups of their own, keyed by pair(node) (by the
// node itself where pair is nil or says nil).
func (u *execUserRefs) takeLocked(g *Graph, key *Node, path []*Node, pair func(*Node) *Node) {
	g.mu.Lock()
	refs := g.takeUserObjectsLocked()
	var kids []*Node
	for _, n := range g.nodes {
		if n.child != nil {
			kids = append(kids, n)
		}
	}
	g.mu.Unlock()
	if refs != nil {
		if u.groups == nil {
			u.groups = map[*Node]*refGroup{}
		}
		u.groups[key] = &refGroup{path: path, refs: refs}
		u.has.Store(true)
	}
	if key != nil {
		path = append(slices.Clip(path), key)
	}
	for _, n := range kids {
		k := n
		if pair != nil {
			if m := pair(n); m != nil {
				k = m
			}
		}
		u.takeLocked(n.child, k, path, pair)
	}
}

// replaceUserRefs is the whole-graph update's part (Exec.Update): e takes
// copies of the references of from and of the graphs embedded in it, and
// releases those it held, after the launches of e issued so far have
// finished. pair maps a child graph node of from (at any depth) to the node
// of the graph e was instantiated from that it updates, so that a later
// replaceChildUserRefs finds it by that node; nil means none is needed.
// Call it without holding locks of graphs or of e.
func (e *Exec) replaceUserRefs(from *Graph, pair func(*Node) *Node) {
	u := &e.users
	u.mu.Lock()
	defer u.mu.Unlock()
	old := u.groups
	u.groups = nil
	if from.dev.uobj.used.Load() {
		u.takeLocked(from, nil, nil, pair)
	}
	u.retireLocked(e, old)
}

// replaceChildUserRefs is the per-node update's part for child graph node n
// (Exec.SetParams with a new graph, cudaGraphExecChildGraphNodeSetParams):
// the references that came from n's graph, and from graphs embedded in it,
// are replaced by copies of those of from and its embedded graphs. n is the
// node of the graph e was instantiated from (the key pair gave it). The old
// references are released after the launches of e issued so far.
func (e *Exec) replaceChildUserRefs(n *Node, from *Graph) {
	u := &e.users
	u.mu.Lock()
	defer u.mu.Unlock()
	path := u.pathOfLocked(n)
	old := map[*Node]*refGroup{}
	for k, grp := range u.groups {
		if k == n || slices.Contains(grp.path, n) {
			old[k] = grp
			delete(u.groups, k)
		}
	}
	if from.dev.uobj.used.Load() {
		u.takeLocked(from, n, path, nil)
	}
	u.retireLocked(e, old)
}

// pathOfLocked returns the keys of the child graph nodes enclosing n, as
// recorded when its references (or those of a graph inside it) were taken;
// none for a node of the instantiated graph itself.
func (u *execUserRefs) pathOfLocked(n *Node) []*Node {
	if grp := u.groups[n]; grp != nil {
		return grp.path
	}
	for _, grp := range u.groups {
		if i := slices.Index(grp.path, n); i >= 0 {
			return grp.path[:i:i]
		}
	}
	return nil
}

// destroyUserRefs releases e's references (Exec.Destroy), after its
// launches have finished.
func (e *Exec) destroyUserRefs() {
	u := &e.users
	if !u.has.Load() {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	old := u.groups
	u.groups = nil
	u.retireLocked(e, old)
}

// retireLocked releases groups of references that e no longer owns. The
// objects forget them at once (the handle may die), but on the host backend
// the destructor waits until the launches of e issued so far have finished
// (the driver does the same on cuda).
func (u *execUserRefs) retireLocked(e *Exec, groups map[*Node]*refGroup) {
	if len(groups) > 0 {
		refs := map[*UserObject]int64{}
		for _, grp := range groups {
			for o, n := range grp.refs {
				refs[o] += n
			}
		}
		// The objects forget them at once; the destructor waits until the
		// launches of e issued so far have finished (pending).
		for o, n := range refs {
			o.mu.Lock()
			o.refs -= n
			o.held -= n
			o.pending += n
			o.mu.Unlock()
		}
		e.be.AfterLaunches(func() {
			for o, n := range refs {
				o.mu.Lock()
				o.pending -= n
				o.settledLocked()
				o.mu.Unlock()
			}
		})
	}
	if len(u.groups) == 0 {
		u.has.Store(false)
	}
}

// Destructors.

// scheduleDestructor queues fn for the device's destructor goroutine,
// starting it if none is running. It never blocks (the driver calls it from
// its own threads, inside API calls).
func (d *Device) scheduleDestructor(fn func()) {
	s := &d.uobj
	s.mu.Lock()
	s.queue = append(s.queue, fn)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go d.runDestructors()
	}
}

// runDestructors runs queued destructors in order until the queue is empty.
// The goroutine is locked to its thread and registered, so that API calls
// made by a destructor are recognised (notInDestructor) and refused.
func (d *Device) runDestructors() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	id := enterDestructor()
	defer leaveDestructor(id)
	s := &d.uobj
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		fn := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		d.runDestructor(fn)
	}
}

func (d *Device) runDestructor(fn func()) {
	defer func() {
		if p := recover(); p != nil {
			// As for a host function: the device's state is unknown.
			d.fail(newErr("user object destructor", ErrLaunchFailure, "panic: %v", p))
		}
	}()
	fn()
}

// Destructor goroutines, process-wide: the API refuses calls from them.
var (
	destructorsRunning atomic.Int32 // destructor goroutines alive; the fast path reads only this
	destructorMu       sync.Mutex
	destructorThreads  = map[int64]int{} // threadID -> goroutines registered on it
)

func enterDestructor() int64 {
	id := osthread.ID() // destructor goroutines are locked to their thread
	destructorMu.Lock()
	destructorThreads[id]++
	destructorMu.Unlock()
	destructorsRunning.Add(1)
	return id
}

func leaveDestructor(id int64) {
	destructorsRunning.Add(-1)
	destructorMu.Lock()
	if destructorThreads[id]--; destructorThreads[id] == 0 {
		delete(destructorThreads, id)
	}
	destructorMu.Unlock()
}

// notInDestructor fails op if it is called by a user object destructor:
// CUDA forbids API calls there (they could block the thread that runs
// destructors). The common case costs one atomic load.
func notInDestructor(opName string) error {
	if destructorsRunning.Load() == 0 {
		return nil
	}
	return destructorCall(opName)
}

func destructorCall(opName string) error {
	id := osthread.ID() // destructor goroutines are locked to their thread
	destructorMu.Lock()
	_, in := destructorThreads[id]
	destructorMu.Unlock()
	if in {
		return newErr(opName, ErrNotPermitted, "API calls are not permitted in a user object destructor")
	}
	return nil
}

// User objects the driver keeps (backend.UserObjects, cuda).

// cudaNewUserObject creates o's native object (cuUserObjectCreate); the
// driver checks refs and flags. The driver calls the destructor on a
// thread of its own, possibly inside an API call, so the backend only
// queues it for the device's destructor goroutine, where it runs as on the
// host backend.
func (d *Device) newDriverUserObject(uo backend.UserObjects, opName string, o *UserObject, refs int, flags UserObjectFlags) error {
	be, err := uo.NewUserObject(func() { d.scheduleDestructor(o.destroy) }, refs, uint(flags))
	if err != nil {
		return backendErr(opName, err)
	}
	o.be = be
	return nil
}

// cudaRetain is cuUserObjectRetain.
func (o *UserObject) driverRetain(opName string, n int) error {
	return backendErr(opName, o.be.Retain(n))
}

// cudaRelease is cuUserObjectRelease.
func (o *UserObject) driverRelease(opName string, n int) error {
	return backendErr(opName, o.be.Release(n))
}

// driverRetainUserObject is cuGraphRetainUserObject.
func (g *Graph) driverRetainUserObject(opName string, o *UserObject, n int, flags GraphUserObjectFlags) error {
	return backendErr(opName, g.be.(graphUserObjects).RetainUserObject(o.be, n, uint(flags)))
}

// driverReleaseUserObject is cuGraphReleaseUserObject.
func (g *Graph) driverReleaseUserObject(opName string, o *UserObject, n int) error {
	return backendErr(opName, g.be.(graphUserObjects).ReleaseUserObject(o.be, n))
}

// graphUserObjects is implemented by graphs whose driver keeps user object
// references (cuGraphRetainUserObject).
type graphUserObjects interface {
	RetainUserObject(o backend.UserObject, n int, flags uint) error
	ReleaseUserObject(o backend.UserObject, n int) error
}
