package gpugraph_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

func run(t *testing.T, s *gg.Stream, e *gg.Exec) {
	t.Helper()
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
}

// Host backend: the rules and orderings that the GPU scenarios cannot show
// (a fault kills the CUDA context) or show only by timing.

// okAsync reports err from a goroutine other than the test's (a kernel).
func okAsync(t *testing.T, err error) {
	if err != nil {
		t.Errorf("in a kernel: %v", err)
	}
}

// hostKernel is a Go-only kernel that launches graphs.
func hostKernel(name string, body func(b gg.Block)) *gg.Kernel {
	return &gg.Kernel{Name: name, Go: func(b gg.Block, _ gg.Args) { body(b) }, DeviceRuntime: true}
}

// hostGraph instantiates a graph of one Go kernel node.
func hostGraph(t *testing.T, d *gg.Device, flags gg.InstantiateFlags, body func(b gg.Block)) *gg.Exec {
	t.Helper()
	return instantiate(t, d, flags, kp(hostKernel(t.Name(), body)))
}

func TestDeviceLaunchFireAndForgetCompletesFirst(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	release, started := make(chan struct{}), make(chan struct{})
	var childDone atomic.Bool
	child := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) {
		close(started)
		<-release
		childDone.Store(true)
	})
	ok(t, child.Upload(s))
	h := handle(t, child)
	var launchErr error
	root := hostGraph(t, d, 0, func(b gg.Block) { launchErr = b.LaunchGraph(h, gg.FireAndForget) })
	ok(t, root.Launch(s))
	var sawChild atomic.Bool
	ok(t, s.LaunchHostFunc(func() { sawChild.Store(childDone.Load()) }))
	<-started
	isCode(t, s.Query(), gg.ErrNotReady) // the launch is not complete while its child runs
	close(release)
	ok(t, s.Synchronize())
	ok(t, launchErr)
	if !sawChild.Load() {
		t.Fatal("the stream moved on before the fire-and-forget graph completed")
	}
}

func TestDeviceLaunchTailWaitsForFireAndForget(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	release := make(chan struct{})
	var childDone, tailSawChild atomic.Bool
	child := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) { <-release; childDone.Store(true) })
	tail := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) { tailSawChild.Store(childDone.Load()) })
	ok(t, child.Upload(s))
	ok(t, tail.Upload(s))
	hc, ht := handle(t, child), handle(t, tail)
	rootDone := make(chan struct{})
	root := hostGraph(t, d, 0, func(b gg.Block) {
		okAsync(t, b.LaunchGraph(ht, gg.TailLaunch)) // queued first, runs last
		okAsync(t, b.LaunchGraph(hc, gg.FireAndForget))
		close(rootDone)
	})
	ok(t, root.Launch(s))
	<-rootDone
	close(release)
	ok(t, s.Synchronize())
	if !tailSawChild.Load() {
		t.Fatal("the tail launch ran before the fire-and-forget graph completed")
	}
}

func TestDeviceLaunchSiblingDoesNotHoldTail(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	release := make(chan struct{})
	var timedOut atomic.Bool
	// The sibling waits for the tail graph; were it the launching graph's
	// child, the tail launch would wait for it (a deadlock, ended by the
	// timeout).
	sibling := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			timedOut.Store(true)
		}
	})
	tail := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) { close(release) })
	ok(t, sibling.Upload(s))
	ok(t, tail.Upload(s))
	hs, ht := handle(t, sibling), handle(t, tail)
	root := hostGraph(t, d, 0, func(b gg.Block) {
		okAsync(t, b.LaunchGraph(hs, gg.SiblingLaunch))
		okAsync(t, b.LaunchGraph(ht, gg.TailLaunch))
	})
	ok(t, root.Launch(s))
	ok(t, s.Synchronize())
	if timedOut.Load() {
		t.Fatal("the sibling launch held back the launching graph's tail launch")
	}
}

// A sibling of a fire-and-forget child belongs to the child's parent: the
// parent's execution waits for it, so its tail launches run after it.
func TestDeviceLaunchSiblingOfChildHoldsParent(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	var mu sync.Mutex
	var order []string
	note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
	// The sibling waits a while for the tail graph, which does not come if
	// the sibling belongs to its parent's execution; were it the stream's,
	// the tail graph would run at once and come first.
	release := make(chan struct{})
	sib := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) {
		select {
		case <-release:
		case <-time.After(200 * time.Millisecond):
		}
		note("sibling")
	})
	tail := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) { note("tail"); close(release) })
	ok(t, sib.Upload(s))
	ok(t, tail.Upload(s))
	hs, ht := handle(t, sib), handle(t, tail)
	child := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(b gg.Block) { okAsync(t, b.LaunchGraph(hs, gg.SiblingLaunch)) })
	ok(t, child.Upload(s))
	hc := handle(t, child)
	mid := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(b gg.Block) {
		okAsync(t, b.LaunchGraph(ht, gg.TailLaunch))
		okAsync(t, b.LaunchGraph(hc, gg.FireAndForget))
	})
	ok(t, mid.Upload(s))
	hm := handle(t, mid)
	run(t, s, hostGraph(t, d, 0, func(b gg.Block) { okAsync(t, b.LaunchGraph(hm, gg.FireAndForget)) }))
	if !slices.Equal(order, []string{"sibling", "tail"}) {
		t.Fatalf("order %v, want the sibling (child of the launching graph's parent) before its tail launch", order)
	}
}

func TestDeviceLaunchRunningGraphRefused(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	release := make(chan struct{})
	busy := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) { <-release })
	ok(t, busy.Upload(s))
	h := handle(t, busy)
	// Two kernel nodes in a row: the second launches the graph the first
	// launched, which is still running.
	k1 := hostKernel("first", func(b gg.Block) { okAsync(t, b.LaunchGraph(h, gg.FireAndForget)) })
	var second error
	k2 := hostKernel("second", func(b gg.Block) { second = b.LaunchGraph(h, gg.TailLaunch); close(release) })
	g := graph(t, d)
	n1 := must[*gg.Node](t)(g.AddKernelNode(kp(k1)))
	must[*gg.Node](t)(g.AddKernelNode(kp(k2), n1))
	run(t, s, must[*gg.Exec](t)(g.Instantiate(0)))
	isCode(t, second, gg.ErrInvalidValue)

	// A graph with a host launch queued (in a stream held back) is running
	// too, and so refused.
	hold := stream(t, d)
	gate := make(chan struct{})
	ok(t, hold.LaunchHostFunc(func() { <-gate }))
	ok(t, busy.Launch(hold))
	var err error
	run(t, s, hostGraph(t, d, 0, func(b gg.Block) { err = b.LaunchGraph(h, gg.FireAndForget) }))
	close(gate)
	ok(t, hold.Synchronize())
	isCode(t, err, gg.ErrInvalidValue)
}

func TestDeviceLaunchHostGraphFaults(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	hostOnly := hostGraph(t, d, 0, func(gg.Block) {})
	h := handle(t, hostOnly)
	var err error
	ok(t, hostGraph(t, d, 0, func(b gg.Block) { err = b.LaunchGraph(h, gg.FireAndForget) }).Launch(s))
	isCode(t, s.Synchronize(), gg.ErrIllegalAddress) // the launching graph's launch failed, as on the GPU
	isCode(t, err, gg.ErrIllegalAddress)
	ok(t, s.Synchronize()) // reported once, as the driver does: not sticky
}

func TestDeviceLaunchChildFaultFailsLaunch(t *testing.T) {
	for _, mode := range []gg.DeviceLaunchMode{gg.FireAndForget, gg.TailLaunch, gg.SiblingLaunch} {
		t.Run(mode.String(), func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			faulty := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) { gg.Slice[byte](gg.DevicePtr(8), 1)[0] = 1 })
			ok(t, faulty.Upload(s))
			h := handle(t, faulty)
			var ran atomic.Bool
			after := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) { ran.Store(true) })
			ok(t, after.Upload(s))
			ha := handle(t, after)
			ok(t, hostGraph(t, d, 0, func(b gg.Block) {
				okAsync(t, b.LaunchGraph(h, mode))
				if mode == gg.TailLaunch {
					okAsync(t, b.LaunchGraph(ha, gg.TailLaunch)) // not run: the device has failed
				}
			}).Launch(s))
			isCode(t, s.Synchronize(), gg.ErrIllegalAddress)
			if ran.Load() {
				t.Fatal("a tail launch ran after a failure")
			}
		})
	}
}

func TestDeviceLaunchLimitsPerExecution(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	var graphs []uint64
	for range 2*121 + 256 {
		e := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) {})
		ok(t, e.Upload(s))
		graphs = append(graphs, handle(t, e))
	}
	var ffErr, sibErr, tailErr [2]error
	root := hostGraph(t, d, 0, func(b gg.Block) {
		for i, h := range graphs[:121] {
			if err := b.LaunchGraph(h, gg.FireAndForget); err != nil {
				ffErr = [2]error{fmt.Errorf("%d", i), err}
				break
			}
		}
		for i, h := range graphs[121:242] {
			if err := b.LaunchGraph(h, gg.SiblingLaunch); err != nil {
				sibErr = [2]error{fmt.Errorf("%d", i), err}
				break
			}
		}
		for i, h := range graphs[242:] {
			if err := b.LaunchGraph(h, gg.TailLaunch); err != nil {
				tailErr = [2]error{fmt.Errorf("%d", i), err}
				break
			}
		}
	})
	run(t, s, root)
	for _, c := range []struct {
		what string
		err  [2]error
		at   string
	}{{"fire-and-forget", ffErr, "120"}, {"sibling", sibErr, "120"}, {"tail", tailErr, "255"}} {
		if c.err[0] == nil || c.err[0].Error() != c.at {
			t.Fatalf("%s launches: refused at %v, want at %s", c.what, c.err[0], c.at)
		}
		isCode(t, c.err[1], gg.ErrInvalidValue)
	}
}

func TestDeviceLaunchRefusedCalls(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	dev := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) {})
	ok(t, dev.Upload(s))
	h := handle(t, dev)
	other := open(t)
	s2 := stream(t, other)
	foreign := hostGraph(t, other, gg.InstantiateDeviceLaunch, func(gg.Block) {})
	ok(t, foreign.Upload(s2))
	ok(t, s2.Synchronize())
	hf := handle(t, foreign)
	gone := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) {})
	hg := handle(t, gone)
	ok(t, gone.Destroy())
	_, err := gone.DeviceHandle()
	isCode(t, err, gg.ErrInvalidResourceHandle)

	errs := map[string]error{}
	run(t, s, hostGraph(t, d, 0, func(b gg.Block) {
		errs["another device's graph"] = b.LaunchGraph(hf, gg.FireAndForget)
		errs["a destroyed graph"] = b.LaunchGraph(hg, gg.FireAndForget)
		errs["no graph"] = b.LaunchGraph(0, gg.TailLaunch)
	}))
	for what, err := range errs {
		if !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("launching %s: %v, want ErrInvalidValue", what, err)
		}
	}

	// A kernel that does not set DeviceRuntime cannot launch graphs.
	var err2 error
	plain := &gg.Kernel{Name: "plain", Go: func(b gg.Block, _ gg.Args) { err2 = b.LaunchGraph(h, gg.FireAndForget) }}
	run(t, s, instantiate(t, d, 0, kp(plain)))
	isCode(t, err2, gg.ErrNotSupported)
	// Nor can one in a stream, outside any graph.
	ok(t, s.Launch(plain, one, one))
	ok(t, s.Synchronize())
	isCode(t, err2, gg.ErrNotSupported)
	// Host graphs have no current device graph.
	var cur uint64 = 1
	run(t, s, hostGraph(t, d, 0, func(b gg.Block) { cur = b.CurrentGraphExec() }))
	if cur != 0 {
		t.Fatalf("CurrentGraphExec in a host graph: %#x", cur)
	}
}

func TestInstantiateWithParamsUploadStream(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	g := graph(t, d)
	must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	for _, c := range []struct {
		name   string
		stream *gg.Stream
		want   *gg.Code
	}{
		{"another device's stream", stream(t, open(t)), gg.ErrInvalidValue},
		{"a destroyed stream", func() *gg.Stream { x := stream(t, d); ok(t, x.Destroy()); return x }(), gg.ErrInvalidResourceHandle},
	} {
		p := &gg.InstantiateParams{Flags: gg.InstantiateUpload, UploadStream: c.stream}
		_, err := g.InstantiateWithParams(p)
		isCode(t, err, c.want)
		if p.Result != gg.InstantiateError {
			t.Errorf("%s: result %v", c.name, p.Result)
		}
	}
	// Upload alone, of a host graph: allowed.
	p := &gg.InstantiateParams{Flags: gg.InstantiateUpload, UploadStream: s}
	e := must[*gg.Exec](t)(g.InstantiateWithParams(p))
	run(t, s, e)
}

// Sibling launches of a device graph launched fire-and-forget count against
// its parent's execution, which already holds that launch: the driver (H100,
// CUDA 13.0, docs/driver-devlaunch.txt) refuses the 120th, not the 121st.
func TestDeviceLaunchSiblingLimitInParent(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	var graphs []uint64
	for range 125 {
		e := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(gg.Block) {})
		ok(t, e.Upload(s))
		graphs = append(graphs, handle(t, e))
	}
	refused := -1
	sib := hostGraph(t, d, gg.InstantiateDeviceLaunch, func(b gg.Block) {
		for i, h := range graphs {
			if err := b.LaunchGraph(h, gg.SiblingLaunch); err != nil {
				refused = i
				return
			}
		}
	})
	ok(t, sib.Upload(s))
	hs := handle(t, sib)
	run(t, s, hostGraph(t, d, 0, func(b gg.Block) { ok(t, b.LaunchGraph(hs, gg.FireAndForget)) }))
	if refused != 119 {
		t.Fatalf("first sibling refused at %d, want 119", refused)
	}
}
