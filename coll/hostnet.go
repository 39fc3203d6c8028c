package coll

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/host"
)

// Host communicators across processes: how their ranks connect. The
// collectives themselves are host.NetComm's (TCP, a star through rank 0).
//
// NewUniqueID("host") opens a listener, on 127.0.0.1 (InitFromEnv: on
// MASTER_ADDR's host) at a port of the system's choice, and writes into the
// id its address and a random token. Rank 0's InitRank takes that listener
// from a registry of this process (keyed by the token), accepts one
// connection from every other rank and closes it; the other ranks dial the
// address. Each connection opens with a hello: magic, version, token, rank
// and world size. A hello with the wrong token or world size, a rank out of
// range or already joined, or anything else is refused and closed, and
// rank 0 goes on waiting until every rank has joined or its timeout
// passes; hellos are read concurrently, each by the same deadline, so a
// connection that says half a hello and falls silent holds nothing up.
// Once all have joined, rank 0 answers every hello: the communicator is up.
//
// An id whose rank 0 never calls InitRank keeps its listener open until
// the process exits (InitRank with world 1 closes it too).

// UniqueID layout on host: magic [0,4), version 4, address length 5, token
// [6,38), address (host:port) [38, 38+length).
var hostIDMagic = [4]byte{'G', 'G', 'H', 'N'}

const (
	hostNetVersion = 1
	tokenSize      = 32
	maxAddr        = len(UniqueID{}) - 38
)

// Hello (48 bytes): magic [0,4), version 4, zero [5,8), token [8,40), rank
// [40,44), world [44,48). Answer (8 bytes): magic [0,4), status 4, zero.
var (
	helloMagic  = [4]byte{'G', 'G', 'H', 'H'}
	answerMagic = [4]byte{'G', 'G', 'H', 'A'}
)

const helloSize = 48

// Answers to a hello.
const (
	joinOK = iota
	joinNotHello
	joinWrongToken
	joinWrongWorld
	joinBadRank
	joinRankTwice
	joinGaveUp // rank 0 stopped waiting for the others
)

var joinWords = [...]string{
	joinOK:         "joined",
	joinNotHello:   "not a hello of this protocol (version)",
	joinWrongToken: "wrong token: a UniqueID of another communicator",
	joinWrongWorld: "wrong world size",
	joinBadRank:    "rank out of range",
	joinRankTwice:  "rank already joined",
	joinGaveUp:     "rank 0 gave up waiting for the other ranks",
}

// listeners holds the listeners of the ids this process made, by token,
// until rank 0's InitRank takes its own.
var listeners struct {
	sync.Mutex
	m map[[tokenSize]byte]net.Listener
}

// newHostID opens the listener of a communicator's rank 0 at host and
// makes the UniqueID that names it.
func newHostID(opName, host string) (UniqueID, error) {
	var id UniqueID
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return id, errorf(opName, gg.ErrUnknown, "cannot listen for the communicator's connections: %v", err)
	}
	addr := ln.Addr().String()
	if len(addr) > maxAddr {
		ln.Close()
		return id, errorf(opName, gg.ErrInvalidValue, "address %s is longer than a UniqueID holds", addr)
	}
	var token [tokenSize]byte
	rand.Read(token[:])
	copy(id[:], hostIDMagic[:])
	id[4], id[5] = hostNetVersion, byte(len(addr))
	copy(id[6:], token[:])
	copy(id[38:], addr)
	listeners.Lock()
	if listeners.m == nil {
		listeners.m = map[[tokenSize]byte]net.Listener{}
	}
	listeners.m[token] = ln
	listeners.Unlock()
	return id, nil
}

// parseHostID reads an id newHostID made.
func parseHostID(id UniqueID) (addr string, token [tokenSize]byte, ok bool) {
	if [4]byte(id[:4]) != hostIDMagic || id[4] != hostNetVersion || int(id[5]) > maxAddr || id[5] == 0 {
		return "", token, false
	}
	copy(token[:], id[6:])
	return string(id[38 : 38+int(id[5])]), token, true
}

// takeListener removes the listener of token from the registry.
func takeListener(token [tokenSize]byte) net.Listener {
	listeners.Lock()
	defer listeners.Unlock()
	ln := listeners.m[token]
	delete(listeners.m, token)
	return ln
}

// releaseHostID closes the listener of an id, if this process has it.
func releaseHostID(id UniqueID) {
	if _, token, ok := parseHostID(id); ok {
		if ln := takeListener(token); ln != nil {
			ln.Close()
		}
	}
}

// initHostRank connects rank of a host communicator of world > 1 ranks.
func initHostRank(opName string, world, rank int, id UniqueID, timeout time.Duration) (*host.NetComm, error) {
	addr, token, ok := parseHostID(id)
	if !ok {
		return nil, errorf(opName, gg.ErrInvalidValue, "not a UniqueID of the host backend (coll.NewUniqueID(\"host\") makes them)")
	}
	if world > host.MaxNetRanks {
		return nil, errorf(opName, gg.ErrInvalidValue, "%d ranks: a host communicator across processes has at most %d", world, host.MaxNetRanks)
	}
	if rank == 0 {
		ln := takeListener(token)
		if ln == nil {
			return nil, errorf(opName, gg.ErrInvalidValue, "rank 0's UniqueID was not made by coll.NewUniqueID(\"host\") in this process, or was used already")
		}
		conns, err := acceptRanks(ln, world, token, timeout)
		if err != nil {
			return nil, errorf(opName, gg.ErrUnknown, "rank 0 of %d at %s: %v", world, addr, err)
		}
		return host.NewNetComm(0, world, conns, timeout), nil
	}
	conn, err := joinRank(addr, world, rank, token, time.Now().Add(timeout))
	if err != nil {
		code := gg.ErrUnknown
		var re refusedError
		if errors.As(err, &re) && re != joinGaveUp {
			code = gg.ErrInvalidValue
		}
		return nil, errorf(opName, code, "rank %d of %d: %v", rank, world, err)
	}
	conns := make([]net.Conn, world)
	conns[0] = conn
	return host.NewNetComm(rank, world, conns, timeout), nil
}

// refusedError is rank 0's answer to a hello it refused.
type refusedError uint8

func (e refusedError) Error() string {
	if e == joinGaveUp {
		return joinWords[e]
	}
	if int(e) < len(joinWords) {
		return "rank 0 refused the connection: " + joinWords[e]
	}
	return fmt.Sprintf("rank 0 refused the connection (answer %d)", e)
}

// acceptRanks is rank 0's side: it takes hellos on ln until every rank
// 1..world-1 has joined or the deadline passes, then closes ln and answers
// the ranks that joined. conns is indexed by rank.
func acceptRanks(ln net.Listener, world int, token [tokenSize]byte, timeout time.Duration) (conns []net.Conn, err error) {
	deadline := time.Now().Add(timeout)
	type hello struct {
		conn net.Conn
		rank int
	}
	hellos := make(chan hello)
	done := make(chan struct{})
	var mu sync.Mutex
	open := map[net.Conn]bool{} // connections whose hello is still being read
	finished := false
	defer func() {
		ln.Close()
		close(done)
		mu.Lock()
		finished = true
		for c := range open {
			c.Close()
		}
		mu.Unlock()
	}()
	var refusedMu sync.Mutex
	var refused []string
	refuse := func(c net.Conn, status byte, why string) {
		answer(c, status)
		c.Close()
		refusedMu.Lock()
		if len(refused) < 8 {
			refused = append(refused, fmt.Sprintf("%v: %s", c.RemoteAddr(), why))
		}
		refusedMu.Unlock()
	}
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed, or the deadline passed
			}
			mu.Lock()
			if finished {
				mu.Unlock()
				c.Close()
				return
			}
			open[c] = true
			mu.Unlock()
			go func() {
				rank, status, why := readHello(c, world, token, deadline)
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				if status != joinOK {
					refuse(c, status, why)
					return
				}
				select {
				case hellos <- hello{c, rank}:
				case <-done:
					c.Close()
				}
			}()
		}
	}()
	conns = make([]net.Conn, world)
	defer func() {
		if err != nil {
			for _, c := range conns {
				if c != nil {
					answer(c, joinGaveUp)
					c.Close()
				}
			}
		}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for joined := 1; joined < world; {
		select {
		case h := <-hellos:
			if conns[h.rank] != nil {
				refuse(h.conn, joinRankTwice, fmt.Sprintf("rank %d twice", h.rank))
				continue
			}
			conns[h.rank] = h.conn
			joined++
		case <-timer.C:
			var missing []int
			for r := 1; r < world; r++ {
				if conns[r] == nil {
					missing = append(missing, r)
				}
			}
			refusedMu.Lock()
			why := ""
			if len(refused) > 0 {
				why = fmt.Sprintf("; refused: %v", refused)
			}
			refusedMu.Unlock()
			return nil, fmt.Errorf("ranks %v never joined within %v%s", missing, timeout, why)
		}
	}
	for r, c := range conns {
		if c == nil {
			continue
		}
		if err := answer(c, joinOK); err != nil {
			return nil, fmt.Errorf("answering rank %d: %v", r, err)
		}
		c.SetDeadline(time.Time{})
	}
	return conns, nil
}

// readHello reads and checks one hello.
func readHello(c net.Conn, world int, token [tokenSize]byte, deadline time.Time) (rank int, status byte, why string) {
	c.SetDeadline(deadline)
	var h [helloSize]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return 0, joinNotHello, fmt.Sprintf("no hello: %v", err)
	}
	r, w := binary.LittleEndian.Uint32(h[40:]), binary.LittleEndian.Uint32(h[44:])
	switch {
	case [4]byte(h[:4]) != helloMagic || h[4] != hostNetVersion || h[5]|h[6]|h[7] != 0:
		return 0, joinNotHello, "not a hello"
	case [tokenSize]byte(h[8:40]) != token:
		return 0, joinWrongToken, "wrong token"
	case w != uint32(world):
		return 0, joinWrongWorld, fmt.Sprintf("rank %d of %d, the communicator has %d", r, w, world)
	case r == 0 || r >= uint32(world):
		return 0, joinBadRank, fmt.Sprintf("rank %d of %d", r, world)
	}
	return int(r), joinOK, ""
}

func answer(c net.Conn, status byte) error {
	var a [8]byte
	copy(a[:], answerMagic[:])
	a[4] = status
	c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := c.Write(a[:])
	return err
}

// joinRank is the side of rank 1..world-1: it dials rank 0 until it
// answers, says hello and waits for every rank to have joined.
func joinRank(addr string, world, rank int, token [tokenSize]byte, deadline time.Time) (net.Conn, error) {
	var h [helloSize]byte
	copy(h[:], helloMagic[:])
	h[4] = hostNetVersion
	copy(h[8:], token[:])
	binary.LittleEndian.PutUint32(h[40:], uint32(rank))
	binary.LittleEndian.PutUint32(h[44:], uint32(world))
	var conn net.Conn
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			conn = c
			break
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("could not reach rank 0 at %s: %v", addr, err)
		}
		time.Sleep(wait)
	}
	conn.SetDeadline(deadline)
	var a [8]byte
	_, err := conn.Write(h[:])
	if err == nil {
		_, err = io.ReadFull(conn, a[:])
	}
	if err != nil {
		conn.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("rank 0 at %s did not complete the communicator by the deadline", addr)
		}
		return nil, fmt.Errorf("rank 0 at %s: %v", addr, err)
	}
	if [4]byte(a[:4]) != answerMagic {
		conn.Close()
		return nil, fmt.Errorf("%s is not rank 0 of a host communicator", addr)
	}
	if a[4] != joinOK {
		conn.Close()
		return nil, refusedError(a[4])
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}
