package osthread

import (
	"runtime"
	"testing"
)

func TestIDIsPerLockedThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, b := ID(), ID()
	if a != b || a <= 0 {
		t.Fatalf("ID() = %d then %d on one locked thread", a, b)
	}
	other := make(chan int64)
	go func() {
		runtime.LockOSThread() // a thread of its own, never returned to the pool
		other <- ID()
	}()
	if o := <-other; o == a {
		t.Fatalf("two locked goroutines share ID %d", a)
	}
}
