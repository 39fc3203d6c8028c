package backendtest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// Scenarios of pinned (page-locked) host memory: MallocHost, FreeHost,
// HostRegister, HostUnregister, and what copies with it do.

// pinnedHostMemory: the calls and their refusals, each leaving the memory
// as it was.
func pinnedHostMemory(t *testing.T, d *gg.Device) {
	b := Must[[]byte](t)(d.MallocHost(0))
	if b != nil {
		t.Fatalf("MallocHost(0) = %d bytes, want nil", len(b))
	}
	_, err := d.MallocHost(-1)
	IsCode(t, err, gg.ErrInvalidValue)
	b = Must[[]byte](t)(d.MallocHost(1 << 16))
	if len(b) != 1<<16 {
		t.Fatalf("MallocHost(64 KiB) = %d bytes", len(b))
	}
	for i := range b {
		b[i] = byte(i)
	}
	OK(t, d.FreeHost(nil))
	IsCode(t, d.FreeHost(make([]byte, 16)), gg.ErrInvalidValue) // Go memory
	IsCode(t, d.FreeHost(b[1:]), gg.ErrInvalidValue)            // not its start
	IsCode(t, d.HostUnregister(b), gg.ErrHostMemoryNotRegistered)
	IsCode(t, d.HostRegister(b[4096:8192]), gg.ErrHostMemoryAlreadyRegistered)

	g := make([]byte, 1<<16)
	IsCode(t, d.HostRegister(g[:0]), gg.ErrInvalidValue)
	IsCode(t, d.HostUnregister(g), gg.ErrHostMemoryNotRegistered)
	OK(t, d.HostRegister(g))
	IsCode(t, d.HostRegister(g), gg.ErrHostMemoryAlreadyRegistered)
	IsCode(t, d.HostRegister(g[100:200]), gg.ErrHostMemoryAlreadyRegistered)
	IsCode(t, d.HostUnregister(g[100:]), gg.ErrHostMemoryNotRegistered)
	IsCode(t, d.FreeHost(g), gg.ErrInvalidValue)

	// Both still work as copy sources and targets, after the refusals.
	dev := Must[gg.DevicePtr](t)(d.Malloc(1 << 16))
	defer d.Free(dev)
	s := NewStream(t, d)
	OK(t, s.Memcpy(gg.HtoD(dev, b)))
	OK(t, s.Memcpy(gg.DtoH(g, dev)))
	OK(t, s.Synchronize())
	if !bytes.Equal(g, b) {
		t.Fatal("the copy from MallocHost memory to registered memory differs")
	}
	OK(t, d.Memcpy(gg.HtoD(dev, g[:8])))
	OK(t, d.Memcpy(gg.DtoH(b[:8], dev)))
	OK(t, d.HostUnregister(g))
	IsCode(t, d.HostUnregister(g), gg.ErrHostMemoryNotRegistered)
	OK(t, d.HostRegister(g[:4096])) // a part, now that it is free
	OK(t, d.HostUnregister(g[:4096]))
	OK(t, d.FreeHost(b))
	IsCode(t, d.FreeHost(b), gg.ErrInvalidValue)
}

// pinnedStreamCopies: a stream copy with pinned memory returns at once and
// runs in stream order; one with pageable memory returns when it is done.
func pinnedStreamCopies(t *testing.T, d *gg.Device) {
	const n = 4096
	s := NewStream(t, d)
	dev := Must[gg.DevicePtr](t)(d.Malloc(n))
	defer d.Free(dev)
	pinned := Must[[]byte](t)(d.MallocHost(n))
	defer d.FreeHost(pinned)
	pageable := make([]byte, n)
	for i := range pinned {
		pinned[i], pageable[i] = 1, 2
	}
	// The stream is held by a host function until release.
	// (released at the latest when the test ends, before the device closes).
	hold := func() func() {
		c := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(c) }) }
		t.Cleanup(release)
		OK(t, s.LaunchHostFunc(func() { <-c }))
		return release
	}
	returned := func(f func() error) chan error {
		c := make(chan error, 1)
		go func() { c <- f() }()
		return c
	}

	release := hold()
	done := returned(func() error { return s.Memcpy(gg.HtoD(dev, pinned)) })
	select {
	case err := <-done:
		OK(t, err)
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("a copy from pinned memory waited for the stream")
	}
	IsCode(t, s.Query(), gg.ErrNotReady) // the held host function and the copy
	release()
	OK(t, s.Synchronize())
	out := make([]byte, n)
	OK(t, d.Memcpy(gg.DtoH(out, dev)))
	if out[0] != 1 || out[n-1] != 1 {
		t.Fatalf("after the pinned copy: %d ... %d, want 1", out[0], out[n-1])
	}

	release = hold()
	done = returned(func() error { return s.Memcpy(gg.HtoD(dev, pageable)) })
	select {
	case err := <-done:
		release()
		OK(t, err)
		// The driver may stage a pageable source and return without
		// waiting for the stream (CUDA's API synchronization notes): the
		// host backend's answer is what this run reports on cuda.
		if d.Properties().Backend == gg.BackendHost {
			t.Fatal("a copy from pageable memory returned before the work queued before it ran")
		}
		t.Logf("the driver returned from a copy from pageable memory before the stream's earlier work ran (the host backend waits)")
		OK(t, s.Synchronize())
	case <-time.After(50 * time.Millisecond):
		release()
		OK(t, <-done)
	}
	OK(t, d.Memcpy(gg.DtoH(out, dev)))
	if out[0] != 2 || out[n-1] != 2 {
		t.Fatalf("after the pageable copy: %d ... %d, want 2", out[0], out[n-1])
	}
}

// pinnedGraphCopies: a memcpy node reads a pinned source when it runs, a
// pageable one when the graph is launched (the driver stages pageable
// memory at the call): a host node of the same launch that writes the
// source before the copy reaches a pinned source only. Registered Go
// memory is pinned like MallocHost's.
func pinnedGraphCopies(t *testing.T, d *gg.Device) {
	const n = 256
	s := NewStream(t, d)
	registered := make([]byte, n)
	OK(t, d.HostRegister(registered))
	defer d.HostUnregister(registered)
	alloc := Must[[]byte](t)(d.MallocHost(n))
	defer d.FreeHost(alloc)
	for _, c := range []struct {
		name   string
		src    []byte
		pinned bool
	}{
		{"pageable", make([]byte, n), false},
		{"MallocHost", alloc, true},
		{"HostRegister", registered, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := c.src
			dev := Must[gg.DevicePtr](t)(d.Malloc(n))
			defer d.Free(dev)
			dst := Must[[]byte](t)(d.MallocHost(n))
			defer d.FreeHost(dst)
			g := NewGraph(t, d)
			// The host node adds one to every byte of the source, then the
			// copy reads it, and a copy back writes dst.
			h := Must[*gg.Node](t)(g.AddHostNode(func() {
				for i := range src {
					src[i]++
				}
			}))
			cp := Must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(dev, src), h))
			Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(dst, dev), cp))
			e := Must[*gg.Exec](t)(g.Instantiate(0))
			for i := range src {
				src[i] = 10
			}
			for launch := 0; launch < 3; launch++ {
				launchSync(t, e, s)
				// The source was 10+launch at the call, 11+launch once the
				// host node ran.
				want := byte(10 + launch)
				if c.pinned {
					want++
				}
				if dst[0] != want || dst[n-1] != want {
					t.Fatalf("launch %d copied %d ... %d, want %d", launch, dst[0], dst[n-1], want)
				}
				if src[0] != byte(11+launch) {
					t.Fatalf("launch %d: the host node left %d", launch, src[0])
				}
			}
		})
	}
}

// pageableCopyChain: a copy into pageable memory and a later copy from it
// in the same launch: the later copy delivers what the first wrote, even
// when a host node between them writes the memory again — that write
// reaches a pinned source only (the driver stages a pageable range once
// per launch, and a copy into it writes the staging too:
// docs/driver-pageable.txt). The host node sees what the first copy wrote.
func pageableCopyChain(t *testing.T, d *gg.Device) {
	const n = 64
	s := NewStream(t, d)
	dev := Must[gg.DevicePtr](t)(d.Malloc(2 * n))
	defer d.Free(dev)
	for _, pinned := range []bool{false, true} {
		for _, overwrite := range []bool{false, true} {
			what := fmt.Sprintf("pinned %v, the host node writes %v", pinned, overwrite)
			h := make([]byte, n)
			if pinned {
				h = Must[[]byte](t)(d.MallocHost(n))
			}
			for i := range h {
				h[i] = 0x11
			}
			OK(t, d.Memset(gg.Memset8(dev, 0xaa, 2*n)))
			g := NewGraph(t, d)
			set := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(dev, 0x55, n)))
			out := Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(h, dev), set))
			var seen byte
			host := Must[*gg.Node](t)(g.AddHostNode(func() {
				seen = h[0]
				if overwrite {
					for i := range h {
						h[i] = 0x33
					}
				}
			}, out))
			Must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(dev+n, h), host))
			e := Must[*gg.Exec](t)(g.Instantiate(0))
			launchSync(t, e, s)
			got := make([]byte, n)
			OK(t, d.Memcpy(gg.DtoH(got, dev+n)))
			want := byte(0x55)
			if pinned && overwrite {
				want = 0x33
			}
			if seen != 0x55 || got[0] != want || got[n-1] != want {
				t.Errorf("%s: the host node saw %#x, the copy back delivered %#x ... %#x; want 0x55, %#x", what, seen, got[0], got[n-1], want)
			}
			OK(t, e.Destroy())
			if pinned {
				OK(t, d.FreeHost(h))
			}
		}
	}

	// A copy into other pageable memory stages the pageable sources of
	// the copies after it again: a host node's write before that point
	// reaches them; without one, the source is as at the launch call.
	// (After device work, what a copy reads of a host node's write is not
	// settled: the GPU answered both ways, docs/memory.md.)
	for _, c := range []struct {
		what    string
		between bool
	}{{"host node only", false}, {"copy into pageable memory between", true}} {
		src, other := bytes.Repeat([]byte{0x11}, n), make([]byte, n)
		g := NewGraph(t, d)
		last := Must[*gg.Node](t)(g.AddHostNode(func() {
			for i := range src {
				src[i] = 0x44
			}
		}))
		if c.between {
			last = Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(other, dev), last))
		}
		Must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(dev+n, src), last))
		e := Must[*gg.Exec](t)(g.Instantiate(0))
		launchSync(t, e, s)
		got := make([]byte, n)
		OK(t, d.Memcpy(gg.DtoH(got, dev+n)))
		want := map[bool]byte{false: 0x11, true: 0x44}[c.between]
		if got[0] != want || got[n-1] != want {
			t.Errorf("%s: delivered %#x ... %#x, want %#x", c.what, got[0], got[n-1], want)
		}
		OK(t, e.Destroy())
	}
}
