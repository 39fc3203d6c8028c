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
