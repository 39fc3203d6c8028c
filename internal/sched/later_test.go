package sched

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A deferred node holds no worker: with no helpers at all, the owner runs
// the independent node that finishes the deferred one, and the deferred
// node's successor runs after it.
func TestLaterFreesTheWorker(t *testing.T) {
	// 0: deferred root; 1: independent root that completes 0; 2: after 0.
	preds := [][]int32{nil, nil, {0}}
	var r *Runner
	var order []int32
	r = NewRunner(NewDAG(preds), NewPool(0), func(i int32) {
		order = append(order, i)
		switch i {
		case 0:
			r.Later(0)
		case 1:
			r.Done(0)
		}
	})
	r.EnableLater()
	for rep := 0; rep < 3; rep++ {
		order = order[:0]
		done := make(chan struct{})
		go func() { r.Run(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("run did not finish: the deferred node held the only worker")
		}
		if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
			t.Fatalf("order %v, want [0 1 2]", order)
		}
	}
}

// Done from another goroutine, while the owner sleeps with nothing to do,
// wakes it; deferred sinks end the run only when done.
func TestLaterDoneFromOutside(t *testing.T) {
	// 0 -> 1 (deferred) -> 2, and 3 a deferred sink.
	preds := [][]int32{nil, {0}, {1}, nil}
	var r *Runner
	var ran [4]atomic.Int32
	release := make(chan int32, 4)
	r = NewRunner(NewDAG(preds), NewPool(1), func(i int32) {
		ran[i].Add(1)
		if i == 1 || i == 3 {
			r.Later(i)
			release <- i
		}
	})
	r.EnableLater()
	for rep := int32(1); rep <= 3; rep++ {
		done := make(chan struct{})
		go func() { r.Run(); close(done) }()
		for k := 0; k < 2; k++ {
			i := <-release
			select {
			case <-done:
				t.Fatalf("run finished before node %d was done", i)
			case <-time.After(time.Millisecond):
			}
			r.Done(i)
		}
		<-done
		for i := range ran {
			if ran[i].Load() != rep {
				t.Fatalf("node %d ran %d times in %d runs", i, ran[i].Load(), rep)
			}
		}
	}
}

// Random DAGs with random deferred nodes, finished by other goroutines,
// keep dependency order.
func TestLaterRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	pool := NewPool(2)
	for trial := 0; trial < 30; trial++ {
		n := 1 + rng.Intn(200)
		preds := make([][]int32, n)
		later := make([]bool, n)
		for i := range preds {
			later[i] = rng.Intn(4) == 0
			for j := 0; j < i; j++ {
				if rng.Intn(i) < 2 {
					preds[i] = append(preds[i], int32(j))
				}
			}
		}
		var clock atomic.Int64
		start := make([]int64, n)
		finish := make([]int64, n)
		var wg sync.WaitGroup
		var r *Runner
		r = NewRunner(NewDAG(preds), pool, func(i int32) {
			start[i] = clock.Add(1)
			if !later[i] {
				finish[i] = clock.Add(1)
				return
			}
			r.Later(i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				finish[i] = clock.Add(1)
				r.Done(i)
			}()
		})
		r.EnableLater()
		for rep := 0; rep < 2; rep++ {
			r.Run()
			wg.Wait()
			for i := range preds {
				for _, p := range preds[i] {
					if finish[p] >= start[i] {
						t.Fatalf("trial %d: node %d started before dependency %d finished", trial, i, p)
					}
				}
			}
		}
	}
}
