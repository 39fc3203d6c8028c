package backendtest

import (
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// condBodyPeerMemory: a conditional body of device 0's graph may not hold
// a memset, memcpy or kernel node on device 1's memory, even with peer
// access both ways: the driver refuses the memset at instantiation, takes
// the memcpy and faults the launch (cudaErrorLaunchFailure, the context
// lost), and takes the kernel and loses its writes (measured on two H100s,
// docs/driver-condpeer.txt). Both backends refuse all three at
// instantiation with ErrInvalidValue naming the node, directly in the body,
// in a child graph in it, and captured into it from a stream (a captured
// memset the driver takes, and ran out of order: a differential input); on
// device 0's own memory the same nodes run.
func condBodyPeerMemory(t *testing.T, backend string, count int, open OpenOrdinal) {
	d0, d1 := open(t, 0), open(t, 1)
	EnablePeers(t, d0, d1)
	const n = 64
	own := Must[gg.DevicePtr](t)(d0.Malloc(4 * n))
	defer d0.Free(own)
	peer := Must[gg.DevicePtr](t)(d1.Malloc(4 * n))
	defer d1.Free(peer)
	s0 := NewStream(t, d0)
	nodes := []struct {
		what string
		p    func(m gg.DevicePtr) gg.NodeParams
	}{
		{"memset", func(m gg.DevicePtr) gg.NodeParams { return gg.Memset32(m, 5, n) }},
		{"memcpy", func(m gg.DevicePtr) gg.NodeParams { return gg.DtoD(m, m+4*n/2, 4*n/2) }},
		{"kernel", func(m gg.DevicePtr) gg.NodeParams {
			return gg.KernelParams{Kernel: AddOne, Grid: gg.Dim1(1), Block: gg.Dim1(n), Args: []any{m, m, n}}
		}},
	}
	// The same work captured into the body from a stream of device 0 (the
	// driver's nodes: their memory read back from them on cuda).
	issue := map[string]func(s *gg.Stream, m gg.DevicePtr) error{
		"memset": func(s *gg.Stream, m gg.DevicePtr) error { return s.Memset(gg.Memset32(m, 5, n)) },
		"memcpy": func(s *gg.Stream, m gg.DevicePtr) error { return s.Memcpy(gg.DtoD(m, m+4*n/2, 4*n/2)) },
		"kernel": func(s *gg.Stream, m gg.DevicePtr) error { return s.Launch(AddOne, gg.Dim1(1), gg.Dim1(n), m, m, n) },
	}
	// ifBody makes a graph of device 0 holding an IF node that always runs
	// its body, and returns the graph and the body.
	ifBody := func() (*gg.Graph, *gg.Graph) {
		g := NewGraph(t, d0)
		h := Must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		_, bodies := AddCond(t, g, h, gg.ConditionalIf, 1)
		return g, bodies[0]
	}
	// instantiate instantiates g, whose body works on memory m: on device
	// 0's own memory it must instantiate and run; on device 1's it returns
	// the refusal.
	instantiate := func(g *gg.Graph, m gg.DevicePtr) error {
		e, err := g.Instantiate(0)
		if m == own {
			OK(t, err)
			launchSync(t, e, s0)
			OK(t, e.Destroy())
			return nil
		}
		return err
	}
	for _, nd := range nodes {
		for _, m := range []gg.DevicePtr{own, peer} {
			g, body := ifBody()
			cs := NewStream(t, d0)
			OK(t, cs.BeginCaptureToGraph(body, nil, gg.CaptureModeGlobal))
			OK(t, issue[nd.what](cs, m))
			Must[*gg.Graph](t)(cs.EndCapture())
			if err := instantiate(g, m); m == peer && !errors.Is(err, gg.ErrInvalidValue) {
				t.Fatalf("captured %s on device 1's memory in a body: %v, want ErrInvalidValue", nd.what, err)
			}
		}
		for _, inChild := range []bool{false, true} {
			for _, m := range []gg.DevicePtr{own, peer} {
				g, body := ifBody()
				var bad *gg.Node
				if inChild {
					c := NewGraph(t, d0)
					Must[*gg.Node](t)(c.AddNode(nd.p(m)))
					cn := Must[*gg.Node](t)(body.AddChildGraphNode(c))
					emb := Must[*gg.Graph](t)(cn.ChildGraph())
					bad = Must[[]*gg.Node](t)(emb.Nodes())[0]
				} else {
					bad = Must[*gg.Node](t)(body.AddNode(nd.p(m)))
				}
				err := instantiate(g, m)
				if m == own {
					continue
				}
				IsCode(t, err, gg.ErrInvalidValue)
				var ge *gg.Error
				if errors.As(err, &ge) && ge.Node != bad {
					t.Fatalf("%s (in a child graph %v): the error names %v, want %v: %v", nd.what, inChild, ge.Node, bad, err)
				}
			}
		}
	}
}

// capturedPeerMemsetUpdate: a memset captured in a stream of device 0 on
// device 1's memory (peer access enabled) takes no update but to its own
// parameters, while the same memset added to the graph takes any
// (cudaGraphExecMemsetNodeSetParams, measured on two H100s:
// docs/driver-multidev.txt, capturedMemsets and memsetShapes).
func capturedPeerMemsetUpdate(t *testing.T, backend string, count int, open OpenOrdinal) {
	d0, d1 := open(t, 0), open(t, 1)
	if !Must[bool](t)(d0.CanAccessPeer(d1)) {
		t.Skip("device 0 cannot access device 1")
	}
	if err := d0.EnablePeerAccess(d1); err != nil && !errors.Is(err, gg.ErrPeerAccessAlreadyEnabled) {
		t.Fatal(err)
	}
	defer d0.DisablePeerAccess(d1)
	const n = 64
	peer := Must[gg.DevicePtr](t)(d1.Malloc(4 * n))
	defer d1.Free(peer)
	s0 := NewStream(t, d0)
	p := gg.Memset32(peer, 7, n)
	OK(t, s0.BeginCapture(gg.CaptureModeGlobal))
	OK(t, s0.Memset(p))
	g := Must[*gg.Graph](t)(s0.EndCapture())
	defer g.Destroy()
	ms := Must[[]*gg.Node](t)(g.Nodes())[0]
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	defer e.Destroy()
	IsCode(t, e.SetParams(ms, gg.Memset32(peer, 8, n)), gg.ErrInvalidValue)
	IsCode(t, e.SetParams(ms, gg.Memset8(peer, 8, 4*n)), gg.ErrInvalidValue)
	OK(t, e.SetParams(ms, p))
	launchSync(t, e, s0)
	wantU32s(t, "the captured memset after the refused updates", d1, peer, n, 7)

	// A change that moves it home, to memory of the capturing stream's
	// device, is taken; a whole-graph update between captured graphs
	// moves a captured memset's destination either way (two-GPU
	// differential inputs).
	own := Must[gg.DevicePtr](t)(d0.Malloc(4 * n))
	defer d0.Free(own)
	OK(t, e.SetParams(ms, gg.Memset32(own, 5, n)))
	launchSync(t, e, s0)
	wantU32s(t, "the captured memset moved home", d0, own, n, 5)
	capture := func(p gg.MemsetParams) *gg.Graph {
		OK(t, s0.BeginCapture(gg.CaptureModeGlobal))
		OK(t, s0.Memset(p))
		return Must[*gg.Graph](t)(s0.EndCapture())
	}
	home, away := capture(gg.Memset32(own, 6, n)), capture(gg.Memset32(peer, 4, n))
	defer home.Destroy()
	defer away.Destroy()
	ew := Must[*gg.Exec](t)(home.Instantiate(0))
	defer ew.Destroy()
	for _, c := range []struct {
		g    *gg.Graph
		on   *gg.Device
		at   gg.DevicePtr
		want uint32
	}{{away, d1, peer, 4}, {home, d0, own, 6}} {
		if res, err := ew.Update(c.g); err != nil || res.Result != gg.UpdateSuccess {
			t.Fatalf("whole-graph update of a captured memset to device %d's memory: %+v %v", c.on.Properties().Ordinal, res, err)
		}
		launchSync(t, ew, s0)
		wantU32s(t, "the captured memset after a whole-graph update", c.on, c.at, n, c.want)
	}

	h := NewGraph(t, d0)
	added := Must[*gg.Node](t)(h.AddMemsetNode(p))
	eh := Must[*gg.Exec](t)(h.Instantiate(0))
	defer eh.Destroy()
	OK(t, eh.SetParams(added, gg.Memset32(peer, 9, n)))
	launchSync(t, eh, s0)
	wantU32s(t, "the added memset after its update", d1, peer, n, 9)
}
