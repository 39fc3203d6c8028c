package rendezvous

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

func testPayload(seed int) [Payload]byte {
	var id [Payload]byte
	for i := range id {
		id[i] = byte(i*7 + seed)
	}
	return id
}

// serve runs Serve in the background; its error comes on the channel.
func serve(t *testing.T, world int, token string, id [Payload]byte, deadline time.Time) (string, <-chan error) {
	t.Helper()
	ln := listen(t)
	done := make(chan error, 1)
	go func() { done <- Serve(ln, world, token, id, deadline) }()
	return ln.Addr().String(), done
}

// wait returns Serve's error, failing the test if it takes past limit.
func wait(t *testing.T, done <-chan error, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Serve still running after %v", limit)
		return nil
	}
}

// hello is a rank's version-2 hello.
func hello(token string, rank, world int) []byte {
	h := make([]byte, helloSize)
	copy(h, magic[:])
	h[4] = version
	binary.BigEndian.PutUint32(h[5:], uint32(int32(rank)))
	binary.BigEndian.PutUint32(h[9:], uint32(int32(world)))
	copy(h[13:], "0123456789abcdef")
	copy(h[helloMACAt:], mac([]byte(token), helloLabel, h[:helloMACAt]))
	return h
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestEveryRankGetsThePayload(t *testing.T) {
	for _, world := range []int{1, 2, 8} {
		for _, token := range []string{"", "a job's token"} {
			id := testPayload(world)
			deadline := time.Now().Add(4 * time.Second)
			addr, done := serve(t, world, token, id, deadline)
			got := make([][Payload]byte, world)
			errs := make([]error, world)
			var wg sync.WaitGroup
			for r := 1; r < world; r++ {
				wg.Go(func() { got[r], errs[r] = Fetch(addr, r, world, token, deadline) })
			}
			wg.Wait()
			for r := 1; r < world; r++ {
				if errs[r] != nil || got[r] != id {
					t.Fatalf("world %d, token %q, rank %d: %v, payload match %v", world, token, r, errs[r], got[r] == id)
				}
			}
			if err := wait(t, done, time.Second); err != nil {
				t.Fatalf("world %d, token %q, rank 0: %v", world, token, err)
			}
		}
	}
}

// A rank that dials before rank 0 listens keeps trying.
func TestFetchBeforeServe(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	deadline := time.Now().Add(4 * time.Second)
	id := testPayload(42)
	done := make(chan error, 1)
	go func() {
		got, err := Fetch(addr, 1, 2, "t", deadline)
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
	if err := Serve(ln2, 2, "t", id, deadline); err != nil {
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
	go Fetch(addr, 2, 4, "", deadline)
	err := Serve(ln, 4, "", [Payload]byte{}, deadline)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "ranks [1 3] of 4 never joined") {
		t.Fatalf("got %v", err)
	}
	// Nothing listening: the deadline ends the dialling.
	start := time.Now()
	if _, err := Fetch(addr, 1, 2, "", time.Now().Add(200*time.Millisecond)); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "could not reach rank 0") {
		t.Fatalf("no rank 0: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Fetch overran its deadline: %v", el)
	}
}

// TestRefusals: what rank 0 refuses, a typed error at once on the rank's
// side (not retried) and summed up in rank 0's error at the deadline.
func TestRefusals(t *testing.T) {
	const token = "job A"
	id := testPayload(1)
	start := time.Now()
	deadline := start.Add(time.Second)
	addr, done := serve(t, 3, token, id, deadline)
	if got, err := Fetch(addr, 1, 3, token, deadline); err != nil || got != id {
		t.Fatalf("rank 1: %v", err)
	}
	for _, tc := range []struct {
		name        string
		token       string
		rank, world int
		want        Refusal
	}{
		{"wrong token", "job B", 2, 3, RefusedToken},
		{"no token", "", 2, 3, RefusedToken},
		{"wrong world", token, 2, 4, RefusedWorld},
		{"rank 0", token, 0, 3, RefusedRank},
		{"rank = world", token, 3, 3, RefusedRank},
		{"rank > world", token, 7, 3, RefusedRank},
		{"negative rank", token, -1, 3, RefusedRank},
		{"duplicate rank", token, 1, 3, RefusedJoined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Fetch(addr, tc.rank, tc.world, tc.token, deadline)
			var re *RefusedError
			if !errors.As(err, &re) || re.Reason != tc.want || !errors.Is(err, ErrMismatch) {
				t.Fatalf("got %v, want a refusal: %v", err, tc.want)
			}
			if el := time.Since(start); el > 500*time.Millisecond {
				t.Fatalf("refused after %v: retried?", el)
			}
			t.Logf("%v", err)
		})
	}
	// Rank 2 never comes: rank 0's error names it and what it refused.
	err := wait(t, done, 3*time.Second)
	for _, want := range []string{"ranks [2] of 3 never joined", "2 with a wrong job token", "1 of another world size (127.0.0.1:", "rank 2 of 4, the job has 3)",
		"4 with a rank out of range (e.g. 127.0.0.1:", "rank 0 of 3, 127.0.0.1:", "rank 3 of 3)", "1 of a rank already joined"} {
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), want) {
			t.Fatalf("rank 0: %v\nwant it to say %q", err, want)
		}
	}
	t.Logf("rank 0: %v", err)
}

// TestRawRequests: what is not a version-2 hello is dropped, or answered
// with a refusal, at once; a real rank is served after.
func TestRawRequests(t *testing.T) {
	const token = "t"
	id := testPayload(2)
	deadline := time.Now().Add(3 * time.Second)
	addr, done := serve(t, 2, token, id, deadline)
	v1 := append(append(magic[:4:4], 0, 0, 0, 1), 0, 0, 0, 2) // version 1: magic, rank 1, world 2
	badMagic := hello(token, 1, 2)
	copy(badMagic, "HTTP")
	badVersion := hello(token, 1, 2)
	badVersion[4] = 9
	for _, tc := range []struct {
		name string
		send []byte
		want []byte // the answer; nil: closed without one
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), nil},
		{"short garbage then close", []byte{0xff, 0}, nil},
		{"nothing then close", nil, nil},
		{"wrong magic", badMagic, nil},
		{"half a hello then close", hello(token, 1, 2)[:30], nil},
		{"wrong version", badVersion, append([]byte("GGRV\x02\x01"), make([]byte, v1AnswerSize-headSize)...)},
		{"version 1", v1, append([]byte("GGRV\x02\x01"), make([]byte, v1AnswerSize-headSize)...)},
		{"wrong token", hello("u", 1, 2), []byte("GGRV\x02\x02")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			start := time.Now()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.name != "wrong version" && tc.name != "version 1" && tc.name != "wrong token" {
				c.(*net.TCPConn).CloseWrite()
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			got, err := io.ReadAll(c)
			if errors.Is(err, syscall.ECONNRESET) && tc.want == nil && len(got) == 0 {
				err = nil // closed with the request unread: a reset
			}
			if err != nil {
				t.Fatalf("%v (after %v)", err, time.Since(start))
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if tc.name == "version 1" && binary.BigEndian.Uint32(got) == 0 {
				t.Fatal("a version-1 rank would take the answer for its payload")
			}
			if el := time.Since(start); el > time.Second {
				t.Fatalf("answered after %v", el)
			}
		})
	}
	if got, err := Fetch(addr, 1, 2, token, deadline); err != nil || got != id {
		t.Fatalf("rank 1: %v", err)
	}
	if err := wait(t, done, time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestSilentClients: connections that say half a hello, or nothing, and
// stay open, do not hold the real ranks up.
func TestSilentClients(t *testing.T) {
	const token, world = "t", 4
	id := testPayload(3)
	deadline := time.Now().Add(4 * time.Second)
	addr, done := serve(t, world, token, id, deadline)
	for i := range 20 {
		c := dial(t, addr)
		if i%2 == 0 {
			if _, err := c.Write(hello(token, 1, world)[:30]); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(50 * time.Millisecond) // rank 0 has them all
	errs, took := fetchAll(addr, world, token, id, deadline)
	for r := 1; r < world; r++ {
		if errs[r] != nil || took[r] > time.Second {
			t.Fatalf("rank %d: %v after %v, want served within 1s", r, errs[r], took[r])
		}
	}
	if err := wait(t, done, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("3 ranks served within %v beside 20 silent connections", max(took[1], took[2], took[3]).Round(time.Millisecond))
}

// fetchAll fetches the payload as ranks 1 to world-1 at once: each rank's
// error (a payload other than want is one) and how long after the call it
// had its answer.
func fetchAll(addr string, world int, token string, want [Payload]byte, deadline time.Time) (errs []error, took []time.Duration) {
	start := time.Now()
	errs, took = make([]error, world), make([]time.Duration, world)
	var wg sync.WaitGroup
	for r := 1; r < world; r++ {
		wg.Go(func() {
			var got [Payload]byte
			got, errs[r] = Fetch(addr, r, world, token, deadline)
			if errs[r] == nil && got != want {
				errs[r] = errors.New("wrong payload")
			}
			took[r] = time.Since(start)
		})
	}
	wg.Wait()
	return errs, took
}

// TestFlood: 200 connections at once, garbage, silent and refused, while
// 7 real ranks join: every one gets the payload and rank 0 returns ok.
func TestFlood(t *testing.T) {
	const token, world = "t", 8
	id := testPayload(4)
	start := time.Now()
	deadline := start.Add(4 * time.Second)
	addr, done := serve(t, world, token, id, deadline)
	var junk, dialled sync.WaitGroup
	stop := make(chan struct{})
	dialled.Add(200)
	for i := range 200 {
		junk.Go(func() {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			dialled.Done()
			if err != nil {
				return // rank 0's backlog full
			}
			defer c.Close()
			// 40 silent ones at most: the limit is 64 at once.
			switch i % 10 {
			case 0, 1, 2, 3, 4, 5: // garbage
				c.Write(bytes.Repeat([]byte{byte(i)}, 5+i%70))
			case 6: // silent
			case 7, 8: // another job, another world, a rank out of range, a rank that never acks
				c.Write(hello([]string{"u", token, token, token}[i%4], 1+i%4*3, world+i%2))
			case 9: // half a hello, then silence
				c.Write(hello(token, 1, world)[:i%helloSize])
			}
			select {
			case <-stop:
			case <-time.After(5 * time.Second):
			}
		})
	}
	dialled.Wait() // the junk comes first, and stays
	errs, _ := fetchAll(addr, world, token, id, deadline)
	err := wait(t, done, 5*time.Second)
	el := time.Since(start)
	close(stop)
	junk.Wait()
	for r := 1; r < world; r++ {
		if errs[r] != nil {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
	if err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	if el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
	t.Logf("7 ranks served beside 200 junk connections in %v", el.Round(time.Millisecond))
}

// TestBusyClosedAtOnce: past maxConns at once, connections are closed as
// soon as accepted; once some go, a real rank is served.
func TestBusyClosedAtOnce(t *testing.T) {
	const token = "t"
	id := testPayload(5)
	deadline := time.Now().Add(4 * time.Second)
	addr, done := serve(t, 2, token, id, deadline)
	conns := make([]net.Conn, maxConns+10)
	for i := range conns {
		conns[i] = dial(t, addr)
	}
	start := time.Now()
	var closed atomic.Int32
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err == io.EOF {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := closed.Load(); n < 10 {
		t.Fatalf("%d of %d connections closed within 500ms, want at least 10", n, len(conns))
	}
	t.Logf("%d of %d closed at once (%v)", closed.Load(), len(conns), time.Since(start).Round(time.Millisecond))
	for _, c := range conns {
		c.Close()
	}
	start = time.Now()
	if got, err := Fetch(addr, 1, 2, token, deadline); err != nil || got != id {
		t.Fatalf("rank 1: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("rank 1 served after %v", el)
	}
	if err := wait(t, done, time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestReconnectBeforeAck: a rank given the payload that drops before its
// ack is not counted, and is served again when it dials again; one that
// acked is counted once, and a second process of its rank is refused.
func TestReconnectBeforeAck(t *testing.T) {
	const token = "t"
	id := testPayload(6)
	deadline := time.Now().Add(3 * time.Second)
	addr, done := serve(t, 3, token, id, deadline)
	for range 2 { // rank 1: the payload, then gone
		c := dial(t, addr)
		c.Write(hello(token, 1, 3))
		a := make([]byte, answerSize)
		if _, err := io.ReadFull(c, a); err != nil || [Payload]byte(a[headSize:]) != id {
			t.Fatalf("rank 1: %v, %q", err, a)
		}
		c.Close()
	}
	// Rank 2 acks and drops before rank 0's confirm.
	c := dial(t, addr)
	c.Write(hello(token, 2, 3))
	if _, err := io.ReadFull(c, make([]byte, answerSize)); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{ackByte})
	c.Close()
	time.Sleep(50 * time.Millisecond)
	if _, err := Fetch(addr, 2, 3, token, deadline); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "already joined") {
		t.Fatalf("rank 2 again: %v, want already joined", err)
	}
	if got, err := Fetch(addr, 1, 3, token, deadline); err != nil || got != id {
		t.Fatalf("rank 1 again: %v", err)
	}
	if err := wait(t, done, time.Second); err != nil {
		t.Fatal(err)
	}
}

// fake is a rank 0 scripted by answer: it is given each hello (and how
// many came before) and writes what it likes.
func fake(t *testing.T, ln net.Listener, answer func(n int, c net.Conn, hello []byte)) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Second))
				h := make([]byte, helloSize)
				if _, err := io.ReadFull(c, h); err != nil {
					return
				}
				answer(n, c, h)
			})
		}
	})
}

// okAnswer is rank 0's answer to h, with the proof made with token.
func okAnswer(token string, h []byte, id [Payload]byte) []byte {
	a := make([]byte, answerSize)
	copy(a, magic[:])
	a[4] = version
	copy(a[headSize:], id[:])
	copy(a[headSize+Payload:], mac([]byte(token), answerLabel, h, a[:headSize+Payload]))
	return a
}

// TestFetchFromFakes: what a rank takes from what answers at rank 0's
// address.
func TestFetchFromFakes(t *testing.T) {
	const token = "job A"
	id := testPayload(7)
	for _, tc := range []struct {
		name    string
		answer  func(n int, c net.Conn, h []byte)
		timeout time.Duration
		check   func(got [Payload]byte, err error) string // "" if as wanted
	}{
		{"another job's rank 0, not checking the token", func(_ int, c net.Conn, h []byte) {
			c.Write(okAnswer("job B", h, id))
			io.ReadFull(c, make([]byte, 1))
		}, 600 * time.Millisecond, func(got [Payload]byte, err error) string {
			if got == id || !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrOtherJob) || errors.Is(err, ErrMismatch) {
				return "want ErrTimeout and ErrOtherJob, not the payload"
			}
			return ""
		}},
		{"not a rendezvous", func(_ int, c net.Conn, h []byte) {
			c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
		}, 400 * time.Millisecond, func(got [Payload]byte, err error) string {
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrOtherJob) || !strings.Contains(err.Error(), "does not speak the gpugraph rendezvous") {
				return "want ErrTimeout and ErrOtherJob: not a rendezvous"
			}
			return ""
		}},
		{"version 1", func(_ int, c net.Conn, h []byte) {
			c.Write(append([]byte{0, 0, 0, 1}, make([]byte, Payload)...))
		}, 2 * time.Second, func(got [Payload]byte, err error) string {
			var re *RefusedError
			if !errors.As(err, &re) || re.Reason != RefusedVersion || re.Version != 1 {
				return "want RefusedVersion, version 1"
			}
			return ""
		}},
		{"version 3", func(_ int, c net.Conn, h []byte) {
			c.Write([]byte("GGRV\x03\x00"))
		}, 2 * time.Second, func(got [Payload]byte, err error) string {
			var re *RefusedError
			if !errors.As(err, &re) || re.Reason != RefusedVersion || re.Version != 3 || !strings.Contains(err.Error(), "version 3, this rank 2") {
				return "want RefusedVersion, version 3"
			}
			return ""
		}},
		{"confirm lost, then already joined", func(n int, c net.Conn, h []byte) {
			if n == 0 {
				c.Write(okAnswer(token, h, id))
				io.ReadFull(c, make([]byte, 1)) // the ack; no confirm
				return
			}
			c.Write([]byte("GGRV\x02\x05"))
		}, 2 * time.Second, func(got [Payload]byte, err error) string {
			if err != nil || got != id {
				return "want the payload"
			}
			return ""
		}},
		{"hello without the token in clear", func(_ int, c net.Conn, h []byte) {
			if bytes.Contains(h, []byte(token)) {
				c.Write([]byte("GGRV\x02\x03")) // a refusal the check tells apart
				return
			}
			c.Write(okAnswer(token, h, id))
			io.ReadFull(c, make([]byte, 1))
			c.Write([]byte{ackByte})
		}, 2 * time.Second, func(got [Payload]byte, err error) string {
			if err != nil || got != id {
				return "want the payload"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t)
			fake(t, ln, tc.answer)
			start := time.Now()
			got, err := Fetch(ln.Addr().String(), 1, 2, token, start.Add(tc.timeout))
			el := time.Since(start)
			if why := tc.check(got, err); why != "" {
				t.Fatalf("got %v (payload match %v): %s", err, got == id, why)
			}
			if el > tc.timeout+500*time.Millisecond {
				t.Fatalf("took %v, deadline %v", el, tc.timeout)
			}
			t.Logf("after %v: %v", el.Round(time.Millisecond), err)
		})
	}
}

// TestConfirmLostRankZeroGone: a rank holding a payload rank 0 proved,
// whose confirm was lost, takes rank 0's closed port for done.
func TestConfirmLostRankZeroGone(t *testing.T) {
	const token = "t"
	id := testPayload(10)
	ln := listen(t)
	fake(t, ln, func(_ int, c net.Conn, h []byte) {
		c.Write(okAnswer(token, h, id))
		io.ReadFull(c, make([]byte, 1))
		ln.Close() // as Serve does on the last ack, here before confirming
	})
	start := time.Now()
	got, err := Fetch(ln.Addr().String(), 1, 2, token, start.Add(3*time.Second))
	if err != nil || got != id || time.Since(start) > time.Second {
		t.Fatalf("%v after %v, payload match %v", err, time.Since(start), got == id)
	}
}

// TestSquatterThenRankZero: another job's rank 0 at the address is not
// believed; when it goes and the right one comes, the rank gets its id.
func TestSquatterThenRankZero(t *testing.T) {
	const token = "job A"
	ln := listen(t)
	addr := ln.Addr().String()
	var answered atomic.Int32
	fake(t, ln, func(_ int, c net.Conn, h []byte) {
		answered.Add(1)
		c.Write(okAnswer("job B", h, testPayload(0)))
	})
	id := testPayload(8)
	deadline := time.Now().Add(4 * time.Second)
	type result struct {
		id  [Payload]byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := Fetch(addr, 1, 2, token, deadline)
		done <- result{got, err}
	}()
	time.Sleep(300 * time.Millisecond)
	ln.Close()
	if answered.Load() < 2 {
		t.Fatalf("the squatter answered %d times, want the rank to keep dialling", answered.Load())
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	if err := Serve(ln2, 2, token, id, deadline); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.id != id {
		t.Fatalf("rank 1: %v, payload match %v", r.err, r.id == id)
	}
}

// TestRefusedSummaryBounded: rank 0's error at the deadline stays short
// however much junk came.
func TestRefusedSummaryBounded(t *testing.T) {
	const world = 100
	addr, done := serve(t, world, "t", testPayload(9), time.Now().Add(time.Second))
	var wg sync.WaitGroup
	for i := range 150 {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			if i%2 == 0 {
				c.Write(hello("u", i, world))
			} else {
				c.Write([]byte(strings.Repeat("x", i)))
			}
			io.Copy(io.Discard, c)
		})
	}
	err := wait(t, done, 3*time.Second)
	wg.Wait()
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "ranks [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 and 83 more] of 100 never joined") {
		t.Fatalf("got %v", err)
	}
	if len(err.Error()) > 1000 {
		t.Fatalf("%d bytes: %v", len(err.Error()), err)
	}
	t.Logf("%v", err)
}
