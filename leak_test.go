package gpugraph_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// A long-running service opens, uses and closes devices without end:
// nothing may grow. Each cycle leaves behind what a careless program
// would: a capture left open, an executable graph with memory nodes
// launched, a pool with an allocation, a user object with a reference, a
// Malloc never freed. Close must release all of it.

// leakCycles is how many cycles a leak test runs: short in CI, longer with
// GPUGRAPH_LEAK_CYCLES (the GPU run uses 1000).
func leakCycles(t *testing.T, def int) int {
	if v := os.Getenv("GPUGRAPH_LEAK_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("GPUGRAPH_LEAK_CYCLES=%q", v)
		}
		return n
	}
	if testing.Short() {
		return def / 4
	}
	return def
}

// leakKernel writes its index into a buffer (Go and CUDA bodies).
var leakKernel = &gg.Kernel{
	Name:   "leak_fill",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		p := gg.Slice[int32](a.Ptr(0), a.Int(1))
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < len(p) {
				p[i] = int32(i)
			}
		}
	},
	CUDA: `extern "C" __global__ void leak_fill(int* p, int n) {
		int i = blockIdx.x * blockDim.x + threadIdx.x;
		if (i < n) p[i] = i;
	}`,
}

// cycle opens device ordinal 0 of backend, uses it carelessly and closes
// it; destroyed counts user objects destroyed.
func cycle(backend string, destroyed *atomic.Int64) error {
	d, err := gg.Open(backend)
	if err != nil {
		return err
	}
	use := func() error {
		const n = 4096
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		if _, err := d.Malloc(4 * n); err != nil { // never freed
			return err
		}
		// An executable graph with memory nodes, launched.
		g, err := d.NewGraph()
		if err != nil {
			return err
		}
		a, p, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 4 * n})
		if err != nil {
			return err
		}
		k, err := g.AddKernelNode(gg.KernelParams{Kernel: leakKernel, Grid: gg.Dim1(n / 256), Block: gg.Dim1(256), Args: []any{p, n}}, a)
		if err != nil {
			return err
		}
		if _, err := g.AddMemFreeNode(p, k); err != nil {
			return err
		}
		e, err := g.Instantiate(0)
		if err != nil {
			return err
		}
		for range 3 {
			if err := e.Launch(s); err != nil {
				return err
			}
		}
		// A pool with an allocation alive.
		pool, err := d.NewMemPool(gg.MemPoolProps{})
		if err != nil {
			return err
		}
		if _, err := s.MallocFromPoolAsync(1<<16, pool); err != nil {
			return err
		}
		// A user object whose reference the program keeps.
		if _, err := d.NewUserObject(func() { destroyed.Add(1) }, 1, gg.UserObjectNoDestructorSync); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		// A capture left open.
		c, err := d.NewStream()
		if err != nil {
			return err
		}
		if err := c.BeginCapture(gg.CaptureModeGlobal); err != nil {
			return err
		}
		return c.Launch(leakKernel, gg.Dim1(1), gg.Dim1(32), p, 32)
	}
	uerr := use()
	return errors.Join(uerr, d.Close())
}

// usage is what the process holds.
type usage struct {
	fds, maps, goroutines int
	heap                  uint64
	devFree               uint64 // cuda: free device memory
}

func measure(t *testing.T, probe *gg.Device) usage {
	t.Helper()
	var u usage
	for range 3 { // let exiting goroutines finish
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u.heap = ms.HeapAlloc
	u.goroutines = runtime.NumGoroutine()
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		u.fds = len(fds)
	}
	if b, err := os.ReadFile("/proc/self/maps"); err == nil {
		u.maps = strings.Count(string(b), "\n")
	}
	if probe != nil {
		free, _, err := probe.MemGetInfo()
		if err != nil {
			t.Fatal(err)
		}
		u.devFree = free
	}
	return u
}

func TestLeakCycles(t *testing.T) {
	for _, tc := range []struct {
		backend string
		cycles  int
	}{{"host", 200}, {"cuda", 200}} {
		t.Run(tc.backend, func(t *testing.T) {
			var probe *gg.Device
			if tc.backend == "cuda" {
				// The probe keeps the primary context alive across the
				// cycles, as a service's other work would, and reads the
				// free memory.
				probe = openCUDA(t)
				defer probe.Close()
			}
			n := leakCycles(t, tc.cycles)
			var destroyed atomic.Int64
			warm := max(5, n/10)
			for i := range warm {
				if err := cycle(tc.backend, &destroyed); err != nil {
					t.Fatalf("warm-up cycle %d: %v", i, err)
				}
			}
			before := measure(t, probe)
			start := time.Now()
			for i := range n {
				if err := cycle(tc.backend, &destroyed); err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
			}
			el := time.Since(start)
			after := measure(t, probe)
			deadline := time.Now().Add(5 * time.Second)
			for destroyed.Load() < int64(warm+n) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // destructors run on the driver's thread
			}
			t.Logf("%d cycles in %v: fds %d→%d, mappings %d→%d, goroutines %d→%d, heap %.1f→%.1f MiB, device free %d→%d MiB, user objects destroyed %d of %d",
				n, el.Round(time.Millisecond), before.fds, after.fds, before.maps, after.maps, before.goroutines, after.goroutines,
				float64(before.heap)/(1<<20), float64(after.heap)/(1<<20), before.devFree>>20, after.devFree>>20, destroyed.Load(), warm+n)
			var bad []string
			check := func(what string, grew, limit int64) {
				if grew > limit {
					bad = append(bad, fmt.Sprintf("%s grew by %d (limit %d)", what, grew, limit))
				}
			}
			check("file descriptors", int64(after.fds-before.fds), 0)
			check("mappings", int64(after.maps-before.maps), 16) // the Go heap may map a few more arenas
			check("goroutines", int64(after.goroutines-before.goroutines), 0)
			check("Go heap (bytes)", int64(after.heap)-int64(before.heap), 4<<20)
			check("device memory in use (bytes)", int64(before.devFree)-int64(after.devFree), 2<<20)
			check("user objects not destroyed", int64(warm+n)-destroyed.Load(), 0)
			if len(bad) > 0 {
				t.Fatalf("over %d cycles: %s", n, strings.Join(bad, "; "))
			}
		})
	}
}
