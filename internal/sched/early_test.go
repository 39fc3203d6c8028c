package sched

import (
	"math/rand"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// An early successor starts while its source still runs, once the source
// triggers: the source waits for it to start.
func TestRunnerEarlyOverlap(t *testing.T) {
	pool := NewPool(runtime.GOMAXPROCS(0) - 1)
	// 0 -early-> 1 -> 2; 0 -> 2
	d := NewDAGEarly([][]int32{nil, nil, {0, 1}}, []EarlyEdge{{From: 0, To: 1, Port: 1}})
	var r *Runner
	started := make(chan struct{}, 1)
	var overlapped, order atomic.Int32
	r = NewRunner(d, pool, func(i int32) {
		switch i {
		case 0:
			r.Trigger(0, 1)
			r.Trigger(0, 1) // a second trigger does nothing
			select {
			case <-started:
				overlapped.Add(1)
			case <-time.After(10 * time.Second):
			}
		case 1:
			started <- struct{}{}
		case 2:
			order.Add(1)
		}
	})
	for rep := 1; rep <= 20; rep++ {
		r.Run()
		if overlapped.Load() != int32(rep) || order.Load() != int32(rep) {
			t.Fatalf("run %d: overlapped %d times, node 2 ran %d times", rep, overlapped.Load(), order.Load())
		}
	}
}

// A source that never triggers releases its early successors when it
// finishes; a source whose successors are all early still ends the run
// only when it is done.
func TestRunnerEarlyWithoutTrigger(t *testing.T) {
	pool := NewPool(2)
	d := NewDAGEarly([][]int32{nil, nil}, []EarlyEdge{{From: 0, To: 1, Port: 1}})
	var done0 atomic.Bool
	var sawDone atomic.Bool
	r := NewRunner(d, pool, func(i int32) {
		if i == 0 {
			time.Sleep(time.Millisecond) // give a wrongly released successor time to run
			done0.Store(true)
			return
		}
		sawDone.Store(done0.Load())
	})
	for rep := 0; rep < 10; rep++ {
		done0.Store(false)
		r.Run()
		if !sawDone.Load() {
			t.Fatal("early successor ran before its untriggered source finished")
		}
	}
	// Source 0 triggers, then runs on: Run returns only after 0 is done.
	var r2 *Runner
	r2 = NewRunner(d, pool, func(i int32) {
		if i == 0 {
			done0.Store(false)
			r2.Trigger(0, 1)
			time.Sleep(time.Millisecond)
			done0.Store(true)
		}
	})
	for rep := 0; rep < 10; rep++ {
		r2.Run()
		if !done0.Load() {
			t.Fatal("Run returned before a source with only early successors finished")
		}
	}
}

// Random DAGs with early edges on several ports: every node runs once per
// run, after its ordinary dependencies have finished and after its early
// sources have started.
func TestRunnerEarlyRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	pool := NewPool(3)
	for trial := 0; trial < 40; trial++ {
		n := 2 + rng.Intn(200)
		preds := make([][]int32, n)
		var early []EarlyEdge
		for i := 1; i < n; i++ {
			for j := 0; j < i; j++ {
				if rng.Intn(i) < 2 {
					if rng.Intn(3) == 0 {
						early = append(early, EarlyEdge{From: int32(j), To: int32(i), Port: uint8(1 + rng.Intn(2))})
					} else {
						preds[i] = append(preds[i], int32(j))
					}
				}
			}
		}
		var clock atomic.Int64
		start := make([]atomic.Int64, n)
		end := make([]atomic.Int64, n)
		runs := make([]atomic.Int32, n)
		var r *Runner
		r = NewRunner(NewDAGEarly(preds, early), pool, func(i int32) {
			start[i].Store(clock.Add(1))
			runs[i].Add(1)
			if i%2 == 0 {
				r.Trigger(i, 1)
			}
			r.Trigger(i, 2)
			end[i].Store(clock.Add(1))
		})
		for rep := int32(1); rep <= 3; rep++ {
			r.Run()
			for i := range preds {
				if runs[i].Load() != rep {
					t.Fatalf("trial %d: node %d ran %d times in %d runs", trial, i, runs[i].Load(), rep)
				}
				for _, p := range preds[i] {
					if end[p].Load() >= start[i].Load() {
						t.Fatalf("trial %d: node %d started before dependency %d finished", trial, i, p)
					}
				}
			}
			for _, e := range early {
				if start[e.From].Load() >= start[e.To].Load() {
					t.Fatalf("trial %d: node %d started before its early source %d", trial, e.To, e.From)
				}
			}
		}
	}
}

func TestRunnerEarlyNoAllocs(t *testing.T) {
	preds := make([][]int32, 100)
	var early []EarlyEdge
	for i := 1; i < len(preds); i++ {
		if i%3 == 0 {
			early = append(early, EarlyEdge{From: int32(i - 1), To: int32(i), Port: 1})
		} else {
			preds[i] = []int32{int32(i - 1)}
		}
	}
	var r *Runner
	r = NewRunner(NewDAGEarly(preds, early), NewPool(1), func(i int32) { r.Trigger(i, 1) })
	if a := testing.AllocsPerRun(100, r.Run); a != 0 {
		t.Fatalf("%v allocations per run", a)
	}
}
