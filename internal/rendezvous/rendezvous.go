// Package rendezvous hands rank 0's bytes (an NCCL unique id, or a host
// communicator's address and token) to the other ranks of a job over TCP,
// as torchrun's and NCCL's own examples do with MPI_Bcast: rank 0 listens
// at the job's address, every other rank dials it, says who it is, and
// reads the bytes. Rank 0 returns once every rank has them, so a rank that
// never starts is reported by name, with the deadline, instead of hanging
// the job in NCCL's initialisation.
//
// # Threat model
//
// The network is trusted: nobody reads or forges the traffic. What the
// protocol guards against is accidental cross-talk and misbehaving peers:
// a rank of another job that dials the same address (a stale job, a typo in
// MASTER_ADDR or MASTER_PORT), a rank 0 of another job listening where this
// job's should, a port scanner, a half-dead client. Every job has a token
// (GPUGRAPH_JOB_TOKEN; empty when the launcher sets none, which then must
// be empty on every rank): a rank proves it knows the token before rank 0
// gives it the payload, and rank 0 proves it knows the token before the
// rank accepts the payload. The proofs are HMAC-SHA256 keyed by the token,
// so the token itself never travels; the payload travels in clear, and an
// eavesdropper could replay a rank's hello: out of scope.
//
// Rank 0 handles every connection concurrently, each within a few seconds
// (connTimeout) and at most maxConns at once (more are closed at once), so
// garbage, silence or a flood of connections delays no real rank for long.
//
// # Protocol, version 2
//
// Rank r of 1..world-1 dials rank 0 and sends a hello of 61 bytes:
//
//	[0,4)    magic "GGRV"
//	4        version: 2
//	[5,9)    rank, int32 big-endian
//	[9,13)   world size, int32 big-endian
//	[13,29)  nonce: 16 random bytes
//	[29,61)  HMAC-SHA256(token, "gpugraph rendezvous v2 hello" || hello[0,29))
//
// Rank 0 reads the magic and the version first (a mismatch is answered at
// once), then the rest, and answers with 6 bytes:
//
//	[0,4)    magic "GGRV"
//	4        rank 0's version
//	5        status: 0 ok; a Refusal otherwise (1 version, 2 token,
//	         3 world size, 4 rank out of range, 5 rank already joined)
//
// checked in that order. A refusal ends the answer (one for another version
// is padded with zeros to 132 bytes, so that a version-1 rank, which reads
// 132 bytes and takes a non-zero first word for a refusal, stops at once)
// and rank 0 closes the connection. Status 0 goes on:
//
//	[6,134)    the payload
//	[134,166)  HMAC-SHA256(token, "gpugraph rendezvous v2 answer" || hello || answer[0,134))
//
// The rank checks the HMAC, which binds the answer to its nonce, and sends
// one byte, 0x06 (ack). Rank 0 counts the rank as served only once it has
// read the ack, and replies with one byte, 0x06 (confirm). A rank whose
// connection breaks before the confirm dials again: rank 0 gives it the
// payload again if it never read the ack, or refuses it as already joined,
// which the rank, holding a payload rank 0 proved, takes as done. So a
// rank reconnecting after a blip is never refused as a duplicate unless it
// already had the payload. (Two processes claiming the same rank at the
// same moment may both get it: they cannot be told from one that dialled
// twice.)
//
// Version 1 had no version byte: a 12-byte request (magic, rank, world
// size) and a 132-byte answer (a big-endian uint32 status, the payload).
// A version-2 rank 0 answers it with a version refusal; a version-1 rank 0
// refuses a version-2 hello with status 1, which a version-2 rank reports
// as a version mismatch.
package rendezvous

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// magic opens every hello and answer, so a stray connection is told apart.
var magic = [4]byte{'G', 'G', 'R', 'V'}

// version is this protocol's; version 1 is the unversioned one before it.
const version = 2

// Payload is the size of what is handed out: an ncclUniqueId.
const Payload = 128

// Sizes on the wire.
const (
	nonceSize    = 16
	macSize      = sha256.Size
	helloSize    = 4 + 1 + 4 + 4 + nonceSize + macSize // 61
	helloMACAt   = helloSize - macSize
	headSize     = 6
	answerSize   = headSize + Payload + macSize // 166
	v1AnswerSize = 4 + Payload
	ackByte      = 0x06 // the rank's ack, and rank 0's confirm
)

const (
	helloLabel  = "gpugraph rendezvous v2 hello"
	answerLabel = "gpugraph rendezvous v2 answer"
)

// Rank 0's bounds: a connection has connTimeout (never past Serve's
// deadline) to say its hello and ack the payload, which take two round
// trips; at most maxConns connections are handled at once, and more are
// closed as soon as accepted, so junk cannot pile up goroutines and
// descriptors. A real rank closed that way dials again shortly.
const (
	connTimeout = 3 * time.Second
	maxConns    = 64
)

// attemptTimeout bounds one attempt of Fetch (never past its deadline): a
// port that accepts and never answers is dialled again, in case the right
// rank 0 comes up there.
const attemptTimeout = 10 * time.Second

// refuseDrain bounds how long rank 0 waits for a refused rank to close.
const refuseDrain = 500 * time.Millisecond

// Errors a rank reports.
var (
	// ErrTimeout: the deadline passed before every rank joined (Serve),
	// or before rank 0 gave this rank the payload (Fetch).
	ErrTimeout = errors.New("rendezvous: deadline passed")
	// ErrMismatch: rank 0 refused this rank, for good (a *RefusedError
	// says why), or the rank's arguments cannot be said on the wire.
	ErrMismatch = errors.New("rendezvous: ranks disagree about the job")
	// ErrOtherJob: rank 0's address answered, but not as this job's rank 0
	// (it did not prove the job's token, or spoke no rendezvous at all).
	// Fetch keeps dialling until its deadline, in case the right rank 0
	// comes up, and then reports it with ErrTimeout.
	ErrOtherJob = errors.New("rendezvous: rank 0's address answered as another job")
)

// otherJobError is an answer as another job: it says how, and is ErrOtherJob.
type otherJobError struct{ how string }

func (e *otherJobError) Error() string { return e.how }
func (e *otherJobError) Unwrap() error { return ErrOtherJob }

// Refusal is why rank 0 refused a rank: the status byte of its answer.
type Refusal uint8

const (
	RefusedVersion Refusal = iota + 1 // another version of this protocol
	RefusedToken                      // the rank's job token is not rank 0's
	RefusedWorld                      // the rank counts another number of ranks
	RefusedRank                       // the rank is not one of 1..world-1
	RefusedJoined                     // the rank already got the payload and acknowledged it
)

var refusalWords = [...]string{
	RefusedVersion: "another version of the rendezvous protocol",
	RefusedToken:   "wrong job token (rank 0 is of another job, or GPUGRAPH_JOB_TOKEN differs between the ranks)",
	RefusedWorld:   "wrong world size (rank 0's job has another number of ranks)",
	RefusedRank:    "rank out of range",
	RefusedJoined:  "rank already joined (another process has this rank)",
}

func (r Refusal) String() string {
	if r > 0 && int(r) < len(refusalWords) {
		return refusalWords[r]
	}
	return "refusal " + strconv.Itoa(int(r))
}

// RefusedError is rank 0's refusal of a rank, as Fetch reports it. It is
// final (the same hello would be refused again), and errors.Is(err,
// ErrMismatch) holds.
type RefusedError struct {
	Addr        string // rank 0's
	Rank, World int    // as this rank asked
	Reason      Refusal
	Version     int // with RefusedVersion: rank 0's version (1: the unversioned protocol)
}

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("%v: rank 0 at %s refused rank %d of %d: %v", ErrMismatch, e.Addr, e.Rank, e.World, e.Reason)
	if e.Reason == RefusedVersion {
		s += fmt.Sprintf(" (rank 0 speaks version %d, this rank %d: the ranks run different gpugraph builds)", e.Version, version)
	}
	return s
}

func (e *RefusedError) Unwrap() error { return ErrMismatch }

func mac(key []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// What rank 0 refused or dropped, for its error at the deadline.
type kind int

const (
	kindGarbage kind = iota
	kindVersion
	kindToken
	kindWorld
	kindRank
	kindJoined
	kindSilent
	kindNoAck
	kindBusy
	numKinds
)

var kindWords = [numKinds]string{
	kindGarbage: "not rendezvous hellos",
	kindVersion: "of another protocol version",
	kindToken:   "with a wrong job token",
	kindWorld:   "of another world size",
	kindRank:    "with a rank out of range",
	kindJoined:  "of a rank already joined",
	kindSilent:  "incomplete or silent, dropped",
	kindNoAck:   "given the payload but never acknowledged",
	kindBusy:    fmt.Sprintf("over %d at once, closed", maxConns),
}

// examples is how many connections of each kind rank 0's error describes.
const examples = 2

// server is rank 0's state while it serves.
type server struct {
	ln       net.Listener
	world    int
	key      []byte
	payload  [Payload]byte
	deadline time.Time
	stopOnce sync.Once

	mu      sync.Mutex
	stopped bool // ln closed: the ranks all joined or the deadline passed
	served  []bool
	left    int               // ranks not served yet
	conns   map[net.Conn]bool // being handled
	count   [numKinds]int
	example [numKinds][]string
}

// Serve is rank 0's side: it accepts on ln until every rank 1..world-1 of
// the job with token has read payload and acknowledged it, or the deadline
// passes (ErrTimeout, naming the ranks that never came and summing up what
// was refused). It closes ln.
func Serve(ln net.Listener, world int, token string, payload [Payload]byte, deadline time.Time) error {
	if world < 1 || world > math.MaxInt32 {
		ln.Close()
		return fmt.Errorf("%w: a job of %d ranks", ErrMismatch, world)
	}
	if world == 1 {
		ln.Close()
		return nil
	}
	s := &server{ln: ln, world: world, key: []byte(token), payload: payload, deadline: deadline,
		served: make([]bool, world), left: world - 1, conns: map[net.Conn]bool{}}
	s.served[0] = true
	timer := time.AfterFunc(time.Until(deadline), s.stop)
	defer timer.Stop()
	var handlers sync.WaitGroup
	var acceptErr error
	for wait := 5 * time.Millisecond; ; {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				break
			}
			// Out of descriptors, say: the connections being handled free
			// some. The timer closes ln at the deadline.
			acceptErr = err
			time.Sleep(wait)
			wait = min(2*wait, 200*time.Millisecond)
			continue
		}
		wait = 5 * time.Millisecond
		s.mu.Lock()
		if s.stopped || len(s.conns) >= maxConns {
			if !s.stopped {
				s.note(kindBusy, conn.RemoteAddr().String())
			}
			s.mu.Unlock()
			conn.Close()
			continue
		}
		s.conns[conn] = true
		s.mu.Unlock()
		handlers.Go(func() {
			s.handle(conn)
			conn.Close()
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		})
	}
	s.stop() // ln was closed by someone else
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	handlers.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == 0 {
		return nil
	}
	var missing []int
	for r, ok := range s.served {
		if !ok {
			missing = append(missing, r)
		}
	}
	why := s.summary()
	if acceptErr != nil {
		why += fmt.Sprintf("; accepting: %v", acceptErr)
	}
	if time.Now().Before(deadline) {
		return fmt.Errorf("rendezvous: rank 0 at %v: listener closed before the deadline: ranks %s of %d never joined%s", ln.Addr(), rankList(missing), world, why)
	}
	return fmt.Errorf("%w: rank 0 at %v: ranks %s of %d never joined%s", ErrTimeout, ln.Addr(), rankList(missing), world, why)
}

// stop closes the listener: Serve's accept loop ends.
func (s *server) stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.ln.Close()
	})
}

// note records a refused connection; s.mu is held.
func (s *server) note(k kind, what string) {
	s.count[k]++
	if len(s.example[k]) < examples {
		if len(what) > 80 {
			what = what[:77] + "..."
		}
		s.example[k] = append(s.example[k], what)
	}
}

// refused records a refused connection, unless Serve is over (then it was
// closed by Serve, not refused). A refusal is recorded before it is sent,
// so the record follows the order of the ranks' requests.
func (s *server) refused(k kind, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.note(k, fmt.Sprintf(format, args...))
	}
}

// summary says what was refused, in bounded length; s.mu is held.
func (s *server) summary() string {
	var parts []string
	for k, n := range s.count {
		if n == 0 {
			continue
		}
		p := fmt.Sprintf("%d %s", n, kindWords[k])
		if ex := s.example[k]; len(ex) > 0 {
			eg := ""
			if n > len(ex) {
				eg = "e.g. "
			}
			p += " (" + eg + strings.Join(ex, ", ") + ")"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return "; refused: " + strings.Join(parts, "; ")
}

// rankList names ranks, the first few of many: "[1 3]".
func rankList(ranks []int) string {
	const most = 16
	s := make([]string, 0, most)
	for _, r := range ranks[:min(len(ranks), most)] {
		s = append(s, strconv.Itoa(r))
	}
	if len(ranks) > most {
		return fmt.Sprintf("[%s and %d more]", strings.Join(s, " "), len(ranks)-most)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// readFailure says why a read of a rank's connection failed, briefly.
func readFailure(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "silent"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	}
	return err.Error()
}

// handle answers one connection (the protocol in the package doc).
func (s *server) handle(conn net.Conn) {
	conn.SetDeadline(earlier(time.Now().Add(connTimeout), s.deadline))
	from := conn.RemoteAddr().String()
	var h [helloSize]byte
	if n, err := io.ReadFull(conn, h[:5]); err != nil {
		if n == 0 {
			s.refused(kindSilent, "%s: %s", from, readFailure(err))
		} else {
			s.refused(kindSilent, "%s: %s after %d bytes", from, readFailure(err), n)
		}
		return
	}
	if [4]byte(h[:4]) != magic {
		s.refused(kindGarbage, "%s", from)
		return
	}
	if h[4] != version {
		s.refused(kindVersion, "%s: version %d", from, h[4])
		s.refuse(conn, RefusedVersion)
		return
	}
	if n, err := io.ReadFull(conn, h[5:]); err != nil {
		s.refused(kindSilent, "%s: %s after %d bytes", from, readFailure(err), 5+n)
		return
	}
	rank := int(int32(binary.BigEndian.Uint32(h[5:])))
	world := int(int32(binary.BigEndian.Uint32(h[9:])))
	// The token first: another job's rank and world size mean nothing here.
	if !hmac.Equal(h[helloMACAt:], mac(s.key, helloLabel, h[:helloMACAt])) {
		s.refused(kindToken, "%s: rank %d of %d", from, rank, world)
		s.refuse(conn, RefusedToken)
		return
	}
	if world != s.world {
		s.refused(kindWorld, "%s: rank %d of %d, the job has %d", from, rank, world, s.world)
		s.refuse(conn, RefusedWorld)
		return
	}
	if rank < 1 || rank >= s.world {
		s.refused(kindRank, "%s: rank %d of %d", from, rank, world)
		s.refuse(conn, RefusedRank)
		return
	}
	s.mu.Lock()
	joined := s.served[rank]
	s.mu.Unlock()
	if joined {
		s.refused(kindJoined, "%s: rank %d", from, rank)
		s.refuse(conn, RefusedJoined)
		return
	}
	var a [answerSize]byte
	copy(a[:], magic[:])
	a[4] = version
	copy(a[headSize:], s.payload[:])
	copy(a[headSize+Payload:], mac(s.key, answerLabel, h[:], a[:headSize+Payload]))
	var ack [1]byte
	if _, err := conn.Write(a[:]); err != nil {
		s.refused(kindNoAck, "rank %d: %v", rank, err)
		return
	}
	if _, err := io.ReadFull(conn, ack[:]); err != nil || ack[0] != ackByte {
		why := fmt.Sprintf("ack %#x", ack[0])
		if err != nil {
			why = readFailure(err)
		}
		s.refused(kindNoAck, "rank %d: %s", rank, why)
		return
	}
	// Counted before the confirm, so that a rank that has its confirm is
	// refused as joined if it comes again. The last rank's confirm is
	// written before Serve closes the connections; another's may be cut
	// by that close, and the rank, dialling again, finds the port closed
	// or hears it joined: it has its payload either way.
	s.mu.Lock()
	last := false
	if !s.served[rank] {
		s.served[rank] = true
		s.left--
		last = s.left == 0
	}
	s.mu.Unlock()
	conn.Write([]byte{ackByte})
	if last {
		s.stop()
	}
}

// refuse answers a hello with a refusal, and closes gently: bytes of the
// hello left unread (a hello of another version is read only up to its
// version) would make the close a reset, which may beat the refusal to the
// rank. The rank closes once it has read the refusal; the drain is bounded
// by the connection's deadline and by refuseDrain.
func (s *server) refuse(conn net.Conn, why Refusal) {
	var a [v1AnswerSize]byte
	copy(a[:], magic[:])
	a[4], a[5] = version, byte(why)
	n := headSize
	if why == RefusedVersion {
		n = v1AnswerSize
	}
	if _, err := conn.Write(a[:n]); err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.CloseWrite()
		tc.SetReadDeadline(earlier(time.Now().Add(refuseDrain), s.deadline))
		io.Copy(io.Discard, io.LimitReader(tc, 4<<10))
	}
}

// Fetch is the side of rank 1..world-1 of the job with token: it dials
// addr until rank 0 gives it the payload, and returns it. A refusal by rank
// 0 is final (a *RefusedError, ErrMismatch); a connection that fails, or an
// answer as another job (ErrOtherJob), is tried again until the deadline
// (ErrTimeout). Once it holds a payload rank 0 proved, Fetch does not
// fail: it dials again until rank 0 confirms the ack, says the rank
// already joined, no longer listens, or the deadline passes, and returns
// the payload.
func Fetch(addr string, rank, world int, token string, deadline time.Time) ([Payload]byte, error) {
	var none [Payload]byte
	if rank != int(int32(rank)) || world != int(int32(world)) {
		return none, fmt.Errorf("%w: rank %d of %d does not fit the protocol", ErrMismatch, rank, world)
	}
	f := fetcher{addr: addr, rank: rank, world: world, key: []byte(token)}
	var (
		got   *[Payload]byte // the payload rank 0 proved, acknowledged but not confirmed
		last  error          // the last attempt's failure
		other error          // the last answer as another job
	)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		p, confirmed, err := f.attempt(deadline)
		var re *RefusedError
		switch {
		case err == nil && confirmed:
			return p, nil
		case err == nil:
			got = &p
		case got != nil && (errors.As(err, &re) && re.Reason == RefusedJoined || errors.Is(err, syscall.ECONNREFUSED)):
			// Rank 0 counted the ack, or is done listening: either it
			// has every rank, or it gave up and so will the job.
			return *got, nil
		case errors.Is(err, ErrMismatch):
			return none, err
		case errors.Is(err, ErrOtherJob):
			other = err
		}
		if err != nil {
			last = err
		}
		if time.Now().Add(wait).After(deadline) {
			switch {
			case got != nil:
				return *got, nil
			case other != nil:
				return none, fmt.Errorf("%w: rank %d of %d: rank 0's address %s answered as another job: %w", ErrTimeout, rank, world, addr, other)
			}
			return none, fmt.Errorf("%w: rank %d of %d could not reach rank 0 at %s: %v", ErrTimeout, rank, world, addr, last)
		}
		time.Sleep(wait)
	}
}

type fetcher struct {
	addr        string
	rank, world int
	key         []byte
}

// attempt is one connection to rank 0. err == nil means this rank holds
// the payload, rank 0 proved it and was sent the ack; confirmed, that
// rank 0 said it counted the ack.
func (f *fetcher) attempt(deadline time.Time) (p [Payload]byte, confirmed bool, err error) {
	d := earlier(time.Now().Add(attemptTimeout), deadline)
	conn, err := (&net.Dialer{Deadline: d}).Dial("tcp", f.addr)
	if err != nil {
		return p, false, err
	}
	defer conn.Close()
	conn.SetDeadline(d)
	var h [helloSize]byte
	copy(h[:], magic[:])
	h[4] = version
	binary.BigEndian.PutUint32(h[5:], uint32(int32(f.rank)))
	binary.BigEndian.PutUint32(h[9:], uint32(int32(f.world)))
	rand.Read(h[13:helloMACAt])
	copy(h[helloMACAt:], mac(f.key, helloLabel, h[:helloMACAt]))
	if _, err := conn.Write(h[:]); err != nil {
		return p, false, err
	}
	var a [answerSize]byte
	if _, err := io.ReadFull(conn, a[:headSize]); err != nil {
		return p, false, err
	}
	refused := func(why Refusal, v int) error {
		return &RefusedError{Addr: f.addr, Rank: f.rank, World: f.world, Reason: why, Version: v}
	}
	switch {
	case [4]byte(a[:4]) == [4]byte{0, 0, 0, 1}:
		// A version-1 rank 0's refusal: it read a rank out of range.
		return p, false, refused(RefusedVersion, 1)
	case [4]byte(a[:4]) != magic:
		return p, false, &otherJobError{"it does not speak the gpugraph rendezvous"}
	case a[4] != version:
		return p, false, refused(RefusedVersion, int(a[4]))
	case a[5] != 0:
		return p, false, refused(Refusal(a[5]), version)
	}
	if _, err := io.ReadFull(conn, a[headSize:]); err != nil {
		return p, false, err
	}
	if !hmac.Equal(a[headSize+Payload:], mac(f.key, answerLabel, h[:], a[:headSize+Payload])) {
		return p, false, &otherJobError{"it gave a payload without proving the job's token"}
	}
	copy(p[:], a[headSize:])
	if _, err := conn.Write([]byte{ackByte}); err != nil {
		return p, false, nil
	}
	var c [1]byte
	if _, err := io.ReadFull(conn, c[:]); err != nil || c[0] != ackByte {
		return p, false, nil
	}
	return p, true, nil
}
