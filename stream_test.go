package gpugraph_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

func TestOpenUnknownBackend(t *testing.T) {
	_, err := gg.Open("tpu")
	isCode(t, err, gg.ErrInvalidValue)
}

func TestProperties(t *testing.T) {
	p := open(t).Properties()
	if p.Backend != "host" || p.TotalMem == 0 || p.MaxThreadsPerBlock != 1024 || p.MultiProcessorCount != runtime.GOMAXPROCS(0) {
		t.Fatalf("unexpected properties %+v", p)
	}
}

func TestStreamFIFO(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	var got []int
	for i := 0; i < 100; i++ {
		ok(t, s.LaunchHostFunc(func() { got = append(got, i) }))
	}
	ok(t, s.Synchronize())
	for i, v := range got {
		if v != i {
			t.Fatalf("host functions ran out of order: %v", got)
		}
	}
	if len(got) != 100 {
		t.Fatalf("ran %d of 100", len(got))
	}
}

func TestStreamOrdersKernelsAndCopies(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const n = 10000
	x := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	y := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i)
	}
	ok(t, s.Memcpy(gg.HtoD(x, gg.Bytes(in))))
	ok(t, s.Launch(fill32, gg.Dim1((n+255)/256), gg.Dim1(256), y, float32(1), n))
	ok(t, s.Launch(axpy, gg.Dim1((n+255)/256), gg.Dim1(256), x, y, float32(2), n))
	out := make([]float32, n)
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(out), y)))
	ok(t, s.Synchronize())
	for i, v := range out {
		if v != 1+2*float32(i) {
			t.Fatalf("y[%d] = %v, want %v", i, v, 1+2*float32(i))
		}
	}
}

func TestStreamQueryNotReadyWhilePending(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	release := make(chan struct{})
	ok(t, s.LaunchHostFunc(func() { <-release }))
	isCode(t, s.Query(), gg.ErrNotReady)
	close(release)
	ok(t, s.Synchronize())
	ok(t, s.Query())
}

func TestEventsAcrossStreams(t *testing.T) {
	d := open(t)
	a, b := stream(t, d), stream(t, d)
	e := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, e.Query()) // never recorded: complete
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	note := func(s string) func() {
		return func() { mu.Lock(); order = append(order, s); mu.Unlock() }
	}
	ok(t, a.LaunchHostFunc(func() { <-release }))
	ok(t, a.LaunchHostFunc(note("a")))
	ok(t, a.Record(e))
	ok(t, b.Wait(e))
	ok(t, b.LaunchHostFunc(note("b")))
	isCode(t, e.Query(), gg.ErrNotReady)
	time.Sleep(10 * time.Millisecond)
	isCode(t, b.Query(), gg.ErrNotReady) // b is held by the event
	close(release)
	ok(t, e.Synchronize())
	ok(t, b.Synchronize())
	if len(order) != 2 || order[0] != "a" || order[1] != "b" {
		t.Fatalf("order %v, want [a b]", order)
	}
}

func TestEventWaitUsesRecordAtCallTime(t *testing.T) {
	d := open(t)
	a, b := stream(t, d), stream(t, d)
	e := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, a.Record(e))
	ok(t, a.Synchronize())
	ok(t, b.Wait(e)) // waits for the completed record, not a later one
	release := make(chan struct{})
	ok(t, a.LaunchHostFunc(func() { <-release }))
	ok(t, a.Record(e))
	done := make(chan error)
	go func() { done <- b.Synchronize() }()
	select {
	case err := <-done:
		ok(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("stream waited for a record issued after its wait")
	}
	close(release)
	ok(t, a.Synchronize())
}

func TestElapsedTime(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	start := must[*gg.Event](t)(d.NewEvent(0))
	end := must[*gg.Event](t)(d.NewEvent(0))
	_, err := gg.ElapsedTime(start, end)
	isCode(t, err, gg.ErrInvalidResourceHandle) // never recorded
	ok(t, s.Record(start))
	ok(t, s.LaunchHostFunc(func() { time.Sleep(20 * time.Millisecond) }))
	ok(t, s.Record(end))
	ok(t, end.Synchronize())
	dt, err := gg.ElapsedTime(start, end)
	ok(t, err)
	if dt < 20*time.Millisecond {
		t.Fatalf("elapsed %v, want >= 20ms", dt)
	}
	release := make(chan struct{})
	ok(t, s.LaunchHostFunc(func() { <-release }))
	ok(t, s.Record(end))
	_, err = gg.ElapsedTime(start, end)
	isCode(t, err, gg.ErrNotReady)
	close(release)
	ok(t, s.Synchronize())
	nt := must[*gg.Event](t)(d.NewEvent(gg.EventDisableTiming))
	ok(t, s.Record(nt))
	ok(t, s.Synchronize())
	_, err = gg.ElapsedTime(start, nt)
	isCode(t, err, gg.ErrInvalidResourceHandle)
	_, err = d.NewEvent(1 << 7)
	isCode(t, err, gg.ErrInvalidValue)
}

func TestMemory(t *testing.T) {
	d := open(t)
	p, err := d.Malloc(0)
	if err != nil || p != 0 {
		t.Fatalf("Malloc(0) = %#x, %v; want 0, nil", p, err)
	}
	ok(t, d.Free(0))
	_, err = d.Malloc(-1)
	isCode(t, err, gg.ErrInvalidValue)
	_, err = d.Malloc(1 << 50)
	isCode(t, err, gg.ErrMemoryAllocation)

	a := must[gg.DevicePtr](t)(d.Malloc(1000))
	b := must[gg.DevicePtr](t)(d.Malloc(3 << 20)) // spans granules
	if a%256 != 0 || b%256 != 0 {
		t.Fatalf("allocations not 256-byte aligned: %#x %#x", a, b)
	}
	src := make([]byte, 1000)
	for i := range src {
		src[i] = byte(i)
	}
	ok(t, d.Memcpy(gg.HtoD(a, src)))
	ok(t, d.Memcpy(gg.DtoD(b+5, a, 1000)))
	dst := make([]byte, 1000)
	ok(t, d.Memcpy(gg.DtoH(dst, b+5)))
	for i := range dst {
		if dst[i] != byte(i) {
			t.Fatalf("round trip byte %d = %d", i, dst[i])
		}
	}
	isCode(t, d.Free(a+16), gg.ErrInvalidValue) // not the start
	ok(t, d.Free(a))
	isCode(t, d.Free(a), gg.ErrInvalidValue) // double free
	ok(t, d.Free(b))
}

func TestMemcpyRangeChecks(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(256))
	q := must[gg.DevicePtr](t)(d.Malloc(256))
	freed := must[gg.DevicePtr](t)(d.Malloc(256))
	ok(t, d.Free(freed))
	cases := []struct {
		name string
		p    gg.MemcpyParams
	}{
		{"past end", gg.HtoD(p, make([]byte, 257))},
		{"offset past end", gg.HtoD(p+200, make([]byte, 100))},
		{"freed", gg.HtoD(freed, make([]byte, 1))},
		{"not device memory", gg.HtoD(12345, make([]byte, 1))},
		{"short host slice", gg.MemcpyParams{Dst: p, SrcHost: make([]byte, 10), Size: 20}},
		{"both sides set", gg.MemcpyParams{Dst: p, DstHost: make([]byte, 4), Src: q, Size: 4}},
		{"negative", gg.DtoD(p, q, -1)},
		{"dtod past end", gg.DtoD(p, q+1, 256)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			isCode(t, s.Memcpy(tc.p), gg.ErrInvalidValue)
			isCode(t, d.Memcpy(tc.p), gg.ErrInvalidValue)
		})
	}
	ok(t, s.Synchronize())
}

func TestMemset(t *testing.T) {
	d := open(t)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	read := func() []byte { b := make([]byte, 64); ok(t, d.Memcpy(gg.DtoH(b, p))); return b }
	ok(t, d.Memset(gg.Memset8(p, 0xAB, 64)))
	for _, v := range read() {
		if v != 0xAB {
			t.Fatal("Memset8 did not fill")
		}
	}
	ok(t, d.Memset(gg.Memset32(p, 0x01020304, 16)))
	if b := read(); b[0] != 4 || b[3] != 1 || b[60] != 4 {
		t.Fatalf("Memset32 wrote %v", b[:8])
	}
	ok(t, d.Memset(gg.Memset16(p, 0xBEEF, 32)))
	if b := read(); b[0] != 0xEF || b[1] != 0xBE {
		t.Fatalf("Memset16 wrote %v", b[:4])
	}
	// 2D: 4 rows of 3 bytes, pitch 16.
	ok(t, d.Memset(gg.Memset8(p, 0, 64)))
	ok(t, d.Memset(gg.MemsetParams{Dst: p, Value: 7, ElementSize: 1, Width: 3, Height: 4, Pitch: 16}))
	b := read()
	for i, v := range b {
		want := byte(0)
		if i < 64 && i%16 < 3 {
			want = 7
		}
		if v != want {
			t.Fatalf("2D memset byte %d = %d, want %d", i, v, want)
		}
	}
	bad := []gg.MemsetParams{
		{Dst: p, Value: 1, ElementSize: 3, Width: 1, Height: 1},
		{Dst: p, Value: 256, ElementSize: 1, Width: 1, Height: 1},
		{Dst: p, Value: 1, ElementSize: 1, Width: 65, Height: 1},
		{Dst: p, Value: 1, ElementSize: 1, Width: 8, Height: 2, Pitch: 4},
		{Dst: p, Value: 1, ElementSize: 1, Width: 16, Height: 5, Pitch: 16},
		{Dst: p, Value: 1, ElementSize: 1, Width: 1, Height: 0},
	}
	for _, m := range bad {
		isCode(t, d.Memset(m), gg.ErrInvalidValue)
	}
}

func TestKernelGridCoverage(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	grid, block := gg.Dim3{X: 5, Y: 3, Z: 2}, gg.Dim3{X: 4, Y: 2, Z: 1}
	n := grid.Count()
	out := must[gg.DevicePtr](t)(d.Malloc(4 * n))
	ok(t, d.Memset(gg.Memset32(out, 0, n)))
	mark := &gg.Kernel{Name: "mark", Params: []gg.ParamType{gg.Pointer}, Go: func(b gg.Block, a gg.Args) {
		if b.Dim != block || b.GridDim != grid {
			panic("wrong dims")
		}
		i := b.Idx.X + b.Idx.Y*b.GridDim.X + b.Idx.Z*b.GridDim.X*b.GridDim.Y
		gg.Slice[uint32](a.Ptr(0), n)[i]++
	}}
	ok(t, s.Launch(mark, grid, block, out))
	ok(t, s.Synchronize())
	got := make([]uint32, n)
	ok(t, d.Memcpy(gg.DtoH(gg.Bytes(got), out)))
	for i, v := range got {
		if v != 1 {
			t.Fatalf("block %d ran %d times", i, v)
		}
	}
}

// concurrency tracks how many callers are inside at once.
type concurrency struct{ now, max atomic.Int32 }

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Millisecond)
	c.now.Add(-1)
}

func TestKernelBlocksRunInParallel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS >= 2")
	}
	d := open(t)
	s := stream(t, d)
	var c concurrency
	busy := &gg.Kernel{Name: "busy", Go: func(gg.Block, gg.Args) { c.enter() }}
	ok(t, s.Launch(busy, gg.Dim1(64), one))
	ok(t, s.Synchronize())
	if c.max.Load() < 2 {
		t.Fatalf("at most %d blocks ran at once", c.max.Load())
	}
}

func TestKernelLaunchErrors(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	p := must[gg.DevicePtr](t)(d.Malloc(64))
	noBody := &gg.Kernel{Name: "nobody", CUDA: "..."}
	cases := []struct {
		name string
		p    gg.KernelParams
		want *gg.Code
	}{
		{"zero grid", gg.KernelParams{Kernel: fill32, Grid: gg.Dim3{}, Block: one, Args: []any{p, float32(1), 1}}, gg.ErrInvalidConfiguration},
		{"zero block y", gg.KernelParams{Kernel: fill32, Grid: one, Block: gg.Dim3{X: 1}, Args: []any{p, float32(1), 1}}, gg.ErrInvalidConfiguration},
		{"block too big", gg.KernelParams{Kernel: fill32, Grid: one, Block: gg.Dim2(64, 32), Args: []any{p, float32(1), 1}}, gg.ErrInvalidConfiguration},
		{"negative grid", gg.KernelParams{Kernel: fill32, Grid: gg.Dim1(-1), Block: one, Args: []any{p, float32(1), 1}}, gg.ErrInvalidConfiguration},
		{"too few args", gg.KernelParams{Kernel: fill32, Grid: one, Block: one, Args: []any{p}}, gg.ErrInvalidValue},
		{"too many args", gg.KernelParams{Kernel: fill32, Grid: one, Block: one, Args: []any{p, float32(1), 1, 2}}, gg.ErrInvalidValue},
		{"wrong arg type", gg.KernelParams{Kernel: fill32, Grid: one, Block: one, Args: []any{p, 1.0, 1}}, gg.ErrInvalidValue},
		{"int32 out of range", gg.KernelParams{Kernel: fill32, Grid: one, Block: one, Args: []any{p, float32(1), 1 << 40}}, gg.ErrInvalidValue},
		{"shared memory too large", gg.KernelParams{Kernel: fill32, Grid: one, Block: one, SharedMem: 1 << 20, Args: []any{p, float32(1), 1}}, gg.ErrInvalidValue},
		{"nil kernel", gg.KernelParams{Grid: one, Block: one}, gg.ErrInvalidDeviceFunction},
		{"no Go body", gg.KernelParams{Kernel: noBody, Grid: one, Block: one}, gg.ErrInvalidDeviceFunction},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			isCode(t, s.LaunchKernel(tc.p), tc.want)
			g := graph(t, d)
			_, err := g.AddKernelNode(tc.p)
			isCode(t, err, tc.want)
			if n := must[[]*gg.Node](t)(g.Nodes()); len(n) != 0 {
				t.Fatal("failed AddKernelNode changed the graph")
			}
		})
	}
	isCode(t, s.LaunchHostFunc(nil), gg.ErrInvalidValue)
	ok(t, s.Synchronize()) // nothing was queued, the device is healthy
}

func TestKernelPanicIsStickyLaunchFailure(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	boom := &gg.Kernel{Name: "boom", Go: func(gg.Block, gg.Args) { panic("boom") }}
	ok(t, s.Launch(boom, one, one))
	err := s.Synchronize()
	isCode(t, err, gg.ErrLaunchFailure)
	isCode(t, s.Launch(boom, one, one), gg.ErrLaunchFailure) // sticky
	isCode(t, d.Synchronize(), gg.ErrLaunchFailure)
}

func TestKernelIllegalAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		ptr  func(d *gg.Device) gg.DevicePtr
	}{
		{"freed memory", func(d *gg.Device) gg.DevicePtr {
			p := must[gg.DevicePtr](t)(d.Malloc(4 << 20)) // its own granules, decommitted on free
			ok(t, d.Free(p))
			return p
		}},
		{"not device memory", func(*gg.Device) gg.DevicePtr { return 64 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			p := tc.ptr(d)
			ok(t, s.Launch(fill32, one, gg.Dim1(32), p, float32(1), 32))
			err := s.Synchronize()
			isCode(t, err, gg.ErrIllegalAddress)
		})
	}
}

func TestUseAfterDestroy(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	e := must[*gg.Event](t)(d.NewEvent(0))
	ok(t, s.Destroy())
	isCode(t, s.Launch(fill32, one, one), gg.ErrInvalidResourceHandle)
	isCode(t, s.Synchronize(), gg.ErrInvalidResourceHandle)
	isCode(t, s.Destroy(), gg.ErrInvalidResourceHandle)
	s2 := stream(t, d)
	ok(t, e.Destroy())
	isCode(t, s2.Record(e), gg.ErrInvalidResourceHandle)
	isCode(t, e.Query(), gg.ErrInvalidResourceHandle)
	var nilStream *gg.Stream
	isCode(t, nilStream.Launch(fill32, one, one), gg.ErrInvalidResourceHandle)
	isCode(t, s2.Record(nil), gg.ErrInvalidResourceHandle)
}

func TestClosedDevice(t *testing.T) {
	d, err := gg.Open("")
	ok(t, err)
	s := stream(t, d)
	ok(t, d.Close())
	_, err = d.Malloc(1)
	isCode(t, err, gg.ErrContextIsDestroyed)
	isCode(t, s.Synchronize(), gg.ErrContextIsDestroyed)
	isCode(t, d.Close(), gg.ErrContextIsDestroyed)
}

func TestErrorMessage(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	n := must[*gg.Node](t)(g.AddEmptyNode())
	err := g.AddDependency(n, n)
	var e *gg.Error
	if !errors.As(err, &e) || e.Node != n || e.Op != "Graph.AddDependency" {
		t.Fatalf("error %#v does not name the op and node", err)
	}
	const want = "gpugraph: Graph.AddDependency: empty node 0: invalid argument (cudaErrorInvalidValue): self edge"
	if err.Error() != want {
		t.Fatalf("message\n%q\nwant\n%q", err.Error(), want)
	}
	if gg.ErrInvalidValue.Num() != 1 || gg.ErrNotReady.Num() != 600 {
		t.Fatal("codes do not carry CUDA's numbers")
	}
}

// A Go kernel that panics is reported as a launch failure that names the
// kernel and the file and line of the panic (the kernel's own line, not the
// runtime's), whether it ran from a stream or a graph, with one block or
// many; the device is left in the sticky error state.
func TestKernelPanicNamesKernelAndLine(t *testing.T) {
	var nilMap map[string]int
	_, _, line, _ := runtime.Caller(0)
	line += 3 // the assignment below
	nilMapKernel := &gg.Kernel{Name: "writes_nil_map", Go: func(b gg.Block, _ gg.Args) {
		nilMap["x"] = b.Idx.X
	}}
	want := fmt.Sprintf("stream_test.go:%d", line)
	check := func(t *testing.T, err error) {
		t.Helper()
		t.Log(err)
		isCode(t, err, gg.ErrLaunchFailure)
		for _, s := range []string{"kernel writes_nil_map", "assignment to entry in nil map", want} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
	}
	for _, grid := range []gg.Dim3{one, gg.Dim1(64)} {
		t.Run(fmt.Sprintf("stream/grid=%d", grid.X), func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			ok(t, s.Launch(nilMapKernel, grid, one))
			check(t, s.Synchronize())
			isCode(t, d.Synchronize(), gg.ErrLaunchFailure) // sticky
		})
		t.Run(fmt.Sprintf("graph/grid=%d", grid.X), func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			g := must[*gg.Graph](t)(d.NewGraph())
			must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: nilMapKernel, Grid: grid, Block: one}))
			e := must[*gg.Exec](t)(g.Instantiate(0))
			ok(t, e.Launch(s))
			check(t, s.Synchronize())
			isCode(t, d.Synchronize(), gg.ErrLaunchFailure)
		})
	}
}
