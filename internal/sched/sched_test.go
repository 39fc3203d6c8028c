package sched

import (
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func build(preds [][]int32) *DAG { return NewDAG(preds) }

func TestRunnerOrderAndCompleteness(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	pool := NewPool(3)
	for trial := 0; trial < 50; trial++ {
		n := 1 + rng.Intn(500)
		preds := make([][]int32, n)
		for i := 1; i < n; i++ {
			for j := 0; j < i; j++ {
				if rng.Intn(i) < 2 {
					preds[i] = append(preds[i], int32(j))
				}
			}
		}
		var clock atomic.Int64
		stamp := make([]int64, n)
		runs := make([]atomic.Int32, n)
		r := NewRunner(build(preds), pool, func(i int32) {
			runs[i].Add(1)
			stamp[i] = clock.Add(1)
		})
		for rep := int32(1); rep <= 3; rep++ {
			r.Run()
			for i := range preds {
				if runs[i].Load() != rep {
					t.Fatalf("trial %d: node %d ran %d times in %d runs", trial, i, runs[i].Load(), rep)
				}
				for _, p := range preds[i] {
					if stamp[p] >= stamp[i] {
						t.Fatalf("trial %d: node %d before dependency %d", trial, i, p)
					}
				}
			}
		}
	}
}

func TestRunnerNoAllocs(t *testing.T) {
	preds := make([][]int32, 200)
	for i := 1; i < len(preds); i++ {
		preds[i] = []int32{int32((i - 1) / 2)}
	}
	r := NewRunner(build(preds), NewPool(1), func(int32) {})
	if a := testing.AllocsPerRun(100, r.Run); a != 0 {
		t.Fatalf("%v allocations per run", a)
	}
}

func TestPoolForCoversRangeAndRecoversPanic(t *testing.T) {
	p := NewPool(2)
	for _, n := range []int{0, 1, 2, 7, 1000} {
		seen := make([]atomic.Int32, n)
		if err := p.For(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n=%d: index %d ran %d times", n, i, seen[i].Load())
			}
		}
	}
	_, _, line, _ := runtime.Caller(0)
	err := p.For(100, func(lo, hi int) {
		if lo <= 50 && 50 < hi {
			panic("x") // line+3
		}
	})
	if pp, ok := err.(*Panicked); !ok || pp.Value != "x" || pp.Line != line+3 || !strings.HasSuffix(pp.File, "sched_test.go") {
		t.Fatalf("For returned %#v, want the panic value and its line %d", err, line+3)
	}
}

// A node that panics counts as finished: OnPanic sees it, its successors
// still run, and the next run runs it again.
func TestRunnerOnPanic(t *testing.T) {
	for _, helpers := range []int{0, 2} {
		preds := [][]int32{{}, {0}, {0}, {1, 2}, {3}}
		var ran [5]atomic.Int32
		var panicked []int32
		r := NewRunner(build(preds), NewPool(helpers), func(i int32) {
			ran[i].Add(1)
			if i == 1 || i == 4 {
				panic(i)
			}
		})
		r.OnPanic(func(node int32, p any) {
			if p.(int32) != node {
				t.Errorf("node %d panicked with %v", node, p)
			}
			panicked = append(panicked, node) // nodes 1 and 4 are ordered by 3
		})
		for rep := int32(1); rep <= 3; rep++ {
			r.Run()
			for i := range ran {
				if ran[i].Load() != rep {
					t.Fatalf("%d helpers: node %d ran %d times in %d runs", helpers, i, ran[i].Load(), rep)
				}
			}
		}
		if len(panicked) != 6 {
			t.Fatalf("%d helpers: OnPanic saw %v, want nodes 1 and 4 three times", helpers, panicked)
		}
	}
}

// Ready nodes reach an idle worker while the worker that made them ready
// runs something long: siblings that wait for each other (up to a timeout)
// meet. A worker that kept its ready successors to itself (a private stack
// with helpers in the pool) would run every pair but the first one after
// the other, always. CUDA does not promise that siblings run at the same
// time, and neither does the runner: a helper that is just leaving may miss
// a push, so the test asks for most pairs, not all.
func TestRunnerHandsOverWork(t *testing.T) {
	// root -> (a, b), a -> (a', b'), ... four levels deep.
	preds := [][]int32{{}}
	other := map[int32]int32{}
	parent := int32(0)
	for level := 0; level < 4; level++ {
		a, b := int32(len(preds)), int32(len(preds)+1)
		preds = append(preds, []int32{parent}, []int32{parent})
		other[a], other[b] = b, a
		parent = a
	}
	arrived := make([]chan struct{}, len(preds))
	for i := range arrived {
		arrived[i] = make(chan struct{}, 1)
	}
	var missed atomic.Int32
	r := NewRunner(build(preds), NewPool(1), func(i int32) {
		o, ok := other[i]
		if !ok {
			return
		}
		arrived[o] <- struct{}{}
		select {
		case <-arrived[i]:
		case <-time.After(100 * time.Millisecond):
			missed.Add(1) // the partner runs later, finds this one's signal and goes on
		}
	})
	const runs = 10
	for rep := 0; rep < runs; rep++ {
		r.Run()
		for _, c := range arrived { // the signals of pairs that missed each other
			select {
			case <-c:
			default:
			}
		}
	}
	if pairs := int32(runs * len(other) / 2); missed.Load() > pairs/4 {
		t.Fatalf("%d of %d pairs of siblings missed each other: ready work stayed with a busy worker", missed.Load(), pairs)
	}
}

// Helpers are recruited for nodes worth one and not for nodes that take
// nanoseconds: where each node of a chain makes two ready, sleeping nodes
// run side by side, while empty ones, once their grain is known, run on
// the owner alone.
func TestRunnerRecruitsByGrain(t *testing.T) {
	// A spine of 100 nodes, each with a leaf, which comes first among its
	// successors: the worker runs the leaf and leaves the next spine node on
	// the shared stack, alone (a leaf after it would pile up there).
	preds := [][]int32{{}}
	for i := 0; i < 100; i++ {
		spine := int32(len(preds) - 1)
		if i == 0 {
			spine = 0
		}
		preds = append(preds, []int32{spine}, []int32{spine}) // leaf, next spine node
	}
	for _, tc := range []struct {
		name     string
		work     func()
		parallel bool
	}{
		{"sleeping nodes", func() { time.Sleep(20 * time.Microsecond) }, true},
		{"empty nodes", func() {}, false},
	} {
		var running, most atomic.Int32
		pool := NewPool(3)
		for deadline := time.Now().Add(5 * time.Second); pool.idle.Load() < 3 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // the helpers can be recruited
		}
		r := NewRunner(build(preds), pool, func(int32) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			tc.work()
			running.Add(-1)
		})
		var recruited int64
		for rep := 0; rep < 20; rep++ {
			if rep == 10 { // the runs after the grain is known
				most.Store(0)
				recruited = r.recruited.Load()
			}
			r.Run()
		}
		recruited = r.recruited.Load() - recruited
		if !tc.parallel && raceEnabled {
			t.Logf("%s: %d helpers recruited in 10 runs (not checked under the race detector, which makes empty nodes slow)", tc.name, recruited)
			continue
		}
		// A preempted sample or run makes an empty node look slow for a
		// while: some recruiting is tolerated, not a helper per run (a rule
		// recruiting whenever work waits takes all three, every run).
		if tc.parallel && most.Load() < 2 || !tc.parallel && recruited >= 10 {
			t.Errorf("%s: at most %d nodes ran at once in the last runs, %d helpers recruited (grain %d ns)", tc.name, most.Load(), recruited, r.grain.Load())
		}
	}
}

// wavefront is the DAG of an n×n grid where node (i, j) depends on (i-1, j)
// and (i, j-1): never more than n nodes ready at once, and two at most made
// ready by any one node.
func wavefront(n int) [][]int32 {
	preds := make([][]int32, n*n)
	for i := range n {
		for j := range n {
			var p []int32
			if i > 0 {
				p = append(p, int32((i-1)*n+j))
			}
			if j > 0 {
				p = append(p, int32(i*n+j-1))
			}
			preds[i*n+j] = p
		}
	}
	return preds
}

// A wavefront of nodes longer than a wake-up runs on several workers: the
// few nodes ready at a time never add up to much waiting work, but each one
// pays for waking a helper, and none may wait while helpers sleep. The test
// counts the most bodies running at once (no timing is asserted: the nodes
// spin for 2 µs, longer than a wake-up costs, and there are 1024 of them a
// run).
func TestRunnerWavefrontOfLongNodesUsesHelpers(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two threads")
	}
	pool := NewPool(3)
	for deadline := time.Now().Add(5 * time.Second); pool.idle.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	var running, most atomic.Int32
	r := NewRunner(build(wavefront(32)), pool, func(int32) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		for t0 := nanotime(); nanotime()-t0 < 2000; {
		}
		running.Add(-1)
	})
	for rep := 0; rep < 8; rep++ {
		if rep == 3 { // the runs after the grain is known
			most.Store(0)
		}
		r.Run()
	}
	if most.Load() < 2 {
		t.Fatalf("a 32×32 wavefront of 2 µs nodes ran one node at a time with 3 helpers idle (grain %d ns, %d helpers recruited)",
			r.grain.Load(), r.recruited.Load())
	}
	t.Logf("at most %d nodes at once, grain %d ns, %d helpers recruited in 8 runs", most.Load(), r.grain.Load(), r.recruited.Load())
}

// A fan-out of many long nodes spreads over the pool: with three helpers,
// at least three bodies run at once. The nodes wait for each other (up to a
// bound) rather than spin for a fixed time, so the check holds on a machine
// with fewer cores than workers: it counts the most bodies running at once,
// and asserts no timing.
func TestRunnerFanOutOfLongNodesRunsConcurrently(t *testing.T) {
	const width = 64
	preds := make([][]int32, width+2)
	for i := 1; i <= width; i++ {
		preds[i] = []int32{0}
		preds[width+1] = append(preds[width+1], int32(i))
	}
	pool := NewPool(3)
	for deadline := time.Now().Add(5 * time.Second); pool.idle.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	var running, most atomic.Int32
	r := NewRunner(build(preds), pool, func(i int32) {
		if i == 0 || i == width+1 {
			return
		}
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		// Long, and long enough for the others to arrive: stay until three
		// run at once or 2 ms have passed.
		for t0 := nanotime(); most.Load() < 3 && nanotime()-t0 < 2e6; {
			runtime.Gosched()
		}
		running.Add(-1)
	})
	for rep := 0; rep < 5 && most.Load() < 3; rep++ {
		r.Run()
	}
	if most.Load() < 3 {
		t.Fatalf("a fan-out of %d long nodes ran at most %d at once with 3 helpers (grain %d ns, %d helpers recruited)",
			width, most.Load(), r.grain.Load(), r.recruited.Load())
	}
}
