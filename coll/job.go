package coll

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
	"github.com/gpugraph/gpugraph/internal/host"
	"github.com/gpugraph/gpugraph/internal/nccl"
	"github.com/gpugraph/gpugraph/internal/rendezvous"
)

// One process per device: a job of several processes (on one machine or
// many), each driving one device, as torchrun and Slurm start them. Rank 0
// makes a UniqueID and hands it to the others; every rank passes it to
// InitRank. InitFromEnv does both from the launcher's environment.

// UniqueID is what ties the ranks of one communicator together
// (ncclUniqueId): made by rank 0, handed to every other rank.
type UniqueID [128]byte

// NewUniqueID makes a UniqueID for a communicator on the named backend
// (ncclGetUniqueId on cuda). On host it opens the listener rank 0's InitRank
// takes the other ranks' connections on, at 127.0.0.1, and the id holds its
// address and a random token; rank 0's InitRank closes it, and an id never
// passed to rank 0's InitRank keeps it open until the process exits.
func NewUniqueID(backend string) (UniqueID, error) {
	const opName = "coll.NewUniqueID"
	var id UniqueID
	switch backend {
	case gg.BackendCUDA:
		l, err := lib(opName)
		if err != nil {
			return id, err
		}
		nid, err := l.GetUniqueID()
		if err != nil {
			return id, ncclErr(opName, err)
		}
		return UniqueID(nid), nil
	case gg.BackendHost:
		return newHostID(opName, "127.0.0.1")
	}
	return id, errorf(opName, gg.ErrInvalidValue, "unknown backend %q", backend)
}

// InitRank creates rank's communicator of a job of world ranks, one per
// process (or per goroutine), on dev (ncclCommInitRank). Every rank calls
// it with the same id; it returns when all have, or fails when they have
// not within the communicator's timeout. On host the ranks connect by TCP
// to the address in the id (rank 0's, which must be the process that made
// the id); several host devices of one process are better served by
// InitAll, which shares memory.
func InitRank(dev *gg.Device, world, rank int, id UniqueID, opts ...Option) (*Comm, error) {
	const opName = "coll.InitRank"
	cfg, err := options(opName, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case dev == nil:
		return nil, errorf(opName, gg.ErrInvalidDevice, "nil device")
	case world < 1 || rank < 0 || rank >= world:
		return nil, errorf(opName, gg.ErrInvalidValue, "rank %d of %d", rank, world)
	}
	p := dev.Properties()
	if p.Backend != gg.BackendCUDA {
		if world == 1 {
			releaseHostID(id) // no other rank will connect
			return &Comm{dev: dev, rank: 0, size: 1, group: host.NewCommGroup(1, cfg.timeout)}, nil
		}
		nc, err := initHostRank(opName, world, rank, id, cfg.timeout)
		if err != nil {
			return nil, err
		}
		return &Comm{dev: dev, rank: rank, size: world, group: nc}, nil
	}
	l, err := lib(opName)
	if err != nil {
		return nil, err
	}
	drv, err := driver.Load()
	if err != nil {
		return nil, errorf(opName, gg.ErrNoDevice, "%v", err)
	}
	nid := nccl.UniqueID(id)
	// Nonblocking, so that a rank that never joins ends in an error within
	// the timeout: the communicator is aborted, not waited on forever.
	h, err := l.InitRank(p.Ordinal, world, rank, &nid, func() error {
		// NCCL takes the device from the runtime's current one, which is
		// the thread's current context: the device's primary context.
		return drv.SetCurrent(dev.NativeContext())
	}, false)
	if err != nil {
		return nil, ncclErr(opName, err)
	}
	if err := l.Wait(h, "ncclCommInitRankScalable", time.Now().Add(cfg.timeout)); err != nil {
		return nil, ncclErr(opName, fmt.Errorf("rank %d of %d: %w", rank, world, err))
	}
	c := &Comm{dev: dev, rank: rank, size: world, nc: &ncclComm{lib: l, comm: h, rank: rank, size: world, timeout: cfg.timeout}}
	if err := start(opName, []*Comm{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// Env is a process's place in a job, as its launcher describes it.
type Env struct {
	Rank, World int
	// LocalRank is the rank among the job's processes on this machine:
	// the ordinal of the device the process drives.
	LocalRank int
	// Addr is where rank 0 hands out the UniqueID (host:port).
	Addr string
	// Token tells this job from another that dials the same Addr (a stale
	// job, a typo): rank 0 gives the UniqueID only to a rank that proves it
	// has the same token, and a rank takes it only from a rank 0 that
	// proves the same (neither sends it). Empty, as under torchrun or
	// Slurm, is a token too: it must then be empty on every rank.
	Token string
}

// JobTokenEnv is the variable EnvFromOS reads Env.Token from. gpugraph
// launch sets it to a random value for a job of one machine; a job of
// several machines needs the same value on every one, set by the user.
const JobTokenEnv = "GPUGRAPH_JOB_TOKEN"

// EnvFromOS reads the job from the environment: RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR and MASTER_PORT as gpugraph launch and torchrun
// set them, or Slurm's SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID (with
// MASTER_ADDR and MASTER_PORT from the job script), and the job's token
// from GPUGRAPH_JOB_TOKEN (JobTokenEnv; empty if unset). ok is false when
// the process was not started as part of a job.
func EnvFromOS() (env Env, ok bool, err error) {
	get := func(names ...string) (string, bool) {
		for _, n := range names {
			if v, ok := os.LookupEnv(n); ok {
				return v, true
			}
		}
		return "", false
	}
	num := func(v string, name string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("coll: %s=%q is not a number", name, v)
		}
		return n, nil
	}
	rs, hasRank := get("RANK", "SLURM_PROCID")
	ws, hasWorld := get("WORLD_SIZE", "SLURM_NTASKS")
	if !hasRank && !hasWorld {
		return Env{}, false, nil
	}
	if !hasRank || !hasWorld {
		return Env{}, true, fmt.Errorf("coll: RANK and WORLD_SIZE must both be set (or SLURM_PROCID and SLURM_NTASKS)")
	}
	if env.Rank, err = num(rs, "RANK"); err != nil {
		return Env{}, true, err
	}
	if env.World, err = num(ws, "WORLD_SIZE"); err != nil {
		return Env{}, true, err
	}
	env.LocalRank = env.Rank
	if ls, ok := get("LOCAL_RANK", "SLURM_LOCALID"); ok {
		if env.LocalRank, err = num(ls, "LOCAL_RANK"); err != nil {
			return Env{}, true, err
		}
	}
	if env.World < 1 || env.Rank < 0 || env.Rank >= env.World || env.LocalRank < 0 {
		return Env{}, true, fmt.Errorf("coll: rank %d (local %d) of a job of %d", env.Rank, env.LocalRank, env.World)
	}
	addr, hasAddr := get("MASTER_ADDR")
	port, hasPort := get("MASTER_PORT")
	if env.World > 1 && (!hasAddr || !hasPort) {
		return Env{}, true, fmt.Errorf("coll: a job of %d ranks needs MASTER_ADDR and MASTER_PORT (where rank 0 hands out the id)", env.World)
	}
	if hasAddr || hasPort {
		env.Addr = net.JoinHostPort(addr, port)
	}
	env.Token = os.Getenv(JobTokenEnv)
	return env, true, nil
}

// InitFromEnv creates this process's communicator of the job env describes
// on dev: rank 0 makes the UniqueID and hands it to the others over TCP at
// env.Addr (waiting for all of them at most the communicator's timeout),
// only to ranks with the same env.Token, and every rank calls InitRank.
// A rank that rank 0 refuses (another job's token, another world size, a
// rank out of range or already joined, another version of the rendezvous)
// fails at once with ErrInvalidValue saying which; a rank 0 that does not answer, or answers as another job,
// and a rank 0 whose ranks do not all join, fail at the timeout with
// ErrUnknown.
func InitFromEnv(dev *gg.Device, env Env, opts ...Option) (*Comm, error) {
	const opName = "coll.InitFromEnv"
	cfg, err := options(opName, opts)
	if err != nil {
		return nil, err
	}
	if dev == nil {
		return nil, errorf(opName, gg.ErrInvalidDevice, "nil device")
	}
	backend := dev.Properties().Backend
	deadline := time.Now().Add(cfg.timeout)
	var id UniqueID
	switch {
	case env.World == 1:
		if backend == gg.BackendCUDA {
			var err error
			if id, err = NewUniqueID(backend); err != nil {
				return nil, err
			}
		}
	case env.Rank == 0:
		ln, err := net.Listen("tcp", env.Addr)
		if err != nil {
			return nil, errorf(opName, gg.ErrInvalidValue, "rank 0 cannot listen at %s: %v", env.Addr, err)
		}
		if backend == gg.BackendCUDA {
			id, err = NewUniqueID(backend)
		} else {
			// The communicator's connections come where the rendezvous
			// is: an address every rank reaches.
			h, _, _ := net.SplitHostPort(env.Addr)
			id, err = newHostID(opName, h)
		}
		if err != nil {
			ln.Close()
			return nil, err
		}
		if err := rendezvous.Serve(ln, env.World, env.Token, id, deadline); err != nil {
			releaseHostID(id)
			return nil, errorf(opName, gg.ErrUnknown, "%v", err)
		}
	default:
		got, err := rendezvous.Fetch(env.Addr, env.Rank, env.World, env.Token, deadline)
		if errors.Is(err, rendezvous.ErrMismatch) {
			// Final: this rank's env is not the job's (asking again would
			// be refused again).
			return nil, errorf(opName, gg.ErrInvalidValue, "%v", err)
		}
		if err != nil {
			return nil, errorf(opName, gg.ErrUnknown, "%v", err)
		}
		id = got
	}
	return InitRank(dev, env.World, env.Rank, id, opts...)
}
