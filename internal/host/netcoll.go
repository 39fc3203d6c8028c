package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/gpugraph/gpugraph/internal/vmem"
)

// Collectives between processes: a NetComm is one rank of a communicator
// whose ranks are host devices of different processes (one each), joined
// by TCP in a star. Rank 0 holds a connection to every other rank, and
// every other rank one to rank 0. Rank 0 gathers the ranks' inputs of a
// collective, runs it with the in-process code (runCollective) over copies
// of the other ranks' buffers (staging memory that Pointer resolves), and
// sends each rank its result, so the results are bit for bit a
// CommGroup's. A send between two other ranks is relayed by rank 0.
//
// Each connection has a reader goroutine that takes frames as they come:
// no rank is blocked writing to another, and a connection that closes
// breaks the communicator at once (EOF, reset) rather than at the next
// timeout. A frame is a fixed header (type, sequence number, collective
// kind, count, element type, reduction, root, sender, receiver, payload
// length) and a payload whose length is checked against what the header
// implies before a byte of it is read. Any failure (a connection closing,
// a call not answered within the timeout, a malformed or out-of-sequence
// frame, calls that do not match) breaks the communicator: every call
// fails from then on, and the other ranks are told (an abort frame, then
// the connection closes), so every rank fails fast, naming the cause.
//
// A communicator destroyed while it works says goodbye instead: a bye
// frame to its peer(s), after the last frame it wrote, carrying how many
// collectives it joined and how many sends it made to each rank; then its
// connections close. Rank 0 passes a rank's goodbye on to the others. A
// goodbye fails only what needs the rank that left: a collective it did
// not join (at rank 0, one whose part from it is missing), a send to it
// not yet received, a receive from it not yet sent, and, at the other
// ranks once rank 0 left, whatever rank 0 has not delivered yet.
// Everything else completes: rank 0 goes on answering the others'
// collectives and relaying their sends. A call that fails names the rank
// that left and how far it got, and breaks the communicator as any failure
// does. An EOF without a goodbye stays a failure (a crashed process), as
// does a goodbye whose counts disagree with what arrived.

// Frame types.
const (
	frameColl   = 1 // a rank's part of a collective: its send buffer, to rank 0
	frameResult = 2 // rank 0's answer: the rank's receive buffer, or why the collective failed
	frameSend   = 3 // a Send's data, to its receiver (relayed by rank 0)
	frameAck    = 4 // the receiver has copied a Send's data: the sender may return
	frameAbort  = 5 // the sender's communicator broke; the payload says why
	// frameBye: the sender destroyed its working communicator and leaves.
	// The sequence number is how many collectives it joined (sent its
	// part of; rank 0: answered), the payload how many sends it wrote to
	// which ranks (see byeSends).
	frameBye = 6
)

const (
	headerSize = 48
	// maxPayload bounds a frame's payload (and so count × size), so no
	// header can make an offset overflow; payloads are read as they come,
	// never allocated from the header alone.
	maxPayload = 1 << 40
	maxMessage = 4096 // error and abort texts
	maxPending = 4096 // collectives rank 0 holds for ranks ahead of it
	// MaxNetRanks bounds a NetComm's ranks (so offsets stay far from overflow).
	MaxNetRanks = 1 << 16
	readChunk   = 1 << 20
	abortGrace  = 100 * time.Millisecond // for the abort frame of a breaking communicator
)

var frameMagic = [4]byte{'G', 'G', 'H', 'F'}

// frame is one message. Header layout (little-endian): magic [0,4), type
// 4, status 5 (0 ok, 1 failed: the payload is the error), kind 6, element
// type 7, reduction 8, zero [9,12), sender 12, receiver 16, root or peer
// 20, sequence number 24, count 32, payload length 40.
type frame struct {
	typ, status    uint8
	kind           CollKind
	dtype          DType
	op             RedOp
	from, to, root int
	seq            uint64
	count          int
	data           []byte
}

func (f *frame) header() []byte {
	h := make([]byte, headerSize)
	copy(h, frameMagic[:])
	h[4], h[5], h[6], h[7], h[8] = f.typ, f.status, byte(f.kind), byte(f.dtype), byte(f.op)
	binary.LittleEndian.PutUint32(h[12:], uint32(f.from))
	binary.LittleEndian.PutUint32(h[16:], uint32(f.to))
	binary.LittleEndian.PutUint32(h[20:], uint32(f.root))
	binary.LittleEndian.PutUint64(h[24:], f.seq)
	binary.LittleEndian.PutUint64(h[32:], uint64(f.count))
	binary.LittleEndian.PutUint64(h[40:], uint64(len(f.data)))
	return h
}

// parseHeader reads a header and checks it, and the payload length it
// announces, against a communicator of n ranks.
func parseHeader(h []byte, n int) (*frame, int, error) {
	if [4]byte(h[:4]) != frameMagic || h[9]|h[10]|h[11] != 0 {
		return nil, 0, errors.New("not a frame of this protocol")
	}
	u32 := func(o int) uint64 { return uint64(binary.LittleEndian.Uint32(h[o:])) }
	from, to, root := u32(12), u32(16), u32(20)
	count, length := binary.LittleEndian.Uint64(h[32:]), binary.LittleEndian.Uint64(h[40:])
	if from >= uint64(n) || to >= uint64(n) || root >= uint64(n) {
		return nil, 0, fmt.Errorf("rank %d to rank %d, root %d, in a communicator of %d", from, to, root, n)
	}
	if count > maxPayload || length > maxPayload {
		return nil, 0, fmt.Errorf("%d elements, %d bytes: more than a frame carries", count, length)
	}
	f := &frame{typ: h[4], status: h[5], kind: CollKind(h[6]), dtype: DType(h[7]), op: RedOp(h[8]),
		from: int(from), to: int(to), root: int(root), seq: binary.LittleEndian.Uint64(h[24:]), count: int(count)}
	size := f.dtype.Size()
	want := -1 // the payload's length, where the header alone says it
	switch f.typ {
	case frameColl:
		if f.kind > ReduceScatter || size == 0 || f.op > Avg || f.status != 0 || f.count > maxPayload/size {
			return nil, 0, fmt.Errorf("collective %d of %d elements of type %d, op %d, status %d", f.kind, f.count, f.dtype, f.op, f.status)
		}
		want = sendBytes(f.call(), f.from, n)
	case frameResult:
		if f.status > 1 || f.status == 1 && length > maxMessage {
			return nil, 0, fmt.Errorf("result of status %d, %d bytes", f.status, length)
		}
	case frameSend:
		if f.kind != Send || size == 0 || f.status != 0 || f.count > maxPayload/size {
			return nil, 0, fmt.Errorf("send %d of %d elements of type %d, status %d", f.kind, f.count, f.dtype, f.status)
		}
		want = f.count * size
	case frameAck:
		want = 0
	case frameAbort:
		if length > maxMessage {
			return nil, 0, fmt.Errorf("abort of %d bytes", length)
		}
	case frameBye:
		if f.status != 0 || length%16 != 0 || length > 16*uint64(n) {
			return nil, 0, fmt.Errorf("goodbye of status %d, %d bytes", f.status, length)
		}
	default:
		return nil, 0, fmt.Errorf("frame type %d", f.typ)
	}
	if want >= 0 && uint64(want) != length {
		return nil, 0, fmt.Errorf("frame type %d (%v of %d elements of type %d) with %d bytes, want %d",
			f.typ, f.kind, f.count, f.dtype, length, want)
	}
	return f, int(length), nil
}

// call is the collective a frameColl or frameResult carries, buffers aside.
func (f *frame) call() Call {
	return Call{Kind: f.kind, Count: f.count, Type: f.dtype, Op: f.op, Peer: f.root}
}

// sendBytes is what rank contributes to collective c of n ranks: the
// bytes runCollective reads of its send buffer.
func sendBytes(c Call, rank, n int) int {
	nb := c.Count * c.Type.Size()
	switch c.Kind {
	case ReduceScatter:
		return nb * n
	case Broadcast:
		if rank != c.Peer {
			return 0
		}
	}
	return nb
}

// recvBytes is what collective c of n ranks writes to rank's receive buffer.
func recvBytes(c Call, rank, n int) int {
	nb := c.Count * c.Type.Size()
	switch c.Kind {
	case AllGather:
		return nb * n
	case Reduce:
		if rank != c.Peer {
			return 0
		}
	}
	return nb
}

// NetComm is one rank of a communicator across processes.
type NetComm struct {
	rank, n int
	timeout time.Duration
	links   []*link // by rank: rank 0 has every other rank's, the others only rank 0's

	mu      sync.Mutex
	err     error         // why the communicator broke; nil while it works
	broken  chan struct{} // closed when err is set
	collSeq uint64        // collectives this rank has run
	slots   map[uint64]*netSlot
	replies map[uint64]chan *frame // rank ≠ 0: results awaited, by sequence number
	sendSeq []uint64               // per receiver: sends posted
	recvSeq []uint64               // per sender: receives posted
	inbox   map[netKey]chan *frame // sends arrived, by sender and sequence number
	acks    map[netKey]chan struct{}

	gone     []*departure  // by rank: the ranks that said goodbye (nil while here)
	departed []*departure  // the same, in the order they left
	left     chan struct{} // closed, and replaced, when a rank says goodbye
	// What this rank wrote, for its goodbye: parts of collectives (to
	// rank 0; rank 0: collectives it answered) and sends, by receiver.
	// Updated under mu while holding the write lock of the link the frame
	// took.
	outColl uint64
	outSend []uint64

	// Only the reader of the connection frames from a rank arrive on
	// touches that rank's counters: the sequence numbers expected next.
	inColl []uint64
	inSend []uint64

	stageMu sync.Mutex
	stage   *vmem.Reservation // rank 0: copies of the other ranks' buffers

	// resultHook, if set (by tests), runs before rank 0 writes the result
	// of collective call k to rank to.
	resultHook func(k uint64, to int)
}

// departure is a rank that said goodbye, and the error of a call that
// needs it.
type departure struct {
	rank  int
	colls uint64 // collectives it joined
}

func (d *departure) Error() string {
	if d.colls == 0 {
		return fmt.Sprintf("rank %d destroyed its communicator before its first collective", d.rank)
	}
	return fmt.Sprintf("rank %d destroyed its communicator after its %s collective", d.rank, ordinal(d.colls))
}

// ordinal writes n as 1st, 2nd, 3rd, 4th, ..., 11th, ..., 21st.
func ordinal(n uint64) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprint(n, suffix)
}

// netSlot gathers the other ranks' parts of one collective at rank 0.
type netSlot struct {
	frames []*frame // by rank
	got    int
	ready  chan struct{} // closed when every other rank's part is here
}

type netKey struct {
	rank int
	seq  uint64
}

type link struct {
	peer int
	conn net.Conn
	wmu  chan struct{} // the write lock: held while a frame is written (a channel, so a goodbye can wait for it a bounded time)
	done chan struct{} // closed when the reader of the connection returns
}

func (l *link) lock()   { l.wmu <- struct{}{} }
func (l *link) unlock() { <-l.wmu }

// lockBy takes the write lock unless deadline passes first (if it has
// passed, only if the lock is free).
func (l *link) lockBy(deadline time.Time) bool {
	select {
	case l.wmu <- struct{}{}:
		return true
	default:
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l.wmu <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// errDestroyed is the cause of a communicator broken by Abort.
var errDestroyed = errors.New("communicator destroyed")

// NewNetComm makes rank's communicator of n ranks over conns, indexed by
// rank: rank 0 has one to every other rank, the others one to rank 0. A
// call waits at most timeout for another rank. The communicator owns the
// connections.
func NewNetComm(rank, n int, conns []net.Conn, timeout time.Duration) *NetComm {
	c := &NetComm{rank: rank, n: n, timeout: timeout, links: make([]*link, n), broken: make(chan struct{}),
		slots: map[uint64]*netSlot{}, replies: map[uint64]chan *frame{}, sendSeq: make([]uint64, n),
		recvSeq: make([]uint64, n), inbox: map[netKey]chan *frame{}, acks: map[netKey]chan struct{}{},
		gone: make([]*departure, n), left: make(chan struct{}), outSend: make([]uint64, n),
		inColl: make([]uint64, n), inSend: make([]uint64, n)}
	for r, conn := range conns {
		if conn != nil {
			c.links[r] = &link{peer: r, conn: conn, wmu: make(chan struct{}, 1), done: make(chan struct{})}
		}
	}
	for _, l := range c.links {
		if l != nil {
			go c.read(l)
		}
	}
	return c
}

// Size is the number of ranks.
func (c *NetComm) Size() int { return c.n }

// Abort breaks the communicator and closes its connections without
// waiting for anything (ncclCommAbort): calls in progress fail, and the
// other ranks are told: a working communicator says goodbye (the others
// go on with what does not need this rank), a broken one aborts. It is how
// a communicator is destroyed.
func (c *NetComm) Abort() {
	c.fail(errDestroyed)
	c.stageMu.Lock()
	if c.stage != nil {
		c.stage.Release()
		c.stage = nil
	}
	c.stageMu.Unlock()
}

// Run runs rank's calls, a group's, as CommGroup.Run does: the collectives
// in order, then the sends and receives together. It panics with
// CollError when a call fails, and the communicator is broken from then
// on.
func (c *NetComm) Run(rank int, calls []Call) {
	if err := c.run(calls); err != nil {
		panic(CollError{err.Error()})
	}
}

func (c *NetComm) run(calls []Call) error {
	defer func() {
		// A buffer that is not device memory (bytes panics): the other
		// ranks are told now rather than left to time out.
		if p := recover(); p != nil {
			c.fail(fmt.Errorf("%v", p))
			panic(p)
		}
	}()
	var sends, recvs []Call
	for _, call := range calls {
		switch call.Kind {
		case Send:
			sends = append(sends, call)
		case Recv:
			recvs = append(recvs, call)
		default:
			if err := c.collective(call); err != nil {
				c.fail(err)
				return err
			}
		}
	}
	if len(sends)+len(recvs) == 0 {
		return nil
	}
	err := c.pointToPoint(sends, recvs)
	if err != nil {
		c.fail(err)
	}
	return err
}

// brokenLocked is the error of a call on a broken communicator, or nil.
func (c *NetComm) brokenLocked(what string) error {
	if c.err == nil {
		return nil
	}
	if c.err == errDestroyed {
		return fmt.Errorf("%s: the communicator was destroyed", what)
	}
	return fmt.Errorf("%s: the communicator is broken: %w", what, c.err)
}

func (c *NetComm) collective(call Call) error {
	c.mu.Lock()
	if err := c.brokenLocked(fmt.Sprintf("%v of rank %d", call.Kind, c.rank)); err != nil {
		c.mu.Unlock()
		return err
	}
	k := c.collSeq
	if err := c.collNeedLocked(k); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("%v (call %d of rank %d): %w", call.Kind, k, c.rank, err)
	}
	c.collSeq++
	var s *netSlot
	var result chan *frame
	if c.rank == 0 {
		s = c.slotLocked(k)
	} else {
		result = make(chan *frame, 1)
		c.replies[k] = result
	}
	c.mu.Unlock()
	what := fmt.Sprintf("%v (call %d of rank %d)", call.Kind, k, c.rank)
	if c.rank == 0 {
		return c.collectiveAtZero(what, k, s, call)
	}
	f := &frame{typ: frameColl, kind: call.Kind, dtype: call.Type, op: call.Op, from: c.rank, to: 0, root: call.Peer,
		seq: k, count: call.Count, data: bytes(call.Send, sendBytes(call, c.rank, c.n))}
	if err := c.write(f); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// Rank 0 knows which rank is missing: it has a little longer to say
	// so before this rank gives up on it.
	wait := c.timeout + min(c.timeout/4, time.Second)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	r, timedOut, err := await(c, what, result, func() error { return c.collNeedLocked(k) }, timer.C)
	if err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("%s: timeout after %v waiting for rank 0", what, wait)
	}
	if r.kind != call.Kind || r.count != call.Count || r.dtype != call.Type || r.op != call.Op || r.root != call.Peer {
		return fmt.Errorf("%s: rank 0 answered for another call (%v, %d elements of type %d)", what, r.kind, r.count, r.dtype)
	}
	if r.status != 0 {
		return fmt.Errorf("%s: %s", what, r.data)
	}
	if want := recvBytes(call, c.rank, c.n); len(r.data) != want {
		return fmt.Errorf("%s: rank 0 sent %d bytes of result, want %d", what, len(r.data), want)
	}
	copy(bytes(call.Recv, len(r.data)), r.data)
	return nil
}

// await takes what ch brings: it waits until it comes, the communicator
// breaks, a rank the call needs leaves (need, called under c.mu, says
// which) or timeout fires. What came first wins: a frame that arrived
// before the communicator broke (a rank that got its answer may destroy
// it since) or before the rank it needs left is taken.
func await[T any](c *NetComm, what string, ch <-chan T, need func() error, timeout <-chan time.Time) (v T, timedOut bool, err error) {
	for {
		c.mu.Lock()
		gone := need()
		left := c.left
		c.mu.Unlock()
		if gone != nil {
			// Whatever the rank sent was handed over before its goodbye.
			select {
			case v = <-ch:
				return v, false, nil
			default:
				return v, false, fmt.Errorf("%s: %w", what, gone)
			}
		}
		select {
		case v = <-ch:
			return v, false, nil
		case <-left:
		case <-c.broken:
			select {
			case v = <-ch:
				return v, false, nil
			default:
				return v, false, c.brokenWhile(what)
			}
		case <-timeout:
			return v, true, nil
		}
	}
}

// collNeedLocked is why collective call k of this rank cannot be done: a
// rank left before it (at the other ranks: rank 0 left), or nil.
func (c *NetComm) collNeedLocked(k uint64) error {
	if d := c.gone[0]; d != nil && c.rank != 0 {
		return d
	}
	for _, d := range c.departed {
		if k >= d.colls {
			return d
		}
	}
	return nil
}

// needLocked is why a send to or receive from rank p cannot be done: p
// left (or, at the other ranks, rank 0, which relays), or nil.
func (c *NetComm) needLocked(p int) error {
	if d := c.gone[0]; d != nil && c.rank != 0 {
		return d
	}
	if d := c.gone[p]; d != nil {
		return d
	}
	return nil
}

// brokenWhile is the error of a call the communicator broke under.
func (c *NetComm) brokenWhile(what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == errDestroyed {
		return fmt.Errorf("%s: the communicator was destroyed", what)
	}
	return fmt.Errorf("%s: %w", what, c.err)
}

func (c *NetComm) slotLocked(k uint64) *netSlot {
	s := c.slots[k]
	if s == nil {
		s = &netSlot{frames: make([]*frame, c.n), ready: make(chan struct{})}
		if c.n == 1 {
			close(s.ready)
		}
		c.slots[k] = s
	}
	return s
}

// collectiveAtZero waits for every other rank's part of collective k,
// runs it, and answers each rank.
func (c *NetComm) collectiveAtZero(what string, k uint64, s *netSlot, call Call) error {
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	_, timedOut, err := await(c, what, s.ready, func() error { return c.collNeedLocked(k) }, timer.C)
	if err != nil {
		return err
	}
	if timedOut {
		c.mu.Lock()
		var missing []int
		for r := 1; r < c.n; r++ {
			if s.frames[r] == nil {
				missing = append(missing, r)
			}
		}
		c.mu.Unlock()
		return fmt.Errorf("%s: timeout after %v waiting for %s", what, c.timeout, ranksText(missing))
	}
	c.mu.Lock()
	delete(c.slots, k)
	c.mu.Unlock()

	c.stageMu.Lock()
	defer c.stageMu.Unlock()
	if err := c.brokenLocked(what); err != nil {
		return err
	}
	// Lay out the other ranks' buffers in staging, each as its own call
	// says: a call that does not match rank 0's is reported by
	// runCollective before any buffer is touched.
	calls := make([]Call, c.n)
	calls[0] = call
	offs := make([][2]int, c.n)
	total := 0
	for r := 1; r < c.n; r++ {
		pc := s.frames[r].call()
		offs[r] = [2]int{total, total + roundUp8(sendBytes(pc, r, c.n))}
		total = offs[r][1] + roundUp8(recvBytes(pc, r, c.n))
		calls[r] = pc
	}
	if err := c.growStage(total); err != nil {
		return fmt.Errorf("%s: staging %d bytes: %v", what, total, err)
	}
	base := uint64(0)
	if c.stage != nil {
		base = uint64(c.stage.Addr())
	}
	for r := 1; r < c.n; r++ {
		if nb := sendBytes(calls[r], r, c.n); nb > 0 {
			calls[r].Send = base + uint64(offs[r][0])
			copy(bytes(calls[r].Send, nb), s.frames[r].data)
		}
		if recvBytes(calls[r], r, c.n) > 0 {
			calls[r].Recv = base + uint64(offs[r][1])
		}
	}
	runErr := runCollective(calls)
	for r := 1; r < c.n; r++ {
		f := s.frames[r]
		out := &frame{typ: frameResult, kind: f.kind, dtype: f.dtype, op: f.op, from: 0, to: r, root: f.root, seq: k, count: f.count}
		if runErr != nil {
			out.status, out.data = 1, []byte(truncate(runErr.Error()))
		} else {
			out.data = bytes(calls[r].Recv, recvBytes(calls[r], r, c.n))
		}
		if c.resultHook != nil {
			c.resultHook(k, r)
		}
		if err := c.write(out); err != nil {
			if _, left := errors.AsType[*departure](err); left {
				continue // it destroyed its communicator since it sent its part: it wants no answer
			}
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if runErr != nil {
		return fmt.Errorf("%s: %v", what, runErr)
	}
	c.mu.Lock()
	c.outColl++
	c.mu.Unlock()
	return nil
}

// growStage makes the staging memory at least n bytes; the caller holds
// stageMu.
func (c *NetComm) growStage(n int) error {
	if n == 0 || c.stage != nil && c.stage.Size() >= uintptr(n) {
		return nil
	}
	if c.stage != nil {
		c.stage.Release()
		c.stage = nil
	}
	r, err := vmem.Reserve(uintptr(n), uintptr(n))
	if err != nil {
		return err
	}
	if err := r.Commit(0, r.Size()); err != nil {
		r.Release()
		return err
	}
	c.stage = r
	return nil
}

func roundUp8(n int) int { return (n + 7) &^ 7 }

// pointToPoint posts the sends, copies what the receives get (acknowledging
// each), then waits until every send was received, all within one
// timeout, as CommGroup.pointToPoint does.
func (c *NetComm) pointToPoint(sends, recvs []Call) error {
	c.mu.Lock()
	if err := c.brokenLocked(fmt.Sprintf("send/recv of rank %d", c.rank)); err != nil {
		c.mu.Unlock()
		return err
	}
	for _, s := range sends {
		if err := c.needLocked(s.Peer); err != nil {
			c.mu.Unlock()
			return fmt.Errorf("send of rank %d to rank %d: %w", c.rank, s.Peer, err)
		}
	}
	sendKeys := make([]netKey, len(sends))
	acked := make([]chan struct{}, len(sends))
	for i, s := range sends {
		sendKeys[i] = netKey{s.Peer, c.sendSeq[s.Peer]}
		c.sendSeq[s.Peer]++
		acked[i] = make(chan struct{})
		c.acks[sendKeys[i]] = acked[i]
	}
	recvKeys := make([]netKey, len(recvs))
	boxes := make([]chan *frame, len(recvs))
	for i, r := range recvs {
		recvKeys[i] = netKey{r.Peer, c.recvSeq[r.Peer]}
		c.recvSeq[r.Peer]++
		boxes[i] = c.inboxLocked(recvKeys[i])
	}
	c.mu.Unlock()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	for i, s := range sends {
		f := &frame{typ: frameSend, kind: Send, dtype: s.Type, from: c.rank, to: s.Peer, seq: sendKeys[i].seq,
			count: s.Count, data: bytes(s.Send, s.Count*s.Type.Size())}
		if err := c.write(f); err != nil {
			return fmt.Errorf("send of rank %d to rank %d: %w", c.rank, s.Peer, err)
		}
	}
	for i, r := range recvs {
		what := fmt.Sprintf("recv of rank %d from rank %d", c.rank, r.Peer)
		f, timedOut, err := await(c, what, boxes[i], func() error { return c.needLocked(r.Peer) }, timer.C)
		if err != nil {
			return err
		}
		if timedOut {
			return fmt.Errorf("%s: timeout after %v waiting for the send", what, c.timeout)
		}
		c.mu.Lock()
		delete(c.inbox, recvKeys[i])
		c.mu.Unlock()
		if f.count != r.Count || f.dtype != r.Type {
			return fmt.Errorf("%s: %d elements of type %d sent, %d of type %d expected", what, f.count, f.dtype, r.Count, r.Type)
		}
		copy(bytes(r.Recv, len(f.data)), f.data)
		if err := c.write(&frame{typ: frameAck, from: c.rank, to: r.Peer, seq: f.seq}); err != nil {
			// A receipt for a rank that left (or that only rank 0, which
			// left, could pass on) is wanted by no one.
			if _, left := errors.AsType[*departure](err); !left {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	for i, s := range sends {
		what := fmt.Sprintf("send of rank %d to rank %d", c.rank, s.Peer)
		_, timedOut, err := await(c, what, acked[i], func() error { return c.needLocked(s.Peer) }, timer.C)
		if err != nil {
			return err
		}
		if timedOut {
			return fmt.Errorf("%s: not received within %v", what, c.timeout)
		}
	}
	return nil
}

func (c *NetComm) inboxLocked(k netKey) chan *frame {
	b := c.inbox[k]
	if b == nil {
		b = make(chan *frame, 1)
		c.inbox[k] = b
	}
	return b
}

// route is the connection a frame to rank takes: its own from rank 0,
// rank 0's from the others.
func (c *NetComm) route(rank int) *link {
	if c.rank == 0 {
		return c.links[rank]
	}
	return c.links[0]
}

// write sends f toward f.to, within the timeout. If the rank at the other
// end of the connection said goodbye, it writes nothing and returns the
// *departure.
func (c *NetComm) write(f *frame) error {
	l := c.route(f.to)
	c.mu.Lock()
	d := c.gone[l.peer]
	c.mu.Unlock()
	if d != nil {
		return d
	}
	l.lock()
	l.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	bufs := net.Buffers{f.header(), f.data}
	_, err := bufs.WriteTo(l.conn)
	if err == nil && f.from == c.rank && (f.typ == frameColl || f.typ == frameSend) {
		c.mu.Lock()
		if f.typ == frameColl {
			c.outColl++
		} else {
			c.outSend[f.to]++
		}
		c.mu.Unlock()
	}
	l.unlock()
	if err != nil {
		return c.writeError(l, err)
	}
	return nil
}

// writeError says why a write on l failed. A peer that said goodbye and
// closed its connection may fail a write before its goodbye is read: the
// reader has a moment to take it, and then the error is the *departure.
func (c *NetComm) writeError(l *link, err error) error {
	c.mu.Lock()
	broken := c.err != nil
	c.mu.Unlock()
	if !broken {
		t := time.NewTimer(abortGrace)
		select {
		case <-l.done:
		case <-t.C:
		}
		t.Stop()
		c.mu.Lock()
		d := c.gone[l.peer]
		c.mu.Unlock()
		if d != nil {
			return d
		}
	}
	return c.linkError(l, err, true)
}

// read takes l's frames until the connection fails, the communicator
// breaks or the peer says goodbye. It waits for a frame's first byte
// without a deadline (an idle rank is not a dead one: a call waiting on it
// has its own timeout), and for the rest of the frame at most the timeout
// between chunks.
func (c *NetComm) read(l *link) {
	defer close(l.done)
	h := make([]byte, headerSize)
	for {
		l.conn.SetReadDeadline(time.Time{})
		if _, err := io.ReadFull(l.conn, h[:1]); err != nil {
			c.fail(c.linkError(l, err, false))
			return
		}
		l.conn.SetReadDeadline(time.Now().Add(c.timeout))
		if _, err := io.ReadFull(l.conn, h[1:]); err != nil {
			c.fail(c.linkError(l, err, true))
			return
		}
		f, n, err := parseHeader(h, c.n)
		if err != nil {
			c.fail(fmt.Errorf("rank %d sent a bad message: %v", l.peer, err))
			return
		}
		f.data = make([]byte, 0, min(n, readChunk))
		for len(f.data) < n {
			m := len(f.data)
			f.data = slices.Grow(f.data, min(n-m, readChunk))[:m+min(n-m, readChunk)]
			l.conn.SetReadDeadline(time.Now().Add(c.timeout))
			if _, err := io.ReadFull(l.conn, f.data[m:]); err != nil {
				c.fail(c.linkError(l, err, true))
				return
			}
		}
		if err := c.dispatch(l, f); err != nil {
			c.fail(err)
			return
		}
		if f.typ == frameBye && f.from == l.peer {
			return // it left: what follows is its connection closing
		}
	}
}

// dispatch hands a frame that came on l to whoever waits for it, or
// relays it.
func (c *NetComm) dispatch(l *link, f *frame) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("rank %d sent a bad message: %s", l.peer, fmt.Sprintf(format, args...))
	}
	// On rank 0 a connection carries its rank's frames only; on the
	// others rank 0's, and what it relays.
	if c.rank == 0 && f.from != l.peer || f.from == c.rank || f.to == f.from {
		return bad("a frame from rank %d to rank %d", f.from, f.to)
	}
	if f.typ == frameAbort {
		if c.rank == 0 || f.from == 0 {
			return errors.New(string(f.data))
		}
		return bad("an abort from rank %d", f.from)
	}
	if f.typ == frameBye {
		if f.to != c.rank {
			return bad("a goodbye of rank %d for rank %d", f.from, f.to)
		}
		return c.goodbye(f, bad)
	}
	if f.to != c.rank {
		if c.rank != 0 || f.typ != frameSend && f.typ != frameAck {
			return bad("a frame of type %d for rank %d", f.typ, f.to)
		}
		if err := c.write(f); err != nil {
			if _, left := errors.AsType[*departure](err); left {
				return nil // the sender learns from the receiver's goodbye that it left
			}
			return fmt.Errorf("relaying rank %d's message to rank %d: %w", f.from, f.to, err)
		}
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch f.typ {
	case frameColl:
		if c.rank != 0 {
			return bad("a collective's input, sent to rank %d", c.rank)
		}
		if f.seq != c.inColl[f.from] {
			return bad("collective call %d, call %d expected", f.seq, c.inColl[f.from])
		}
		if len(c.slots) >= maxPending {
			return bad("more than %d collectives ahead of rank 0", maxPending)
		}
		c.inColl[f.from]++
		s := c.slotLocked(f.seq)
		s.frames[f.from] = f
		if s.got++; s.got == c.n-1 {
			close(s.ready)
		}
	case frameResult:
		if c.rank == 0 || f.from != 0 {
			return bad("a collective's result, sent to rank %d", c.rank)
		}
		ch := c.replies[f.seq]
		if ch == nil {
			return bad("the result of collective call %d, which rank %d has not made", f.seq, c.rank)
		}
		delete(c.replies, f.seq)
		ch <- f
	case frameSend:
		if f.seq != c.inSend[f.from] {
			return bad("send %d from rank %d, send %d expected", f.seq, f.from, c.inSend[f.from])
		}
		c.inSend[f.from]++
		c.inboxLocked(netKey{f.from, f.seq}) <- f
	case frameAck:
		k := netKey{f.from, f.seq}
		ch := c.acks[k]
		if ch == nil {
			return bad("a receipt for send %d to rank %d, which rank %d has not made", f.seq, f.from, c.rank)
		}
		delete(c.acks, k)
		close(ch)
	}
	return nil
}

// goodbye records that f's sender left, after checking that what it says
// it wrote has arrived (every frame it wrote comes before its goodbye),
// and wakes the calls that may need it; rank 0 passes the goodbye on to
// the other ranks.
func (c *NetComm) goodbye(f *frame, bad func(string, ...any) error) error {
	r := f.from
	sent, err := byeSends(f.data, r, c.rank, c.n)
	if err != nil {
		return bad("a goodbye of rank %d: %v", r, err)
	}
	c.mu.Lock()
	switch {
	case c.gone[r] != nil:
		c.mu.Unlock()
		return bad("a second goodbye of rank %d", r)
	case sent != c.inSend[r]:
		c.mu.Unlock()
		return bad("rank %d left after %d sends to rank %d, %d of which arrived", r, sent, c.rank, c.inSend[r])
	case c.rank == 0 && f.seq != c.inColl[r]:
		c.mu.Unlock()
		return bad("rank %d left after %d collectives, %d of its parts arrived", r, f.seq, c.inColl[r])
	}
	d := &departure{rank: r, colls: f.seq}
	c.gone[r] = d
	c.departed = append(c.departed, d)
	close(c.left)
	c.left = make(chan struct{})
	var others []*link
	if c.rank == 0 && c.err == nil {
		for p, l := range c.links {
			if l != nil && p != r && c.gone[p] == nil {
				others = append(others, l)
			}
		}
	}
	c.mu.Unlock()
	for _, l := range others {
		g := *f
		g.to = l.peer
		// At its turn: after what rank 0 relayed from r to it. A rank that
		// cannot be told is leaving too, or its own reader reports what
		// happened to its connection.
		c.write(&g)
	}
	return nil
}

// byeSends reads a goodbye's payload (of rank from, in a communicator of n
// ranks): (rank, count) pairs, 8 bytes each, by rank, of the sends it
// wrote; a rank not listed got none. It returns the count for rank to.
func byeSends(data []byte, from, to, n int) (uint64, error) {
	if len(data)%16 != 0 {
		return 0, fmt.Errorf("%d bytes of send counts", len(data))
	}
	var sent uint64
	prev := -1
	for o := 0; o < len(data); o += 16 {
		p, k := binary.LittleEndian.Uint64(data[o:]), binary.LittleEndian.Uint64(data[o+8:])
		switch {
		case p >= uint64(n) || int(p) == from:
			return 0, fmt.Errorf("%d sends to rank %d", k, p)
		case int(p) <= prev:
			return 0, fmt.Errorf("sends to rank %d listed after rank %d's", p, prev)
		case k == 0:
			return 0, fmt.Errorf("0 sends to rank %d listed", p)
		}
		prev = int(p)
		if int(p) == to {
			sent = k
		}
	}
	return sent, nil
}

// goodbyeFrame is this rank's goodbye to rank p. The caller holds p's
// link's write lock: what it says of the sends to p is exact. A goodbye to
// rank 0 lists the sends to every rank (rank 0 passes it on); rank 0's
// lists those to p.
func (c *NetComm) goodbyeFrame(p int) *frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	var data []byte
	put := func(q int, k uint64) {
		if k > 0 {
			data = binary.LittleEndian.AppendUint64(data, uint64(q))
			data = binary.LittleEndian.AppendUint64(data, k)
		}
	}
	if c.rank == 0 {
		put(p, c.outSend[p])
	} else {
		for q, k := range c.outSend {
			put(q, k)
		}
	}
	return &frame{typ: frameBye, from: c.rank, to: p, seq: c.outColl, data: data}
}

// linkError says what happened to l's connection.
func (c *NetComm) linkError(l *link, err error, midFrame bool) error {
	var ne net.Error
	var errno syscall.Errno
	switch {
	case errors.Is(err, net.ErrClosed):
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil {
			return c.err // closed because the communicator broke
		}
		return fmt.Errorf("the connection to rank %d was closed", l.peer)
	case errors.Is(err, io.EOF) && !midFrame:
		return fmt.Errorf("rank %d closed its connection (EOF)", l.peer)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("rank %d closed its connection in the middle of a message (EOF)", l.peer)
	case errors.As(err, &errno) && (errno == syscall.ECONNRESET || errno == syscall.EPIPE):
		return fmt.Errorf("rank %d closed its connection (%v)", l.peer, errno)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("timeout after %v exchanging a message with rank %d", c.timeout, l.peer)
	}
	return fmt.Errorf("connection to rank %d: %v", l.peer, err)
}

// fail breaks the communicator with err, once: calls waiting wake up and
// fail, the other ranks are told why (a short, best-effort abort frame, or
// a goodbye if err is errDestroyed: Abort of a working communicator) and
// the connections close. A rank that said goodbye is told nothing.
func (c *NetComm) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.broken)
	gone := slices.Clone(c.gone)
	c.mu.Unlock()
	bye := err == errDestroyed
	msg := fmt.Sprintf("rank %d failed: %v", c.rank, err)
	deadline := time.Now() // an abort does not wait for the write lock
	if bye {
		deadline = deadline.Add(abortGrace) // a goodbye a little, all links together
	}
	for _, l := range c.links {
		if l == nil {
			continue
		}
		// A writer in the middle of a frame keeps the lock: then the
		// connection just closes, and the other side sees that. The
		// connection closes under the lock, so nothing follows a goodbye.
		if gone[l.peer] == nil && l.lockBy(deadline) {
			f := &frame{typ: frameAbort, from: c.rank, to: l.peer, data: []byte(truncate(msg))}
			if bye {
				f = c.goodbyeFrame(l.peer)
			}
			l.conn.SetWriteDeadline(time.Now().Add(abortGrace))
			bufs := net.Buffers{f.header(), f.data}
			bufs.WriteTo(l.conn)
			l.conn.Close()
			l.unlock()
			continue
		}
		l.conn.Close()
	}
}

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage]
	}
	return s
}

func ranksText(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	return fmt.Sprintf("ranks %v", rs)
}
