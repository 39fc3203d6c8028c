package gpugraph_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

const mib = 1 << 20

func addFree(t *testing.T, g *gg.Graph, p gg.DevicePtr, deps ...*gg.Node) *gg.Node {
	t.Helper()
	return must[*gg.Node](t)(g.AddMemFreeNode(p, deps...))
}

// fillNode adds a kernel node that sets n float32s at p to v.
func fillNode(t *testing.T, g *gg.Graph, p gg.DevicePtr, n int, v float32, deps ...*gg.Node) *gg.Node {
	t.Helper()
	return must[*gg.Node](t)(g.AddKernelNode(gg.KernelParams{Kernel: fill32, Grid: gg.Dim1((n + 255) / 256), Block: gg.Dim1(256), Args: []any{p, v, n}}, deps...))
}

func stats(t *testing.T, d *gg.Device) gg.GraphMemStats {
	t.Helper()
	return must[gg.GraphMemStats](t)(d.GraphMemStats())
}

func TestAllocAddressReuseFollowsDependencies(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	a, pa := addAlloc(t, g, 3*mib)
	fa := addFree(t, g, pa, a)
	_, pb := addAlloc(t, g, 3*mib, fa) // after the free of a: reuses its range
	_, pc := addAlloc(t, g, 3*mib, a)  // concurrent with a's lifetime: must not
	if pb != pa {
		t.Errorf("alloc ordered after the free got %#x, want a's %#x", pb, pa)
	}
	if pc == pa || (pc < pa+3*mib && pa < pc+3*mib) {
		t.Errorf("alloc not ordered after the free overlaps a: %#x vs %#x", pc, pa)
	}
	got := must[gg.NodeParams](t)(a.Params()).(gg.MemAllocParams)
	if got.Ptr != pa || got.Size != 3*mib {
		t.Errorf("alloc node params %+v", got)
	}
	if fp := must[gg.NodeParams](t)(fa.Params()).(gg.MemFreeParams); fp.Ptr != pa {
		t.Errorf("free node params %+v", fp)
	}

	// The diamond of the driver probe: a freed, then b and c, both freed
	// before d, which is as large as b and c together. The driver gives d a
	// fresh range (256 MiB reserved); packing d over b and c needs 128.
	h := graph(t, d)
	na, qa := addAlloc(t, h, 64*mib)
	fqa := addFree(t, h, qa, na)
	nb, qb := addAlloc(t, h, 64*mib, fqa)
	nc, qc := addAlloc(t, h, 64*mib, fqa)
	fb, fc := addFree(t, h, qb, nb), addFree(t, h, qc, nc)
	_, qd := addAlloc(t, h, 128*mib, fb, fc)
	if qb != qa || qd != min(qb, qc) || max(qb, qc)-min(qb, qc) != 64*mib {
		t.Errorf("diamond addresses a %#x b %#x c %#x d %#x: want b=a, c next to b, d over both", qa, qb, qc, qd)
	}
}

// TestMemNodeRefusals mirrors what the CUDA 13.0 driver refuses
// (docs/driver-memnodes.txt).
func TestMemNodeRefusals(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	_, _, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 0})
	isCode(t, err, gg.ErrInvalidValue)
	_, _, err = g.AddMemAllocNode(gg.MemAllocParams{Size: 1, Location: 1})
	isCode(t, err, gg.ErrInvalidDevice)
	_, _, err = g.AddMemAllocNode(gg.MemAllocParams{Size: 1, Access: []gg.MemAccessDesc{{Device: 3}}})
	isCode(t, err, gg.ErrInvalidDevice)
	an, p := addAlloc(t, g, mib)
	fn := addFree(t, g, p, an)
	dm := must[gg.DevicePtr](t)(d.Malloc(mib))
	for name, ptr := range map[string]gg.DevicePtr{
		"second free": p, "interior address": p + 256, "Malloc address": dm, "bogus": 0x1000, "null": 0,
	} {
		_, err := g.AddMemFreeNode(ptr, fn)
		if !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("free node of %s: %v, want ErrInvalidValue", name, err)
		}
	}
	_, pb := addAlloc(t, g, mib)
	must[*gg.Node](t)(g.AddMemFreeNode(pb)) // not ordered after its alloc: the driver accepts it

	_, err = g.Clone()
	isCode(t, err, gg.ErrNotSupported)
	parent := graph(t, d)
	_, err = parent.AddChildGraphNode(g)
	isCode(t, err, gg.ErrNotSupported)
	isCode(t, g.DestroyNode(fn), gg.ErrNotSupported)
	isCode(t, g.RemoveDependencies(gg.Edge{From: an, To: fn}), gg.ErrNotSupported)
	isCode(t, an.SetParams(gg.MemAllocParams{Size: 2}), gg.ErrNotSupported)
	e0 := must[*gg.Node](t)(g.AddEmptyNode())
	ok(t, g.AddDependency(e0, an)) // adding edges is allowed

	e1 := must[*gg.Exec](t)(g.Instantiate(0))
	_, err = g.Instantiate(0)
	isCode(t, err, gg.ErrNotSupported)
	ok(t, e1.Destroy())
	e2 := must[*gg.Exec](t)(g.Instantiate(0)) // allowed once the first is gone
	ok(t, e2.Destroy())

	child := graph(t, d)
	cn := must[*gg.Node](t)(parent.AddChildGraphNode(child))
	emb := must[*gg.Graph](t)(cn.ChildGraph())
	_, _, err = emb.AddMemAllocNode(gg.MemAllocParams{Size: 1})
	isCode(t, err, gg.ErrNotSupported)

	if !d.GraphMemNodesSupported() {
		t.Error("host device reports no graph memory node support")
	}
}

func TestGraphAllocationLifetimes(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	// A graph that allocates and never frees, and one that frees it.
	ga := graph(t, d)
	an, x := addAlloc(t, ga, 4*mib)
	fillNode(t, ga, x, 1024, 7, an)
	ea := must[*gg.Exec](t)(ga.Instantiate(0))
	gf := graph(t, d)
	addFree(t, gf, x)
	ef := must[*gg.Exec](t)(gf.Instantiate(0))

	isCode(t, ef.Launch(s), gg.ErrInvalidValue) // nothing allocated yet
	ok(t, ea.Launch(s))
	err := ea.Launch(s) // relaunch with the allocation live
	isCode(t, err, gg.ErrInvalidValue)
	if err.(*gg.Error).Node != an {
		t.Errorf("relaunch error names %v, want the alloc node", err.(*gg.Error).Node)
	}
	ok(t, s.Synchronize()) // the refused launch changed nothing
	if v := readF32(t, d, x, 4); v[0] != 7 || v[3] != 7 {
		t.Fatalf("graph allocation read %v after the launch", v)
	}
	ok(t, ef.Launch(s))                         // a free node in another graph
	isCode(t, ef.Launch(s), gg.ErrInvalidValue) // double free
	ok(t, ea.Launch(s))
	ok(t, s.FreeAsync(x))
	isCode(t, s.FreeAsync(x), gg.ErrInvalidValue)
	ok(t, ea.Launch(s))
	ok(t, s.Synchronize())
	ok(t, d.Free(x)) // synchronous free of a graph allocation
	isCode(t, d.Free(x), gg.ErrInvalidValue)

	// Destroying the graph and the executable graph frees nothing.
	ok(t, ea.Launch(s))
	ok(t, ea.Destroy())
	ok(t, ga.Destroy())
	ok(t, s.Synchronize())
	if v := readF32(t, d, x, 1); v[0] != 7 {
		t.Fatalf("allocation lost with its graph: %v", v)
	}
	ok(t, s.FreeAsync(x))
	ok(t, s.Synchronize())
}

func TestAutoFreeOnLaunch(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	an, x := addAlloc(t, g, mib)
	fillNode(t, g, x, 256, 3, an)
	e := must[*gg.Exec](t)(g.Instantiate(gg.InstantiateAutoFreeOnLaunch))
	for i := 0; i < 5; i++ {
		ok(t, e.Launch(s))
	}
	ok(t, s.Synchronize())
	if v := readF32(t, d, x, 1); v[0] != 3 {
		t.Fatalf("read %v", v)
	}
	ok(t, d.Free(x)) // the last launch's allocation is the caller's to free
	_, err := g.Instantiate(1 << 5)
	isCode(t, err, gg.ErrInvalidValue)
}

// TestGraphMemoryIsPhysicallyShared: two graphs launched into one stream map
// the same physical memory at their different addresses, so a use after
// free of the first graph's allocation reads the second graph's data.
func TestGraphMemoryIsPhysicallyShared(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g1, g2 := graph(t, d), graph(t, d)
	a1, x := addAlloc(t, g1, mib)
	addFree(t, g1, x, fillNode(t, g1, x, 1024, 1, a1))
	a2, y := addAlloc(t, g2, mib)
	addFree(t, g2, y, fillNode(t, g2, y, 1024, 2, a2))
	if x == y {
		t.Fatal("two graphs' allocations share an address")
	}
	e1 := must[*gg.Exec](t)(g1.Instantiate(0))
	e2 := must[*gg.Exec](t)(g2.Instantiate(0))
	ok(t, e1.Launch(s))
	ok(t, e2.Launch(s))
	var stale float32
	ok(t, s.LaunchHostFunc(func() { stale = gg.Slice[float32](x, 1)[0] })) // use after free
	ok(t, s.Synchronize())
	if stale != 2 {
		t.Fatalf("use after free of graph 1's allocation read %v, want graph 2's 2: memory is not shared", stale)
	}
	st := stats(t, d)
	if st.ReservedCurrent != 2*mib {
		t.Fatalf("two 1 MiB graphs in one stream reserve %d bytes, want one 2 MiB chunk", st.ReservedCurrent)
	}
}

// TestLiveAllocationKeepsItsMemory: an allocation live after its graph's
// launch is not overwritten by another graph launched into the same stream.
func TestLiveAllocationKeepsItsMemory(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g1, g2 := graph(t, d), graph(t, d)
	a1, x := addAlloc(t, g1, mib)
	fillNode(t, g1, x, 1024, 1, a1)
	a2, y := addAlloc(t, g2, mib)
	addFree(t, g2, y, fillNode(t, g2, y, 1024, 2, a2))
	e1 := must[*gg.Exec](t)(g1.Instantiate(0))
	e2 := must[*gg.Exec](t)(g2.Instantiate(0))
	ok(t, e1.Launch(s))
	ok(t, e2.Launch(s))
	ok(t, e2.Launch(s))
	ok(t, s.Synchronize())
	if v := readF32(t, d, x, 1024); v[0] != 1 || v[1023] != 1 {
		t.Fatalf("live allocation overwritten: %v", v[:4])
	}
	ok(t, s.FreeAsync(x))
	ok(t, e1.Launch(s)) // relaunch after the free reuses memory
	ok(t, e2.Launch(s))
	ok(t, s.Synchronize())
	if v := readF32(t, d, x, 1); v[0] != 1 {
		t.Fatalf("second live allocation overwritten: %v", v)
	}
}

// TestConcurrentStreamsGetSeparateMemory: a graph running in one stream
// while another runs in a second stream must not share its memory.
func TestConcurrentStreamsGetSeparateMemory(t *testing.T) {
	d := open(t)
	s1, s2 := stream(t, d), stream(t, d)
	release, started := make(chan struct{}), make(chan struct{})
	var seen float32
	g1 := graph(t, d)
	a1, x := addAlloc(t, g1, mib)
	f1 := fillNode(t, g1, x, 1024, 1, a1)
	h := must[*gg.Node](t)(g1.AddHostNode(func() { close(started); <-release; seen = gg.Slice[float32](x, 1)[0] }, f1))
	addFree(t, g1, x, h)
	g2 := graph(t, d)
	a2, y := addAlloc(t, g2, mib)
	addFree(t, g2, y, fillNode(t, g2, y, 1024, 2, a2))
	e1 := must[*gg.Exec](t)(g1.Instantiate(0))
	e2 := must[*gg.Exec](t)(g2.Instantiate(0))
	ok(t, e2.Launch(s1)) // bind g2 to s1 first, so both would share s1's memory
	ok(t, s1.Synchronize())
	ok(t, e1.Launch(s1))
	<-started            // g1 is running, on stream 1's memory
	ok(t, e2.Launch(s2)) // runs while g1 waits inside its launch
	ok(t, s2.Synchronize())
	close(release)
	ok(t, s1.Synchronize())
	if seen != 1 {
		t.Fatalf("graph 1 read %v: a graph in another stream wrote its memory", seen)
	}
	if st := stats(t, d); st.ReservedCurrent != 4*mib {
		t.Fatalf("two streams reserve %d, want a chunk each", st.ReservedCurrent)
	}
}

// rss is the process's resident memory in bytes.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	pages, _ := strconv.ParseInt(strings.Fields(string(b))[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func TestFootprintSharingAndTrim(t *testing.T) {
	d := open(t)
	s1, s2 := stream(t, d), stream(t, d)
	const k, size = 8, 4 * mib
	chain, par := graph(t, d), graph(t, d)
	var prev *gg.Node
	for i := 0; i < k; i++ {
		var deps []*gg.Node
		if prev != nil {
			deps = append(deps, prev)
		}
		a, p := addAlloc(t, chain, size, deps...)
		prev = addFree(t, chain, p, fillNode(t, chain, p, size/4, 1, a))
		b, q := addAlloc(t, par, size)
		addFree(t, par, q, fillNode(t, par, q, size/4, 1, b))
	}
	ec := must[*gg.Exec](t)(chain.Instantiate(0))
	ep := must[*gg.Exec](t)(par.Instantiate(0))
	if st := stats(t, d); st.ReservedCurrent != 0 {
		t.Fatalf("instantiation reserved %d bytes", st.ReservedCurrent)
	}
	steps := []struct {
		name     string
		do       func()
		reserved uint64
	}{
		{"chain", func() { ok(t, ec.Launch(s1)) }, size},
		{"parallel in the same stream", func() { ok(t, ep.Launch(s1)) }, k * size},
		{"chain again", func() { ok(t, ec.Launch(s1)) }, k * size},
		{"trim", func() { ok(t, d.TrimGraphMem()) }, 0},
		{"chain after trim", func() { ok(t, ec.Launch(s1)) }, size},
		// Stream 1 is idle: its memory moves to stream 2.
		{"parallel in a second stream", func() { ok(t, ep.Launch(s2)) }, k * size},
		// Stream 2 is busy: stream 1 needs memory of its own.
		{"chain while the second stream is busy", func() {
			hold := make(chan struct{})
			ok(t, s2.LaunchHostFunc(func() { <-hold }))
			ok(t, ep.Launch(s2))
			ok(t, ec.Launch(s1))
			ok(t, s1.Synchronize())
			close(hold)
		}, k*size + size},
		{"trim", func() { ok(t, d.TrimGraphMem()) }, 0},
		{"upload", func() { ok(t, ep.Upload(s1)) }, k * size},
		{"launch after upload", func() { ok(t, ep.Launch(s1)) }, k * size},
	}
	for _, st := range steps {
		st.do()
		ok(t, d.Synchronize())
		got := stats(t, d)
		if got.ReservedCurrent != st.reserved {
			t.Fatalf("after %s: reserved %d MiB, want %d MiB", st.name, got.ReservedCurrent/mib, st.reserved/mib)
		}
		if got.UsedCurrent > got.ReservedCurrent || got.ReservedHigh < got.ReservedCurrent || got.UsedHigh < got.UsedCurrent {
			t.Fatalf("after %s: inconsistent stats %+v", st.name, got)
		}
	}
	if st := stats(t, d); st.ReservedHigh != size+k*size {
		t.Fatalf("high-water %d, want %d", st.ReservedHigh, size+k*size)
	}
	ok(t, d.ResetGraphMemHigh())
	if st := stats(t, d); st.ReservedHigh != st.ReservedCurrent || st.UsedHigh != st.UsedCurrent {
		t.Fatalf("reset did not bring high marks to current: %+v", st)
	}
}

func TestTrimReturnsMemoryToTheSystem(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const size = 256 * mib
	g := graph(t, d)
	a, p := addAlloc(t, g, size)
	addFree(t, g, p, fillNode(t, g, p, size/4, 1, a))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	before := rss(t)
	ok(t, d.TrimGraphMem())
	after := rss(t)
	if before-after < size/2 {
		t.Fatalf("trim lowered RSS by %d MiB, want about %d", (before-after)/mib, size/mib)
	}
	ok(t, e.Launch(s)) // the graph maps fresh memory again
	ok(t, s.Synchronize())

	// Memory of a live allocation survives trim.
	h := graph(t, d)
	b, q := addAlloc(t, h, mib)
	fillNode(t, h, q, 1024, 5, b)
	eh := must[*gg.Exec](t)(h.Instantiate(0))
	ok(t, eh.Launch(s))
	ok(t, s.Synchronize())
	ok(t, d.TrimGraphMem())
	if v := readF32(t, d, q, 1); v[0] != 5 {
		t.Fatalf("live allocation lost by trim: %v", v)
	}
	if st := stats(t, d); st.ReservedCurrent != 2*mib {
		t.Fatalf("after trim with one live 1 MiB allocation: reserved %d", st.ReservedCurrent)
	}
	ok(t, d.Free(q))
	ok(t, d.TrimGraphMem())
	if st := stats(t, d); st.ReservedCurrent != 0 || st.UsedCurrent != 0 {
		t.Fatalf("after freeing and trimming: %+v", st)
	}
}

func TestMemCheckReportsUseOutsideLifetime(t *testing.T) {
	d, err := gg.Open("host", gg.WithMemCheck())
	ok(t, err)
	t.Cleanup(func() { d.Close() })
	s := stream(t, d)
	g := graph(t, d)
	a, p := addAlloc(t, g, 4096)
	f := addFree(t, g, p, fillNode(t, g, p, 1024, 1, a))
	fillNode(t, g, p, 1024, 2, f) // after the free: a use after free
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(s))
	err = s.Synchronize()
	isCode(t, err, gg.ErrIllegalAddress)
	if msg := err.Error(); !strings.Contains(msg, a.String()) || !strings.Contains(msg, "not live") {
		t.Fatalf("report does not name the alloc node and its state: %s", msg)
	}
}

func TestMemCheckAllowsCorrectUse(t *testing.T) {
	d, err := gg.Open("host", gg.WithMemCheck())
	ok(t, err)
	t.Cleanup(func() { d.Close() })
	s := stream(t, d)
	g := graph(t, d)
	a, p := addAlloc(t, g, 4096)
	out := make([]float32, 1024)
	cp := must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(gg.Bytes(out), p), fillNode(t, g, p, 1024, 9, a)))
	addFree(t, g, p, cp)
	e := must[*gg.Exec](t)(g.Instantiate(0))
	for i := 0; i < 3; i++ {
		ok(t, e.Launch(s))
	}
	ok(t, s.Synchronize())
	if out[0] != 9 || out[1023] != 9 {
		t.Fatalf("read %v", out[:2])
	}
}

// TestSyncCopyOfUnmappedGraphMemory: a synchronous copy from graph memory
// that is no longer mapped fails with ErrIllegalAddress instead of crashing.
func TestSyncCopyOfUnmappedGraphMemory(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	a, p := addAlloc(t, g, mib)
	addFree(t, g, p, fillNode(t, g, p, 16, 1, a))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	ok(t, d.TrimGraphMem()) // unmaps the idle graph
	buf := make([]byte, 16)
	err := d.Memcpy(gg.DtoH(buf, p))
	isCode(t, err, gg.ErrIllegalAddress)
	if !strings.Contains(err.Error(), a.String()) {
		t.Fatalf("report does not name the allocation: %v", err)
	}
}
