package host

import (
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Semaphore is the host backend's external semaphore: a timeline
// semaphore, a 64-bit value that only grows, which stream operations,
// graph nodes and Go code signal and wait on. It counts its users (work
// issued that signals or waits on it, Go waits in progress) so that
// Destroy can refuse while any remain. The zero value is a semaphore at 0;
// its methods are safe for concurrent use.
type Semaphore struct {
	mu        sync.Mutex
	value     uint64
	waiters   []*semWaiter
	users     int
	destroyed bool
}

// semWaiter is a wait for value >= target; fn runs once, without the lock,
// on the goroutine that raises the value. It must not block.
type semWaiter struct {
	target uint64
	fn     func()
}

// Destroyed reports whether Destroy succeeded.
func (s *Semaphore) Destroyed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.destroyed
}

// Value is the current value.
func (s *Semaphore) Value() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value
}

// Signal sets the value to v, as a host-side signal of a Vulkan timeline
// semaphore does: v must exceed the current value. It returns the value it
// found and whether it signalled (false: destroyed, or v too small).
func (s *Semaphore) Signal(v uint64) (cur uint64, ok bool) {
	s.mu.Lock()
	if s.destroyed || v <= s.value {
		cur := s.value
		s.mu.Unlock()
		return cur, false
	}
	fire := s.raiseLocked(v)
	s.mu.Unlock()
	run(fire)
	return v, true
}

// Raise is a signal from a stream or a graph: the value becomes at least v
// (a value that does not exceed the current one changes nothing).
func (s *Semaphore) Raise(v uint64) {
	s.mu.Lock()
	fire := s.raiseLocked(v)
	s.mu.Unlock()
	run(fire)
}

// OnReach arranges for fn to run once the value reaches v, and reports
// false, arranging nothing, if it already has.
func (s *Semaphore) OnReach(v uint64, fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.value >= v {
		return false
	}
	s.waiters = append(s.waiters, &semWaiter{target: v, fn: fn})
	return true
}

// Wait waits, as a user of the semaphore, until the value reaches v or
// done is closed. It reports reached=false with destroyed=true if the
// semaphore is destroyed, and reached=false if done closed first.
func (s *Semaphore) Wait(v uint64, done <-chan struct{}) (reached, destroyed bool) {
	ch := make(chan struct{})
	w := &semWaiter{target: v, fn: func() { close(ch) }}
	s.mu.Lock()
	if s.destroyed {
		s.mu.Unlock()
		return false, true
	}
	if s.value >= v {
		s.mu.Unlock()
		return true, false
	}
	s.waiters = append(s.waiters, w)
	s.users++
	s.mu.Unlock()
	select {
	case <-ch:
		s.Release()
		return true, false
	case <-done:
	}
	s.mu.Lock()
	pending := s.removeLocked(w)
	s.users--
	s.mu.Unlock()
	return !pending, false // not pending: reached as done closed
}

// Acquire counts a user of the semaphore (work just issued on it), unless
// it is destroyed.
func (s *Semaphore) Acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return false
	}
	s.users++
	return true
}

// Release ends a use counted by Acquire.
func (s *Semaphore) Release() {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
}

// Destroy destroys the semaphore if nothing uses it (backend.ExternalSemaphore).
func (s *Semaphore) Destroy() error {
	switch users, already := s.TryDestroy(); {
	case already:
		return backend.Errorf(backend.ErrInvalidResourceHandle, "external semaphore is destroyed")
	case users > 0:
		return backend.Errorf(backend.ErrNotPermitted, "%d operations still use the semaphore", users)
	}
	return nil
}

// TryDestroy destroys the semaphore if nothing uses it. It returns the
// number of users that prevented it (0 on success), and already=true if it
// was destroyed before.
func (s *Semaphore) TryDestroy() (users int, already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.destroyed:
		return 0, true
	case s.users > 0:
		return s.users, false
	}
	s.destroyed = true
	return 0, false
}

// raiseLocked sets the value to at least v and returns the waiters it
// satisfies, removed from the list.
func (s *Semaphore) raiseLocked(v uint64) []*semWaiter {
	if v > s.value {
		s.value = v
	}
	var fire []*semWaiter
	keep := s.waiters[:0]
	for _, w := range s.waiters {
		if w.target <= s.value {
			fire = append(fire, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(s.waiters[len(keep):])
	s.waiters = keep
	return fire
}

// removeLocked removes w and reports whether it was still waiting.
func (s *Semaphore) removeLocked(w *semWaiter) bool {
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return true
		}
	}
	return false
}

func run(ws []*semWaiter) {
	for _, w := range ws {
		w.fn()
	}
}
