package host

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"
)

// Collectives of the host backend: shared-memory collectives between the
// host devices of one process, the same operations NCCL provides. Every
// rank runs its calls in the same order (as NCCL requires); the k-th call
// a rank runs meets the k-th call of every other rank, whether it was
// issued to a stream or replayed by a graph, and the last rank to arrive
// does the work for all of them. A rank that does not arrive within the
// group's timeout fails the others' calls: never a hang.

// CollKind is a collective operation.
type CollKind uint8

// The collective operations.
const (
	AllReduce CollKind = iota
	Broadcast
	Reduce
	AllGather
	ReduceScatter
	Send
	Recv
)

func (k CollKind) String() string {
	return [...]string{"all-reduce", "broadcast", "reduce", "all-gather", "reduce-scatter", "send", "recv"}[k]
}

// DType is an element type, with NCCL's values (ncclDataType_t).
type DType uint8

// Element types.
const (
	Int32    DType = 2
	Int64    DType = 4
	Float16  DType = 6
	Float32  DType = 7
	Float64  DType = 8
	BFloat16 DType = 9
)

// Size is the element size in bytes.
func (t DType) Size() int {
	switch t {
	case Int32, Float32:
		return 4
	case Int64, Float64:
		return 8
	case Float16, BFloat16:
		return 2
	}
	return 0
}

// RedOp is a reduction, with NCCL's values (ncclRedOp_t).
type RedOp uint8

// Reductions.
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// Call is one rank's part of a collective: its buffers (device addresses),
// element count and type, reduction, and root or peer rank.
type Call struct {
	Kind       CollKind
	Send, Recv uint64
	Count      int // elements: per rank for all-gather's send and reduce-scatter's receive
	Type       DType
	Op         RedOp
	Peer       int // the root of broadcast and reduce, the peer of send and recv
}

// CommGroup is the ranks of one communicator (ncclCommInitAll's set).
type CommGroup struct {
	n       int
	timeout time.Duration

	mu    sync.Mutex
	seq   []uint64 // per rank: collectives run so far
	slots map[uint64]*collSlot
	p2p   map[p2pKey]*p2pSlot
	p2pN  map[[2]int]uint64 // per (from, to): sends run so far; and per (to, from) receives
}

type collSlot struct {
	calls   []Call
	arrived int
	left    int
	done    chan struct{}
	err     error
}

type p2pKey struct {
	from, to int
	seq      uint64
}

type p2pSlot struct {
	send     *Call
	consumed chan struct{} // closed when the receiver has copied the data
	posted   chan struct{} // closed when the sender has posted its buffer
}

// NewCommGroup makes a communicator of n ranks; a rank waits at most
// timeout for the others.
func NewCommGroup(n int, timeout time.Duration) *CommGroup {
	return &CommGroup{n: n, timeout: timeout, seq: make([]uint64, n), slots: map[uint64]*collSlot{},
		p2p: map[p2pKey]*p2pSlot{}, p2pN: map[[2]int]uint64{}}
}

// Size is the number of ranks.
func (g *CommGroup) Size() int { return g.n }

// CollError is what a failed collective panics with: the kernel running it
// fails with ErrLaunchFailure and this message (the device's sticky error,
// as an aborted NCCL communicator leaves its device).
type CollError struct{ Msg string }

func (e CollError) Error() string { return e.Msg }

// Run runs rank's calls, a group's (Send and Recv among them run together,
// so a pair that sends to and receives from each other cannot deadlock).
// It panics with CollError on a timeout.
func (g *CommGroup) Run(rank int, calls []Call) {
	var sends, recvs []Call
	for _, c := range calls {
		switch c.Kind {
		case Send:
			sends = append(sends, c)
		case Recv:
			recvs = append(recvs, c)
		default:
			if err := g.collective(rank, c); err != nil {
				panic(CollError{err.Error()})
			}
		}
	}
	if err := g.pointToPoint(rank, sends, recvs); err != nil {
		panic(CollError{err.Error()})
	}
}

// collective meets the other ranks' k-th collective and, last to arrive,
// does the work.
func (g *CommGroup) collective(rank int, c Call) error {
	g.mu.Lock()
	k := g.seq[rank]
	g.seq[rank]++
	s := g.slots[k]
	if s == nil {
		s = &collSlot{calls: make([]Call, g.n), left: g.n, done: make(chan struct{})}
		g.slots[k] = s
	}
	s.calls[rank] = c
	s.arrived++
	last := s.arrived == g.n
	g.mu.Unlock()
	if last {
		s.err = runCollective(s.calls)
		close(s.done)
	} else {
		select {
		case <-s.done:
		case <-time.After(g.timeout):
			return fmt.Errorf("%v (call %d of rank %d): not every rank arrived within %v", c.Kind, k, rank, g.timeout)
		}
	}
	g.mu.Lock()
	if s.left--; s.left == 0 {
		delete(g.slots, k)
	}
	g.mu.Unlock()
	return s.err
}

// pointToPoint posts rank's sends, then copies what its receives get, then
// waits until its sends were received.
func (g *CommGroup) pointToPoint(rank int, sends, recvs []Call) error {
	slot := func(from, to int, seq uint64) *p2pSlot {
		k := p2pKey{from, to, seq}
		s := g.p2p[k]
		if s == nil {
			s = &p2pSlot{consumed: make(chan struct{}), posted: make(chan struct{})}
			g.p2p[k] = s
		}
		return s
	}
	var posted []*p2pSlot
	g.mu.Lock()
	for i := range sends {
		c := &sends[i]
		n := g.p2pN[[2]int{rank, c.Peer}]
		g.p2pN[[2]int{rank, c.Peer}]++
		s := slot(rank, c.Peer, n)
		s.send = c
		close(s.posted)
		posted = append(posted, s)
	}
	type want struct {
		c Call
		s *p2pSlot
		k p2pKey
	}
	var wants []want
	for _, c := range recvs {
		key := [2]int{-1 - c.Peer, rank} // receives count apart from sends
		n := g.p2pN[key]
		g.p2pN[key]++
		wants = append(wants, want{c, slot(c.Peer, rank, n), p2pKey{c.Peer, rank, n}})
	}
	g.mu.Unlock()
	deadline := time.After(g.timeout)
	for _, w := range wants {
		select {
		case <-w.s.posted:
		case <-deadline:
			return fmt.Errorf("recv of rank %d from rank %d: the send did not come within %v", rank, w.c.Peer, g.timeout)
		}
		src := w.s.send
		if src.Count != w.c.Count || src.Type != w.c.Type {
			close(w.s.consumed)
			return fmt.Errorf("recv of rank %d from rank %d: %d elements of type %d sent, %d of type %d expected",
				rank, w.c.Peer, src.Count, src.Type, w.c.Count, w.c.Type)
		}
		n := w.c.Count * w.c.Type.Size()
		copy(bytes(w.c.Recv, n), bytes(src.Send, n))
		close(w.s.consumed)
		g.mu.Lock()
		delete(g.p2p, w.k)
		g.mu.Unlock()
	}
	for i, s := range posted {
		select {
		case <-s.consumed:
		case <-deadline:
			return fmt.Errorf("send of rank %d to rank %d: not received within %v", rank, sends[i].Peer, g.timeout)
		}
	}
	return nil
}

// bytes is n bytes of device memory at p (any host device's).
func bytes(p uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	ptr := Pointer(p, uintptr(n))
	if ptr == nil {
		panic(CollError{fmt.Sprintf("[%#x, +%d) is not device memory", p, n)})
	}
	return unsafe.Slice((*byte)(ptr), n)
}

// runCollective does a collective with every rank's call.
func runCollective(calls []Call) error {
	c0 := calls[0]
	for r, c := range calls {
		if c.Kind != c0.Kind || c.Type != c0.Type || c.Count != c0.Count || c.Op != c0.Op || c.Peer != c0.Peer {
			return fmt.Errorf("%v: rank %d's call (%v, %d elements of type %d, op %d, root %d) does not match rank 0's (%v, %d, %d, %d, %d)",
				c0.Kind, r, c.Kind, c.Count, c.Type, c.Op, c.Peer, c0.Kind, c0.Count, c0.Type, c0.Op, c0.Peer)
		}
	}
	n, size, t := c0.Count, c0.Type.Size(), c0.Type
	nb := n * size
	switch c0.Kind {
	case AllReduce, Reduce:
		acc := reduce(calls, 0, n, t, c0.Op)
		for r, c := range calls {
			if c0.Kind == AllReduce || r == c0.Peer {
				copy(bytes(c.Recv, nb), acc)
			}
		}
	case Broadcast:
		src := append([]byte(nil), bytes(calls[c0.Peer].Send, nb)...)
		for _, c := range calls {
			copy(bytes(c.Recv, nb), src)
		}
	case AllGather:
		all := make([]byte, 0, nb*len(calls))
		for _, c := range calls {
			all = append(all, bytes(c.Send, nb)...)
		}
		for _, c := range calls {
			copy(bytes(c.Recv, len(all)), all)
		}
	case ReduceScatter:
		for r, c := range calls {
			copy(bytes(c.Recv, nb), reduce(calls, r*n, n, t, c0.Op))
		}
	}
	return nil
}

// reduce reduces elements [off, off+n) of every rank's send buffer.
func reduce(calls []Call, off, n int, t DType, op RedOp) []byte {
	size := t.Size()
	out := make([]byte, n*size)
	acc := make([]float64, n) // exact for every type's values but int64 beyond 2^53
	var iacc []int64
	if t == Int32 || t == Int64 {
		iacc = make([]int64, n)
	}
	for r, c := range calls {
		in := bytes(c.Send+uint64(off*size), n*size)
		for i := 0; i < n; i++ {
			if iacc != nil {
				v := loadInt(in[i*size:], t)
				iacc[i] = combineInt(iacc[i], v, op, r == 0)
				continue
			}
			acc[i] = combine(acc[i], loadFloat(in[i*size:], t), op, r == 0)
		}
	}
	for i := 0; i < n; i++ {
		if iacc != nil {
			v := iacc[i]
			if op == Avg {
				v /= int64(len(calls))
			}
			storeInt(out[i*size:], t, v)
			continue
		}
		v := acc[i]
		if op == Avg {
			v /= float64(len(calls))
		}
		storeFloat(out[i*size:], t, v)
	}
	return out
}

func combine(a, v float64, op RedOp, first bool) float64 {
	if first {
		return v
	}
	switch op {
	case Prod:
		return a * v
	case Max:
		return math.Max(a, v)
	case Min:
		return math.Min(a, v)
	}
	return a + v
}

func combineInt(a, v int64, op RedOp, first bool) int64 {
	if first {
		return v
	}
	switch op {
	case Prod:
		return a * v
	case Max:
		return max(a, v)
	case Min:
		return min(a, v)
	}
	return a + v
}

func loadInt(b []byte, t DType) int64 {
	if t == Int32 {
		return int64(int32(binary.LittleEndian.Uint32(b)))
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func storeInt(b []byte, t DType, v int64) {
	if t == Int32 {
		binary.LittleEndian.PutUint32(b, uint32(int32(v)))
		return
	}
	binary.LittleEndian.PutUint64(b, uint64(v))
}

func loadFloat(b []byte, t DType) float64 {
	switch t {
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case BFloat16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
	}
	return float64(HalfToFloat32(binary.LittleEndian.Uint16(b)))
}

func storeFloat(b []byte, t DType, v float64) {
	switch t {
	case Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	case BFloat16:
		binary.LittleEndian.PutUint16(b, Float32ToBFloat16(float32(v)))
	default:
		binary.LittleEndian.PutUint16(b, Float32ToHalf(float32(v)))
	}
}

// Float32ToBFloat16 rounds f to bfloat16, to nearest even.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN stays NaN
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// HalfToFloat32 widens an IEEE 754 half.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		for mant&0x400 == 0 {
			mant <<= 1
			exp--
		}
		exp++
		mant &= 0x3ff
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// Float32ToHalf rounds f to an IEEE 754 half, to nearest even.
func Float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff:
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00 // overflow: infinity
	case exp-127 < -25:
		return sign // underflow: zero
	case exp-127 < -14: // subnormal half
		mant |= 0x800000
		shift := uint32(-14-(exp-127)) + 13
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || rem == mid && half&1 == 1 {
			half++
		}
		return sign | uint16(half)
	}
	h := uint32(exp-127+15)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent: correct, up to infinity
	}
	return sign | uint16(h)
}
