package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// copyGraph is a graph whose host node adds one to src, then copies src to
// dev and dev to dst; it returns the copy node.
func copyGraph(t *testing.T, d *gg.Device, src, dst []byte, dev gg.DevicePtr) (*gg.Graph, *gg.Node) {
	t.Helper()
	g := graph(t, d)
	h := must[*gg.Node](t)(g.AddHostNode(func() {
		for i := range src {
			src[i]++
		}
	}))
	cp := must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(dev, src), h))
	must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(dst, dev), cp))
	return g, cp
}

// TestPinnedExecSetParams: which memory a copy node reads when is taken
// from the node's parameters as they are now: an executable graph's copy
// node moved from pageable to pinned memory reads it when it runs, and
// back; and a copy captured from a stream follows the same rule.
func TestPinnedExecSetParams(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const n = 64
	dev := must[gg.DevicePtr](t)(d.Malloc(n))
	pageable := make([]byte, n)
	pinned := must[[]byte](t)(d.MallocHost(n))
	dst := make([]byte, n)
	src := pageable
	g := graph(t, d)
	h := must[*gg.Node](t)(g.AddHostNode(func() { src[0]++ }))
	cp := must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(dev, pageable), h))
	must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(dst, dev), cp))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	launch := func(want byte) {
		t.Helper()
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		if dst[0] != want {
			t.Fatalf("copied %d, want %d", dst[0], want)
		}
	}
	launch(0) // pageable: as at the call
	src = pinned
	ok(t, e.SetParams(cp, gg.HtoD(dev, pinned)))
	launch(1) // pinned: after the host node
	src = pageable
	ok(t, e.SetParams(cp, gg.HtoD(dev, pageable)))
	launch(1) // pageable again: 1 at the call, 2 after

	// A captured copy is a memcpy node like any other.
	cs := stream(t, d)
	for _, call := range []func() error{
		func() error { _, err := d.MallocHost(8); return err },
		func() error { return d.HostRegister(make([]byte, 8)) },
		func() error { return d.FreeHost(pinned) },
	} {
		// Unsafe during a global capture, like Malloc: refused, and the
		// capture is invalidated.
		ok(t, cs.BeginCapture(gg.CaptureModeGlobal))
		isCode(t, call(), gg.ErrStreamCaptureUnsupported)
		_, err := cs.EndCapture()
		isCode(t, err, gg.ErrStreamCaptureInvalidated)
	}
	ok(t, cs.BeginCapture(gg.CaptureModeGlobal))
	pageable[0] = 5
	ok(t, cs.LaunchHostFunc(func() { pageable[0]++ }))
	ok(t, cs.Memcpy(gg.HtoD(dev, pageable)))
	ok(t, cs.Memcpy(gg.DtoH(dst, dev)))
	cg := must[*gg.Graph](t)(cs.EndCapture())
	ce := must[*gg.Exec](t)(cg.Instantiate(0))
	ok(t, ce.Launch(s))
	ok(t, s.Synchronize())
	if dst[0] != 5 || pageable[0] != 6 {
		t.Fatalf("captured copy of pageable memory: copied %d, source now %d; want 5 and 6", dst[0], pageable[0])
	}
}

// TestPinnedReleasedAtClose: Close frees what its device allocated and
// unregisters what it registered, so the memory can be registered again.
func TestPinnedReleasedAtClose(t *testing.T) {
	d1 := open(t)
	b := make([]byte, 4096)
	ok(t, d1.HostRegister(b))
	must[[]byte](t)(d1.MallocHost(4096))
	d2 := open(t)
	isCode(t, d2.HostRegister(b), gg.ErrHostMemoryAlreadyRegistered) // pinned for every device
	ok(t, d1.Close())
	ok(t, d2.HostRegister(b))
	ok(t, d2.HostUnregister(b))
	_, err := d1.MallocHost(8)
	isCode(t, err, gg.ErrContextIsDestroyed)
}

// TestPinnedQueuedLaunches: launches queued back to back each copy a
// pageable source as it was at their call; a disabled copy node copies
// nothing.
func TestPinnedQueuedLaunches(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const n = 16
	dev := must[gg.DevicePtr](t)(d.Malloc(n))
	src, dst := make([]byte, n), make([]byte, n)
	g, cp := copyGraph(t, d, src, dst, dev)
	e := must[*gg.Exec](t)(g.Instantiate(0))
	// Hold the stream so that the launches are all queued before the
	// first runs: each staged its source at its call.
	hold := make(chan struct{})
	ok(t, s.LaunchHostFunc(func() { <-hold }))
	seen := make([]byte, 0, 3)
	for i := range 3 {
		src[0] = byte(10 * (i + 1))
		ok(t, e.Launch(s))
		ok(t, s.LaunchHostFunc(func() { seen = append(seen, dst[0]) }))
	}
	close(hold)
	ok(t, s.Synchronize())
	if string(seen) != string([]byte{10, 20, 30}) {
		t.Fatalf("queued launches copied %v, want [10 20 30] (the source at each call)", seen)
	}
	ok(t, e.SetEnabled(cp, false))
	src[0] = 99
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
	if dst[0] != 30 {
		t.Fatalf("with the copy node disabled the device buffer holds %d, want 30 (the last launch's)", dst[0])
	}
}
