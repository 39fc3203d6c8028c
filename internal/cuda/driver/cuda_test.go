//go:build linux

package driver

import (
	"errors"
	"math"
	"runtime"
	"testing"
	"unsafe"
)

const testSrc = `
extern "C" __global__ void empty() {}
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}`

type env struct {
	d      *Driver
	ctx    uintptr
	stream uintptr
	mod    uintptr
	empty  uintptr
	saxpy  uintptr
	cm     *CMem
}

func setup(tb testing.TB) *env {
	tb.Helper()
	d, err := Load()
	if errors.Is(err, ErrNoDriver) {
		tb.Skip("no NVIDIA driver (libcuda.so.1): the cuda tests run on the GPU machine")
	}
	if err != nil {
		tb.Fatal(err)
	}
	runtime.LockOSThread()
	tb.Cleanup(runtime.UnlockOSThread)
	dev, err := d.DeviceGet(0)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, err := d.PrimaryContext(dev)
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.SetCurrent(ctx); err != nil {
		tb.Fatal(err)
	}
	major, _ := d.Attribute(AttrComputeCapMajor, dev)
	minor, _ := d.Attribute(AttrComputeCapMinor, dev)
	nv, err := LoadNVRTC()
	if err != nil {
		tb.Fatal(err)
	}
	ptx, err := nv.Compile(testSrc, "test", major, minor)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{d: d, ctx: ctx}
	if e.mod, err = d.ModuleLoadData(ptx); err != nil {
		tb.Fatal(err)
	}
	e.empty, _ = d.ModuleGetFunction(e.mod, "empty")
	e.saxpy, _ = d.ModuleGetFunction(e.mod, "saxpy")
	if e.stream, err = d.StreamCreate(1); err != nil { // non-blocking
		tb.Fatal(err)
	}
	if e.cm, err = NewCMem(1 << 16); err != nil {
		tb.Fatal(err)
	}
	return e
}

func TestSaxpy(t *testing.T) {
	e := setup(t)
	d := e.d
	const n = 1 << 16
	x, _ := d.MemAlloc(4 * n)
	y, _ := d.MemAlloc(4 * n)
	hx, hy := make([]float32, n), make([]float32, n)
	for i := range hx {
		hx[i], hy[i] = float32(i), 1
	}
	must(t, d.MemcpyHtoDAsync(x, f32bytes(hx), 4*n, e.stream))
	must(t, d.MemcpyHtoDAsync(y, f32bytes(hy), 4*n, e.stream))
	e.cm.Lock()
	params := e.cm.Params([]uint64{n, uint64(math.Float32bits(2)), x, y})
	must(t, d.Launch(e.saxpy, [3]uint32{n / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, e.stream, params))
	e.cm.Unlock()
	must(t, d.MemcpyDtoHAsync(f32bytes(hy), y, 4*n, e.stream))
	must(t, d.StreamSynchronize(e.stream))
	for i, v := range hy {
		if v != 2*float32(i)+1 {
			t.Fatalf("y[%d] = %v", i, v)
		}
	}
}

// f32bytes is the memory of s as bytes.
func f32bytes(s []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRawLaunch is the floor of a Go launch: one cuLaunchKernel
// through purego.SyscallN, the parameter array laid out in C memory.
func BenchmarkRawLaunch(b *testing.B) {
	e := setup(b)
	e.cm.Lock()
	params := e.cm.Params(nil)
	e.cm.Unlock()
	i := 0
	for b.Loop() {
		if err := e.d.Launch(e.empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, e.stream, params); err != nil {
			b.Fatal(err)
		}
		if i++; i%1000 == 0 {
			e.d.StreamSynchronize(e.stream)
		}
	}
	e.d.StreamSynchronize(e.stream)
}

// TestLaunchWithoutCurrentContext: do stream-bound calls need the context
// current on the calling thread? (They take it from the stream if not.)
func TestLaunchWithoutCurrentContext(t *testing.T) {
	e := setup(t)
	must(t, e.d.SetCurrent(0))
	defer e.d.SetCurrent(e.ctx)
	e.cm.Lock()
	params := e.cm.Params(nil)
	e.cm.Unlock()
	err := e.d.Launch(e.empty, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, e.stream, params)
	t.Logf("cuLaunchKernel with no current context: %v", err)
	err2 := e.d.StreamSynchronize(e.stream)
	t.Logf("cuStreamSynchronize with no current context: %v", err2)
	g, _ := func() (uintptr, error) { e.d.SetCurrent(e.ctx); defer e.d.SetCurrent(0); return e.d.GraphCreate() }()
	e.d.SetCurrent(e.ctx)
	n, _ := e.d.GraphAddEmptyNode(g, nil)
	_ = n
	x, _ := e.d.Instantiate(g, 0)
	e.d.SetCurrent(0)
	t.Logf("cuGraphLaunch with no current context: %v", e.d.GraphLaunch(x, e.stream))
}

// TestHotPathAllocs: a stream launch (cuLaunchKernel) and a graph launch
// (cuGraphLaunch) go through fastCall without a heap allocation.
func TestHotPathAllocs(t *testing.T) {
	e := setup(t)
	e.cm.Lock()
	params := e.cm.Params(nil)
	e.cm.Unlock()
	g, err := e.d.GraphCreate()
	must(t, err)
	_, err = e.d.GraphAddEmptyNode(g, nil)
	must(t, err)
	x, err := e.d.Instantiate(g, 0)
	must(t, err)
	one := [3]uint32{1, 1, 1}
	if a := testing.AllocsPerRun(100, func() { e.d.Launch(e.empty, one, one, 0, e.stream, params) }); a != 0 {
		t.Errorf("Launch: %v allocations a call", a)
	}
	if a := testing.AllocsPerRun(100, func() { e.d.GraphLaunch(x, e.stream) }); a != 0 {
		t.Errorf("GraphLaunch: %v allocations a call", a)
	}
	must(t, e.d.StreamSynchronize(e.stream))
	must(t, e.d.GraphExecDestroy(x))
	must(t, e.d.GraphDestroy(g))
}
