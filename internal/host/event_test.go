package host

import (
	"sync"
	"testing"
	"time"
)

func TestEventWaitsForTheRecordIssued(t *testing.T) {
	var e Event
	if seq, done, _ := e.Latest(); seq != 0 || !done {
		t.Fatalf("a new event: latest %d, done %v; want 0, true", seq, done)
	}
	e.Wait(e.Target()) // never recorded: returns at once
	r1, r2 := e.Issue(), e.Issue()
	if r1 != 1 || r2 != 2 || e.Target() != 2 {
		t.Fatalf("records %d, %d, target %d", r1, r2, e.Target())
	}
	var wg sync.WaitGroup
	woke := make(chan uint64, 2)
	for _, seq := range []uint64{r1, r2} {
		wg.Add(1)
		go func() { defer wg.Done(); e.Wait(seq); woke <- seq }()
	}
	e.Complete(r1)
	if got := <-woke; got != r1 {
		t.Fatalf("record %d woke first, want %d", got, r1)
	}
	select {
	case seq := <-woke:
		t.Fatalf("a wait for record %d returned before it completed", seq)
	case <-time.After(20 * time.Millisecond):
	}
	before := time.Now()
	e.Complete(r2)
	wg.Wait()
	if seq, done, at := e.Latest(); seq != 2 || !done || at.Before(before) {
		t.Fatalf("latest %d, done %v at %v", seq, done, at)
	}
	e.Complete(r1) // late, out of order: changes nothing
	if _, _, at := e.Latest(); at.Before(before) {
		t.Fatal("an earlier record moved the completion time back")
	}
}
