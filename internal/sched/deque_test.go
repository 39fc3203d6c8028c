package sched

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Every node pushed is taken exactly once, by the owner's pops (one or a
// batch at a time) or by thieves, while three thieves steal.
func TestDequeTakesEveryNodeOnce(t *testing.T) {
	const n = 20000
	q := newDeque(64)
	var taken [n]atomic.Int32
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() || q.size() > 0 {
				if x := q.steal(); x >= 0 {
					taken[x].Add(1)
				}
			}
		}()
	}
	for i := int32(0); i < n; {
		// Push a few, pop one: the deque stays short and wraps around.
		for k := 0; k < 3 && i < n; k++ {
			if q.push(i) {
				i++
			} else if x := q.pop(); x >= 0 {
				taken[x].Add(1)
			}
		}
		if i%2 == 0 {
			if x := q.pop(); x >= 0 {
				taken[x].Add(1)
			}
		} else {
			var batch [4]int32
			for _, x := range batch[:q.popN(batch[:])] {
				taken[x].Add(1)
			}
		}
	}
	for x := q.pop(); x >= 0; x = q.pop() {
		taken[x].Add(1)
	}
	stop.Store(true)
	wg.Wait()
	for i := range taken {
		if c := taken[i].Load(); c != 1 {
			t.Fatalf("node %d taken %d times", i, c)
		}
	}
}

// A full deque refuses a push; pop is newest first, steal oldest first.
func TestDequeOrderAndCapacity(t *testing.T) {
	q := newDeque(8)
	for i := int32(0); i < 8; i++ {
		if !q.push(i) {
			t.Fatalf("push %d of 8 refused", i)
		}
	}
	if q.push(8) {
		t.Fatal("a full deque took a ninth node")
	}
	if x := q.pop(); x != 7 {
		t.Fatalf("pop = %d, want 7", x)
	}
	if x := q.steal(); x != 0 {
		t.Fatalf("steal = %d, want 0", x)
	}
	for want := int32(6); want >= 1; want-- {
		if x := q.pop(); x != want {
			t.Fatalf("pop = %d, want %d", x, want)
		}
	}
	if x := q.pop(); x != empty {
		t.Fatalf("pop of an empty deque = %d", x)
	}
	if x := q.steal(); x != empty {
		t.Fatalf("steal from an empty deque = %d", x)
	}
}
