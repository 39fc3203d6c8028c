package host

import (
	"testing"
	"time"
)

func TestSemaphore(t *testing.T) {
	var s Semaphore
	if cur, ok := s.Signal(0); ok || cur != 0 {
		t.Fatalf("Signal(0) on a new semaphore = %d, %v; want a refusal", cur, ok)
	}
	fired := 0
	if !s.OnReach(3, func() { fired++ }) {
		t.Fatal("OnReach(3) at 0 arranged nothing")
	}
	s.Raise(2) // not far enough
	if fired != 0 {
		t.Fatal("a waiter for 3 ran at 2")
	}
	if _, ok := s.Signal(5); !ok || fired != 1 || s.Value() != 5 {
		t.Fatalf("Signal(5): fired %d, value %d", fired, s.Value())
	}
	s.Raise(4) // never lowers
	if s.Value() != 5 || s.OnReach(5, func() {}) {
		t.Fatal("the value went down, or a reached value arranged a wait")
	}

	done := make(chan struct{})
	go func() { time.Sleep(10 * time.Millisecond); s.Raise(7) }()
	if reached, _ := s.Wait(7, done); !reached {
		t.Fatal("Wait(7) did not see the raise")
	}
	close(done)
	if reached, destroyed := s.Wait(9, done); reached || destroyed {
		t.Fatal("Wait with done closed reached 9")
	}

	if !s.Acquire() {
		t.Fatal("Acquire on a live semaphore")
	}
	if users, already := s.TryDestroy(); users != 1 || already {
		t.Fatalf("Destroy with a user: %d users, already %v", users, already)
	}
	s.Release()
	if users, already := s.TryDestroy(); users != 0 || already || !s.Destroyed() {
		t.Fatal("Destroy with no users failed")
	}
	if _, already := s.TryDestroy(); !already {
		t.Fatal("a second Destroy did not say so")
	}
	if s.Acquire() {
		t.Fatal("Acquire on a destroyed semaphore")
	}
	if _, destroyed := s.Wait(100, nil); !destroyed {
		t.Fatal("Wait on a destroyed semaphore")
	}
}
