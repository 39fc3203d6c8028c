package coll_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/coll"
)

// Host communicators across processes (InitRank and InitFromEnv on host):
// ranks that are goroutines of this process, each with its own host device
// and connected only by the TCP transport, and ranks that are processes
// (this test binary run again, see TestMain).

// childEnv names what a child process of these tests does, and
// childBackendEnv on which backend ("" is host).
const (
	childEnv        = "GPUGRAPH_COLL_TEST_CHILD"
	childBackendEnv = "GPUGRAPH_COLL_TEST_BACKEND"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	os.Exit(m.Run())
}

// childMain is a rank of a job started by a test: it joins the job from
// its environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), all-reduces
// issued and captured, prints what it got, and, as mode says, exits or
// waits to be killed.
func childMain(mode string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	env, _, err := coll.EnvFromOS()
	if err != nil {
		return fail(err)
	}
	backend, ord := os.Getenv(childBackendEnv), 0
	if backend == gg.BackendCUDA {
		ord = env.LocalRank // a GPU per process; a host device is its process's own
	}
	d, err := gg.Open(backend, gg.WithOrdinal(ord))
	if err != nil {
		return fail(err)
	}
	c, err := coll.InitFromEnv(d, env, coll.WithTimeout(20*time.Second))
	if err != nil {
		return fail(err)
	}
	got, err := allReduceRank(d, c, mode == "allreduce")
	if err != nil {
		return fail(err)
	}
	fmt.Printf("rank %d: %v\n", env.Rank, got)
	if mode == "wait" {
		io.Copy(io.Discard, os.Stdin) // until the test kills this process
	}
	return 0
}

// allReduceRank sums 1, 2, 3, rank over the ranks as int32 and float32,
// issued and (if captured) captured in every capture mode, each graph
// replayed twice.
func allReduceRank(d *gg.Device, c *coll.Comm, captured bool) ([]float64, error) {
	s, err := d.NewStream()
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, dt := range []coll.DataType{coll.Int32, coll.Float32} {
		send, err := d.Malloc(16)
		if err != nil {
			return nil, err
		}
		recv, err := d.Malloc(16)
		if err != nil {
			return nil, err
		}
		if err := d.Memcpy(gg.HtoD(send, encode(dt, []float64{1, 2, 3, float64(c.Rank())}))); err != nil {
			return nil, err
		}
		if err := c.AllReduce(s, send, recv, 4, dt, coll.Sum); err != nil {
			return nil, err
		}
		for _, mode := range []gg.CaptureMode{gg.CaptureModeGlobal, gg.CaptureModeThreadLocal, gg.CaptureModeRelaxed} {
			if !captured {
				break
			}
			if err := s.BeginCapture(mode); err != nil {
				return nil, err
			}
			aerr := c.AllReduce(s, send, recv, 4, dt, coll.Sum)
			g, err := s.EndCapture()
			if err = errors.Join(aerr, err); err != nil {
				return nil, fmt.Errorf("capture mode %v: %w", mode, err)
			}
			e, err := g.Instantiate(0)
			if err != nil {
				return nil, err
			}
			defer e.Destroy()
			for range 2 {
				if err := e.Launch(s); err != nil {
					return nil, err
				}
			}
		}
		if err := s.Synchronize(); err != nil {
			return nil, err
		}
		b := make([]byte, 16)
		if err := d.Memcpy(gg.DtoH(b, recv)); err != nil {
			return nil, err
		}
		out = append(out, decode(dt, b)...)
	}
	return out, nil
}

// hostDevices opens host devices 0 to n-1 with a stream each.
func hostDevices(t *testing.T, n int) ([]*gg.Device, []*gg.Stream) {
	t.Helper()
	if err := gg.SetHostDeviceCount(n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gg.SetHostDeviceCount(1) })
	devs := make([]*gg.Device, n)
	streams := make([]*gg.Stream, n)
	for i := range n {
		d, err := gg.Open("host", gg.WithOrdinal(i))
		ok(t, err)
		t.Cleanup(func() { d.Close() })
		devs[i] = d
		streams[i], err = d.NewStream()
		ok(t, err)
	}
	return devs, streams
}

// initRanks makes devs the ranks of one communicator by InitRank, one
// goroutine each, as processes of a job would.
func initRanks(t *testing.T, devs []*gg.Device, opts ...coll.Option) []*coll.Comm {
	t.Helper()
	n := len(devs)
	id, err := coll.NewUniqueID("host")
	ok(t, err)
	comms := make([]*coll.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, d := range devs {
		wg.Go(func() { comms[r], errs[r] = coll.InitRank(d, n, r, id, opts...) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Destroy()
			}
		}
	})
	ok(t, errors.Join(errs...))
	return comms
}

// netRanks opens n host devices with a stream each and connects them by
// InitRank.
func netRanks(t *testing.T, n int, opts ...coll.Option) ([]*coll.Comm, []*gg.Stream) {
	t.Helper()
	devs, streams := hostDevices(t, n)
	return initRanks(t, devs, opts...), streams
}

// TestHostNetCollectives runs every collective and a send/recv ring over
// the TCP transport on 2 and 3 ranks, issued and captured and replayed,
// against the CPU reference of TestCollectives.
func TestHostNetCollectives(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, m := range modes {
			t.Run(fmt.Sprintf("ranks=%d/%s", n, m.name), func(t *testing.T) {
				comms, streams := netRanks(t, n)
				runAll(t, comms, streams, m.captured, m.mode)
			})
		}
	}
}

// TestHostNetBitExact: every call over TCP writes exactly the bytes the
// in-process communicator writes, on the same devices and inputs (random
// values, so every rounding of the 16-bit types and of Avg is exercised),
// including sends between two ranks that rank 0 only relays.
func TestHostNetBitExact(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			devs, streams := hostDevices(t, n)
			local, err := coll.InitAll(devs)
			ok(t, err)
			t.Cleanup(func() {
				for _, c := range local {
					c.Destroy()
				}
			})
			remote := initRanks(t, devs)
			const count = 6 * 5 * 7 // divisible by every rank count
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			for _, dt := range types {
				size := dt.Size()
				send := make([]gg.DevicePtr, n)
				recv := [2][]gg.DevicePtr{make([]gg.DevicePtr, n), make([]gg.DevicePtr, n)}
				for r, d := range devs {
					send[r] = must(t)(d.Malloc(count * n * size))
					vals := make([]float64, count*n)
					for i := range vals {
						vals[i] = (rng.Float64() - 0.5) * 8
						if dt == coll.Int32 || dt == coll.Int64 {
							vals[i] = float64(rng.IntN(2001) - 1000)
						}
					}
					ok(t, d.Memcpy(gg.HtoD(send[r], encode(dt, vals))))
					for k := range recv {
						recv[k][r] = must(t)(d.Malloc(count * n * size))
					}
				}
				type call func(cs []*coll.Comm, r int, out gg.DevicePtr) error
				var calls []struct {
					name string
					do   call
				}
				add := func(name string, do call) {
					calls = append(calls, struct {
						name string
						do   call
					}{name, do})
				}
				for _, op := range []coll.RedOp{coll.Sum, coll.Prod, coll.Max, coll.Min, coll.Avg} {
					add(fmt.Sprintf("all-reduce %d", op), func(cs []*coll.Comm, r int, out gg.DevicePtr) error {
						return cs[r].AllReduce(streams[r], send[r], out, count, dt, op)
					})
					add(fmt.Sprintf("reduce-scatter %d", op), func(cs []*coll.Comm, r int, out gg.DevicePtr) error {
						return cs[r].ReduceScatter(streams[r], send[r], out, count/n, dt, op)
					})
				}
				for root := range n {
					add(fmt.Sprintf("broadcast from %d", root), func(cs []*coll.Comm, r int, out gg.DevicePtr) error {
						return cs[r].Broadcast(streams[r], send[r], out, count, dt, root)
					})
					add(fmt.Sprintf("reduce to %d", root), func(cs []*coll.Comm, r int, out gg.DevicePtr) error {
						return cs[r].Reduce(streams[r], send[r], out, count, dt, coll.Avg, root)
					})
				}
				add("all-gather", func(cs []*coll.Comm, r int, out gg.DevicePtr) error {
					return cs[r].AllGather(streams[r], send[r], out, count, dt)
				})
				add("send/recv exchange", func(cs []*coll.Comm, r int, out gg.DevicePtr) error {
					for q := range n { // every pair, both ways
						if q == r {
							continue
						}
						if err := cs[r].Send(streams[r], send[r]+gg.DevicePtr(q*count/n*size), count/n, dt, q); err != nil {
							return err
						}
						if err := cs[r].Recv(streams[r], out+gg.DevicePtr(q*count/n*size), count/n, dt, q); err != nil {
							return err
						}
					}
					return nil
				})
				add(fmt.Sprintf("send %d to %d only", n-2, n-1), func(cs []*coll.Comm, r int, out gg.DevicePtr) error {
					switch r {
					case n - 2:
						return cs[r].Send(streams[r], send[r], count, dt, n-1)
					case n - 1:
						return cs[r].Recv(streams[r], out, count, dt, n-2)
					}
					return nil
				})
				for _, c := range calls {
					for k, cs := range [][]*coll.Comm{local, remote} {
						for r, d := range devs {
							ok(t, d.Memset(gg.Memset8(recv[k][r], 0xa5, count*n*size)))
						}
						coll.GroupStart()
						for r := range devs {
							if err := c.do(cs, r, recv[k][r]); err != nil {
								coll.GroupEnd()
								t.Fatalf("%v %s, rank %d: %v", dt, c.name, r, err)
							}
						}
						ok(t, coll.GroupEnd())
						for _, s := range streams {
							ok(t, s.Synchronize())
						}
					}
					written := false
					for r, d := range devs {
						a, b := make([]byte, count*n*size), make([]byte, count*n*size)
						ok(t, d.Memcpy(gg.DtoH(a, recv[0][r])))
						ok(t, d.Memcpy(gg.DtoH(b, recv[1][r])))
						if !bytes.Equal(a, b) {
							t.Fatalf("%v %s, rank %d of %d: over TCP %v..., in process %v...", dt, c.name, r, n, b[:16], a[:16])
						}
						written = written || slices.ContainsFunc(a, func(x byte) bool { return x != 0xa5 })
					}
					if !written {
						t.Fatalf("%v %s: no rank's buffer was written", dt, c.name)
					}
				}
			}
		})
	}
}

// TestHostNetInitFromEnv: goroutines as the ranks of a job, joined by
// InitFromEnv's rendezvous as processes would be.
func TestHostNetInitFromEnv(t *testing.T) {
	devs, _ := hostDevices(t, 3)
	allReduceJob(t, devs, freeAddr(t))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ok(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// startRank runs this test binary as rank of a job of world processes on
// host devices.
func startRank(t *testing.T, ctx context.Context, mode string, rank, world int, addr string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return startRankOn(t, ctx, gg.BackendHost, mode, rank, world, addr)
}

// startRankOn is startRank on a backend (on cuda, GPU rank).
func startRankOn(t *testing.T, ctx context.Context, backend, mode string, rank, world int, addr string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childBackendEnv+"="+backend, "RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(world),
		"LOCAL_RANK="+strconv.Itoa(rank), "MASTER_ADDR="+host, "MASTER_PORT="+port)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if mode == "wait" { // the child waits for its standard input to close
		w, err := cmd.StdinPipe()
		ok(t, err)
		t.Cleanup(func() { w.Close() })
	}
	ok(t, cmd.Start())
	return cmd, &out
}

// TestHostNetProcesses: two processes, each a rank of one job on its own
// host device, all-reduce issued and captured.
func TestHostNetProcesses(t *testing.T) { allReduceProcesses(t, gg.BackendHost, 30*time.Second) }

// allReduceProcesses runs allReduceRank in two processes of a job on the
// backend and checks what each got.
func allReduceProcesses(t *testing.T, backend string, limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	addr := freeAddr(t)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for r := range 2 {
		cmd, out := startRankOn(t, ctx, backend, "allreduce", r, 2, addr)
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("rank %d: %v\n%s", r, err, outs[r])
		}
		want := fmt.Sprintf("rank %d: [2 4 6 1 2 4 6 1]", r)
		if !strings.Contains(outs[r].String(), want) {
			t.Fatalf("rank %d printed %q, want %q", r, outs[r], want)
		}
	}
}

// TestHostNetProcessDies: rank 1 is a process, killed after a first
// all-reduce; rank 0 (this process) fails its next one with
// ErrLaunchFailure naming rank 1, as soon as the connection closes, well
// before its timeout.
func TestHostNetProcessDies(t *testing.T) {
	r := peerDies(t, gg.BackendHost, 20*time.Second)
	err, el := r.err, r.after
	if !errors.Is(err, gg.ErrLaunchFailure) || !strings.Contains(err.Error(), "rank 1 closed its connection") {
		t.Fatalf("got %v, want ErrLaunchFailure saying rank 1 closed its connection", err)
	}
	if el > 2*time.Second {
		t.Fatalf("failed %v after rank 1 died, want well within 2s", el)
	}
	t.Logf("rank 0, %v after rank 1 was killed: %v", el.Round(time.Millisecond), err)
}

// died is what rank 0 saw when its peer died: its communicator and
// stream, and its next all-reduce's wait (the error, and how long after the
// kill it came).
type died struct {
	c     *coll.Comm
	s     *gg.Stream
	err   error
	after time.Duration
}

// peerDies runs rank 1 of a job of 2 as a process on the backend, rank 0
// in this one (device 0), all-reduces once, kills rank 1, and waits on rank
// 0's next all-reduce.
func peerDies(t *testing.T, backend string, timeout time.Duration) died {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	addr := freeAddr(t)
	cmd, out := startRankOn(t, ctx, backend, "wait", 1, 2, addr)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	d, err := gg.Open(backend)
	ok(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := coll.InitFromEnv(d, coll.Env{Rank: 0, World: 2, Addr: addr}, coll.WithTimeout(timeout))
	if err != nil {
		t.Fatalf("%v\nrank 1: %s", err, out)
	}
	t.Cleanup(func() { c.Destroy() })
	if _, err := allReduceRank(d, c, false); err != nil {
		t.Fatalf("%v\nrank 1: %s", err, out)
	}
	ok(t, cmd.Process.Kill())
	killed := time.Now()
	s, err := d.NewStream()
	ok(t, err)
	buf := must(t)(d.Malloc(64))
	ok(t, c.AllReduce(s, buf, buf, 16, coll.Float32, coll.Sum))
	err = s.Synchronize()
	return died{c, s, err, time.Since(killed)}
}

// TestHostNetRankGone: a rank that destroys its communicator, or just stops
// calling, fails the others' next collective with ErrLaunchFailure naming
// it: at once when its connection closes, after the timeout when it stays
// silent; the others' communicators are broken from then on and fail fast.
func TestHostNetRankGone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		timeout time.Duration
		destroy bool // the last rank destroys its communicator; else it stays silent
		want    string
		within  time.Duration
	}{
		{"destroyed/ranks=2", 2, time.Minute, true, "rank 1 destroyed its communicator", 2 * time.Second},
		{"destroyed/ranks=3", 3, time.Minute, true, "rank 2 destroyed its communicator", 2 * time.Second},
		{"silent/ranks=2", 2, 300 * time.Millisecond, false, "timeout after 300ms waiting for rank 1", 2 * time.Second},
		{"silent/ranks=3", 3, 300 * time.Millisecond, false, "timeout after 300ms waiting for rank 2", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comms, streams := netRanks(t, tc.n, coll.WithTimeout(tc.timeout))
			bufs := make([]gg.DevicePtr, tc.n)
			for r, c := range comms {
				bufs[r] = must(t)(c.Device().Malloc(64))
			}
			allReduce := func(r int) error {
				return comms[r].AllReduce(streams[r], bufs[r], bufs[r], 16, coll.Float32, coll.Sum)
			}
			coll.GroupStart()
			for r := range comms {
				ok(t, allReduce(r))
			}
			ok(t, coll.GroupEnd())
			for _, s := range streams {
				ok(t, s.Synchronize())
			}
			last := tc.n - 1
			start := time.Now()
			if tc.destroy {
				ok(t, comms[last].Destroy())
				if el := time.Since(start); el > 100*time.Millisecond {
					t.Errorf("Destroy took %v", el)
				}
			}
			for r := range last {
				ok(t, allReduce(r))
			}
			for r := range last {
				err := streams[r].Synchronize()
				want := tc.want
				if r > 0 && !tc.destroy {
					// Rank 0 reports the silent rank, unless this rank's own
					// timeout came first.
					want = "timeout after 300ms waiting for rank"
				}
				if !errors.Is(err, gg.ErrLaunchFailure) || !strings.Contains(err.Error(), want) {
					t.Fatalf("rank %d: %v, want ErrLaunchFailure saying %q", r, err, want)
				}
				if el := time.Since(start); el > tc.within || el < tc.timeout && !tc.destroy {
					t.Fatalf("rank %d failed after %v, want within %v", r, el, tc.within)
				}
				t.Logf("rank %d after %v: %v", r, time.Since(start).Round(time.Millisecond), err)
			}
			if tc.destroy {
				return
			}
			// The silent rank's communicator was told: its call fails at once.
			start = time.Now()
			ok(t, allReduce(last))
			err := streams[last].Synchronize()
			if !errors.Is(err, gg.ErrLaunchFailure) || !strings.Contains(err.Error(), "rank 0 failed") || time.Since(start) > time.Second {
				t.Fatalf("rank %d after the others failed: %v after %v", last, err, time.Since(start))
			}
			t.Logf("rank %d: %v", last, err)
		})
	}
}

// hostID reads the address and token of a host UniqueID (layout: magic
// [0,4), version 4, address length 5, token [6,38), address from 38).
func hostID(id coll.UniqueID) (string, []byte) {
	return string(id[38 : 38+int(id[5])]), id[6:38]
}

// hello is the bytes a rank opens its connection with.
func hello(token []byte, rank, world int) []byte {
	h := make([]byte, 48)
	copy(h, "GGHH")
	h[4] = 1
	copy(h[8:], token)
	binary.LittleEndian.PutUint32(h[40:], uint32(rank))
	binary.LittleEndian.PutUint32(h[44:], uint32(world))
	return h
}

// TestHostNetBadHellos: connections that are not a rank of the
// communicator are refused (answered and closed, or just closed), and rank
// 0 goes on waiting: the real rank 1 joins and the communicator works;
// with no real rank, rank 0 fails at its deadline, listing what it refused.
func TestHostNetBadHellos(t *testing.T) {
	otherToken := bytes.Repeat([]byte{7}, 32)
	for _, tc := range []struct {
		name   string
		send   func(token []byte) []byte
		answer int // the status rank 0 answers, -1 for none (closed or later)
	}{
		{"wrong token", func([]byte) []byte { return hello(otherToken, 1, 2) }, 2},
		{"wrong world", func(tok []byte) []byte { return hello(tok, 1, 3) }, 3},
		{"rank 0", func(tok []byte) []byte { return hello(tok, 0, 2) }, 4},
		{"rank out of range", func(tok []byte) []byte { return hello(tok, 2, 2) }, 4},
		{"garbage", func([]byte) []byte { return bytes.Repeat([]byte("garbage!"), 6) }, 1},
		{"wrong version", func(tok []byte) []byte { h := hello(tok, 1, 2); h[4] = 9; return h }, 1},
		{"half a hello then silence", func(tok []byte) []byte { return hello(tok, 1, 2)[:20] }, -1},
		{"a few bytes then close", func([]byte) []byte { return []byte("GET /") }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs, streams := hostDevices(t, 2)
			id, err := coll.NewUniqueID("host")
			ok(t, err)
			addr, token := hostID(id)
			var c0 *coll.Comm
			var err0 error
			done := make(chan struct{})
			go func() {
				defer close(done)
				c0, err0 = coll.InitRank(devs[0], 2, 0, id, coll.WithTimeout(5*time.Second))
			}()
			bad, err := net.Dial("tcp", addr)
			ok(t, err)
			defer bad.Close()
			_, err = bad.Write(tc.send(token))
			ok(t, err)
			if tc.name == "a few bytes then close" {
				bad.Close()
			}
			if tc.answer >= 0 {
				var a [8]byte
				bad.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := io.ReadFull(bad, a[:]); err != nil || string(a[:4]) != "GGHA" || int(a[4]) != tc.answer {
					t.Fatalf("answer %q, %v; want status %d", a, err, tc.answer)
				}
				if n, err := bad.Read(a[:]); n != 0 || err == nil {
					t.Fatalf("the refused connection stays open: %d, %v", n, err)
				}
			}
			start := time.Now()
			c1, err := coll.InitRank(devs[1], 2, 1, id, coll.WithTimeout(5*time.Second))
			ok(t, err)
			defer c1.Destroy()
			<-done
			ok(t, err0)
			defer c0.Destroy()
			if el := time.Since(start); el > time.Second {
				t.Fatalf("rank 0 took %v after rank 1 came", el)
			}
			buf := [2]gg.DevicePtr{must(t)(devs[0].Malloc(16)), must(t)(devs[1].Malloc(16))}
			coll.GroupStart()
			for r, c := range []*coll.Comm{c0, c1} {
				ok(t, c.AllReduce(streams[r], buf[r], buf[r], 4, coll.Int32, coll.Sum))
			}
			ok(t, coll.GroupEnd())
			for _, s := range streams {
				ok(t, s.Synchronize())
			}
		})
	}
	t.Run("rank twice", func(t *testing.T) {
		devs, _ := hostDevices(t, 3)
		id, err := coll.NewUniqueID("host")
		ok(t, err)
		addr, token := hostID(id)
		first, err := net.Dial("tcp", addr)
		ok(t, err)
		defer first.Close()
		_, err = first.Write(hello(token, 1, 3))
		ok(t, err)
		var c0 *coll.Comm
		var err0 error
		done := make(chan struct{})
		go func() {
			defer close(done)
			c0, err0 = coll.InitRank(devs[0], 3, 0, id, coll.WithTimeout(5*time.Second))
		}()
		// The first rank 1 holds its place (rank 0 waits for rank 2); a
		// second rank 1 is refused at once.
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		_, err = coll.InitRank(devs[1], 3, 1, id, coll.WithTimeout(5*time.Second))
		if !errors.Is(err, gg.ErrInvalidValue) || !strings.Contains(err.Error(), "rank already joined") || time.Since(start) > time.Second {
			t.Fatalf("second rank 1: %v after %v, want ErrInvalidValue saying the rank already joined", err, time.Since(start))
		}
		c2, err := coll.InitRank(devs[2], 3, 2, id, coll.WithTimeout(5*time.Second))
		ok(t, err)
		defer c2.Destroy()
		<-done
		ok(t, err0)
		defer c0.Destroy()
		var a [8]byte
		first.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadFull(first, a[:]); err != nil || string(a[:4]) != "GGHA" || a[4] != 0 {
			t.Fatalf("first rank 1: answer %q, %v; want it joined", a, err)
		}
	})
	t.Run("no real rank", func(t *testing.T) {
		devs, _ := hostDevices(t, 1)
		id, err := coll.NewUniqueID("host")
		ok(t, err)
		addr, token := hostID(id)
		for _, b := range [][]byte{hello(otherToken, 1, 2), hello(token, 1, 2)[:30]} {
			c, err := net.Dial("tcp", addr)
			ok(t, err)
			defer c.Close()
			_, err = c.Write(b)
			ok(t, err)
		}
		start := time.Now()
		_, err = coll.InitRank(devs[0], 2, 0, id, coll.WithTimeout(300*time.Millisecond))
		el := time.Since(start)
		if !errors.Is(err, gg.ErrUnknown) || !strings.Contains(err.Error(), "ranks [1] never joined") || !strings.Contains(err.Error(), "wrong token") {
			t.Fatalf("got %v, want ErrUnknown: rank 1 never joined, a wrong token refused", err)
		}
		if el > time.Second {
			t.Fatalf("rank 0 gave up after %v, want about its 300ms", el)
		}
		t.Logf("after %v: %v", el.Round(time.Millisecond), err)
		// The id is spent: its listener is closed.
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("rank 0's listener at %s is still open", addr)
		}
	})
}

// TestHostNetInitArgs: ids that cannot be a host communicator's are
// refused with ErrInvalidValue, and a world of one needs no connection.
func TestHostNetInitArgs(t *testing.T) {
	devs, _ := hostDevices(t, 1)
	d := devs[0]
	other, err := coll.NewUniqueID("host")
	ok(t, err)
	c, err := coll.InitRank(d, 1, 0, other) // closes other's listener
	ok(t, err)
	ok(t, c.Destroy())
	for name, id := range map[string]coll.UniqueID{"zero id": {}, "spent id": other} {
		if _, err := coll.InitRank(d, 2, 0, id); !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("%s, rank 0: %v, want ErrInvalidValue", name, err)
		}
	}
	if _, err := coll.InitRank(d, 2, 1, coll.UniqueID{}); !errors.Is(err, gg.ErrInvalidValue) {
		t.Errorf("zero id, rank 1: %v, want ErrInvalidValue", err)
	}
	addr, _ := hostID(other)
	start := time.Now()
	if _, err := coll.InitRank(d, 2, 1, other, coll.WithTimeout(300*time.Millisecond)); !errors.Is(err, gg.ErrUnknown) || time.Since(start) > 2*time.Second {
		t.Errorf("rank 1 of a rank 0 gone from %s: %v after %v, want ErrUnknown", addr, err, time.Since(start))
	}
}

// TestProcessesCUDA: two processes, a GPU each, one NCCL communicator
// (InitFromEnv): all-reduce issued and captured in every capture mode.
func TestProcessesCUDA(t *testing.T) {
	if gpus(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	allReduceProcesses(t, gg.BackendCUDA, 2*time.Minute)
}

// TestProcessDiesCUDA: rank 1 is a process on GPU 1, killed after a first
// all-reduce; rank 0 (this process, GPU 0) issues the next one, which NCCL
// leaves waiting for rank 1 forever: the wait on it fails within the
// communicator's timeout (ErrLaunchTimeout, or ErrLaunchFailure if NCCL
// reports the peer first), and the communicator is refused after.
func TestProcessDiesCUDA(t *testing.T) {
	if gpus(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	const timeout = 3 * time.Second
	r := peerDies(t, gg.BackendCUDA, timeout)
	err, el := r.err, r.after
	if !errors.Is(err, gg.ErrLaunchTimeout) && !errors.Is(err, gg.ErrLaunchFailure) {
		t.Fatalf("got %v, want ErrLaunchTimeout or ErrLaunchFailure", err)
	}
	if el > timeout+10*time.Second {
		t.Fatalf("failed %v after rank 1 died, want about the %v timeout", el, timeout)
	}
	t.Logf("rank 0, %v after rank 1 was killed: %v", el.Round(time.Millisecond), err)
	if err := r.c.AllReduce(r.s, 0, 0, 16, coll.Float32, coll.Sum); !errors.Is(err, gg.ErrIllegalState) {
		t.Fatalf("the failed communicator: %v, want ErrIllegalState", err)
	}
}
