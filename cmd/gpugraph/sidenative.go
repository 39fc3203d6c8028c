//go:build linux

package main

// The native side by side: the cuda backend's launch, instantiate and update
// against the same driver calls made from C in this process, on the same
// CUfunction, CUgraph, CUgraphExec, CUstream and OS thread (the sources are
// tools/bench/native, compiled here with the C compiler against the CUDA
// headers). What is left between the two columns is gpugraph's path above
// the driver: its checks, its bookkeeping and the foreign call.
//
// Variants are interleaved: every round runs each variant once, the order
// reversed every other round, so that drifts of the machine fall on all
// alike. The table gives each variant's median over the rounds, the ratio of
// the medians to the C loop's, and the median of the ratios of the rounds
// (each API sample over the C sample of its own round), which a slow drift
// moves less.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/bench"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
	benchsrc "github.com/gpugraph/gpugraph/tools/bench"
)

// nativeConfig is what benchNative measures.
type nativeConfig struct {
	CUDA   string  // the CUDA toolkit: CUDA/include/cuda.h, CUDA/lib64/stubs
	CC     string  // C compiler
	Rounds int     // interleaved rounds
	Time   float64 // seconds per variant per round
	Sizes  []int   // node counts for instantiate and update
}

func defaultNativeConfig() nativeConfig {
	return nativeConfig{CUDA: "/usr/local/cuda", CC: "gcc", Rounds: 7, Time: 0.3, Sizes: []int{10, 100, 1000, 10000}}
}

func (cfg nativeConfig) check() error {
	switch {
	case cfg.Rounds < 1:
		return usagef("%d rounds: need at least 1", cfg.Rounds)
	case !(cfg.Time > 0):
		return usagef("time %g s: need more than 0", cfg.Time)
	case len(cfg.Sizes) == 0:
		return usagef("no graph sizes")
	}
	for _, n := range cfg.Sizes {
		if n < 1 {
			return usagef("graph size %d: need at least 1", n)
		}
	}
	return nil
}

// nativeLoops are the C functions of tools/bench/native.
type nativeLoops struct {
	setCurrent  func(ctx uintptr) int32
	launch      func(f, stream uintptr, n int32) int32
	graphLaunch func(exec, stream uintptr, n int32) int32
	instantiate func(g uintptr, n int32) int32
	update      func(exec, g, h uintptr, n int32) int32
}

// buildNativeLoops compiles the C loops into one shared library in dir and
// loads it.
func buildNativeLoops(cfg nativeConfig, dir string) (*nativeLoops, error) {
	var srcs []string
	for _, src := range []struct{ name, text string }{{"instloop.c", benchsrc.InstLoop}, {"launchloop.c", benchsrc.LaunchLoop}} {
		p := filepath.Join(dir, src.name)
		if err := os.WriteFile(p, []byte(src.text), 0o644); err != nil {
			return nil, err
		}
		srcs = append(srcs, p)
	}
	inc := filepath.Join(cfg.CUDA, "include")
	if _, err := os.Stat(filepath.Join(inc, "cuda.h")); err != nil {
		return nil, fmt.Errorf("no CUDA headers (--cuda %s): %w", cfg.CUDA, err)
	}
	lib := filepath.Join(dir, "libggnative.so")
	args := append([]string{"-O2", "-shared", "-fPIC", "-I" + inc, "-o", lib}, srcs...)
	args = append(args, "-L"+filepath.Join(cfg.CUDA, "lib64", "stubs"), "-lcuda")
	if out, err := exec.Command(cfg.CC, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", cfg.CC, strings.Join(args, " "), err, out)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", lib, err)
	}
	l := &nativeLoops{}
	for name, fn := range map[string]any{
		"gg_ctx_set_current": &l.setCurrent, "gg_launch_loop": &l.launch, "gg_graph_launch_loop": &l.graphLaunch,
		"gg_instantiate_loop": &l.instantiate, "gg_update_loop": &l.update,
	} {
		if _, err := purego.Dlsym(h, name); err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		purego.RegisterLibFunc(fn, h, name)
	}
	return l, nil
}

// cresult reports a C loop's CUresult.
func cresult(call string, r int32) error {
	if r != 0 {
		return fmt.Errorf("%s: CUresult %d", call, r)
	}
	return nil
}

// nativeVariant is one row of a comparison: op does k units of work
// (batches of launches, instantiations or updates).
type nativeVariant struct {
	name string
	ref  int // index of its C reference in the same comparison; -1: a reference, -2: none
	op   func(k int) error
}

// sampleVariant times v for about secs: one unit to warm up and estimate,
// then as many units as fill secs, timed together; it returns ns per unit.
func sampleVariant(v nativeVariant, secs float64) (float64, error) {
	t0 := time.Now()
	if err := v.op(1); err != nil {
		return 0, err
	}
	est := max(time.Since(t0).Seconds(), 1e-7)
	k := max(1, int(secs/est))
	t0 = time.Now()
	if err := v.op(k); err != nil {
		return 0, err
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(k), nil
}

// interleave runs rounds of vs, the order reversed every other round, and
// returns each variant's samples in round order.
func interleave(progress io.Writer, what string, vs []nativeVariant, rounds int, secs float64) ([][]float64, error) {
	out := make([][]float64, len(vs))
	for r := range rounds {
		order := make([]int, len(vs))
		for i := range order {
			order[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			ns, err := sampleVariant(vs[i], secs)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", what, vs[i].name, err)
			}
			out[i] = append(out[i], ns)
		}
	}
	fmt.Fprintf(progress, "bench: %s done\n", what)
	return out, nil
}

// printVariants prints one comparison's rows: each variant's sorted runs
// (divided by per, in unit), median, ratio of medians to its reference and
// median of the per-round ratios.
func printVariants(w io.Writer, vs []nativeVariant, samples [][]float64, per float64, prec int) {
	for i, v := range vs {
		s := make([]float64, len(samples[i]))
		for j, x := range samples[i] {
			s[j] = x / per
		}
		sorted := slices.Clone(s)
		slices.Sort(sorted)
		runs := make([]string, len(sorted))
		for j, x := range sorted {
			runs[j] = fmt.Sprintf("%.*f", prec, x)
		}
		ratio, paired := "1.00", "1.00"
		if v.ref == -2 {
			ratio, paired = "-", "-"
		}
		if v.ref >= 0 {
			ratio = fmt.Sprintf("%.2f", median(s)/median(samples[v.ref])*per)
			rs := make([]float64, len(s))
			for j := range s {
				rs[j] = samples[i][j] / samples[v.ref][j]
			}
			paired = fmt.Sprintf("%.2f", median(rs))
		}
		fmt.Fprintf(w, "  %-28s %9.*f %6s %6s   [%s]\n", v.name, prec, median(s), ratio, paired, strings.Join(runs, " "))
	}
}

// instKernel has one argument, for updates to change.
var instKernel = &gg.Kernel{Name: "gg_bench_arg", Params: []gg.ParamType{gg.Int32}, Go: func(gg.Block, gg.Args) {},
	CUDA: `extern "C" __global__ void gg_bench_arg(int v) {}`}

// instGraph is n kernel nodes of argument v: chains of ten fanning out of
// one root (BenchmarkInstantiate's graph).
func instGraph(d *gg.Device, n, v int) (*gg.Graph, error) {
	g, err := d.NewGraph()
	if err != nil {
		return nil, err
	}
	p := gg.KernelParams{Kernel: instKernel, Grid: gg.Dim1(1), Block: gg.Dim1(1), Args: []any{v}}
	root, err := g.AddNode(p)
	prev := root
	for i := 1; i < n && err == nil; i++ {
		if i%10 == 0 {
			prev = root
		}
		prev, err = g.AddNode(p, prev)
	}
	if err != nil {
		g.Destroy()
		return nil, err
	}
	return g, nil
}

// benchNative prints the launch path, instantiate and update tables of the
// cuda device d against the C loops, and the host backend's instantiate and
// update per node beside them.
func benchNative(w, progress io.Writer, d *gg.Device, cfg nativeConfig) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if d.Properties().Backend != gg.BackendCUDA {
		return usagef("--vs native needs --backend cuda")
	}
	dir, err := os.MkdirTemp("", "gpugraph-native-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := buildNativeLoops(cfg, dir)
	if err != nil {
		return err
	}
	b, err := loadBareCalls()
	if err != nil {
		return err
	}
	// One OS thread with the device's context current for every variant:
	// the C loops take the context from the thread, as the driver calls
	// under the API do.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cresult("cuCtxSetCurrent", c.setCurrent(d.NativeContext())); err != nil {
		return err
	}
	fmt.Fprintf(w, "gpugraph against the driver called from C, in one process, same handles and thread\n")
	fmt.Fprintf(w, "date:   %s\n", time.Now().UTC().Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(w, "device: %s\n", d.Properties().Name)
	fmt.Fprintf(w, "host:   %d CPUs, %s; %s %s/%s\n", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "runs:   %d interleaved rounds, %gs per variant per round; ratio = median / C median, paired = median of the rounds' ratios\n", cfg.Rounds, cfg.Time)
	if err := benchLaunchPath(w, progress, d, c, b, cfg); err != nil {
		return err
	}
	return benchInstUpdate(w, progress, d, c, b, cfg)
}

// benchLaunchPath compares Stream.Launch and Exec.Launch with cuLaunchKernel
// and cuGraphLaunch loops: 1000 launches of an empty kernel, or of a
// one-node graph of it, then a synchronize, per unit.
func benchLaunchPath(w, progress io.Writer, d *gg.Device, c *nativeLoops, b *bareCalls, cfg nativeConfig) error {
	const batch = 1000
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	one := gg.Dim1(1)
	f, err := d.NativeFunction(bench.Empty)
	if err != nil {
		return err
	}
	g, err := d.NewGraph()
	if err != nil {
		return err
	}
	defer g.Destroy()
	if _, err := g.AddKernelNode(gg.KernelParams{Kernel: bench.Empty, Grid: one, Block: one}); err != nil {
		return err
	}
	x, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer x.Destroy()
	launch := func() error { return s.Launch(bench.Empty, one, one) }
	graphLaunch := func() error { return x.Launch(s) }
	repeat := func(one func() error) func(k int) error {
		return func(k int) error {
			for range k {
				for range batch {
					if err := one(); err != nil {
						return err
					}
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	cloop := func(call string, loop func(h, stream uintptr, n int32) int32, h uintptr) func(k int) error {
		return func(k int) error {
			for range k {
				if err := cresult(call, loop(h, s.NativeStream(), batch)); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// The bare foreign call (bareCalls): between it and the C loop is the
	// price of calling C from Go; between it and the API, gpugraph's own
	// path.
	st, gx := s.NativeStream(), x.NativeExec()
	bare := func(call string, fn uintptr, a [12]uintptr) func() error {
		return func() error { return cresult(call, int32(driver.FastCall(fn, a))) }
	}
	// (VZEROUPPER before the call, as C code leaves the vector state,
	// was tried and changed nothing: docs/performance-log.md.)
	la := [12]uintptr{f, 1, 1, 1, 1, 1, 1, 0, st, 0, 0}
	vs := []nativeVariant{
		{"Stream.Launch", 2, repeat(launch)},
		{"Go loop, bare cuLaunchKernel", 2, repeat(bare("cuLaunchKernel", b.launch, la))},
		{"C loop, cuLaunchKernel", -1, cloop("cuLaunchKernel", c.launch, f)},
		{"Exec.Launch, 1-node graph", 5, repeat(graphLaunch)},
		{"Go loop, bare cuGraphLaunch", 5, repeat(bare("cuGraphLaunch", b.graphLaunch, [12]uintptr{gx, st}))},
		{"C loop, cuGraphLaunch", -1, cloop("cuGraphLaunch", c.graphLaunch, gx)},
	}
	samples, err := interleave(progress, "launch path", vs, cfg.Rounds, cfg.Time)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nlaunch path: %d launches of an empty kernel (or a 1-node graph of it) + Synchronize, µs per launch\n", batch)
	fmt.Fprintf(w, "  %-28s %9s %6s %6s   %s\n", "variant", "median", "ratio", "paired", "[runs, sorted]")
	printVariants(w, vs, samples, batch*1000, 3)
	// Split the gap: the foreign call (bare / C) and gpugraph's own path
	// above it (API / bare), each as the median of the rounds' ratios.
	own := func(api, bare int) float64 {
		rs := make([]float64, cfg.Rounds)
		for j := range rs {
			rs[j] = samples[api][j] / samples[bare][j]
		}
		return median(rs)
	}
	fmt.Fprintf(w, "  gpugraph's own path above the bare call (paired): Stream.Launch %.2f, Exec.Launch %.2f\n", own(0, 1), own(3, 4))
	allocs := func(f func() error) float64 {
		n := testing.AllocsPerRun(batch, func() { f() })
		s.Synchronize()
		return n
	}
	fmt.Fprintf(w, "  Go allocations per launch: Stream.Launch %.0f, Exec.Launch %.0f\n", allocs(launch), allocs(graphLaunch))
	return nil
}

// bareCalls are the driver's entry points for the bare rows: Go loops
// calling them through the binding's foreign call (driver.FastCall) with
// nothing of gpugraph above it.
type bareCalls struct {
	launch, graphLaunch, instantiate, destroy, update uintptr
}

// bareOut receives the bare calls' out-parameters: a global does not move,
// as a variable on a goroutine's stack may while its address is held in a
// uintptr.
var bareOut [4]uintptr

func loadBareCalls() (*bareCalls, error) {
	cu, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	var b bareCalls
	var errs []error
	for _, e := range []struct {
		p    *uintptr
		name string
	}{{&b.launch, "cuLaunchKernel"}, {&b.graphLaunch, "cuGraphLaunch"}, {&b.instantiate, "cuGraphInstantiateWithFlags"},
		{&b.destroy, "cuGraphExecDestroy"}, {&b.update, "cuGraphExecUpdate_v2"}} {
		var err error
		*e.p, err = purego.Dlsym(cu, e.name)
		errs = append(errs, err)
	}
	return &b, errors.Join(errs...)
}

// instUpdate returns the bare loops of the C loops of instloop.c:
// instantiate g (cuGraphInstantiate is cuGraphInstantiateWithFlags in
// cuda.h) and destroy the result; update x from h, then g, alternating.
func (b *bareCalls) instUpdate(g, h, x uintptr) (inst, update func(k int) error) {
	out := uintptr(unsafe.Pointer(&bareOut[0]))
	inst = func(k int) error {
		for range k {
			if err := cresult("cuGraphInstantiate", int32(driver.FastCall(b.instantiate, [12]uintptr{out, g, 0}))); err != nil {
				return err
			}
			if err := cresult("cuGraphExecDestroy", int32(driver.FastCall(b.destroy, [12]uintptr{bareOut[0]}))); err != nil {
				return err
			}
		}
		return nil
	}
	i := 0
	update = func(k int) error {
		for range k {
			src := g
			if i++; i&1 == 1 {
				src = h
			}
			if err := cresult("cuGraphExecUpdate", int32(driver.FastCall(b.update, [12]uintptr{x, src, out}))); err != nil {
				return err
			}
		}
		return nil
	}
	return inst, update
}

// benchInstUpdate compares Graph.Instantiate (with Exec.Destroy) and
// Exec.Update with cuGraphInstantiate and cuGraphExecUpdate loops, per
// node, and prints the host backend's costs per node beside them. The bare
// rows make the same calls from a Go loop: between them and the C loop is
// the foreign call, between the API and them gpugraph's own path.
func benchInstUpdate(w, progress io.Writer, d *gg.Device, c *nativeLoops, bare *bareCalls, cfg nativeConfig) error {
	host, err := gg.Open(gg.BackendHost)
	if err != nil {
		return err
	}
	defer host.Close()
	fmt.Fprintf(w, "\ninstantiate and update: graphs of n kernel nodes (chains of 10 from one root), ns per node;\n")
	fmt.Fprintf(w, "  update alternates two graphs whose every kernel argument differs; host: the host backend, API only\n")
	fmt.Fprintf(w, "  %-28s %9s %6s %6s   %s\n", "variant", "median", "ratio", "paired", "[runs, sorted]")
	for _, n := range cfg.Sizes {
		var vs []nativeVariant
		var cleanup []func()
		err := func() error {
			for _, dev := range []*gg.Device{d, host} {
				g, err := instGraph(dev, n, 1)
				if err != nil {
					return err
				}
				h, err := instGraph(dev, n, 2)
				if err != nil {
					g.Destroy()
					return err
				}
				x, err := g.Instantiate(0)
				if err != nil {
					g.Destroy()
					h.Destroy()
					return err
				}
				cleanup = append(cleanup, func() { x.Destroy(); g.Destroy(); h.Destroy() })
				inst := func(k int) error {
					for range k {
						e, err := g.Instantiate(0)
						if err != nil {
							return err
						}
						if err := e.Destroy(); err != nil {
							return err
						}
					}
					return nil
				}
				i := 0
				update := func(k int) error {
					for range k {
						src := g
						if i++; i&1 == 1 {
							src = h
						}
						if _, err := x.Update(src); err != nil {
							return err
						}
					}
					return nil
				}
				if dev == host {
					vs = append(vs, nativeVariant{"host Instantiate", -2, inst}, nativeVariant{"host Update", -2, update})
					continue
				}
				k0 := len(vs)
				bi, bu := bare.instUpdate(g.NativeGraph(), h.NativeGraph(), x.NativeExec())
				vs = append(vs,
					nativeVariant{"Graph.Instantiate", k0 + 2, inst},
					nativeVariant{"Go loop, bare calls", k0 + 2, bi},
					nativeVariant{"C loop, cuGraphInstantiate", -1, func(k int) error {
						return cresult("cuGraphInstantiate", c.instantiate(g.NativeGraph(), int32(k)))
					}},
					nativeVariant{"Exec.Update", k0 + 5, update},
					nativeVariant{"Go loop, bare call", k0 + 5, bu},
					nativeVariant{"C loop, cuGraphExecUpdate", -1, func(k int) error {
						// From h, then g, as the next API update would go.
						return cresult("cuGraphExecUpdate", c.update(x.NativeExec(), h.NativeGraph(), g.NativeGraph(), int32(k)))
					}})
			}
			samples, err := interleave(progress, fmt.Sprintf("instantiate and update, n=%d", n), vs, cfg.Rounds, cfg.Time)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, " n=%d\n", n)
			printVariants(w, vs, samples, float64(n), 1)
			return nil
		}()
		for _, f := range cleanup {
			f()
		}
		if err != nil {
			return err
		}
	}
	return nil
}
