package gpugraph_test

import (
	"errors"
	"math"
	"runtime"
	"testing"
	"time"
	"unsafe"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/bench"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
	"github.com/gpugraph/gpugraph/internal/dl"
)

// openCUDA opens the cuda backend or skips: these tests run on the GPU
// machine (see docs/gpu.md), and CI has no GPU.
func openCUDA(t testing.TB) *gg.Device {
	t.Helper()
	d, err := gg.Open("cuda")
	if errors.Is(err, gg.ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var saxpyCUDA = &gg.Kernel{
	Name:   "saxpy",
	Params: []gg.ParamType{gg.Int32, gg.Float32, gg.Pointer, gg.Pointer},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(0)
		x, y := gg.Slice[float32](a.Ptr(2), n), gg.Slice[float32](a.Ptr(3), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				y[i] += a.Float32(1) * x[i]
			}
		}
	},
	CUDA: `extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
		int i = blockIdx.x * blockDim.x + threadIdx.x;
		if (i < n) y[i] = a * x[i] + y[i];
	}`,
}

func TestCUDAStreamWork(t *testing.T) {
	d := openCUDA(t)
	p := d.Properties()
	t.Logf("%s, driver %d, %d SMs, %d MiB", p.Name, p.DriverVersion, p.MultiProcessorCount, p.TotalMem>>20)
	s := stream(t, d)
	const n = 1 << 20
	x := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	y := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	hx, hy := make([]float32, n), make([]float32, n)
	for i := range hx {
		hx[i] = float32(i % 1000)
	}
	start := must[*gg.Event](t)(d.NewEvent(0))
	end := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, s.Record(start))
	ok(t, s.Memcpy(gg.HtoD(x, gg.Bytes(hx))))
	ok(t, s.Memset(gg.Memset32(y, math.Float32bits(1), n)))
	ok(t, s.Launch(saxpyCUDA, gg.Dim1(n/256), gg.Dim1(256), n, float32(2), x, y))
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(hy), y)))
	ran := false
	ok(t, s.LaunchHostFunc(func() { ran = true }))
	ok(t, s.Record(end))
	ok(t, s.Synchronize())
	for i, v := range hy {
		if want := 2*float32(i%1000) + 1; v != want {
			t.Fatalf("y[%d] = %v, want %v", i, v, want)
		}
	}
	if !ran {
		t.Fatal("host function did not run")
	}
	dt := must[time.Duration](t)(gg.ElapsedTime(start, end))
	t.Logf("8 MiB in and out plus saxpy: %v", dt)
	if dt <= 0 || dt > 10*time.Second {
		t.Fatalf("ElapsedTime = %v for work that took milliseconds", dt)
	}
	ok(t, s.Query())
	isCode(t, d.Free(x+4), gg.ErrInvalidValue)
	isCode(t, s.Memcpy(gg.HtoD(x+4, make([]byte, 4*n))), gg.ErrInvalidValue)
	isCode(t, s.Launch(saxpyCUDA, gg.Dim3{}, gg.Dim1(256), n, float32(2), x, y), gg.ErrInvalidConfiguration)
	ok(t, d.Free(x))
	ok(t, d.Free(y))
}

func TestCUDAGraph(t *testing.T) {
	d := openCUDA(t)
	s := stream(t, d)
	const n = 1 << 16
	x := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	y := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	hx, hy := make([]float32, n), make([]float32, n)
	g := graph(t, d)
	cp := must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(x, gg.Bytes(hx))))
	ms := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(y, 0, n)))
	k := must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: saxpyCUDA, Grid: gg.Dim1(n / 256), Block: gg.Dim1(256), Args: []any{n, float32(3), x, y}}, cp, ms))
	child := graph(t, d)
	must[*gg.Node](t)(child.AddKernelNode(gg.KernelParams{Kernel: saxpyCUDA, Grid: gg.Dim1(n / 256), Block: gg.Dim1(256), Args: []any{n, float32(1), x, y}}))
	c := must[*gg.Node](t)(g.AddChildGraphNode(child, k))
	out := must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(gg.Bytes(hy), y), c))
	launches := 0
	must[*gg.Node](t)(g.AddHostNode(func() { launches++ }, out))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	for l := 1; l <= 3; l++ {
		for i := range hx {
			hx[i] = float32(l * i % 777)
		}
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		for i, v := range hy {
			if want := 4 * float32(l*i%777); v != want {
				t.Fatalf("launch %d: y[%d] = %v, want %v", l, i, v, want)
			}
		}
	}
	if launches != 3 {
		t.Fatalf("host node ran %d times", launches)
	}
	// Edges edited after creation reach the native graph.
	h := graph(t, d)
	a := must[*gg.Node](t)(h.AddEmptyNode())
	b := must[*gg.Node](t)(h.AddEmptyNode())
	ok(t, h.AddDependency(a, b))
	isCode(t, h.AddDependency(b, a), gg.ErrInvalidValue)
	ok(t, h.RemoveDependencies(gg.Edge{From: a, To: b}))
	ok(t, h.DestroyNode(b))
	must[*gg.Exec](t)(h.Instantiate(0))
}

// BenchmarkCUDALaunch mirrors tools/bench/native/launch.cu on the cuda backend:
// the host cost of the launch call alone (1000 calls; the Synchronize after
// them is not timed), for a stream kernel launch and for graph launches of chains
// of empty kernels, and the GPU time per node of the chain. Run with
//
//	gpugraph.test -test.run '^$' -test.bench CUDALaunch
func BenchmarkCUDALaunch(b *testing.B) {
	d, err := gg.Open("cuda")
	if err != nil {
		b.Skipf("no CUDA device: %v", err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	one := gg.Dim1(1)
	b.Run("stream-call", func(b *testing.B) {
		for b.Loop() {
			for i := 0; i < 1000; i++ {
				if err := s.Launch(bench.Empty, one, one); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s.Synchronize()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/launch")
	})
	for _, n := range bench.Sizes {
		g, _, err := bench.BuildGraph(d, bench.Shapes[0], n)
		if err != nil {
			b.Fatal(err)
		}
		e, err := g.Instantiate(0)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bench.Name("graph-call", n), func(b *testing.B) {
			if n > 1 {
				// 1000 queued launches of a larger graph take longer on the
				// GPU than to issue: the call would measure the queue.
				b.Skip("call cost measured at n=1")
			}
			for b.Loop() {
				for i := 0; i < 1000; i++ {
					if err := e.Launch(s); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				s.Synchronize()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/launch")
		})
		b.Run(bench.Name("graph-gpu", n), func(b *testing.B) {
			start, _ := d.NewEvent(0)
			end, _ := d.NewEvent(0)
			var total time.Duration
			for b.Loop() {
				s.Record(start)
				for i := 0; i < 20; i++ {
					e.Launch(s)
				}
				s.Record(end)
				end.Synchronize()
				dt, _ := gg.ElapsedTime(start, end)
				total += dt
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/20/float64(n), "gpu-ns/node")
		})
	}
}

// BenchmarkCUDAChainLaunchSync splits one launch of an n-node chain plus
// Synchronize into GPU time (events around the single launch) and wall time.
func BenchmarkCUDAChainLaunchSync(b *testing.B) {
	d, err := gg.Open("cuda")
	if err != nil {
		b.Skipf("no CUDA device: %v", err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	for _, n := range []int{100, 1000} {
		g, _, _ := bench.BuildGraph(d, bench.Shapes[0], n)
		e, _ := g.Instantiate(0)
		start, _ := d.NewEvent(0)
		end, _ := d.NewEvent(0)
		b.Run(bench.Name("chain", n), func(b *testing.B) {
			var gpu time.Duration
			for b.Loop() {
				s.Record(start)
				e.Launch(s)
				s.Record(end)
				s.Synchronize()
				dt, _ := gg.ElapsedTime(start, end)
				gpu += dt
			}
			b.ReportMetric(float64(gpu.Nanoseconds())/float64(b.N), "gpu-ns/launch")
		})
		b.Run(bench.Name("chain-nosync-events", n), func(b *testing.B) {
			for b.Loop() {
				e.Launch(s)
				end.Synchronize()
				s.Record(end)
				end.Synchronize()
			}
		})
	}
}

// TestCUDACapture: capture is the driver's, so work enqueued on the native
// stream handle by code outside gpugraph is captured too.
func TestCUDACapture(t *testing.T) {
	d := openCUDA(t)
	drv, err := driver.Load()
	ok(t, err)
	s1, s2 := stream(t, d), stream(t, d)
	const n = 1 << 16
	x := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	y := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	z := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	hx := make([]float32, n)
	for i := range hx {
		hx[i] = float32(i % 100)
	}
	ok(t, d.Memcpy(gg.HtoD(x, gg.Bytes(hx))))
	fork := must[*gg.Event](t)(d.NewEvent(0))
	join := must[*gg.Event](t)(d.NewEvent(0))

	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	if st := must[gg.CaptureStatus](t)(s1.IsCapturing()); st != gg.CaptureStatusActive {
		t.Fatalf("status %v", st)
	}
	ok(t, s1.Memset(gg.Memset32(y, 0, n)))
	ok(t, s1.Record(fork))
	ok(t, s2.Wait(fork))
	ok(t, s1.Launch(saxpyCUDA, gg.Dim1(n/256), gg.Dim1(256), n, float32(2), x, y))
	// A call made directly on the raw handle, as another CUDA library would.
	ok(t, drv.MemsetD32Async(uint64(z), math.Float32bits(5), n, s2.NativeStream()))
	ok(t, s2.Record(join))
	ok(t, s1.Wait(join))
	ok(t, s1.Launch(saxpyCUDA, gg.Dim1(n/256), gg.Dim1(256), n, float32(1), z, y)) // y += z
	g := must[*gg.Graph](t)(s1.EndCapture())

	nodes := must[[]*gg.Node](t)(g.Nodes())
	types := map[gg.NodeType]int{}
	for _, nd := range nodes {
		types[nd.Type()]++
	}
	if len(nodes) != 4 || types[gg.NodeMemset] != 2 || types[gg.NodeKernel] != 2 {
		t.Fatalf("captured nodes %v", nodes)
	}
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(s1))
	ok(t, s1.Synchronize())
	hy := make([]float32, n)
	ok(t, d.Memcpy(gg.DtoH(gg.Bytes(hy), y)))
	for i, v := range hy {
		if want := 2*float32(i%100) + 5; v != want {
			t.Fatalf("y[%d] = %v, want %v: the raw call was not captured", i, v, want)
		}
	}

	// Prohibited operations are the driver's.
	ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
	isCode(t, s1.Synchronize(), gg.ErrStreamCaptureUnsupported)
	_, err = s1.EndCapture()
	isCode(t, err, gg.ErrStreamCaptureInvalidated)
}

// ctxOut receives the context entry points' out-parameters: a global does
// not move while its address is held in a uintptr.
var ctxOut [2]uintptr

// TestCUDAExecCallsCarryTheirContext: the cuda backend makes
// cuGraphExecUpdate and cuGraphExecDestroy without making its own context
// current (internal/cuda Device.bound). With another context of the device
// current, the driver takes the context from the executable graph: the
// update reaches the next launch, the destroy succeeds, and the thread's
// context is left as it was. With none current the driver refuses, and the
// calls are repeated with the device's context current (measured on the
// H100 with driver 580: the thread's context is the device's afterwards).
func TestCUDAExecCallsCarryTheirContext(t *testing.T) {
	d := openCUDA(t)
	drv, err := driver.Load()
	if err != nil {
		t.Fatal(err)
	}
	cu, err := dl.Open("libcuda.so.1")
	if err != nil {
		t.Fatal(err)
	}
	sym := func(name string) uintptr {
		p, err := dl.Sym(cu, name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	getCurrent, deviceGet, ctxCreate, ctxDestroy := sym("cuCtxGetCurrent"), sym("cuDeviceGet"), sym("cuCtxCreate_v2"), sym("cuCtxDestroy_v2")
	cuCall := func(name string, fn uintptr, a ...uintptr) {
		t.Helper()
		var w [12]uintptr
		copy(w[:], a)
		if r := driver.FastCall(fn, w); uint32(r) != 0 {
			t.Fatalf("%s: %v", name, drv.Check(name, int(uint32(r))))
		}
	}
	current := func() uintptr {
		cuCall("cuCtxGetCurrent", getCurrent, uintptr(unsafe.Pointer(&ctxOut[0])))
		return ctxOut[0]
	}
	setCurrent := func(ctx uintptr) {
		t.Helper()
		if err := drv.SetCurrent(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	g1, _ := chainOf(t, d, p, 1, 2, 3)
	e := must[*gg.Exec](t)(g1.Instantiate(0))
	cuCall("cuDeviceGet", deviceGet, uintptr(unsafe.Pointer(&ctxOut[1])), uintptr(d.Properties().Ordinal))
	cuCall("cuCtxCreate_v2", ctxCreate, uintptr(unsafe.Pointer(&ctxOut[0])), 0, ctxOut[1])
	other := ctxOut[0]
	defer func() { setCurrent(0); cuCall("cuCtxDestroy_v2", ctxDestroy, other) }()

	for i, c := range []struct {
		name  string
		ctx   uintptr
		after uintptr // the thread's context after Update and Destroy
	}{{"no context current", 0, d.NativeContext()}, {"another context current", other, other}} {
		v := uint32(10 * (i + 1))
		g, _ := chainOf(t, d, p, v, v+1, v+2)
		x := must[*gg.Exec](t)(g.Instantiate(0)) // with the device's context, for Destroy below
		setCurrent(c.ctx)
		if _, err := e.Update(g); err != nil {
			t.Fatalf("%s: Update: %v", c.name, err)
		}
		if err := x.Destroy(); err != nil {
			t.Fatalf("%s: Destroy: %v", c.name, err)
		}
		if got := current(); got != c.after {
			t.Errorf("%s: the thread's context is %#x after Update and Destroy, want %#x", c.name, got, c.after)
		}
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		if got := readU32(t, d, p, 3); got[0] != v || got[1] != v+1 || got[2] != v+2 {
			t.Fatalf("%s: the launch after the update wrote %v, want %v", c.name, got, []uint32{v, v + 1, v + 2})
		}
	}
}
