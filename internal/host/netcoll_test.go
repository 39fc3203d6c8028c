package host

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/vmem"
)

// netPair makes rank's NetComm of 2 ranks whose other rank is the test,
// speaking the protocol by hand on the returned connection.
func netPair(t *testing.T, rank int, timeout time.Duration) (*NetComm, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialled, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	conns[1-rank] = accepted
	c := NewNetComm(rank, 2, conns, timeout)
	t.Cleanup(func() { c.Abort(); dialled.Close() })
	return c, dialled
}

// devMem is n bytes of memory that Pointer resolves, as device memory.
func devMem(t *testing.T, n int) (uint64, []byte) {
	t.Helper()
	r, err := vmem.Reserve(uintptr(n), uintptr(n))
	if err != nil {
		t.Skip(err)
	}
	if err := r.Commit(0, r.Size()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Release() })
	return uint64(r.Addr()), unsafe.Slice((*byte)(r.Pointer(0)), n)
}

// runNet runs calls on c and returns the CollError they failed with ("" if
// none), failing the test if they take more than 5 s.
func runNet(t *testing.T, c *NetComm, calls []Call) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		defer func() {
			p := recover()
			if p == nil {
				done <- ""
				return
			}
			if e, ok := p.(CollError); ok {
				done <- e.Msg
				return
			}
			done <- fmt.Sprintf("not a CollError: %v", p)
		}()
		c.Run(c.rank, calls)
	}()
	select {
	case msg := <-done:
		return msg
	case <-time.After(5 * time.Second):
		t.Fatal("the call hangs")
		return ""
	}
}

func floats(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func frameBytes(f *frame) []byte { return append(f.header(), f.data...) }

// TestNetCommRankZeroRefuses: what rank 0 does with every kind of bad
// input from a rank: the collective fails with a CollError naming the rank
// and what it did, within the timeout, with no panic of another kind and
// no allocation the sender did not pay for; the communicator is broken
// from then on.
func TestNetCommRankZeroRefuses(t *testing.T) {
	const timeout = 300 * time.Millisecond
	part := func(count int, data []byte) *frame {
		return &frame{typ: frameColl, kind: AllReduce, dtype: Float32, op: Sum, from: 1, to: 0, count: count, data: data}
	}
	good := part(4, floats(1, 2, 3, 4))
	// A message cut short times out, in the reader ("exchanging a message
	// with rank 1") or, by a hair, in the call waiting for it.
	const midMessage = "after 300ms"
	with := func(f *frame, edit func(*frame)) []byte { g := *f; edit(&g); return frameBytes(&g) }
	// bye is rank 1's goodbye after colls collectives, and the sends
	// listed: rank, count, ...
	bye := func(colls uint64, sends ...uint64) *frame {
		f := &frame{typ: frameBye, from: 1, to: 0, seq: colls}
		for _, v := range sends {
			f.data = binary.LittleEndian.AppendUint64(f.data, v)
		}
		return f
	}
	withHeader := func(edit func(h []byte)) []byte { b := frameBytes(good); edit(b); return b }
	for _, tc := range []struct {
		name  string
		send  []byte
		close bool
		want  string
	}{
		{"silent", nil, false, "timeout after 300ms waiting for rank 1"},
		{"closed", nil, true, "rank 1 closed its connection (EOF)"},
		{"closed mid-message", frameBytes(good)[:headerSize+6], true, "rank 1 closed its connection in the middle of a message"},
		{"half a header then silence", frameBytes(good)[:20], false, midMessage},
		{"payload short of its length", frameBytes(good)[:headerSize+6], false, midMessage},
		{"a length it never sends", with(good, func(f *frame) { f.count = 1 << 30; f.data = nil })[:headerSize], false,
			"with 0 bytes, want 4294967296"},
		{"a huge message it never sends", withHeader(func(h []byte) {
			binary.LittleEndian.PutUint64(h[32:], 1<<30)
			binary.LittleEndian.PutUint64(h[40:], 1<<32)
		})[:headerSize+16], false, midMessage},
		{"length past any frame", withHeader(func(h []byte) { binary.LittleEndian.PutUint64(h[40:], 1<<50) }), false, "more than a frame carries"},
		{"wrong payload size", with(good, func(f *frame) { f.data = f.data[:8] }), false, "with 8 bytes, want 16"},
		{"garbage", []byte(strings.Repeat("garbage!", 6)), false, "not a frame of this protocol"},
		{"unknown frame type", with(good, func(f *frame) { f.typ = 9 }), false, "frame type 9"},
		{"unknown element type", with(good, func(f *frame) { f.dtype = 3 }), false, "bad message"},
		{"rank out of range", with(good, func(f *frame) { f.to = 5 }), false, "in a communicator of 2"},
		{"as rank 0", with(good, func(f *frame) { f.from = 0 }), false, "a frame from rank 0"},
		{"out of sequence", with(good, func(f *frame) { f.seq = 3 }), false, "collective call 3, call 0 expected"},
		{"a result, to rank 0", with(good, func(f *frame) { f.typ = frameResult }), false, "a collective's result, sent to rank 0"},
		{"a receipt for nothing", frameBytes(&frame{typ: frameAck, from: 1, to: 0, seq: 4}), false, "a receipt for send 4 to rank 1"},
		{"an abort", frameBytes(&frame{typ: frameAbort, from: 1, data: []byte("rank 1 failed: out of disk")}), false, "rank 1 failed: out of disk"},
		{"another call", frameBytes(part(8, floats(1, 2, 3, 4, 5, 6, 7, 8))), false, "rank 1's call (all-reduce, 8 elements"},
		{"a goodbye", frameBytes(bye(0)), false, "rank 1 destroyed its communicator before its first collective"},
		{"a goodbye after parts never sent", frameBytes(bye(3)), false, "rank 1 left after 3 collectives, 0 of its parts arrived"},
		{"a goodbye after sends never sent", frameBytes(bye(0, 0, 2)), false, "rank 1 left after 2 sends to rank 0, 0 of which arrived"},
		{"a goodbye counting sends to itself", frameBytes(bye(0, 1, 1)), false, "1 sends to rank 1"},
		{"a goodbye of a bad size", frameBytes(&frame{typ: frameBye, from: 1, data: make([]byte, 8)}), false, "goodbye of status 0, 8 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, raw := netPair(t, 0, timeout)
			buf, _ := devMem(t, 16)
			if tc.send != nil {
				if _, err := raw.Write(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			if tc.close {
				raw.Close()
			}
			start := time.Now()
			msg := runNet(t, c, []Call{{Kind: AllReduce, Send: buf, Recv: buf, Count: 4, Type: Float32}})
			el := time.Since(start)
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "all-reduce") {
				t.Fatalf("got %q, want it to say %q", msg, tc.want)
			}
			if el > timeout+time.Second {
				t.Fatalf("failed after %v", el)
			}
			t.Logf("after %v: %s", el.Round(time.Millisecond), msg)
			// Broken: the next call fails at once.
			start = time.Now()
			if msg := runNet(t, c, []Call{{Kind: AllReduce, Send: buf, Recv: buf, Count: 4, Type: Float32}}); !strings.Contains(msg, "broken") || time.Since(start) > 100*time.Millisecond {
				t.Fatalf("next call: %q after %v", msg, time.Since(start))
			}
			// The rank was told: an abort, or, for another call, the
			// mismatch as its result.
			raw.SetReadDeadline(time.Now().Add(time.Second))
			if got, _ := io.ReadAll(raw); tc.name == "another call" && !strings.Contains(string(got), "does not match") {
				t.Fatalf("rank 1 was sent %q", got)
			}
		})
	}
}

// TestNetCommRankOneRefuses: a rank other than 0 checks rank 0's answers
// against its call: a wrong size or another call's result is an error, not
// an out-of-bounds copy; a good answer is copied to the receive buffer.
func TestNetCommRankOneRefuses(t *testing.T) {
	const timeout = 300 * time.Millisecond
	result := func(edit func(*frame)) *frame {
		f := &frame{typ: frameResult, kind: AllReduce, dtype: Float32, op: Sum, from: 0, to: 1, count: 4, data: floats(5, 6, 7, 8)}
		edit(f)
		return f
	}
	for _, tc := range []struct {
		name string
		send *frame
		want string
	}{
		{"good", result(func(*frame) {}), ""},
		{"short", result(func(f *frame) { f.data = f.data[:8] }), "rank 0 sent 8 bytes of result, want 16"},
		{"long", result(func(f *frame) { f.data = floats(1, 2, 3, 4, 5) }), "rank 0 sent 20 bytes of result, want 16"},
		{"another call's", result(func(f *frame) { f.kind = Broadcast }), "rank 0 answered for another call"},
		{"a call not made", result(func(f *frame) { f.seq = 7 }), "the result of collective call 7, which rank 1 has not made"},
		{"failed", result(func(f *frame) { f.status, f.data = 1, []byte("calls do not match") }), "calls do not match"},
		{"a send out of sequence", &frame{typ: frameSend, kind: Send, dtype: Float32, from: 0, to: 1, seq: 2, count: 1, data: floats(1)}, "send 2 from rank 0, send 0 expected"},
		{"a collective's input", &frame{typ: frameColl, kind: AllReduce, dtype: Float32, from: 0, to: 1, count: 1, data: floats(1)}, "a collective's input, sent to rank 1"},
		{"a goodbye", &frame{typ: frameBye, from: 0, to: 1}, "rank 0 destroyed its communicator before its first collective"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, raw := netPair(t, 1, timeout)
			addr, mem := devMem(t, 32)
			copy(mem, floats(1, 2, 3, 4))
			go func() {
				// Rank 1's part first, then the answer.
				h := make([]byte, headerSize+16)
				raw.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := io.ReadFull(raw, h); err == nil {
					raw.Write(frameBytes(tc.send))
				}
			}()
			msg := runNet(t, c, []Call{{Kind: AllReduce, Send: addr, Recv: addr + 16, Count: 4, Type: Float32}})
			if tc.want == "" {
				if msg != "" || string(mem[16:]) != string(floats(5, 6, 7, 8)) {
					t.Fatalf("%q, received %v", msg, mem[16:])
				}
				return
			}
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("got %q, want it to say %q", msg, tc.want)
			}
			if string(mem[16:]) != string(make([]byte, 16)) {
				t.Fatalf("the receive buffer was written: %v", mem[16:])
			}
		})
	}
}

// TestNetCommBadBuffer: a call on memory that is not device memory fails
// with a CollError, and the other rank is told at once.
func TestNetCommBadBuffer(t *testing.T) {
	c, raw := netPair(t, 1, time.Minute)
	msg := runNet(t, c, []Call{{Kind: AllReduce, Send: 64, Recv: 64, Count: 4, Type: Float32}})
	if !strings.Contains(msg, "is not device memory") {
		t.Fatalf("got %q", msg)
	}
	raw.SetReadDeadline(time.Now().Add(time.Second))
	got, _ := io.ReadAll(raw)
	if !strings.Contains(string(got), "rank 1 failed") {
		t.Fatalf("rank 0 was sent %q, want an abort", got)
	}
}

// netStar makes the n ranks of one communicator in this process, joined by
// loopback TCP as processes are (a connection from every other rank to
// rank 0), each destroyed at the end of the test.
func netStar(t *testing.T, n int, timeout time.Duration) []*NetComm {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	toZero := make([]net.Conn, n)
	comms := make([]*NetComm, n)
	for r := 1; r < n; r++ {
		dialled, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		accepted, err := ln.Accept() // the one just dialled: no other is pending
		if err != nil {
			t.Fatal(err)
		}
		toZero[r] = accepted
		conns := make([]net.Conn, n)
		conns[0] = dialled
		comms[r] = NewNetComm(r, n, conns, timeout)
	}
	comms[0] = NewNetComm(0, n, toZero, timeout)
	t.Cleanup(func() {
		for _, c := range comms {
			c.Abort()
		}
	})
	return comms
}

// under is f's answer under c's lock.
func under[T any](c *NetComm, f func() T) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f()
}

// eventually waits (at most 5 s) until cond holds, and says whether it
// did.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// goRun runs calls on c in a goroutine, a group each, in order until one
// fails: the channel brings the CollError ("" if none), then closes.
func goRun(c *NetComm, groups ...[]Call) <-chan string {
	done := make(chan string, 1)
	go func() {
		defer close(done)
		for _, calls := range groups {
			if msg := collErr(func() { c.Run(c.rank, calls) }); msg != "" {
				done <- msg
				return
			}
		}
		done <- ""
	}()
	return done
}

// collErr runs f and returns the CollError it panics with, "" if none.
func collErr(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(CollError); ok {
				msg = e.Msg
			} else {
				msg = fmt.Sprintf("not a CollError: %v", p)
			}
		}
	}()
	f()
	return ""
}

// within is what done brings, failing the test if that takes longer than
// limit.
func within(t *testing.T, done <-chan string, limit time.Duration, who string) string {
	t.Helper()
	select {
	case msg := <-done:
		return msg
	case <-time.After(limit):
		t.Fatalf("%s: no answer within %v", who, limit)
		return ""
	}
}

// TestNetCommGoodbyeAfterLastCall: ranks do their collectives and destroy
// their communicators one after another, as processes that finished do.
// Rank 1 destroys its communicator as soon as its last collective returns,
// while rank 0 still has that collective's results to send to ranks 2 and
// 3 (rank 0 is held before writing them until rank 1's goodbye has reached
// every rank): its goodbye fails nothing that no longer needs it, every
// rank gets the right results. A collective after it fails at every rank,
// at once, naming rank 1 and how far it got.
func TestNetCommGoodbyeAfterLastCall(t *testing.T) {
	const n, calls, count = 4, 5, 4
	comms := netStar(t, n, time.Minute)
	hookDone := make(chan bool, 1)
	comms[0].resultHook = func(k uint64, to int) {
		if k != calls-1 || to != 2 {
			return
		}
		// Rank 1 has its result (rank 0 answers the ranks in order): it
		// destroys its communicator; rank 0 and, told by rank 0, ranks 2
		// and 3 take its goodbye before rank 0 answers them.
		hookDone <- eventually(func() bool {
			for _, r := range []int{0, 2, 3} {
				if under(comms[r], func() *departure { return comms[r].gone[1] }) == nil {
					return false
				}
			}
			return true
		})
	}
	in := func(r, k int) []byte { return floats(float32(r+1), float32(10*k), float32(r*k), -1) }
	want := func(k int) []byte {
		var sum [count]float32
		for r := range n {
			for i := range count {
				sum[i] += math.Float32frombits(binary.LittleEndian.Uint32(in(r, k)[4*i:]))
			}
		}
		return floats(sum[:]...)
	}
	mems := make([][]byte, n)
	groups := make([][][]Call, n)
	for r := range n {
		addr, mem := devMem(t, 2*calls*16)
		mems[r] = mem
		for k := range calls {
			send, recv := addr+uint64(32*k), addr+uint64(32*k+16)
			copy(mem[32*k:], in(r, k))
			groups[r] = append(groups[r], []Call{{Kind: AllReduce, Send: send, Recv: recv, Count: count, Type: Float32, Op: Sum}})
		}
	}
	done := make([]<-chan string, n)
	for r := range n {
		if r == 1 {
			ch := make(chan string, 1)
			go func() {
				msg := within(t, goRun(comms[1], groups[1]...), 10*time.Second, "rank 1")
				comms[1].Abort() // right after its last collective returns
				ch <- msg
			}()
			done[r] = ch
			continue
		}
		done[r] = goRun(comms[r], groups[r]...)
	}
	for r := range n {
		if msg := within(t, done[r], 10*time.Second, fmt.Sprintf("rank %d", r)); msg != "" {
			t.Fatalf("rank %d: %s", r, msg)
		}
		for k := range calls {
			if got := mems[r][32*k+16 : 32*k+32]; string(got) != string(want(k)) {
				t.Fatalf("rank %d, collective %d: received %v, want %v", r, k, got, want(k))
			}
		}
	}
	if !<-hookDone {
		t.Fatal("rank 1's goodbye did not reach ranks 0, 2 and 3 while rank 0 waited")
	}
	// Another collective needs rank 1: it fails at once everywhere.
	start := time.Now()
	for _, r := range []int{0, 2, 3} {
		addr, _ := devMem(t, 16)
		done[r] = goRun(comms[r], []Call{{Kind: AllReduce, Send: addr, Recv: addr, Count: count, Type: Float32, Op: Sum}})
	}
	for _, r := range []int{0, 2, 3} {
		msg := within(t, done[r], 2*time.Second, fmt.Sprintf("rank %d", r))
		if !strings.Contains(msg, "rank 1 destroyed its communicator after its 5th collective") {
			t.Fatalf("rank %d: %q, want it to name rank 1, gone after its 5th collective", r, msg)
		}
		t.Logf("rank %d after %v: %s", r, time.Since(start).Round(time.Millisecond), msg)
	}
}

// TestNetCommGoodbyeNeeded: a rank destroys its communicator while others
// need it: their calls fail with an error naming it, well within the
// timeout (a minute), whether they were waiting or come after; what does
// not need it completes.
func TestNetCommGoodbyeNeeded(t *testing.T) {
	const limit = 2 * time.Second // the timeout is a minute
	allReduce := func(t *testing.T) []Call {
		addr, _ := devMem(t, 16)
		return []Call{{Kind: AllReduce, Send: addr, Recv: addr, Count: 4, Type: Float32, Op: Sum}}
	}
	// first: every rank's first collective.
	first := func(t *testing.T, comms []*NetComm) {
		t.Helper()
		var done []<-chan string
		for _, c := range comms {
			done = append(done, goRun(c, allReduce(t)))
		}
		for r, d := range done {
			if msg := within(t, d, 5*time.Second, fmt.Sprintf("rank %d", r)); msg != "" {
				t.Fatalf("rank %d: %s", r, msg)
			}
		}
	}
	expect := func(t *testing.T, done <-chan string, start time.Time, who, want string) {
		t.Helper()
		msg := within(t, done, limit, who)
		if !strings.Contains(msg, want) {
			t.Fatalf("%s: %q, want it to say %q", who, msg, want)
		}
		t.Logf("%s after %v: %s", who, time.Since(start).Round(time.Millisecond), msg)
	}
	for _, waiting := range []bool{true, false} {
		t.Run(fmt.Sprintf("next collective/waiting=%v", waiting), func(t *testing.T) {
			comms := netStar(t, 3, time.Minute)
			first(t, comms)
			var done [2]<-chan string
			start := func() {
				for r := range 2 {
					done[r] = goRun(comms[r], allReduce(t))
				}
			}
			if waiting {
				// Rank 0 holds rank 1's part of the second collective:
				// both wait for rank 2.
				start()
				if !eventually(func() bool { return under(comms[0], func() uint64 { return comms[0].inColl[1] }) == 2 }) {
					t.Fatal("rank 1's part never reached rank 0")
				}
			}
			t0 := time.Now()
			comms[2].Abort()
			if !waiting {
				if !eventually(func() bool { return under(comms[1], func() *departure { return comms[1].gone[2] }) != nil }) {
					t.Fatal("rank 1 was never told rank 2 left")
				}
				start()
			}
			for r := range 2 {
				expect(t, done[r], t0, fmt.Sprintf("rank %d", r), "rank 2 destroyed its communicator after its 1st collective")
			}
		})
	}
	t.Run("rank 0 leaves", func(t *testing.T) {
		comms := netStar(t, 3, time.Minute)
		first(t, comms)
		var done [3]<-chan string
		for r := 1; r < 3; r++ {
			done[r] = goRun(comms[r], allReduce(t))
		}
		if !eventually(func() bool {
			return under(comms[0], func() bool { return comms[0].inColl[1] == 2 && comms[0].inColl[2] == 2 })
		}) {
			t.Fatal("the parts never reached rank 0")
		}
		t0 := time.Now()
		comms[0].Abort()
		for r := 1; r < 3; r++ {
			expect(t, done[r], t0, fmt.Sprintf("rank %d", r), "rank 0 destroyed its communicator after its 1st collective")
		}
	})
	t.Run("send and recv", func(t *testing.T) {
		comms := netStar(t, 4, time.Minute)
		addr := make([]uint64, 4)
		mem := make([][]byte, 4)
		for r := range 4 {
			addr[r], mem[r] = devMem(t, 64)
			copy(mem[r], floats(float32(r), float32(r), float32(r), float32(r)))
		}
		send := func(r, to int) Call {
			return Call{Kind: Send, Send: addr[r], Count: 4, Type: Float32, Peer: to}
		}
		recv := func(r, from, at int) Call {
			return Call{Kind: Recv, Recv: addr[r] + uint64(at), Count: 4, Type: Float32, Peer: from}
		}
		// Rank 2 sends to rank 1, and destroys its communicator once its
		// data has reached rank 1, before rank 1 posts the receive: the
		// receive does not need rank 2 any more.
		sending := goRun(comms[2], []Call{send(2, 1)})
		if !eventually(func() bool { return under(comms[1], func() uint64 { return comms[1].inSend[2] }) == 1 }) {
			t.Fatal("rank 2's send never reached rank 1")
		}
		t0 := time.Now()
		comms[2].Abort()
		if msg := within(t, sending, limit, "rank 2"); !strings.Contains(msg, "the communicator was destroyed") {
			t.Fatalf("rank 2's send: %q", msg)
		}
		if !eventually(func() bool { return under(comms[1], func() *departure { return comms[1].gone[2] }) != nil }) {
			t.Fatal("rank 1 was never told rank 2 left")
		}
		if msg := within(t, goRun(comms[1], []Call{recv(1, 2, 16)}), limit, "rank 1"); msg != "" || string(mem[1][16:32]) != string(floats(2, 2, 2, 2)) {
			t.Fatalf("rank 1's receive of what rank 2 sent before it left: %q, %v", msg, mem[1][16:32])
		}
		// Sends between the ranks that stay do not need rank 2: with rank
		// 0, and through its relay (ranks 1 and 3, both ways).
		d := []<-chan string{
			goRun(comms[0], []Call{send(0, 1), recv(0, 1, 16)}),
			goRun(comms[1], []Call{recv(1, 0, 32), send(1, 0), send(1, 3), recv(1, 3, 48)}),
			nil,
			goRun(comms[3], []Call{send(3, 1), recv(3, 1, 16)}),
		}
		for r, d := range d {
			if d == nil {
				continue
			}
			if msg := within(t, d, limit, fmt.Sprintf("rank %d", r)); msg != "" {
				t.Fatalf("rank %d: %s", r, msg)
			}
		}
		for _, got := range []struct {
			r, at int
			want  float32
		}{{0, 16, 1}, {1, 32, 0}, {1, 48, 3}, {3, 16, 1}} {
			if b := mem[got.r][got.at : got.at+16]; string(b) != string(floats(got.want, got.want, got.want, got.want)) {
				t.Fatalf("rank %d received %v, want rank %v's", got.r, b, got.want)
			}
		}
		// What needs rank 2 fails: a receive at rank 0, a send (through
		// rank 0) at rank 1, a receive at rank 3; each names rank 2 (as
		// its own error, or the one of the rank that told it first).
		d0 := goRun(comms[0], []Call{recv(0, 2, 16)})
		d1 := goRun(comms[1], []Call{send(1, 2)})
		d3 := goRun(comms[3], []Call{recv(3, 2, 16)})
		const gone = "rank 2 destroyed its communicator before its first collective"
		expect(t, d0, t0, "rank 0", gone)
		expect(t, d1, t0, "rank 1", gone)
		expect(t, d3, t0, "rank 3", gone)
	})
}

// TestNetCommDeadRank: a rank whose connection closes without a goodbye (a
// process that died) fails the others' calls at once, as a failure: they
// do not take it for a goodbye.
func TestNetCommDeadRank(t *testing.T) {
	comms := netStar(t, 3, time.Minute)
	addr, _ := devMem(t, 16)
	call := []Call{{Kind: AllReduce, Send: addr, Recv: addr, Count: 4, Type: Float32, Op: Sum}}
	var done [3]<-chan string
	for r := range 3 {
		done[r] = goRun(comms[r], call)
	}
	for r := range 3 {
		if msg := within(t, done[r], 5*time.Second, fmt.Sprintf("rank %d", r)); msg != "" {
			t.Fatalf("rank %d: %s", r, msg)
		}
	}
	for r := range 2 {
		done[r] = goRun(comms[r], call)
	}
	start := time.Now()
	comms[2].links[0].conn.Close() // as the process's end would
	for r := range 2 {
		msg := within(t, done[r], 2*time.Second, fmt.Sprintf("rank %d", r))
		if !strings.Contains(msg, "rank 2 closed its connection") || strings.Contains(msg, "destroyed") {
			t.Fatalf("rank %d: %q, want it to say rank 2 closed its connection", r, msg)
		}
		t.Logf("rank %d after %v: %s", r, time.Since(start).Round(time.Millisecond), msg)
	}
}

// TestNetCommGoodbyeAfterPart: a rank that sends its part of a collective
// and then says goodbye (destroyed during the call) left nothing missing:
// rank 0's collective completes, with its part.
func TestNetCommGoodbyeAfterPart(t *testing.T) {
	c, raw := netPair(t, 0, time.Minute)
	addr, mem := devMem(t, 16)
	copy(mem, floats(1, 2, 3, 4))
	part := &frame{typ: frameColl, kind: AllReduce, dtype: Float32, op: Sum, from: 1, to: 0, count: 4, data: floats(10, 20, 30, 40)}
	bye := &frame{typ: frameBye, from: 1, to: 0, seq: 1}
	if _, err := raw.Write(append(frameBytes(part), frameBytes(bye)...)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if msg := runNet(t, c, []Call{{Kind: AllReduce, Send: addr, Recv: addr, Count: 4, Type: Float32, Op: Sum}}); msg != "" {
		t.Fatal(msg)
	}
	if string(mem) != string(floats(11, 22, 33, 44)) {
		t.Fatalf("received %v", mem)
	}
	// The next one needs rank 1.
	msg := runNet(t, c, []Call{{Kind: AllReduce, Send: addr, Recv: addr, Count: 4, Type: Float32, Op: Sum}})
	if !strings.Contains(msg, "rank 1 destroyed its communicator after its 1st collective") {
		t.Fatalf("next call: %q", msg)
	}
}
