package gpugraph_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/backend/backendtest"
)

// twoHostDevices opens host devices 0 and 1 of a two-device host backend.
func twoHostDevices(t *testing.T) (*gg.Device, *gg.Device) {
	t.Helper()
	if err := gg.SetHostDeviceCount(2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gg.SetHostDeviceCount(1) })
	open := func(i int) *gg.Device {
		d, err := gg.Open("host", gg.WithOrdinal(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	return open(0), open(1)
}

// TestHostPeerAccessChecked: on host, a stream's memset of another
// device's memory needs access to it: peer access to the device, the
// pool's access (MemPool.SetAccess), or the allocation's (an alloc node's
// descriptors). Without it the call fails, with the error the driver gives
// an address the device cannot use. A copy needs none, nor does a memset
// node (the driver adds and runs one without access: docs/driver-peer.txt).
func TestHostPeerAccessChecked(t *testing.T) {
	d0, d1 := twoHostDevices(t)
	s0, s1 := must[*gg.Stream](t)(d0.NewStream()), must[*gg.Stream](t)(d1.NewStream())

	a := must[gg.DevicePtr](t)(d0.Malloc(256))
	isCode(t, s1.Memset(gg.Memset8(a, 7, 256)), gg.ErrInvalidValue)
	g1 := must[*gg.Graph](t)(d1.NewGraph())
	must[*gg.Node](t)(g1.AddMemsetNode(gg.Memset8(a, 7, 256)))
	ok(t, d1.EnablePeerAccess(d0))
	ok(t, s1.Memset(gg.Memset8(a, 7, 256)))
	must[*gg.Node](t)(g1.AddMemsetNode(gg.Memset8(a, 9, 128)))
	ok(t, s1.Synchronize())
	ok(t, d1.DisablePeerAccess(d0))
	isCode(t, s1.Memset(gg.Memset8(a, 1, 1)), gg.ErrInvalidValue)

	// Pool memory: the pool's access, not the device's.
	pool := must[*gg.MemPool](t)(d0.NewMemPool(gg.MemPoolProps{Location: 0}))
	defer pool.Destroy()
	p := must[gg.DevicePtr](t)(s0.MallocFromPoolAsync(4096, pool))
	ok(t, s0.Synchronize())
	isCode(t, s1.Memset(gg.Memset32(p, 5, 1024)), gg.ErrInvalidValue)
	ok(t, pool.SetAccess(1, gg.AccessReadWrite))
	ok(t, s1.Memset(gg.Memset32(p, 5, 1024)))
	ok(t, s1.Synchronize())
	ok(t, s0.FreeAsync(p))

	// A graph allocation: its node's access descriptors.
	g0 := must[*gg.Graph](t)(d0.NewGraph())
	_, shared, err := g0.AddMemAllocNode(gg.MemAllocParams{Size: 4096, Access: []gg.MemAccessDesc{{Device: 1}}})
	ok(t, err)
	_, private, err := g0.AddMemAllocNode(gg.MemAllocParams{Size: 4096})
	ok(t, err)
	e := must[*gg.Exec](t)(g0.Instantiate(0))
	ok(t, e.Launch(s0))
	ok(t, s0.Synchronize())
	ok(t, s1.Memset(gg.Memset32(shared, 3, 1024)))
	isCode(t, s1.Memset(gg.Memset32(private, 3, 1024)), gg.ErrInvalidValue)
	ok(t, s1.Synchronize())
	ok(t, s0.FreeAsync(shared))
	ok(t, s0.FreeAsync(private))
	ok(t, s0.Synchronize())
	ok(t, e.Destroy())

	// Copies need none.
	b := must[gg.DevicePtr](t)(d1.Malloc(256))
	ok(t, s1.Memcpy(gg.DtoD(b, a, 256)))
	buf := make([]byte, 256)
	ok(t, s1.Memcpy(gg.DtoH(buf, b)))
	ok(t, s1.Synchronize())
	if buf[0] != 7 || buf[200] != 7 {
		t.Fatalf("peer copy read %d, %d, want 7 (the memset before the node's)", buf[0], buf[200])
	}
}

// TestHostDevicesOwnMemory: each host device has memory of its own; a
// device frees only its own allocations.
func TestHostDevicesOwnMemory(t *testing.T) {
	d0, d1 := twoHostDevices(t)
	a := must[gg.DevicePtr](t)(d0.Malloc(64))
	b := must[gg.DevicePtr](t)(d1.Malloc(64))
	if d0.Properties().Ordinal != 0 || d1.Properties().Ordinal != 1 {
		t.Fatal("ordinals")
	}
	isCode(t, d1.Free(a), gg.ErrInvalidValue)
	ok(t, d0.Free(a))
	ok(t, d1.Free(b))
}

// TestHostKernelPeerAccessChecked: in the checking mode, a kernel on one
// host device given a pointer to another device's memory that it has no
// access to fails with ErrIllegalAddress, the fault it would be on a GPU;
// with peer access it runs.
func TestHostKernelPeerAccessChecked(t *testing.T) {
	if err := gg.SetHostDeviceCount(2); err != nil {
		t.Fatal(err)
	}
	defer gg.SetHostDeviceCount(1)
	d0 := must[*gg.Device](t)(gg.Open("host", gg.WithOrdinal(0), gg.WithMemCheck()))
	defer d0.Close()
	fill := &gg.Kernel{Name: "fill", Params: []gg.ParamType{gg.Pointer, gg.Int32}, Go: func(b gg.Block, a gg.Args) {
		x := gg.Slice[uint32](a.Ptr(0), a.Int(1))
		for i := range x {
			x[i] = 3
		}
	}}
	a := must[gg.DevicePtr](t)(d0.Malloc(64))
	for _, granted := range []bool{false, true} {
		d1 := must[*gg.Device](t)(gg.Open("host", gg.WithOrdinal(1), gg.WithMemCheck()))
		if granted {
			ok(t, d1.EnablePeerAccess(d0))
		}
		s1 := must[*gg.Stream](t)(d1.NewStream())
		ok(t, s1.Launch(fill, gg.Dim1(1), gg.Dim1(1), a, 16))
		err := s1.Synchronize()
		if granted {
			ok(t, err)
		} else {
			isCode(t, err, gg.ErrIllegalAddress)
		}
		d1.Close()
	}
	buf := make([]byte, 4)
	ok(t, d0.Memcpy(gg.DtoH(buf, a)))
	if buf[0] != 3 {
		t.Fatalf("the kernel with access did not write: %v", buf)
	}
}

// TestBodyNodeOfAnotherDevice: a conditional body, and a graph nested in
// one, hold only nodes of the conditional node's device; a node of another
// device there is refused at instantiation, naming it, with
// InstantiateMultipleDevicesNotSupported. At the top level it is accepted.
func TestBodyNodeOfAnotherDevice(t *testing.T) {
	d0, d1 := twoHostDevices(t)
	k := gg.KernelParams{Kernel: kA, Grid: one, Block: one}
	for _, where := range []string{"top", "body", "child in body", "nested body"} {
		t.Run(where, func(t *testing.T) {
			g := must[*gg.Graph](t)(d0.NewGraph())
			defer g.Destroy()
			h := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
			cond := must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalIf, Size: 1}))
			body := must[[]*gg.Graph](t)(cond.ConditionalBodies())[0]
			must[*gg.Node](t)(body.AddNode(k))
			var bad *gg.Node
			switch where {
			case "top":
				must[*gg.Node](t)(g.AddNodeOn(d1, k))
			case "body":
				bad = must[*gg.Node](t)(body.AddNodeOn(d1, k))
			case "child in body":
				c := must[*gg.Graph](t)(d0.NewGraph())
				must[*gg.Node](t)(c.AddNodeOn(d1, k))
				ch := must[*gg.Node](t)(body.AddChildGraphNode(c))
				bad = must[[]*gg.Node](t)(must[*gg.Graph](t)(ch.ChildGraph()).Nodes())[0]
			case "nested body":
				h2 := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
				inner := must[*gg.Node](t)(body.AddNode(gg.ConditionalParams{Handle: h2, Type: gg.ConditionalWhile, Size: 1}))
				bad = must[*gg.Node](t)(must[[]*gg.Graph](t)(inner.ConditionalBodies())[0].AddNodeOn(d1, k))
			}
			p := &gg.InstantiateParams{}
			e, err := g.InstantiateWithParams(p)
			if bad == nil {
				ok(t, err)
				ok(t, e.Destroy())
				return
			}
			isCode(t, err, gg.ErrInvalidValue)
			if p.Result != gg.InstantiateMultipleDevicesNotSupported || p.ErrNode != bad {
				t.Fatalf("result %v naming %v, want %v naming %v", p.Result, p.ErrNode, gg.InstantiateMultipleDevicesNotSupported, bad)
			}
		})
	}
}

// TestExecSetParamsHolders: an update of an executable graph's memset or
// memcpy node keeps each side's memory on the device (or the host) that
// held the original's, as cudaGraphExec{Memset,Memcpy}NodeSetParams
// require: another device's memory is refused with ErrInvalidValue, naming
// the node and both holders, and the executable graph keeps its
// parameters; memory of the same device is accepted. The original is the
// node's at instantiation, whatever Node.SetParams changed since.
func TestExecSetParamsHolders(t *testing.T) {
	d0, d1 := twoHostDevices(t)
	const n = 256
	a := must[gg.DevicePtr](t)(d0.Malloc(n))
	a2 := must[gg.DevicePtr](t)(d0.Malloc(n))
	b := must[gg.DevicePtr](t)(d1.Malloc(n))
	b2 := must[gg.DevicePtr](t)(d1.Malloc(n))
	h, h2 := make([]byte, n), make([]byte, n)
	s0 := must[*gg.Stream](t)(d0.NewStream())

	// where adds the node to a new graph of d0: at the top, on device 1,
	// in a child graph or in a conditional body.
	type adder func(g *gg.Graph, p gg.NodeParams) *gg.Node
	top := func(g *gg.Graph, p gg.NodeParams) *gg.Node { return must[*gg.Node](t)(g.AddNode(p)) }
	on1 := func(g *gg.Graph, p gg.NodeParams) *gg.Node { return must[*gg.Node](t)(g.AddNodeOn(d1, p)) }
	child := func(g *gg.Graph, p gg.NodeParams) *gg.Node {
		c := must[*gg.Graph](t)(d0.NewGraph())
		orig := must[*gg.Node](t)(c.AddNode(p))
		ch := must[*gg.Node](t)(g.AddChildGraphNode(c))
		return must[*gg.Node](t)(must[*gg.Graph](t)(ch.ChildGraph()).ClonedNode(orig))
	}
	body := func(g *gg.Graph, p gg.NodeParams) *gg.Node {
		hd := must[gg.ConditionalHandle](t)(g.ConditionalHandleCreate(1, gg.ConditionalAssignDefault))
		cond := must[*gg.Node](t)(g.AddNode(gg.ConditionalParams{Handle: hd, Type: gg.ConditionalIf, Size: 1}))
		return must[*gg.Node](t)(must[[]*gg.Graph](t)(cond.ConditionalBodies())[0].AddNode(p))
	}
	for _, tc := range []struct {
		name     string
		add      adder
		orig, nu gg.NodeParams
		refused  string // what the error says moves, or "" if accepted
	}{
		{"memset on the same device", top, gg.Memset8(a, 1, n), gg.Memset8(a2, 2, n), ""},
		{"memset to another device", top, gg.Memset8(a, 1, n), gg.Memset8(b, 2, n), "destination would move from memory of device 0 to memory of device 1"},
		{"memset from another device", top, gg.Memset8(b, 1, n), gg.Memset8(a, 2, n), "destination would move from memory of device 1 to memory of device 0"},
		{"memset of device 1's memory, other memory of device 1", top, gg.Memset8(b, 1, n), gg.Memset8(b2, 2, n), ""},
		{"memset node of device 1", on1, gg.Memset8(a, 1, n), gg.Memset8(b, 2, n), "destination would move from memory of device 0 to memory of device 1"},
		{"memset in a child graph", child, gg.Memset8(a, 1, n), gg.Memset8(b, 2, n), "destination would move"},
		{"memset in a conditional body", body, gg.Memset8(a, 1, n), gg.Memset8(b, 2, n), "destination would move"},
		{"copy on the same devices", top, gg.DtoD(a, b, n), gg.DtoD(a2, b2, n), ""},
		{"copy's destination to another device", top, gg.DtoD(a, a2, n), gg.DtoD(b, a2, n), "copy's destination would move from memory of device 0 to memory of device 1"},
		{"copy's source to another device", top, gg.DtoD(a, a2, n), gg.DtoD(a, b, n), "copy's source would move from memory of device 0 to memory of device 1"},
		{"copy's sides swap devices", top, gg.DtoD(a, b, n), gg.DtoD(b2, a2, n), "copy's destination would move from memory of device 0 to memory of device 1"},
		{"copy from the host, other host memory", top, gg.HtoD(a, h), gg.HtoD(a2, h2), ""},
		{"copy from the host to another device", top, gg.HtoD(a, h), gg.HtoD(b, h2), "copy's destination would move"},
		{"copy to the host from another device", top, gg.DtoH(h, a), gg.DtoH(h2, b), "copy's source would move from memory of device 0 to memory of device 1"},
		{"copy's source from a device to the host", top, gg.DtoD(a, a2, n), gg.HtoD(a, h), "copy's source would move from memory of device 0 to host memory"},
		{"copy in a child graph", child, gg.DtoD(a, a2, n), gg.DtoD(a, b, n), "copy's source would move"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := must[*gg.Graph](t)(d0.NewGraph())
			defer g.Destroy()
			nd := tc.add(g, tc.orig)
			e := must[*gg.Exec](t)(g.Instantiate(0))
			defer e.Destroy()
			err := e.SetParams(nd, tc.nu)
			if tc.refused == "" {
				ok(t, err)
				return
			}
			isCode(t, err, gg.ErrInvalidValue)
			var ge *gg.Error
			if !errors.As(err, &ge) || ge.Node != nd || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("error %v, want one naming %v and saying %q", err, nd, tc.refused)
			}
			// The executable graph kept the original: a memset still sets
			// its own destination.
			if ms, isSet := tc.orig.(gg.MemsetParams); isSet {
				dev := d0
				if ms.Dst == b {
					dev = d1
				}
				ok(t, dev.Memset(gg.Memset8(ms.Dst, 0, n)))
				ok(t, e.Launch(s0))
				ok(t, s0.Synchronize())
				got := make([]byte, n)
				ok(t, dev.Memcpy(gg.DtoH(got, ms.Dst)))
				if got[n-1] != 1 {
					t.Fatalf("after the refused update, the launch set %d at the original destination, want 1", got[n-1])
				}
			}
		})
	}

	t.Run("the original is the instantiated one", func(t *testing.T) {
		g := must[*gg.Graph](t)(d0.NewGraph())
		defer g.Destroy()
		nd := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(a, 1, n)))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		defer e.Destroy()
		ok(t, nd.SetParams(gg.Memset8(b, 1, n))) // the graph's node only
		ok(t, e.SetParams(nd, gg.Memset8(a2, 2, n)))
		isCode(t, e.SetParams(nd, gg.Memset8(b2, 2, n)), gg.ErrInvalidValue)
	})
}

// TestUpdateHoldersMatrixIsTheDrivers: the table the conformance scenario
// ExecUpdateHoldersMatrix runs, backendtest.UpdateHoldersMatrix, is the
// driver's answers as docs/driver-multidev.txt has them: its sections
// "per-node and whole-graph updates of memset and memcpy nodes", line for
// line.
func TestUpdateHoldersMatrixIsTheDrivers(t *testing.T) {
	b, err := os.ReadFile("docs/driver-multidev.txt")
	if err != nil {
		t.Fatal(err)
	}
	var file []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "==") {
			in = strings.HasPrefix(l, "== per-node and whole-graph updates of memset and memcpy nodes,")
		}
		if in && strings.TrimSpace(l) != "" {
			file = append(file, l)
		}
	}
	table := strings.Split(strings.TrimSpace(backendtest.UpdateHoldersMatrix), "\n")
	if len(file) == 0 || !slices.Equal(file, table) {
		t.Fatalf("backendtest.UpdateHoldersMatrix (%d lines) is not the file's sections (%d lines)", len(table), len(file))
	}
}

// TestExecUpdateHoldersPeer: the peer exception of the rule for moving a
// memcpy node's destination to another device's memory
// (backend.CheckMemoryMove; docs/driver-multidev.txt measures it with
// access both ways) follows EnablePeerAccess and DisablePeerAccess, per
// node and by whole-graph update: access one way is not enough, both ways
// lets the move be, access disabled again refuses it. The refusals say
// what is missing.
func TestExecUpdateHoldersPeer(t *testing.T) {
	d0, d1 := twoHostDevices(t)
	const n = 256
	a := must[gg.DevicePtr](t)(d0.Malloc(n))
	a2 := must[gg.DevicePtr](t)(d0.Malloc(n))
	b := must[gg.DevicePtr](t)(d1.Malloc(n))
	g := must[*gg.Graph](t)(d0.NewGraph())
	defer g.Destroy()
	nd := must[*gg.Node](t)(g.AddNode(gg.DtoD(a2, a, n)))
	g2 := must[*gg.Graph](t)(d0.NewGraph())
	defer g2.Destroy()
	nd2 := must[*gg.Node](t)(g2.AddNode(gg.DtoD(b, a, n)))
	check := func(what string, taken bool) {
		t.Helper()
		e := must[*gg.Exec](t)(g.Instantiate(0))
		defer e.Destroy()
		err := e.SetParams(nd, gg.DtoD(b, a, n))
		e2 := must[*gg.Exec](t)(g.Instantiate(0))
		defer e2.Destroy()
		info, err2 := e2.Update(g2)
		if taken {
			if err != nil || err2 != nil {
				t.Fatalf("%s: per node %v, whole graph %v; want both taken", what, err, err2)
			}
			return
		}
		const why = "only with peer access both ways between devices 0 and 1"
		isCode(t, err, gg.ErrInvalidValue)
		isCode(t, err2, gg.ErrGraphExecUpdateFailure)
		var ge *gg.Error
		if !errors.As(err, &ge) || ge.Node != nd || !strings.Contains(err.Error(), why) {
			t.Fatalf("%s: per node %v, want it naming %v and saying %q", what, err, nd, why)
		}
		if info.Result != gg.UpdateErrorParametersChanged || info.ErrorNode != nd2 || !strings.Contains(err2.Error(), why) {
			t.Fatalf("%s: whole graph %v (%v naming %v), want %v naming %v and saying %q", what, err2, info.Result, info.ErrorNode, gg.UpdateErrorParametersChanged, nd2, why)
		}
	}
	check("no access", false)
	ok(t, d0.EnablePeerAccess(d1))
	check("access from 0 to 1", false)
	ok(t, d1.EnablePeerAccess(d0))
	check("access both ways", true)
	ok(t, d0.DisablePeerAccess(d1))
	check("access from 1 to 0, 0 to 1 disabled", false)
	ok(t, d1.DisablePeerAccess(d0))
}

// TestExecSetParamsHoldersOneDeviceOpen: an executable graph instantiated
// while its device was the only one open keeps the memory of its memset
// nodes on it, once another device is open too.
func TestExecSetParamsHoldersOneDeviceOpen(t *testing.T) {
	ok(t, gg.SetHostDeviceCount(2))
	t.Cleanup(func() { gg.SetHostDeviceCount(1) })
	d0 := must[*gg.Device](t)(gg.Open("host"))
	defer d0.Close()
	a := must[gg.DevicePtr](t)(d0.Malloc(64))
	g := must[*gg.Graph](t)(d0.NewGraph())
	defer g.Destroy()
	nd := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(a, 1, 64)))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	defer e.Destroy()
	d1 := must[*gg.Device](t)(gg.Open("host", gg.WithOrdinal(1)))
	defer d1.Close()
	b := must[gg.DevicePtr](t)(d1.Malloc(64))
	isCode(t, e.SetParams(nd, gg.Memset8(b, 2, 64)), gg.ErrInvalidValue)
	ok(t, e.SetParams(nd, gg.Memset8(a, 2, 64)))
}

// TestDeviceGraphOneDevice: a device graph's nodes all run on its device
// (the CUDA programming guide's device graph requirements): a node of
// another device is refused at instantiation for device launch, with
// InstantiateMultipleDevicesNotSupported; the graph instantiates for host
// launch.
func TestDeviceGraphOneDevice(t *testing.T) {
	d0, d1 := twoHostDevices(t)
	g := must[*gg.Graph](t)(d0.NewGraph())
	defer g.Destroy()
	k := gg.KernelParams{Kernel: kA, Grid: one, Block: one}
	a := must[*gg.Node](t)(g.AddNode(k))
	b := must[*gg.Node](t)(g.AddNodeOn(d1, k, a))
	p := &gg.InstantiateParams{Flags: gg.InstantiateDeviceLaunch}
	_, err := g.InstantiateWithParams(p)
	isCode(t, err, gg.ErrInvalidValue)
	if p.Result != gg.InstantiateMultipleDevicesNotSupported || p.ErrNode != b {
		t.Fatalf("result %v naming %v, want %v naming %v", p.Result, p.ErrNode, gg.InstantiateMultipleDevicesNotSupported, b)
	}
	e := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, e.Destroy())
}
