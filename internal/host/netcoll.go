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

// Frame types.
const (
	frameColl   = 1 // a rank's part of a collective: its send buffer, to rank 0
	frameResult = 2 // rank 0's answer: the rank's receive buffer, or why the collective failed
	frameSend   = 3 // a Send's data, to its receiver (relayed by rank 0)
	frameAck    = 4 // the receiver has copied a Send's data: the sender may return
	frameAbort  = 5 // the sender's communicator broke; the payload says why
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

	// Only the reader of the connection frames from a rank arrive on
	// touches that rank's counters: the sequence numbers expected next.
	inColl []uint64
	inSend []uint64

	stageMu sync.Mutex
	stage   *vmem.Reservation // rank 0: copies of the other ranks' buffers
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
	wmu  sync.Mutex
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
		inColl: make([]uint64, n), inSend: make([]uint64, n)}
	for r, conn := range conns {
		if conn != nil {
			c.links[r] = &link{peer: r, conn: conn}
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
// other ranks are told. It is how a communicator is destroyed.
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
	var r *frame
	select {
	case r = <-result:
	case <-c.broken:
		// A rank that got its answer may have broken the communicator
		// since (destroyed it): the answer came first.
		select {
		case r = <-result:
		default:
			return c.brokenWhile(what)
		}
	case <-timer.C:
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
	select {
	case <-s.ready:
	case <-c.broken:
		return c.brokenWhile(what)
	case <-timer.C:
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
		if err := c.write(out); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if runErr != nil {
		return fmt.Errorf("%s: %v", what, runErr)
	}
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
		var f *frame
		select {
		case f = <-boxes[i]:
		case <-c.broken:
			select {
			case f = <-boxes[i]:
			default:
				return c.brokenWhile(what)
			}
		case <-timer.C:
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
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	for i, s := range sends {
		what := fmt.Sprintf("send of rank %d to rank %d", c.rank, s.Peer)
		select {
		case <-acked[i]:
		case <-c.broken:
			select {
			case <-acked[i]:
			default:
				return c.brokenWhile(what)
			}
		case <-timer.C:
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

// write sends f toward f.to, within the timeout.
func (c *NetComm) write(f *frame) error {
	l := c.route(f.to)
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	bufs := net.Buffers{f.header(), f.data}
	if _, err := bufs.WriteTo(l.conn); err != nil {
		return c.linkError(l, err, true)
	}
	return nil
}

// read takes l's frames until the connection fails or the communicator
// breaks. It waits for a frame's first byte without a deadline (an idle
// rank is not a dead one: a call waiting on it has its own timeout), and
// for the rest of the frame at most the timeout between chunks.
func (c *NetComm) read(l *link) {
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
	if f.to != c.rank {
		if c.rank != 0 || f.typ != frameSend && f.typ != frameAck {
			return bad("a frame of type %d for rank %d", f.typ, f.to)
		}
		if err := c.write(f); err != nil {
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
// fail, the other ranks are told why (a short, best-effort abort frame)
// and the connections close.
func (c *NetComm) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.broken)
	c.mu.Unlock()
	msg := fmt.Sprintf("rank %d failed: %v", c.rank, err)
	if err == errDestroyed {
		msg = fmt.Sprintf("rank %d destroyed its communicator", c.rank)
	}
	for _, l := range c.links {
		if l == nil {
			continue
		}
		// A writer in the middle of a frame keeps the lock: then the
		// connection just closes, and the other side sees that.
		if l.wmu.TryLock() {
			l.conn.SetWriteDeadline(time.Now().Add(abortGrace))
			f := &frame{typ: frameAbort, from: c.rank, to: l.peer, data: []byte(truncate(msg))}
			bufs := net.Buffers{f.header(), f.data}
			bufs.WriteTo(l.conn)
			l.wmu.Unlock()
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
