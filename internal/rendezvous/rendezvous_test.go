package rendezvous

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestEveryRankGetsThePayload(t *testing.T) {
	for _, world := range []int{1, 2, 8} {
		ln := listen(t)
		addr := ln.Addr().String()
		var id [Payload]byte
		for i := range id {
			id[i] = byte(i*7 + world)
		}
		deadline := time.Now().Add(10 * time.Second)
		got := make([][Payload]byte, world)
		errs := make([]error, world)
		var wg sync.WaitGroup
		for r := 1; r < world; r++ {
			wg.Go(func() { got[r], errs[r] = Fetch(addr, r, world, deadline) })
		}
		errs[0] = Serve(ln, world, id, deadline)
		wg.Wait()
		for r := 1; r < world; r++ {
			if errs[r] != nil || got[r] != id {
				t.Fatalf("world %d, rank %d: %v, payload match %v", world, r, errs[r], got[r] == id)
			}
		}
		if errs[0] != nil {
			t.Fatalf("world %d, rank 0: %v", world, errs[0])
		}
	}
}

// A rank that dials before rank 0 listens keeps trying.
func TestFetchBeforeServe(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	deadline := time.Now().Add(10 * time.Second)
	var id [Payload]byte
	id[0] = 42
	done := make(chan error, 1)
	go func() {
		got, err := Fetch(addr, 1, 2, deadline)
		if err == nil && got != id {
			err = errors.New("wrong payload")
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	if err := Serve(ln2, 2, id, deadline); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestMissingRankNamed(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	deadline := time.Now().Add(300 * time.Millisecond)
	go Fetch(addr, 2, 4, deadline)
	err := Serve(ln, 4, [Payload]byte{}, deadline)
	if !errors.Is(err, ErrTimeout) || !contains(err.Error(), "ranks [1 3] of 4 never joined") {
		t.Fatalf("got %v", err)
	}
}

func TestMismatchRefused(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	deadline := time.Now().Add(5 * time.Second)
	serveErr := make(chan error, 1)
	go func() { serveErr <- Serve(ln, 2, [Payload]byte{}, time.Now().Add(500*time.Millisecond)) }()
	if _, err := Fetch(addr, 1, 3, deadline); !errors.Is(err, ErrMismatch) {
		t.Fatalf("world size disagreement: %v", err)
	}
	if err := <-serveErr; !errors.Is(err, ErrTimeout) || !contains(err.Error(), "rank 1 of 3") {
		t.Fatalf("rank 0: %v", err)
	}
	// Nothing listening: the deadline ends the dialling.
	ln2 := listen(t)
	addr2 := ln2.Addr().String()
	ln2.Close()
	start := time.Now()
	if _, err := Fetch(addr2, 1, 2, time.Now().Add(200*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("no rank 0: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("Fetch overran its deadline: %v", time.Since(start))
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
