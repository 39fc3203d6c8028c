package coll_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/coll"
)

func TestEnvFromOS(t *testing.T) {
	vars := []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", coll.JobTokenEnv}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want coll.Env
		ok   bool
		err  string
	}{
		{name: "not a job"},
		{"torchrun", map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
			coll.Env{Rank: 3, World: 4, LocalRank: 1, Addr: "127.0.0.1:29500"}, true, ""},
		{"gpugraph launch", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "GPUGRAPH_JOB_TOKEN": "abc"},
			coll.Env{Rank: 1, World: 2, LocalRank: 1, Addr: "127.0.0.1:29500", Token: "abc"}, true, ""},
		{"slurm", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1234"},
			coll.Env{Rank: 1, World: 2, LocalRank: 0, Addr: "127.0.0.1:1234"}, true, ""},
		{"one rank, no address", map[string]string{"RANK": "0", "WORLD_SIZE": "1"}, coll.Env{World: 1}, true, ""},
		{"no local rank: the rank", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
			coll.Env{Rank: 1, World: 2, LocalRank: 1, Addr: "127.0.0.1:1"}, true, ""},
		{"rank without world", map[string]string{"RANK": "0"}, coll.Env{}, true, "must both be set"},
		{"rank out of range", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, coll.Env{}, true, "rank 2 (local 2) of a job of 2"},
		{"not a number", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, coll.Env{}, true, `RANK="x"`},
		{"two ranks, no address", map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, coll.Env{}, true, "MASTER_ADDR and MASTER_PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, "")
				unsetenv(t, v)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			env, ok, err := coll.EnvFromOS()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || env != tc.want {
				t.Fatalf("got %+v, %v, %v; want %+v, %v", env, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// A job of several processes on host devices (hostnet_test.go has the
// working ones): an id that is not a host id is refused, and a rank whose
// rank 0 never answers fails within its timeout.
func TestInitAcrossProcessesHostArgs(t *testing.T) {
	d, err := gg.Open("host")
	ok(t, err)
	defer d.Close()
	if _, err := coll.InitRank(d, 2, 0, coll.UniqueID{}); !errors.Is(err, gg.ErrInvalidValue) {
		t.Fatalf("InitRank: %v, want ErrInvalidValue", err)
	}
	start := time.Now()
	_, err = coll.InitFromEnv(d, coll.Env{Rank: 1, World: 2, Addr: "127.0.0.1:1"}, coll.WithTimeout(300*time.Millisecond))
	if !errors.Is(err, gg.ErrUnknown) || !strings.Contains(err.Error(), "could not reach rank 0") || time.Since(start) > 2*time.Second {
		t.Fatalf("InitFromEnv: %v after %v, want ErrUnknown: rank 0 unreachable", err, time.Since(start))
	}
	for _, bad := range [][2]int{{0, 0}, {2, 2}, {2, -1}} {
		if _, err := coll.InitRank(d, bad[0], bad[1], coll.UniqueID{}); !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("rank %d of %d: %v", bad[1], bad[0], err)
		}
	}
}

// TestInitFromEnvOtherJob: two jobs of host processes at the same address
// with different tokens do not mix. A rank of the other job is refused at
// once, with ErrInvalidValue saying why, and the job's own rank joins.
func TestInitFromEnvOtherJob(t *testing.T) {
	devs, _ := hostDevices(t, 3)
	addr := freeAddr(t)
	const timeout = 3 * time.Second
	type result struct {
		c   *coll.Comm
		err error
	}
	rank0 := make(chan result, 1)
	go func() {
		c, err := coll.InitFromEnv(devs[0], coll.Env{Rank: 0, World: 2, Addr: addr, Token: "job A"}, coll.WithTimeout(timeout))
		rank0 <- result{c, err}
	}()
	for _, token := range []string{"job B", ""} {
		start := time.Now()
		_, err := coll.InitFromEnv(devs[1], coll.Env{Rank: 1, World: 2, Addr: addr, Token: token}, coll.WithTimeout(timeout))
		el := time.Since(start)
		if !errors.Is(err, gg.ErrInvalidValue) || !strings.Contains(err.Error(), "wrong job token") {
			t.Fatalf("rank 1 with token %q: %v, want ErrInvalidValue: wrong job token", token, err)
		}
		if el > time.Second { // refused, not retried until the timeout
			t.Fatalf("rank 1 with token %q refused after %v", token, el)
		}
		t.Logf("token %q, after %v: %v", token, el.Round(time.Millisecond), err)
	}
	c1, err := coll.InitFromEnv(devs[2], coll.Env{Rank: 1, World: 2, Addr: addr, Token: "job A"}, coll.WithTimeout(timeout))
	ok(t, err)
	defer c1.Destroy()
	r := <-rank0
	ok(t, r.err)
	defer r.c.Destroy()
	// The job works: the two ranks all-reduce.
	var wg sync.WaitGroup
	got := make([][]float64, 2)
	errs := make([]error, 2)
	for i, dc := range []struct {
		d *gg.Device
		c *coll.Comm
	}{{devs[0], r.c}, {devs[2], c1}} {
		wg.Go(func() { got[i], errs[i] = allReduceRank(dc.d, dc.c, false) })
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || fmt.Sprint(got[i]) != "[2 4 6 1 2 4 6 1]" {
			t.Fatalf("rank %d: %v, %v", i, got[i], errs[i])
		}
	}
}

// A job of one process works on either backend.
func TestInitFromEnvOneRank(t *testing.T) {
	d, err := gg.Open("host")
	ok(t, err)
	defer d.Close()
	allReduceJob(t, []*gg.Device{d}, "")
}

// TestInitFromEnvCUDA: one goroutine per GPU, each a rank of a job handed
// its UniqueID over loopback TCP, as processes of a job are.
func TestInitFromEnvCUDA(t *testing.T) {
	n := gpus(t)
	devs := make([]*gg.Device, n)
	for i := range devs {
		d, err := gg.Open("cuda", gg.WithOrdinal(i))
		ok(t, err)
		defer d.Close()
		devs[i] = d
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ok(t, err)
	addr := ln.Addr().String()
	ln.Close()
	allReduceJob(t, devs, addr)
}

// allReduceJob makes each device a rank of one job and all-reduces.
func allReduceJob(t *testing.T, devs []*gg.Device, addr string) {
	n := len(devs)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, d := range devs {
		wg.Go(func() {
			errs[r] = func() error {
				c, err := coll.InitFromEnv(d, coll.Env{Rank: r, World: n, LocalRank: r, Addr: addr}, coll.WithTimeout(30*time.Second))
				if err != nil {
					return err
				}
				defer c.Destroy()
				s, err := d.NewStream()
				if err != nil {
					return err
				}
				send, err := d.Malloc(16)
				if err != nil {
					return err
				}
				recv, err := d.Malloc(16)
				if err != nil {
					return err
				}
				if err := d.Memcpy(gg.HtoD(send, encode(coll.Int32, []float64{1, 2, 3, float64(r)}))); err != nil {
					return err
				}
				if err := c.AllReduce(s, send, recv, 4, coll.Int32, coll.Sum); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				b := make([]byte, 16)
				if err := d.Memcpy(gg.DtoH(b, recv)); err != nil {
					return err
				}
				got, want := decode(coll.Int32, b), []float64{float64(n), float64(2 * n), float64(3 * n), float64(n * (n - 1) / 2)}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					return fmt.Errorf("rank %d: %v, want %v", r, got, want)
				}
				return nil
			}()
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d of %d: %v", r, n, err)
		}
	}
}

// unsetenv removes v for the test; t.Setenv first registered its restore.
func unsetenv(t *testing.T, v string) {
	t.Helper()
	if err := os.Unsetenv(v); err != nil {
		t.Fatal(err)
	}
}

// TestRankMissingCUDA: a job of two ranks of which only rank 0 starts
// ends in an error within the timeout, at the rendezvous (InitFromEnv) and
// in NCCL's own initialisation (InitRank with an id no one else has).
func TestRankMissingCUDA(t *testing.T) {
	gpus(t)
	d, err := gg.Open("cuda")
	ok(t, err)
	defer d.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ok(t, err)
	addr := ln.Addr().String()
	ln.Close()
	const timeout = 2 * time.Second
	start := time.Now()
	_, err = coll.InitFromEnv(d, coll.Env{Rank: 0, World: 2, Addr: addr}, coll.WithTimeout(timeout))
	if err == nil || !strings.Contains(err.Error(), "never joined") || time.Since(start) > timeout+5*time.Second {
		t.Fatalf("rendezvous: %v after %v", err, time.Since(start))
	}
	t.Logf("rendezvous, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	id, err := coll.NewUniqueID("cuda")
	ok(t, err)
	start = time.Now()
	_, err = coll.InitRank(d, 2, 0, id, coll.WithTimeout(timeout))
	if !errors.Is(err, gg.ErrLaunchTimeout) || !strings.Contains(err.Error(), "did not arrive") || time.Since(start) > timeout+10*time.Second {
		t.Fatalf("InitRank: %v after %v", err, time.Since(start))
	}
	t.Logf("InitRank, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	// The device still works, and so does a communicator made after.
	allReduceJob(t, []*gg.Device{d}, "")
}
