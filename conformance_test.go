package gpugraph_test

import (
	"sync"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// The conformance suite: scenarios written once against the public API and
// run on every backend, host always, cuda where there is a GPU (skipped with
// a message elsewhere). Where the two disagree, the driver is right and the
// host backend is fixed. Run on the GPU machine with
//
//	gpugraph.test -test.run Conformance -test.v

func eachBackend(t *testing.T, f func(t *testing.T, d *gg.Device)) {
	t.Run("host", func(t *testing.T) { f(t, open(t)) })
	t.Run("cuda", func(t *testing.T) { f(t, openCUDA(t)) })
}

func TestConformanceGraphOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		g := graph(t, d)
		var mu sync.Mutex
		var order []int
		note := func(i int) func() { return func() { mu.Lock(); order = append(order, i); mu.Unlock() } }
		n0 := must[*gg.Node](t)(g.AddHostNode(note(0)))
		n1 := must[*gg.Node](t)(g.AddKernelNode(kp(kA), n0))
		n2 := must[*gg.Node](t)(g.AddHostNode(note(2), n1))
		child := graph(t, d)
		must[*gg.Node](t)(child.AddHostNode(note(3)))
		n3 := must[*gg.Node](t)(g.AddChildGraphNode(child, n2))
		must[*gg.Node](t)(g.AddHostNode(note(4), n3))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(s))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		want := []int{0, 2, 3, 4, 0, 2, 3, 4}
		if len(order) != len(want) {
			t.Fatalf("order %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("order %v, want %v", order, want)
			}
		}
	})
}

func TestConformanceEventsAcrossStreams(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		a, b := stream(t, d), stream(t, d)
		e := must[*gg.Event](t)(d.NewEvent(0))
		release := make(chan struct{})
		var mu sync.Mutex
		var order []string
		note := func(x string) func() { return func() { mu.Lock(); order = append(order, x); mu.Unlock() } }
		ok(t, a.LaunchHostFunc(func() { <-release }))
		ok(t, a.LaunchHostFunc(note("a")))
		ok(t, a.Record(e))
		ok(t, b.Wait(e))
		ok(t, b.LaunchHostFunc(note("b")))
		isCode(t, e.Query(), gg.ErrNotReady)
		isCode(t, b.Query(), gg.ErrNotReady)
		close(release)
		ok(t, b.Synchronize())
		ok(t, e.Query())
		if len(order) != 2 || order[0] != "a" || order[1] != "b" {
			t.Fatalf("order %v", order)
		}
	})
}

func TestConformanceInvalidCalls(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(256))
		isCode(t, s.Memcpy(gg.HtoD(p, make([]byte, 257))), gg.ErrInvalidValue)
		isCode(t, s.LaunchKernel(gg.KernelParams{Kernel: kA, Grid: gg.Dim3{}, Block: one}), gg.ErrInvalidConfiguration)
		isCode(t, d.Free(p+1), gg.ErrInvalidValue)
		g := graph(t, d)
		a := must[*gg.Node](t)(g.AddEmptyNode())
		b := must[*gg.Node](t)(g.AddEmptyNode(a))
		isCode(t, g.AddDependency(b, a), gg.ErrInvalidValue)
		isCode(t, g.AddDependency(a, b), gg.ErrInvalidValue)
		ok(t, d.Free(p))
		ok(t, s.Synchronize())
	})
}

func TestConformanceCaptureForkJoin(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s1, s2 := stream(t, d), stream(t, d)
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		forkJoin(t, d, s1, s2)
		g := endOK(t, s1)
		h := graph(t, d)
		a := must[*gg.Node](t)(h.AddKernelNode(kp(kA)))
		b := must[*gg.Node](t)(h.AddKernelNode(kp(kB), a))
		c := must[*gg.Node](t)(h.AddKernelNode(kp(kC), a))
		must[*gg.Node](t)(h.AddKernelNode(kp(kD), b, c))
		if !gg.StructurallyEqual(g, h) {
			t.Fatal("fork/join capture differs from A -> B, C -> D")
		}
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(s1))
		ok(t, s1.Synchronize())
	})
}

func TestConformanceCaptureErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s1, s2 := stream(t, d), stream(t, d)
		ev := must[*gg.Event](t)(d.NewEvent(0))
		// Synchronizing a capturing stream invalidates the capture.
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		ok(t, s1.LaunchKernel(kp(kA)))
		isCode(t, s1.Synchronize(), gg.ErrStreamCaptureUnsupported)
		isCode(t, s1.LaunchKernel(kp(kB)), gg.ErrStreamCaptureInvalidated)
		_, err := s1.EndCapture()
		isCode(t, err, gg.ErrStreamCaptureInvalidated)
		if st := status(t, s1); st != gg.CaptureStatusNone {
			t.Fatalf("status after EndCapture %v", st)
		}
		// Begin twice.
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		isCode(t, s1.BeginCapture(gg.CaptureModeGlobal), gg.ErrIllegalState)
		endOK(t, s1)
		// A fork not joined back.
		ok(t, s1.BeginCapture(gg.CaptureModeGlobal))
		ok(t, s1.LaunchKernel(kp(kA)))
		ok(t, s1.Record(ev))
		ok(t, s2.Wait(ev))
		ok(t, s2.LaunchKernel(kp(kB)))
		_, err = s1.EndCapture()
		isCode(t, err, gg.ErrStreamCaptureUnjoined)
		if st := status(t, s2); st != gg.CaptureStatusNone {
			t.Fatalf("forked stream status after the failed EndCapture: %v", st)
		}
	})
}

// TestConformanceMemoryNodes: the graph memory rules every backend shares
// (docs/driver-memnodes.txt for the driver's answers).
func TestConformanceMemoryNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		const size = 4 << 20
		// Address reuse along dependency order.
		g := graph(t, d)
		a, pa := addAlloc(t, g, size)
		fa := addFree(t, g, pa, a)
		_, pb := addAlloc(t, g, size, fa)
		cn, pc := addAlloc(t, g, size, a)
		if pb != pa || pc == pa {
			t.Fatalf("a %#x, b (after a's free) %#x, c (not after it) %#x", pa, pb, pc)
		}
		// Refusals.
		_, _, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 0})
		isCode(t, err, gg.ErrInvalidValue)
		fc := addFree(t, g, pc, cn)
		_, err = g.AddMemFreeNode(pc, fc) // a second free of c
		isCode(t, err, gg.ErrInvalidValue)
		_, err = g.Clone()
		isCode(t, err, gg.ErrNotSupported)
		e := must[*gg.Exec](t)(g.Instantiate(0))
		_, err = g.Instantiate(0)
		isCode(t, err, gg.ErrNotSupported)
		ok(t, e.Destroy())

		// Relaunch with a live allocation, then AutoFreeOnLaunch.
		h := graph(t, d)
		an, x := addAlloc(t, h, size)
		must[*gg.Node](t)(h.AddMemsetNode(gg.Memset32(x, 7, size/4), an))
		eh := must[*gg.Exec](t)(h.Instantiate(0))
		ok(t, eh.Launch(s))
		isCode(t, eh.Launch(s), gg.ErrInvalidValue)
		ok(t, s.Synchronize())
		out := make([]uint32, 4)
		ok(t, d.Memcpy(gg.DtoH(gg.Bytes(out), x)))
		if out[0] != 7 {
			t.Fatalf("graph allocation read %v after the launch", out)
		}
		ok(t, s.FreeAsync(x))
		ok(t, eh.Launch(s))
		ok(t, s.Synchronize())
		ok(t, d.Free(x))
		ok(t, eh.Destroy())
		ea := must[*gg.Exec](t)(h.Instantiate(gg.InstantiateAutoFreeOnLaunch))
		ok(t, ea.Launch(s))
		ok(t, ea.Launch(s))
		ok(t, s.Synchronize())
		ok(t, d.Free(x))

		// Graphs launched into one stream share memory; trim returns it.
		ok(t, d.TrimGraphMem())
		ok(t, d.ResetGraphMemHigh())
		var execs []*gg.Exec
		for i := 0; i < 3; i++ {
			gi := graph(t, d)
			n, p := addAlloc(t, gi, 64<<20)
			must[*gg.Node](t)(gi.AddMemFreeNode(p, must[*gg.Node](t)(gi.AddMemsetNode(gg.Memset8(p, 1, 64<<20), n))))
			execs = append(execs, must[*gg.Exec](t)(gi.Instantiate(0)))
		}
		for _, e := range execs {
			ok(t, e.Launch(s))
		}
		ok(t, s.Synchronize())
		st := must[gg.GraphMemStats](t)(d.GraphMemStats())
		if st.ReservedCurrent != 64<<20 {
			t.Fatalf("three 64 MiB graphs in one stream reserve %d MiB, want 64", st.ReservedCurrent>>20)
		}
		ok(t, d.TrimGraphMem())
		if st := must[gg.GraphMemStats](t)(d.GraphMemStats()); st.ReservedCurrent != 0 {
			t.Fatalf("after trim: reserved %d", st.ReservedCurrent)
		}
	})
}

// TestConformanceCaptureToGraphAndClone: capture into an existing graph with
// dependencies updated mid-capture, capture info, and cloning.
func TestConformanceCaptureToGraphAndClone(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		g := graph(t, d)
		a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
		b := must[*gg.Node](t)(g.AddKernelNode(kp(kB)))
		ok(t, s.BeginCaptureToGraph(g, []*gg.Node{a}, gg.CaptureModeGlobal))
		ok(t, s.LaunchKernel(kp(kC))) // after a
		info := must[gg.CaptureInfo](t)(s.CaptureInfo())
		if info.Status != gg.CaptureStatusActive || info.ID == 0 || len(info.Dependencies) != 1 || info.Dependencies[0].Type() != gg.NodeKernel {
			t.Fatalf("capture info %+v", info)
		}
		ok(t, s.UpdateCaptureDependencies([]*gg.Node{b}, gg.AddCaptureDependencies))
		ok(t, s.LaunchKernel(kp(kD))) // after c and b
		if got := endOK(t, s); got != g {
			t.Fatal("EndCapture did not return the graph captured into")
		}
		h := graph(t, d)
		ha := must[*gg.Node](t)(h.AddKernelNode(kp(kA)))
		hb := must[*gg.Node](t)(h.AddKernelNode(kp(kB)))
		hc := must[*gg.Node](t)(h.AddKernelNode(kp(kC), ha))
		must[*gg.Node](t)(h.AddKernelNode(kp(kD), hc, hb))
		if !gg.StructurallyEqual(g, h) {
			t.Fatal("capture into a graph differs from the explicit one")
		}
		c := must[*gg.Graph](t)(h.Clone())
		if !gg.StructurallyEqual(c, h) {
			t.Fatal("clone differs")
		}
		if m := must[*gg.Node](t)(c.ClonedNode(hc)); m.ID() != hc.ID() || m.Type() != gg.NodeKernel {
			t.Fatalf("ClonedNode %v", m)
		}
		e := must[*gg.Exec](t)(c.Instantiate(0))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
	})
}

// TestConformanceTwoStreams: graphs running at the same time in two streams
// need memory of their own; trim returns all of it once they are done.
func TestConformanceTwoStreams(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s1, s2 := stream(t, d), stream(t, d)
		const size = 64 << 20
		ok(t, d.TrimGraphMem())
		ok(t, d.ResetGraphMemHigh())
		hold := make(chan struct{})
		var execs []*gg.Exec
		for i := 0; i < 2; i++ {
			g := graph(t, d)
			n, p := addAlloc(t, g, size)
			m := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(p, 1, size), n))
			if i == 0 { // the first graph waits inside its launch
				m = must[*gg.Node](t)(g.AddHostNode(func() { <-hold }, m))
			}
			must[*gg.Node](t)(g.AddMemFreeNode(p, m))
			execs = append(execs, must[*gg.Exec](t)(g.Instantiate(0)))
		}
		ok(t, execs[0].Launch(s1))
		ok(t, execs[1].Launch(s2))
		ok(t, s2.Synchronize())
		close(hold)
		ok(t, s1.Synchronize())
		st := must[gg.GraphMemStats](t)(d.GraphMemStats())
		if st.ReservedHigh < 2*size {
			t.Fatalf("two graphs running at once reserved %d MiB at most, want at least %d", st.ReservedHigh>>20, 2*size>>20)
		}
		ok(t, d.TrimGraphMem())
		if st := must[gg.GraphMemStats](t)(d.GraphMemStats()); st.ReservedCurrent != 0 {
			t.Fatalf("after trim: reserved %d", st.ReservedCurrent)
		}
	})
}

// TestConformanceSetParams: a node's new parameters reach later
// instantiations, not executable graphs made before.
func TestConformanceSetParams(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		p := must[gg.DevicePtr](t)(d.Malloc(64))
		g := graph(t, d)
		n := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(p, 1, 16)))
		e1 := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, n.SetParams(gg.Memset32(p, 2, 16)))
		isCode(t, n.SetParams(gg.Memset32(p, 2, 17)), gg.ErrInvalidValue)
		isCode(t, n.SetParams(gg.EmptyParams{}), gg.ErrInvalidValue)
		e2 := must[*gg.Exec](t)(g.Instantiate(0))
		read := func() uint32 {
			out := make([]uint32, 16)
			ok(t, d.Memcpy(gg.DtoH(gg.Bytes(out), p)))
			return out[15]
		}
		ok(t, e1.Launch(s))
		ok(t, s.Synchronize())
		if v := read(); v != 1 {
			t.Fatalf("the executable graph made before SetParams wrote %d, want 1", v)
		}
		ok(t, e2.Launch(s))
		ok(t, s.Synchronize())
		if v := read(); v != 2 {
			t.Fatalf("the executable graph made after SetParams wrote %d, want 2", v)
		}
		if got := must[gg.NodeParams](t)(n.Params()); got != gg.NodeParams(gg.Memset32(p, 2, 16)) {
			t.Fatalf("params %+v", got)
		}
	})
}

// TestConformanceMemPools: stream-ordered allocation from an explicit pool,
// its release threshold, trim and statistics.
func TestConformanceMemPools(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		pool := must[*gg.MemPool](t)(d.NewMemPool(gg.MemPoolProps{}))
		defer pool.Destroy()
		p := must[gg.DevicePtr](t)(s.MallocFromPoolAsync(8<<20, pool))
		ok(t, s.Memset(gg.Memset8(p, 3, 8<<20)))
		out := make([]byte, 16)
		ok(t, s.Memcpy(gg.DtoH(out, p)))
		if st := pool.Stats(); st.UsedCurrent < 8<<20 || st.ReservedCurrent < st.UsedCurrent {
			t.Fatalf("stats while allocated %+v", st)
		}
		ok(t, s.FreeAsync(p))
		ok(t, s.Synchronize()) // release threshold 0: idle memory goes back here
		if out[15] != 3 {
			t.Fatalf("read %v", out)
		}
		if st := pool.Stats(); st.UsedCurrent != 0 || st.ReservedCurrent != 0 {
			t.Fatalf("after free and synchronize with threshold 0: %+v", st)
		}
		ok(t, pool.SetReleaseThreshold(1<<40))
		if pool.ReleaseThreshold() != 1<<40 {
			t.Fatalf("threshold %d", pool.ReleaseThreshold())
		}
		p = must[gg.DevicePtr](t)(s.MallocFromPoolAsync(8<<20, pool))
		ok(t, s.FreeAsync(p))
		ok(t, s.Synchronize())
		if st := pool.Stats(); st.ReservedCurrent == 0 {
			t.Fatal("memory released despite a high threshold")
		}
		ok(t, pool.TrimTo(0))
		if st := pool.Stats(); st.ReservedCurrent != 0 {
			t.Fatalf("after TrimTo(0): %+v", st)
		}
		isCode(t, pool.SetAccess(0, gg.AccessRead), gg.ErrNotSupported)
		isCode(t, d.DefaultMemPool().Destroy(), gg.ErrInvalidValue)
	})
}

// TestConformanceEditEmbeddedGraph: the graph embedded in a child graph node
// belongs to the node, and edits of it change what the node runs.
func TestConformanceEditEmbeddedGraph(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		var mu sync.Mutex
		var ran []string
		note := func(x string) func() { return func() { mu.Lock(); ran = append(ran, x); mu.Unlock() } }
		child := graph(t, d)
		must[*gg.Node](t)(child.AddHostNode(note("first")))
		g := graph(t, d)
		cn := must[*gg.Node](t)(g.AddChildGraphNode(child, must[*gg.Node](t)(g.AddEmptyNode())))
		must[*gg.Node](t)(child.AddHostNode(note("not in the node"))) // the original is the caller's
		emb := must[*gg.Graph](t)(cn.ChildGraph())
		first := must[[]*gg.Node](t)(emb.Nodes())[0]
		must[*gg.Node](t)(emb.AddHostNode(note("second"), first))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		if len(ran) != 2 || ran[0] != "first" || ran[1] != "second" {
			t.Fatalf("ran %v, want [first second]", ran)
		}
	})
}
