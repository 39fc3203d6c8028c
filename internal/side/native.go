//go:build linux

package side

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
func buildNativeLoops(cfg NativeConfig, dir string) (*nativeLoops, error) {
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

// Native measures the launch path, instantiate and update of the cuda
// device d against the C loops, and the host backend's instantiate and
// update per node beside them. Progress notes go to progress.
func Native(d *gg.Device, cfg NativeConfig, progress io.Writer) (*NativeReport, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if d.Properties().Backend != gg.BackendCUDA {
		return nil, configf("--vs native needs --backend cuda")
	}
	dir, err := os.MkdirTemp("", "gpugraph-native-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := buildNativeLoops(cfg, dir)
	if err != nil {
		return nil, err
	}
	b, err := loadBareCalls()
	if err != nil {
		return nil, err
	}
	// One OS thread with the device's context current for every variant:
	// the C loops take the context from the thread, as the driver calls
	// under the API do.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cresult("cuCtxSetCurrent", c.setCurrent(d.NativeContext())); err != nil {
		return nil, err
	}
	r := &NativeReport{Config: cfg, Date: time.Now(), Device: d.Properties().Name,
		Host: fmt.Sprintf("%d CPUs, %s; %s %s/%s", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)}
	if err := benchLaunchPath(r, progress, d, c, b, cfg); err != nil {
		return nil, err
	}
	if err := benchInstUpdate(r, progress, d, c, b, cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// benchLaunchPath compares Stream.Launch and Exec.Launch with cuLaunchKernel
// and cuGraphLaunch loops: 1000 launches of an empty kernel, or of a
// one-node graph of it, then a synchronize, per unit.
func benchLaunchPath(r *NativeReport, progress io.Writer, d *gg.Device, c *nativeLoops, b *bareCalls, cfg NativeConfig) error {
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
	r.launch = nativeTable{vs: vs, samples: samples, per: batch * 1000, prec: 3}
	// Split the gap: the foreign call (bare / C) and gpugraph's own path
	// above it (API / bare), each as the median of the rounds' ratios.
	own := func(api, bare int) float64 {
		rs := make([]float64, cfg.Rounds)
		for j := range rs {
			rs[j] = samples[api][j] / samples[bare][j]
		}
		return median(rs)
	}
	r.ownStream, r.ownExec = own(0, 1), own(3, 4)
	allocs := func(f func() error) float64 {
		n := testing.AllocsPerRun(batch, func() { f() })
		s.Synchronize()
		return n
	}
	r.allocsStream, r.allocsExec = allocs(launch), allocs(graphLaunch)
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
// node, and measures the host backend's costs per node beside them. The bare
// rows make the same calls from a Go loop: between them and the C loop is
// the foreign call, between the API and them gpugraph's own path.
func benchInstUpdate(r *NativeReport, progress io.Writer, d *gg.Device, c *nativeLoops, bare *bareCalls, cfg NativeConfig) error {
	host, err := gg.Open(gg.BackendHost)
	if err != nil {
		return err
	}
	defer host.Close()
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
			r.inst = append(r.inst, nativeSized{n, nativeTable{vs: vs, samples: samples, per: float64(n), prec: 1}})
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
