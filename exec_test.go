package gpugraph_test

import (
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/bench"
)

// TestLaunchRespectsDependencies runs random DAGs whose host nodes record
// when they ran, and checks that every node ran once, after all its
// dependencies.
func TestLaunchRespectsDependencies(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 20; trial++ {
		g := graph(t, d)
		n := 1 + rng.Intn(300)
		var clock atomic.Int64
		stamp := make([]int64, n)
		runs := make([]atomic.Int32, n)
		nodes := make([]*gg.Node, n)
		deps := make([][]int, n)
		for i := range nodes {
			for j := 0; j < i; j++ {
				if rng.Intn(i+1) < 2 {
					deps[i] = append(deps[i], j)
				}
			}
			var ds []*gg.Node
			for _, j := range deps[i] {
				ds = append(ds, nodes[j])
			}
			nodes[i] = must[*gg.Node](t)(g.AddHostNode(func() {
				runs[i].Add(1)
				stamp[i] = clock.Add(1)
			}, ds...))
		}
		ex := must[*gg.Exec](t)(g.Instantiate(0))
		for launch := 1; launch <= 3; launch++ {
			ok(t, ex.Launch(s))
			ok(t, s.Synchronize())
			for i := range nodes {
				if r := runs[i].Load(); r != int32(launch) {
					t.Fatalf("trial %d: node %d ran %d times after %d launches", trial, i, r, launch)
				}
				for _, j := range deps[i] {
					if stamp[j] >= stamp[i] {
						t.Fatalf("trial %d: node %d ran before its dependency %d", trial, i, j)
					}
				}
			}
		}
	}
}

func TestIndependentNodesRunInParallel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS >= 2")
	}
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	var c concurrency
	root := must[*gg.Node](t)(g.AddEmptyNode())
	for i := 0; i < 32; i++ {
		must[*gg.Node](t)(g.AddHostNode(c.enter, root))
	}
	ex := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, ex.Launch(s))
	ok(t, s.Synchronize())
	if c.max.Load() < 2 {
		t.Fatalf("at most %d independent nodes ran at once", c.max.Load())
	}
}

func TestLaunchesNeverOverlap(t *testing.T) {
	d := open(t)
	streams := []*gg.Stream{stream(t, d), stream(t, d), stream(t, d)}
	g := graph(t, d)
	var inside, overlaps, total atomic.Int32
	enter := must[*gg.Node](t)(g.AddHostNode(func() {
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		time.Sleep(100 * time.Microsecond)
	}))
	must[*gg.Node](t)(g.AddHostNode(func() { inside.Add(-1); total.Add(1) }, enter))
	ex := must[*gg.Exec](t)(g.Instantiate(0))
	for i := 0; i < 60; i++ {
		ok(t, ex.Launch(streams[i%len(streams)]))
	}
	ok(t, d.Synchronize())
	if overlaps.Load() != 0 || total.Load() != 60 {
		t.Fatalf("%d overlapping launches, %d completed", overlaps.Load(), total.Load())
	}
}

func TestStreamWorkWaitsForLaunch(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const n = 4096
	p := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: fill32, Grid: gg.Dim1(n / 256), Block: gg.Dim1(256), Args: []any{p, float32(3), n}}))
	must[*gg.Node](t)(g.AddHostNode(func() { time.Sleep(5 * time.Millisecond) }, a))
	ex := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, ex.Launch(s))
	out := make([]float32, n)
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(out), p)))
	ok(t, s.Synchronize())
	for i, v := range out {
		if v != 3 {
			t.Fatalf("out[%d] = %v: the copy ran before the graph finished", i, v)
		}
	}
}

// TestExecIsSnapshot: editing or destroying the graph after instantiation
// does not change the executable graph.
func TestExecIsSnapshot(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(4 * 64))
	g := graph(t, d)
	k := must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: fill32, Grid: one, Block: gg.Dim1(64), Args: []any{p, float32(1), 64}}))
	ex := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, k.SetParams(gg.KernelParams{Kernel: fill32, Grid: one, Block: gg.Dim1(64), Args: []any{p, float32(2), 64}}))
	var ran atomic.Bool
	must[*gg.Node](t)(g.AddHostNode(func() { ran.Store(true) }, k))
	ok(t, ex.Launch(s))
	ok(t, s.Synchronize())
	if v := readF32(t, d, p, 64); v[0] != 1 || ran.Load() {
		t.Fatalf("exec saw later graph edits: value %v, new node ran %v", v[0], ran.Load())
	}
	ex2 := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, g.Destroy())
	ok(t, ex2.Launch(s))
	ok(t, ex.Launch(s))
	ok(t, s.Synchronize())
	if !ran.Load() {
		t.Fatal("second instantiation missed the added node")
	}
	ok(t, ex.Destroy())
	isCode(t, ex.Launch(s), gg.ErrInvalidResourceHandle)
	isCode(t, ex.Destroy(), gg.ErrInvalidResourceHandle)
}

func TestInstantiateValidation(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	t.Run("freed memory", func(t *testing.T) {
		g := graph(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(64))
		must[*gg.Node](t)(g.AddEmptyNode())
		bad := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(p, 0, 64)))
		ok(t, d.Free(p))
		_, err := g.Instantiate(0)
		isCode(t, err, gg.ErrInvalidValue)
		if err.(*gg.Error).Node != bad {
			t.Fatalf("error names %v, want %v", err.(*gg.Error).Node, bad)
		}
	})
	t.Run("destroyed event", func(t *testing.T) {
		g := graph(t, d)
		e := must[*gg.Event](t)(d.NewEvent(0))
		bad := must[*gg.Node](t)(g.AddEventRecordNode(e))
		ok(t, e.Destroy())
		_, err := g.Instantiate(0)
		isCode(t, err, gg.ErrInvalidResourceHandle)
		if err.(*gg.Error).Node != bad {
			t.Fatalf("error names %v", err.(*gg.Error).Node)
		}
	})
	t.Run("bad child graph", func(t *testing.T) {
		g := graph(t, d)
		child := graph(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(64))
		must[*gg.Node](t)(child.AddMemsetNode(gg.Memset8(p, 0, 64)))
		n := must[*gg.Node](t)(g.AddChildGraphNode(child))
		ok(t, d.Free(p))
		_, err := g.Instantiate(0)
		isCode(t, err, gg.ErrInvalidValue)
		emb := must[*gg.Graph](t)(n.ChildGraph())
		if err.(*gg.Error).Node.Graph() != emb {
			t.Fatalf("error names %v, not the node inside the child graph", err.(*gg.Error).Node)
		}
	})
	t.Run("unknown flags", func(t *testing.T) {
		_, err := graph(t, d).Instantiate(1 << 9)
		isCode(t, err, gg.ErrInvalidValue)
	})
	t.Run("stream of another device", func(t *testing.T) {
		ex := must[*gg.Exec](t)(graph(t, d).Instantiate(0))
		isCode(t, ex.Launch(stream(t, open(t))), gg.ErrInvalidValue)
		ok(t, ex.Launch(s)) // an empty graph launches
	})
	ok(t, s.Synchronize())
}

func TestChildGraphRunsInOrder(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	var mu sync.Mutex
	var order []string
	note := func(x string) func() { return func() { mu.Lock(); order = append(order, x); mu.Unlock() } }
	child := graph(t, d)
	c1 := must[*gg.Node](t)(child.AddHostNode(note("c1")))
	must[*gg.Node](t)(child.AddHostNode(note("c2"), c1))
	empty := graph(t, d)
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddHostNode(note("a")))
	b := must[*gg.Node](t)(g.AddChildGraphNode(child, a))
	e := must[*gg.Node](t)(g.AddChildGraphNode(empty, b))
	must[*gg.Node](t)(g.AddHostNode(note("z"), e))
	ex := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, ex.Launch(s))
	ok(t, s.Synchronize())
	if got := len(order); got != 4 || order[0] != "a" || order[1] != "c1" || order[2] != "c2" || order[3] != "z" {
		t.Fatalf("order %v", order)
	}
}

func TestEventNodes(t *testing.T) {
	d := open(t)
	a, b := stream(t, d), stream(t, d)
	done := must[*gg.Event](t)(d.NewEvent(0))
	ready := must[*gg.Event](t)(d.NewEvent(0))
	var mu sync.Mutex
	var order []string
	note := func(x string) func() { return func() { mu.Lock(); order = append(order, x); mu.Unlock() } }
	// The graph waits for `ready` (recorded in stream b), runs, records `done`.
	g := graph(t, d)
	w := must[*gg.Node](t)(g.AddEventWaitNode(ready))
	h := must[*gg.Node](t)(g.AddHostNode(note("graph"), w))
	must[*gg.Node](t)(g.AddEventRecordNode(done, h))
	ex := must[*gg.Exec](t)(g.Instantiate(0))

	release := make(chan struct{})
	ok(t, b.LaunchHostFunc(func() { <-release }))
	ok(t, b.LaunchHostFunc(note("b")))
	ok(t, b.Record(ready))
	ok(t, ex.Launch(a))
	ok(t, b.Wait(done)) // waits for the record made by this launch
	ok(t, b.LaunchHostFunc(note("after")))
	isCode(t, done.Query(), gg.ErrNotReady)
	close(release)
	ok(t, d.Synchronize())
	if len(order) != 3 || order[0] != "b" || order[1] != "graph" || order[2] != "after" {
		t.Fatalf("order %v", order)
	}
	ok(t, done.Query())
}

func TestGraphNodeFailureIsSticky(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	boom := &gg.Kernel{Name: "boom", Go: func(gg.Block, gg.Args) { panic("boom") }}
	bad := must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: boom, Grid: one, Block: one}))
	var after atomic.Bool
	must[*gg.Node](t)(g.AddHostNode(func() { after.Store(true) }, bad))
	ex := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, ex.Launch(s))
	err := s.Synchronize()
	isCode(t, err, gg.ErrLaunchFailure)
	if err.(*gg.Error).Node != bad {
		t.Fatalf("error names %v, want the failing node", err.(*gg.Error).Node)
	}
	if after.Load() {
		t.Fatal("a node after the failure ran")
	}
	isCode(t, ex.Launch(s), gg.ErrLaunchFailure)
}

// TestLaunchAllocationsIndependentOfSize: a launch allocates the same small
// amount for a 10-node and a 1000-node graph.
func TestLaunchAllocationsIndependentOfSize(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	allocs := map[int]float64{}
	for _, n := range []int{10, 1000} {
		g, _, err := bench.BuildGraph(d, bench.Shapes[3], n) // wavefront: fan-out and fan-in
		ok(t, err)
		ex := must[*gg.Exec](t)(g.Instantiate(0))
		allocs[n] = testing.AllocsPerRun(50, func() {
			ok(t, ex.Launch(s))
			ok(t, s.Synchronize())
		})
	}
	if allocs[1000] > allocs[10] || allocs[1000] > 4 {
		t.Fatalf("allocations per launch: %v", allocs)
	}
}
