// Package rendezvous hands rank 0's bytes (an NCCL unique id) to the other
// ranks of a job over TCP, as torchrun's and NCCL's own examples do with
// MPI_Bcast: rank 0 listens at the job's address, every other rank dials
// it, says who it is, and reads the bytes. Rank 0 returns once every rank
// has them, so a rank that never starts is reported by name, with the
// deadline, instead of hanging the job in NCCL's initialisation.
package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"
)

// magic opens every request, so a stray connection is told apart.
var magic = [4]byte{'G', 'G', 'R', 'V'}

// Payload is the size of what is handed out: an ncclUniqueId.
const Payload = 128

// Errors a rank reports.
var (
	ErrTimeout  = errors.New("rendezvous: deadline passed")
	ErrMismatch = errors.New("rendezvous: ranks disagree about the job")
)

const (
	statusOK       = 0
	statusMismatch = 1
)

// Serve is rank 0's side: it accepts on ln until every rank 1..world-1 has
// read payload, or the deadline passes (ErrTimeout, naming the ranks that
// never came). It closes ln.
func Serve(ln net.Listener, world int, payload [Payload]byte, deadline time.Time) error {
	defer ln.Close()
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	served := make([]bool, world)
	served[0] = true
	left := world - 1
	var bad []string
	for left > 0 {
		conn, err := ln.Accept()
		if err != nil {
			var missing []int
			for r, ok := range served {
				if !ok {
					missing = append(missing, r)
				}
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return fmt.Errorf("%w: rank 0 at %v: ranks %v of %d never joined%s", ErrTimeout, ln.Addr(), missing, world, badList(bad))
			}
			return fmt.Errorf("rendezvous: rank 0 at %v: %v (ranks %v missing)", ln.Addr(), err, missing)
		}
		rank, why := serveOne(conn, world, served, payload, deadline)
		if why != "" {
			bad = append(bad, why)
			continue
		}
		served[rank] = true
		left--
	}
	return nil
}

func badList(bad []string) string {
	if len(bad) == 0 {
		return ""
	}
	return "; refused: " + fmt.Sprint(bad)
}

// serveOne answers one connection; why says what was wrong with it.
func serveOne(conn net.Conn, world int, served []bool, payload [Payload]byte, deadline time.Time) (int, string) {
	defer conn.Close()
	d := time.Now().Add(10 * time.Second) // one slow client cannot hold the others up long
	if deadline.Before(d) {
		d = deadline
	}
	conn.SetDeadline(d)
	var req [12]byte
	if _, err := io.ReadFull(conn, req[:]); err != nil {
		return 0, fmt.Sprintf("%v: %v", conn.RemoteAddr(), err)
	}
	if [4]byte(req[:4]) != magic {
		return 0, fmt.Sprintf("%v: not a rendezvous request", conn.RemoteAddr())
	}
	rank, w := int(binary.BigEndian.Uint32(req[4:])), int(binary.BigEndian.Uint32(req[8:]))
	var resp [4 + Payload]byte
	if w != world || rank <= 0 || rank >= world || served[rank] {
		binary.BigEndian.PutUint32(resp[:], statusMismatch)
		conn.Write(resp[:])
		why := fmt.Sprintf("rank %d of %d (the job has %d ranks)", rank, w, world)
		if w == world && rank > 0 && rank < world {
			why = fmt.Sprintf("rank %d twice", rank)
		}
		return 0, why
	}
	copy(resp[4:], payload[:])
	if _, err := conn.Write(resp[:]); err != nil {
		return 0, fmt.Sprintf("rank %d: %v", rank, err)
	}
	return rank, ""
}

// Fetch is the side of rank 1..world-1: it dials addr until rank 0
// answers or the deadline passes, and returns rank 0's payload.
func Fetch(addr string, rank, world int, deadline time.Time) ([Payload]byte, error) {
	var out [Payload]byte
	var last error
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		conn, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			out, err = fetchOne(conn, rank, world, deadline)
			if err == nil || errors.Is(err, ErrMismatch) {
				return out, err
			}
		}
		last = err
		if time.Now().Add(wait).After(deadline) {
			return out, fmt.Errorf("%w: rank %d of %d could not reach rank 0 at %s: %v", ErrTimeout, rank, world, addr, last)
		}
		time.Sleep(wait)
	}
}

func fetchOne(conn net.Conn, rank, world int, deadline time.Time) ([Payload]byte, error) {
	defer conn.Close()
	conn.SetDeadline(deadline)
	var out [Payload]byte
	req := slices.Concat(magic[:], binary.BigEndian.AppendUint32(nil, uint32(rank)), binary.BigEndian.AppendUint32(nil, uint32(world)))
	if _, err := conn.Write(req); err != nil {
		return out, err
	}
	var resp [4 + Payload]byte
	if _, err := io.ReadFull(conn, resp[:]); err != nil {
		return out, err
	}
	if binary.BigEndian.Uint32(resp[:]) != statusOK {
		return out, fmt.Errorf("%w: rank 0 at %s refused rank %d of %d", ErrMismatch, conn.RemoteAddr(), rank, world)
	}
	copy(out[:], resp[4:])
	return out, nil
}
