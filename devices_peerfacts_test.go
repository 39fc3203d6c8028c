package gpugraph_test

import (
	"bufio"
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestHostPeerFacts checks the host backend against the driver's measured
// answers about peer access in docs/driver-peer.txt (tools/probe/peer.cu on
// two H200s, driver 580). Each row names a fact of that file (its left
// column) and asserts what the driver answered (a part of its right
// column); the first subtest checks that every row's fact and answer are in
// the file and that every fact of the file is a row or is listed in
// peerFactsNotApplicable with the reason.
//
// Kernel reads run on host devices opened WithMemCheck, where the driver's
// fault (cudaErrorIllegalAddress at synchronize) is ErrIllegalAddress at the
// Synchronize, and "ok" means the kernel read the values (4096 ints, filled
// as base + 3i) correctly. Every row opens fresh devices, as the probe ran
// each kernel read in a child process: a fault is sticky.
//
// Differences from the driver, asserted as gpugraph's answers:
//
//   - "B {} at A {1 RW}'s reused address": the driver maps a reused address
//     for every allocation that used it, so device 1's kernel reads B. The
//     checking mode checks each allocation's own access and fails the read
//     with ErrIllegalAddress, because relying on the extra mapping is a
//     program error (CUDA guide, graph memory nodes, peer access). Without
//     the checking mode the host reads it as the driver does. Both are
//     tested.
//   - "alloc node on 1 (device 0 current), no descriptor": the driver
//     accepts an alloc node resident on device 1 in a graph made with
//     device 0 current; gpugraph refuses an alloc node of another device
//     than its graph's (ErrNotSupported, both backends): graph memory is
//     accounted per graph device (GraphMemStats, TrimGraphMem, the stream's
//     physical memory), so memory nodes stay their graph's device's.
//   - "cudaMemPoolCreate(resident on 1), device 0 current": the driver (and
//     so the cuda backend) accepts it; the host backend refuses a pool
//     resident on another device than the Device it is created from
//     (ErrNotSupported). The pool of device 1 made from device 1 is
//     accepted on both.
//
// The probe captured the reader of "alloc node ..., reader captured from a
// stream of 1" with cudaStreamBeginCaptureToGraph(stream of 1, graph made
// with device 0 current), which the driver accepts. gpugraph's
// BeginCaptureToGraph refuses a graph of another device on host
// (ErrInvalidValue), so here the stream of device 1 joins the capture into
// device 0's graph by a fork (an event recorded in a stream of device 0),
// and the reader is captured from it: the same graph, a kernel node of
// device 1 after the fill.
func TestHostPeerFacts(t *testing.T) {
	if err := gg.SetHostDeviceCount(2); err != nil {
		t.Fatal(err)
	}
	defer gg.SetHostDeviceCount(1)
	t.Run("every fact of docs/driver-peer.txt is a row or not applicable", func(t *testing.T) {
		checkPeerFactsCoverage(t, peerFactRows)
	})
	for _, r := range peerFactRows {
		t.Run(strings.TrimSpace(r.line)+" => "+r.driver, r.run)
	}
}

// peerFactsNotApplicable are the facts of docs/driver-peer.txt that
// gpugraph's API cannot ask, with the reason.
var peerFactsNotApplicable = map[string]string{
	"cudaDeviceEnablePeerAccess(1, flags 1), device 0": "Device.EnablePeerAccess has no flags argument",
	"alloc node on 0, {1 ReadOnly}":                    "MemAccessDesc grants read-write access only: read-only cannot be expressed",
	"alloc node on 0, {1 None}":                        "MemAccessDesc grants read-write access only: none is no descriptor",

	// gpugraph has no cuMemGetAccess nor pointer-attribute query, and the
	// file says neither tells a graph or pool allocation's mappings: the
	// kernel reads of the last section are the ground truth, and are rows.
	"then cuMemGetAccess(device 1, cudaMalloc of 0)":   "no cuMemGetAccess in gpugraph",
	"then cuMemGetAccess(device 0, cudaMalloc of 1)":   "no cuMemGetAccess in gpugraph",
	"cuMemGetAccess(device 1, allocation of it)":       "no cuMemGetAccess in gpugraph",
	"cuMemGetAccess(device 0, allocation of it)":       "no cuMemGetAccess in gpugraph",
	"cuMemGetAccess(device 1, allocation made before)": "no cuMemGetAccess in gpugraph (the pool's access itself is a row)",
	"cuMemGetAccess(device 0, cudaMalloc memory of 0)": "no cuMemGetAccess in gpugraph",
	"cuMemGetAccess(device 0, the allocation)":         "no cuMemGetAccess nor pointer attribute in gpugraph",
	"cuMemGetAccess(device 1, the allocation)":         "no cuMemGetAccess nor pointer attribute in gpugraph",
	"cuMemGetAccess(device 1, B) after the launch":     "no cuMemGetAccess in gpugraph; the kernel read of B is a row",
	"cuMemGetAccess(device 0, B)":                      "no cuMemGetAccess in gpugraph",
	"launched: cuMemGetAccess(device 1, capture 1's)":  "no cuMemGetAccess in gpugraph; the kernel read is a row",
	"launched: cuMemGetAccess(device 1, capture 2's)":  "no cuMemGetAccess in gpugraph; the kernel read is a row",

	"summary": "the probe's tally, not a fact",
}

// peerFactRow is a fact of docs/driver-peer.txt: line is its left column,
// driver a part of the driver's answer, run checks gpugraph against it.
type peerFactRow struct {
	line   string
	driver string
	run    func(t *testing.T)
}

var peerFactRows = []peerFactRow{
	// == peer access ==
	{"cudaGetDeviceCount", "2", func(t *testing.T) {
		if n := must[int](t)(gg.DeviceCount("host")); n != 2 {
			t.Fatalf("DeviceCount = %d, want 2", n)
		}
	}},
	{"cudaDeviceCanAccessPeer(0, 1)", "1 (cudaSuccess)", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		if !must[bool](t)(d0.CanAccessPeer(d1)) {
			t.Fatal("device 0 cannot access device 1")
		}
	}},
	{"cudaDeviceCanAccessPeer(1, 0)", "1 (cudaSuccess)", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		if !must[bool](t)(d1.CanAccessPeer(d0)) {
			t.Fatal("device 1 cannot access device 0")
		}
	}},
	{"cudaDeviceCanAccessPeer(0, 0)", "0 (cudaSuccess)", func(t *testing.T) {
		d0, _ := peerDevs(t)
		if must[bool](t)(d0.CanAccessPeer(d0)) {
			t.Fatal("device 0 is its own peer")
		}
	}},
	{"cudaDeviceDisablePeerAccess(1) without enabling", "cudaErrorPeerAccessNotEnabled", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		isCode(t, d0.DisablePeerAccess(d1), gg.ErrPeerAccessNotEnabled)
	}},
	{"cudaDeviceEnablePeerAccess(0), device 0 (itself)", "cudaErrorPeerAccessUnsupported", func(t *testing.T) {
		d0, _ := peerDevs(t)
		isCode(t, d0.EnablePeerAccess(d0), gg.ErrPeerAccessUnsupported)
	}},
	{"cudaDeviceEnablePeerAccess(1), device 0", "cudaSuccess", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		ok(t, d0.EnablePeerAccess(d1))
	}},
	{"cudaDeviceEnablePeerAccess(1) twice", "cudaErrorPeerAccessAlreadyEnabled", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		ok(t, d0.EnablePeerAccess(d1))
		isCode(t, d0.EnablePeerAccess(d1), gg.ErrPeerAccessAlreadyEnabled)
	}},
	{"  then cudaDeviceDisablePeerAccess(0), device 1", "cudaErrorPeerAccessNotEnabled", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		ok(t, d0.EnablePeerAccess(d1))
		isCode(t, d1.DisablePeerAccess(d0), gg.ErrPeerAccessNotEnabled) // access is one way
	}},
	{"cudaDeviceDisablePeerAccess(1), device 0", "cudaSuccess", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		ok(t, d0.EnablePeerAccess(d1))
		ok(t, d0.DisablePeerAccess(d1))
	}},
	{"cudaDeviceDisablePeerAccess(1) again", "cudaErrorPeerAccessNotEnabled", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		ok(t, d0.EnablePeerAccess(d1))
		ok(t, d0.DisablePeerAccess(d1))
		isCode(t, d0.DisablePeerAccess(d1), gg.ErrPeerAccessNotEnabled)
	}},

	// == copies and events between devices, no peer access ==
	{"cudaMemcpyPeerAsync 0 -> 1 (stream of 0)", "cudaSuccess, synchronize cudaSuccess, ok, 4096 values checked", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		a, b := peerFilled(t, d0, 100), must[gg.DevicePtr](t)(d1.Malloc(peerBytes))
		s0 := must[*gg.Stream](t)(d0.NewStream())
		ok(t, s0.Memcpy(gg.DtoD(b, a, 4*peerN)))
		ok(t, s0.Synchronize())
		peerCheck(t, d1, b, 100)
	}},
	{"cudaMemcpy(Default) 0 -> 1, device 0 current", "cudaSuccess, ok, 4096 values checked", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		a, b := peerFilled(t, d0, 150), must[gg.DevicePtr](t)(d1.Malloc(peerBytes))
		ok(t, d0.Memcpy(gg.DtoD(b, a, 4*peerN)))
		peerCheck(t, d1, b, 150)
	}},
	{"cudaMemcpyAsync(Default) 1 -> 0 (stream of 0)", "cudaSuccess, synchronize cudaSuccess, ok, 4096 values checked", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		b, a := peerFilled(t, d1, 200), must[gg.DevicePtr](t)(d0.Malloc(peerBytes))
		s0 := must[*gg.Stream](t)(d0.NewStream())
		ok(t, s0.Memcpy(gg.DtoD(a, b, 4*peerN)))
		ok(t, s0.Synchronize())
		peerCheck(t, d0, a, 200)
	}},
	{"memcpy node 0 -> 1 (cudaGraphAddMemcpyNode1D, Default)",
		"add cudaSuccess, instantiate cudaSuccess, launch cudaSuccess, synchronize cudaSuccess, ok, 4096 values checked", func(t *testing.T) {
			d0, d1 := peerDevs(t)
			a, b := peerFilled(t, d0, 300), must[gg.DevicePtr](t)(d1.Malloc(peerBytes))
			g := must[*gg.Graph](t)(d0.NewGraph())
			must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(b, a, 4*peerN)))
			x := must[*gg.Exec](t)(g.Instantiate(0))
			s0 := must[*gg.Stream](t)(d0.NewStream())
			ok(t, x.Launch(s0))
			ok(t, s0.Synchronize())
			peerCheck(t, d1, b, 300)
			ok(t, x.Destroy())
		}},
	{"cudaStreamWaitEvent(stream of 1, event of 0)", "cudaSuccess, synchronize cudaSuccess", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		s0, s1 := must[*gg.Stream](t)(d0.NewStream()), must[*gg.Stream](t)(d1.NewStream())
		ev := must[*gg.Event](t)(d0.NewEvent(0))
		ok(t, s0.Record(ev))
		ok(t, s1.Wait(ev))
		ok(t, s1.Synchronize())
	}},
	{"cudaEventRecord(event of 0, stream of 1)", "cudaErrorInvalidResourceHandle", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		s1 := must[*gg.Stream](t)(d1.NewStream())
		ev := must[*gg.Event](t)(d0.NewEvent(0))
		isCode(t, s1.Record(ev), gg.ErrInvalidResourceHandle)
	}},

	// == memory pools ==
	{"cudaMemPoolGetAccess(pool of 0, device 1), new pool", "0 (none)", func(t *testing.T) {
		d0, _ := peerDevs(t)
		peerAccessIs(t, peerPool(t, d0), 1, gg.AccessNone)
	}},
	// The line's cuMemGetAccess part has no gpugraph query.
	{"with peer access 1 -> 0: device 1's pool access", "0 (none)", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		pool := peerPool(t, d0)
		ok(t, d1.EnablePeerAccess(d0))
		peerAccessIs(t, pool, 1, gg.AccessNone) // peer access is not a pool's access
	}},
	{"cudaMemPoolSetAccess(device 1, ReadWrite)", "cudaSuccess, now 3 (readwrite)", func(t *testing.T) {
		d0, _ := peerDevs(t)
		pool := peerPool(t, d0)
		ok(t, pool.SetAccess(1, gg.AccessReadWrite))
		peerAccessIs(t, pool, 1, gg.AccessReadWrite)
	}},
	{"cudaMemPoolSetAccess(device 1, ReadOnly)", "cudaErrorNotSupported, now 3 (readwrite)", func(t *testing.T) {
		d0, _ := peerDevs(t)
		pool := peerPool(t, d0)
		ok(t, pool.SetAccess(1, gg.AccessReadWrite))
		isCode(t, pool.SetAccess(1, gg.AccessRead), gg.ErrNotSupported)
		peerAccessIs(t, pool, 1, gg.AccessReadWrite)
	}},
	{"cudaMemPoolSetAccess(device 1, None)", "cudaSuccess, now 0 (none)", func(t *testing.T) {
		d0, _ := peerDevs(t)
		pool := peerPool(t, d0)
		ok(t, pool.SetAccess(1, gg.AccessReadWrite))
		ok(t, pool.SetAccess(1, gg.AccessNone))
		peerAccessIs(t, pool, 1, gg.AccessNone)
	}},
	{"cudaMemPoolSetAccess(device 0 = resident, None)", "cudaErrorInvalidDevice", func(t *testing.T) {
		d0, _ := peerDevs(t)
		pool := peerPool(t, d0)
		isCode(t, pool.SetAccess(0, gg.AccessNone), gg.ErrInvalidDevice)
		peerAccessIs(t, pool, 0, gg.AccessReadWrite)
	}},
	{"cudaMemPoolSetAccess(device count, ReadWrite)", "cudaErrorInvalidDevice", func(t *testing.T) {
		d0, _ := peerDevs(t)
		isCode(t, peerPool(t, d0).SetAccess(2, gg.AccessReadWrite), gg.ErrInvalidDevice)
	}},
	// Differs on host (see the test's comment): the pool of device 1 is
	// made from device 1.
	{"cudaMemPoolCreate(resident on 1), device 0 current", "cudaSuccess", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		p := must[*gg.MemPool](t)(d1.NewMemPool(gg.MemPoolProps{Location: 1}))
		ok(t, p.Destroy())
		_, err := d0.NewMemPool(gg.MemPoolProps{Location: 1})
		isCode(t, err, gg.ErrNotSupported) // the driver: cudaSuccess
	}},

	// == graph memory nodes with access descriptors ==
	{"alloc node on 0, no descriptor", "cudaSuccess, then resident on 0, 0 descriptor(s)", func(t *testing.T) {
		peerAllocNode(t, 0, nil)
	}},
	{"alloc node on 0, {1 ReadWrite}", "cudaSuccess, then resident on 0, 1 descriptor(s): device 1 readwrite", func(t *testing.T) {
		peerAllocNode(t, 0, []gg.MemAccessDesc{{Device: 1}})
	}},
	{"alloc node on 0, {0 ReadWrite} (the resident device)", "cudaSuccess, then resident on 0, 1 descriptor(s): device 0 readwrite", func(t *testing.T) {
		peerAllocNode(t, 0, []gg.MemAccessDesc{{Device: 0}})
	}},
	{"alloc node on 0, {0 ReadWrite, 1 ReadWrite}",
		"cudaSuccess, then resident on 0, 2 descriptor(s): device 0 readwrite, device 1 readwrite", func(t *testing.T) {
			peerAllocNode(t, 0, []gg.MemAccessDesc{{Device: 0}, {Device: 1}})
		}},
	{"alloc node on 0, {1 ReadWrite, 1 ReadWrite}",
		"cudaSuccess, then resident on 0, 2 descriptor(s): device 1 readwrite, device 1 readwrite", func(t *testing.T) {
			peerAllocNode(t, 0, []gg.MemAccessDesc{{Device: 1}, {Device: 1}})
		}},
	{"alloc node on 0, {device count ReadWrite}", "cudaErrorInvalidDevice", func(t *testing.T) {
		d0, _ := peerDevs(t)
		_, _, err := must[*gg.Graph](t)(d0.NewGraph()).AddMemAllocNode(gg.MemAllocParams{Size: peerBytes, Access: []gg.MemAccessDesc{{Device: 2}}})
		isCode(t, err, gg.ErrInvalidDevice)
	}},
	// Differs from the driver, on both backends (see the test's comment):
	// graph memory is accounted per graph device.
	{"alloc node on 1 (device 0 current), no descriptor", "cudaSuccess", func(t *testing.T) {
		d0, _ := peerDevs(t)
		_, _, err := must[*gg.Graph](t)(d0.NewGraph()).AddMemAllocNode(gg.MemAllocParams{Size: peerBytes, Location: 1})
		isCode(t, err, gg.ErrNotSupported)
	}},
	// The driver maps 32 MiB where the host maps 2 MiB chunks (the
	// footprint's granularity, docs/driver-footprint.txt's matter): the
	// rows check which device's graph memory an allocation with access
	// for device 1 counts on, not how much.
	{"graph of 0: alloc {1 ReadWrite}, fill; instantiated",
		"device 0 used 0 MiB reserved 0 MiB, device 1 used 0 MiB reserved 0 MiB", func(t *testing.T) {
			d0, d1 := peerDevs(t)
			peerAllocFill(t, d0, []gg.MemAccessDesc{{Device: 1}})
			peerGraphMem(t, d0, false)
			peerGraphMem(t, d1, false)
		}},
	{"  launched (allocation left live)",
		"cudaSuccess, synchronize cudaSuccess; device 0 used 32 MiB reserved 32 MiB, device 1 used 0 MiB reserved 0 MiB", func(t *testing.T) {
			d0, d1 := peerDevs(t)
			x, _ := peerAllocFill(t, d0, []gg.MemAccessDesc{{Device: 1}})
			s0 := must[*gg.Stream](t)(d0.NewStream())
			ok(t, x.Launch(s0))
			ok(t, s0.Synchronize())
			peerGraphMem(t, d0, true)
			peerGraphMem(t, d1, false)
		}},
	// The line's cuMemGetAccess part has no gpugraph query.
	{"graph of 0: alloc with no descriptor, launched", "cudaSuccess/cudaSuccess", func(t *testing.T) {
		d0, _ := peerDevs(t)
		x, p := peerAllocFill(t, d0, nil)
		s0 := must[*gg.Stream](t)(d0.NewStream())
		ok(t, x.Launch(s0))
		ok(t, s0.Synchronize())
		peerCheck(t, d0, p, 500)
	}},

	// == an address reused by allocations with different access ==
	{"graph: A {1 ReadWrite}, fill, free A, then B {}", "B reuses A's address", func(t *testing.T) {
		d0, _ := peerDevs(t)
		a, b := peerReuse(t, d0)
		if a != b {
			t.Fatalf("A at %#x, B at %#x: B does not reuse A's address", a, b)
		}
	}},
	{"  graph memory", "device 0 used 32 MiB reserved 32 MiB, device 1 used 0 MiB reserved 0 MiB", func(t *testing.T) {
		d0, d1 := peerDevs(t)
		peerReuse(t, d0)
		peerGraphMem(t, d0, true)
		peerGraphMem(t, d1, false)
	}},

	// == stream capture from a pool whose access changes ==
	{"capture 1: cudaMallocFromPoolAsync, pool access {0}", "resident on 0, 0 descriptor(s)", func(t *testing.T) {
		d0, _ := peerDevs(t)
		peerAllocIs(t, peerCaptures(t, d0).before1, nil)
	}},
	{"cudaMemPoolSetAccess(pool, device 1 ReadWrite)", "cudaSuccess", func(t *testing.T) {
		d0, _ := peerDevs(t)
		ok(t, peerCaptures(t, d0).setAccess)
	}},
	{"  capture 1's alloc node after that", "resident on 0, 0 descriptor(s)", func(t *testing.T) {
		d0, _ := peerDevs(t)
		peerAllocIs(t, peerAllocOf(t, peerCaptures(t, d0).g1), nil)
	}},
	{"capture 2: the same, after the access change", "resident on 0, 1 descriptor(s): device 1 readwrite", func(t *testing.T) {
		d0, _ := peerDevs(t)
		peerAllocIs(t, peerAllocOf(t, peerCaptures(t, d0).g2), []gg.MemAccessDesc{{Device: 1}})
	}},

	// == kernels on device 1 reading device 0's memory ==
	// tools/probe/peer.cu's children, in order.
	{"cudaMalloc memory, no peer access", "cudaErrorIllegalAddress at synchronize", func(t *testing.T) { // read-no-peer
		d0, d1 := peerDevs(t)
		peerFault(t, peerRead(t, d1, peerFilled(t, d0, 7), 7))
	}},
	{"cudaMalloc memory, peer access 1 -> 0", "ok, 4096 values checked", func(t *testing.T) { // read-peer
		d0, d1 := peerDevs(t)
		ok(t, d1.EnablePeerAccess(d0))
		ok(t, peerRead(t, d1, peerFilled(t, d0, 7), 7))
	}},
	{"device 0 reads 1's, access 0 -> 1 only", "ok, 4096 values checked", func(t *testing.T) { // oneway-forward
		d0, d1 := peerDevs(t)
		ok(t, d0.EnablePeerAccess(d1))
		ok(t, peerRead(t, d0, peerFilled(t, d1, 9), 9))
	}},
	{"device 1 reads 0's, access 0 -> 1 only", "cudaErrorIllegalAddress at synchronize", func(t *testing.T) { // oneway-reverse
		d0, d1 := peerDevs(t)
		ok(t, d0.EnablePeerAccess(d1))
		peerFault(t, peerRead(t, d1, peerFilled(t, d0, 9), 9))
	}},
	{"memset by device 1 of 0's memory, no peer access", "issue cudaErrorInvalidValue, synchronize cudaSuccess", func(t *testing.T) { // memset-no-peer
		d0, d1 := peerDevs(t)
		p := peerFilled(t, d0, 1)
		s1 := must[*gg.Stream](t)(d1.NewStream())
		isCode(t, s1.Memset(gg.Memset8(p, 7, peerBytes)), gg.ErrInvalidValue)
		ok(t, s1.Synchronize())
		peerCheck(t, d0, p, 1) // nothing was set
	}},
	{"memset by device 1 of 0's memory, peer access 1 -> 0", "issue cudaSuccess, synchronize cudaSuccess", func(t *testing.T) { // memset-peer
		d0, d1 := peerDevs(t)
		ok(t, d1.EnablePeerAccess(d0))
		p := peerFilled(t, d0, 1)
		s1 := must[*gg.Stream](t)(d1.NewStream())
		ok(t, s1.Memset(gg.Memset8(p, 7, peerBytes)))
		ok(t, s1.Synchronize())
		peerSetTo(t, d0, p, 7)
	}},
	{"memset node of device 1 on 0's memory, peer access 1 -> 0", "add cudaSuccess, instantiate cudaSuccess, launch cudaSuccess, synchronize cudaSuccess; written", func(t *testing.T) { // memset-node-peer
		d0, d1 := peerDevs(t)
		ok(t, d1.EnablePeerAccess(d0))
		peerMemsetNode(t, d0, d1)
	}},
	{"memset node of device 1 on 0's memory, no peer access", "add cudaSuccess, instantiate cudaSuccess, launch cudaSuccess, synchronize cudaSuccess; written", func(t *testing.T) { // memset-node-no-peer
		d0, d1 := peerDevs(t)
		peerMemsetNode(t, d0, d1)
	}},
	{"pool memory, peer access 1 -> 0, no pool access", "cudaErrorIllegalAddress at synchronize", func(t *testing.T) { // pool-peer-enabled
		d0, d1 := peerDevs(t)
		ok(t, d1.EnablePeerAccess(d0))
		peerFault(t, peerRead(t, d1, peerPoolFilled(t, d0, peerPool(t, d0), 11), 11))
	}},
	{"pool memory, pool access {1 ReadWrite}", "ok, 4096 values checked", func(t *testing.T) { // pool-access
		d0, d1 := peerDevs(t)
		pool := peerPool(t, d0)
		ok(t, pool.SetAccess(1, gg.AccessReadWrite))
		ok(t, peerRead(t, d1, peerPoolFilled(t, d0, pool, 13), 13))
	}},
	{"alloc node {1 RW}, reader node added with device 1 current", "ok, 4096 values checked", func(t *testing.T) { // node-explicit
		d0, d1 := peerDevs(t)
		ok(t, peerNodeGraph(t, d0, d1, []gg.MemAccessDesc{{Device: 1}}, false))
	}},
	{"alloc node {1 RW}, reader captured from a stream of 1", "ok, 4096 values checked", func(t *testing.T) { // node-captured
		d0, d1 := peerDevs(t)
		ok(t, peerNodeGraph(t, d0, d1, []gg.MemAccessDesc{{Device: 1}}, true))
	}},
	{"alloc node {}, reader captured from a stream of 1", "cudaErrorIllegalAddress at synchronize", func(t *testing.T) { // node-no-access
		d0, d1 := peerDevs(t)
		peerFault(t, peerNodeGraph(t, d0, d1, nil, true))
	}},
	{"B {} at A {1 RW}'s reused address", "B at A's address; ok, 4096 values checked", func(t *testing.T) { // reuse-extra
		for _, check := range []bool{true, false} {
			name := "without the checking mode: device 1 reads B, as the driver"
			if check {
				name = "checking mode: ErrIllegalAddress, B's own access (a deliberate difference)"
			}
			t.Run(name, func(t *testing.T) {
				var opts []gg.Option
				if check {
					opts = append(opts, gg.WithMemCheck())
				}
				d0, d1 := peerDevsWith(t, opts...)
				a, b := peerReuse(t, d0)
				if a != b {
					t.Fatalf("A at %#x, B at %#x: B does not reuse A's address", a, b)
				}
				err := peerRead(t, d1, b, 2000)
				if check {
					peerFault(t, err)
				} else {
					ok(t, err)
				}
			})
		}
	}},
	{"captured before the pool's access for 1", "cudaErrorIllegalAddress at synchronize", func(t *testing.T) { // capture-before
		d0, d1 := peerDevs(t)
		c := peerCaptures(t, d0)
		c.launch(t)
		peerFault(t, peerRead(t, d1, c.p1, 3000))
	}},
	{"captured after the pool's access for 1", "ok, 4096 values checked", func(t *testing.T) { // capture-after
		d0, d1 := peerDevs(t)
		c := peerCaptures(t, d0)
		c.launch(t)
		ok(t, peerRead(t, d1, c.p2, 4000))
	}},
}

// The probe's sizes: kernels write and read peerN ints of allocations of
// peerBytes.
const (
	peerN     = 4096
	peerBytes = 2 << 20
)

// peerFillKernel is the probe's fill: p[i] = base + 3i.
var peerFillKernel = &gg.Kernel{
	Name:   "peerfacts_fill",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n, base := a.Int(1), a.Int(2)
		p := gg.Slice[int32](a.Ptr(0), n)
		for t := 0; t < b.Dim.X; t++ {
			for i := b.Idx.X*b.Dim.X + t; i < n; i += b.GridDim.X * b.Dim.X {
				p[i] = int32(base + 3*i)
			}
		}
	},
	CUDA: `extern "C" __global__ void peerfacts_fill(int* p, int n, int base) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = base + 3 * i;
}`,
}

// peerCopyKernel is the probe's copyk: dst[i] = src[i].
var peerCopyKernel = &gg.Kernel{
	Name:   "peerfacts_copyk",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		src, dst := gg.Slice[int32](a.Ptr(0), n), gg.Slice[int32](a.Ptr(1), n)
		for t := 0; t < b.Dim.X; t++ {
			for i := b.Idx.X*b.Dim.X + t; i < n; i += b.GridDim.X * b.Dim.X {
				dst[i] = src[i]
			}
		}
	},
	CUDA: `extern "C" __global__ void peerfacts_copyk(const int* src, int* dst, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}`,
}

func peerFillParams(p gg.DevicePtr, base int) gg.KernelParams {
	return gg.KernelParams{Kernel: peerFillKernel, Grid: gg.Dim1(8), Block: gg.Dim1(256), Args: []any{p, peerN, base}}
}

func peerCopyParams(src, dst gg.DevicePtr) gg.KernelParams {
	return gg.KernelParams{Kernel: peerCopyKernel, Grid: gg.Dim1(8), Block: gg.Dim1(256), Args: []any{src, dst, peerN}}
}

// peerDevs opens fresh host devices 0 and 1 in the checking mode, closed
// when the test ends.
func peerDevs(t *testing.T) (*gg.Device, *gg.Device) {
	t.Helper()
	return peerDevsWith(t, gg.WithMemCheck())
}

func peerDevsWith(t *testing.T, opts ...gg.Option) (*gg.Device, *gg.Device) {
	t.Helper()
	open := func(i int) *gg.Device {
		d, err := gg.Open("host", append([]gg.Option{gg.WithOrdinal(i)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	return open(0), open(1)
}

// peerFilled returns memory of d (Malloc) holding fill(base).
func peerFilled(t *testing.T, d *gg.Device, base int) gg.DevicePtr {
	t.Helper()
	p := must[gg.DevicePtr](t)(d.Malloc(peerBytes))
	s := must[*gg.Stream](t)(d.NewStream())
	ok(t, s.LaunchKernel(peerFillParams(p, base)))
	ok(t, s.Synchronize())
	return p
}

// peerPool is a new pool of d, destroyed when the test ends.
func peerPool(t *testing.T, d *gg.Device) *gg.MemPool {
	t.Helper()
	p := must[*gg.MemPool](t)(d.NewMemPool(gg.MemPoolProps{Location: d.Properties().Ordinal}))
	t.Cleanup(func() { p.Destroy() })
	return p
}

// peerPoolFilled returns memory of pool (MallocFromPoolAsync in a stream
// of d) holding fill(base).
func peerPoolFilled(t *testing.T, d *gg.Device, pool *gg.MemPool, base int) gg.DevicePtr {
	t.Helper()
	s := must[*gg.Stream](t)(d.NewStream())
	p := must[gg.DevicePtr](t)(s.MallocFromPoolAsync(peerBytes, pool))
	ok(t, s.LaunchKernel(peerFillParams(p, base)))
	ok(t, s.Synchronize())
	return p
}

// peerSetTo fails t unless every byte of d's memory at p is v.
func peerSetTo(t *testing.T, d *gg.Device, p gg.DevicePtr, v byte) {
	t.Helper()
	buf := make([]byte, peerBytes)
	ok(t, d.Memcpy(gg.DtoH(buf, p)))
	if i := slices.IndexFunc(buf, func(b byte) bool { return b != v }); i >= 0 {
		t.Fatalf("byte %d is %#x, want %#x", i, buf[i], v)
	}
}

// peerMemsetNode runs a graph of d1 whose memset node sets memory of d0,
// and checks it is written.
func peerMemsetNode(t *testing.T, d0, d1 *gg.Device) {
	t.Helper()
	p := peerFilled(t, d0, 1)
	g := must[*gg.Graph](t)(d1.NewGraph())
	defer g.Destroy()
	must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(p, 9, peerBytes)))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	defer e.Destroy()
	s1 := must[*gg.Stream](t)(d1.NewStream())
	ok(t, e.Launch(s1))
	ok(t, s1.Synchronize())
	peerSetTo(t, d0, p, 9)
}

// peerCheck fails t unless d's memory at p holds fill(base).
func peerCheck(t *testing.T, d *gg.Device, p gg.DevicePtr, base int) {
	t.Helper()
	buf := make([]byte, 4*peerN)
	ok(t, d.Memcpy(gg.DtoH(buf, p)))
	bad := 0
	for i := range peerN {
		if int32(binary.LittleEndian.Uint32(buf[4*i:])) != int32(base+3*i) {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("wrong values: %d of %d", bad, peerN)
	}
}

// peerRead is the probe's readOn: a kernel on d copies src (another
// device's memory) into d's own, and the values are checked. It returns
// the Synchronize's error; the launch itself must succeed, as on the GPU,
// where the fault comes at the synchronize.
func peerRead(t *testing.T, d *gg.Device, src gg.DevicePtr, base int) error {
	t.Helper()
	out := must[gg.DevicePtr](t)(d.Malloc(4 * peerN))
	s := must[*gg.Stream](t)(d.NewStream())
	ok(t, s.LaunchKernel(peerCopyParams(src, out)))
	if err := s.Synchronize(); err != nil {
		return err
	}
	peerCheck(t, d, out, base)
	return nil
}

// peerFault fails t unless err is the fault: ErrIllegalAddress.
func peerFault(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("read the memory, want a fault (ErrIllegalAddress at the synchronize)")
	}
	isCode(t, err, gg.ErrIllegalAddress)
}

func peerAccessIs(t *testing.T, pool *gg.MemPool, dev int, want gg.AccessFlags) {
	t.Helper()
	if got := pool.Access(dev); got != want {
		t.Fatalf("device %d's access to the pool is %v, want %v", dev, got, want)
	}
}

// peerAllocNode adds an alloc node resident on loc with access to a graph
// of device 0 and checks that its parameters read back as given.
func peerAllocNode(t *testing.T, loc int, access []gg.MemAccessDesc) {
	t.Helper()
	d0, _ := peerDevs(t)
	n, ptr, err := must[*gg.Graph](t)(d0.NewGraph()).AddMemAllocNode(gg.MemAllocParams{Size: peerBytes, Location: loc, Access: access})
	ok(t, err)
	p := must[gg.NodeParams](t)(n.Params()).(gg.MemAllocParams)
	if p.Ptr != ptr {
		t.Fatalf("the node's address %#x, the call's %#x", p.Ptr, ptr)
	}
	peerAllocIs(t, p, access)
}

// peerAllocIs fails t unless p is resident on device 0 with access as
// given (nil: no descriptor).
func peerAllocIs(t *testing.T, p gg.MemAllocParams, access []gg.MemAccessDesc) {
	t.Helper()
	if p.Location != 0 || len(p.Access) != len(access) || !slices.Equal(p.Access, access) {
		t.Fatalf("resident on %d, %d descriptor(s) %v; want resident on 0, %d descriptor(s) %v", p.Location, len(p.Access), p.Access, len(access), access)
	}
}

// peerAllocOf returns the parameters of g's alloc node.
func peerAllocOf(t *testing.T, g *gg.Graph) gg.MemAllocParams {
	t.Helper()
	for _, n := range must[[]*gg.Node](t)(g.Nodes()) {
		if n.Type() == gg.NodeMemAlloc {
			return must[gg.NodeParams](t)(n.Params()).(gg.MemAllocParams)
		}
	}
	t.Fatal("no alloc node")
	return gg.MemAllocParams{}
}

// peerAllocFill instantiates a graph of d0: an alloc node with access, a
// fill(500) of it; the allocation is left live.
func peerAllocFill(t *testing.T, d0 *gg.Device, access []gg.MemAccessDesc) (*gg.Exec, gg.DevicePtr) {
	t.Helper()
	g := must[*gg.Graph](t)(d0.NewGraph())
	an, p, err := g.AddMemAllocNode(gg.MemAllocParams{Size: peerBytes, Access: access})
	ok(t, err)
	must[*gg.Node](t)(g.AddKernelNode(peerFillParams(p, 500), an))
	return must[*gg.Exec](t)(g.Instantiate(0)), p
}

// peerGraphMem checks d's graph memory: none, or some, used as reserved.
func peerGraphMem(t *testing.T, d *gg.Device, some bool) {
	t.Helper()
	st := must[gg.GraphMemStats](t)(d.GraphMemStats())
	ord := d.Properties().Ordinal
	switch {
	case !some && (st.UsedCurrent != 0 || st.ReservedCurrent != 0):
		t.Fatalf("device %d: graph memory used %d reserved %d, want none", ord, st.UsedCurrent, st.ReservedCurrent)
	case some && (st.UsedCurrent == 0 || st.UsedCurrent != st.ReservedCurrent):
		t.Fatalf("device %d: graph memory used %d reserved %d, want some, used as reserved", ord, st.UsedCurrent, st.ReservedCurrent)
	}
}

// peerReuse is the probe's buildReuse: one graph of d0 allocates A with
// access for device 1, fills it, frees it, then allocates B with no
// descriptor after the free, fills it (2000) and leaves it live; launched
// and synchronized.
func peerReuse(t *testing.T, d0 *gg.Device) (a, b gg.DevicePtr) {
	t.Helper()
	g := must[*gg.Graph](t)(d0.NewGraph())
	na, a, err := g.AddMemAllocNode(gg.MemAllocParams{Size: peerBytes, Access: []gg.MemAccessDesc{{Device: 1}}})
	ok(t, err)
	wa := must[*gg.Node](t)(g.AddKernelNode(peerFillParams(a, 1000), na))
	fa := must[*gg.Node](t)(g.AddMemFreeNode(a, wa))
	nb, b, err := g.AddMemAllocNode(gg.MemAllocParams{Size: peerBytes}, fa)
	ok(t, err)
	must[*gg.Node](t)(g.AddKernelNode(peerFillParams(b, 2000), nb))
	x := must[*gg.Exec](t)(g.Instantiate(0))
	s0 := must[*gg.Stream](t)(d0.NewStream())
	ok(t, x.Launch(s0))
	ok(t, s0.Synchronize())
	return a, b
}

// peerCap is the probe's Cap: a pool of device 0 accessible from device 0
// only, captured into g1 (MallocFromPoolAsync, fill 3000); then the pool's
// access set for device 1 and the same captured into g2 (fill 4000).
type peerCap struct {
	s0        *gg.Stream
	g1, g2    *gg.Graph
	p1, p2    gg.DevicePtr
	before1   gg.MemAllocParams // g1's alloc node before the access change
	setAccess error
}

func peerCaptures(t *testing.T, d0 *gg.Device) *peerCap {
	t.Helper()
	pool := peerPool(t, d0)
	c := &peerCap{s0: must[*gg.Stream](t)(d0.NewStream())}
	capture := func(base int) (*gg.Graph, gg.DevicePtr) {
		ok(t, c.s0.BeginCapture(gg.CaptureModeGlobal))
		p := must[gg.DevicePtr](t)(c.s0.MallocFromPoolAsync(peerBytes, pool))
		ok(t, c.s0.LaunchKernel(peerFillParams(p, base)))
		return must[*gg.Graph](t)(c.s0.EndCapture()), p
	}
	c.g1, c.p1 = capture(3000)
	c.before1 = peerAllocOf(t, c.g1)
	c.setAccess = pool.SetAccess(1, gg.AccessReadWrite)
	c.g2, c.p2 = capture(4000)
	return c
}

// launch launches both graphs, leaving both allocations live.
func (c *peerCap) launch(t *testing.T) {
	t.Helper()
	for _, g := range []*gg.Graph{c.g1, c.g2} {
		ok(t, must[*gg.Exec](t)(g.Instantiate(0)).Launch(c.s0))
	}
	ok(t, c.s0.Synchronize())
}

// peerNodeGraph is the probe's nodeGraph: a graph of d0 with an alloc node
// (access), a kernel node of d0 that fills it (5000), and a kernel node of
// d1 that copies it into d1's memory, added with AddNodeOn (the probe: with
// device 1 current) or captured from a stream of d1 that joins a capture
// into the graph by a fork (see TestHostPeerFacts). It returns the
// Synchronize's error after the launch; values are checked when it is nil.
func peerNodeGraph(t *testing.T, d0, d1 *gg.Device, access []gg.MemAccessDesc, captured bool) error {
	t.Helper()
	out := must[gg.DevicePtr](t)(d1.Malloc(4 * peerN))
	s0, s1 := must[*gg.Stream](t)(d0.NewStream()), must[*gg.Stream](t)(d1.NewStream())
	g := must[*gg.Graph](t)(d0.NewGraph())
	an, p, err := g.AddMemAllocNode(gg.MemAllocParams{Size: peerBytes, Access: access})
	ok(t, err)
	wn := must[*gg.Node](t)(g.AddKernelNode(peerFillParams(p, 5000), an))
	var reader *gg.Node
	if captured {
		fork := must[*gg.Event](t)(d0.NewEvent(0))
		join := must[*gg.Event](t)(d1.NewEvent(0))
		ok(t, s0.BeginCaptureToGraph(g, []*gg.Node{wn}, gg.CaptureModeGlobal))
		ok(t, s0.Record(fork))
		ok(t, s1.Wait(fork))
		ok(t, s1.LaunchKernel(peerCopyParams(p, out)))
		ok(t, s1.Record(join))
		ok(t, s0.Wait(join))
		if same := must[*gg.Graph](t)(s0.EndCapture()); same != g {
			t.Fatal("EndCapture returned another graph")
		}
		for _, n := range must[[]*gg.Node](t)(g.Nodes()) {
			if n.Type() == gg.NodeKernel && n != wn {
				reader = n
			}
		}
	} else {
		reader = must[*gg.Node](t)(g.AddNodeOn(d1, peerCopyParams(p, out), wn))
	}
	if reader == nil || reader.Device() != d1 {
		t.Fatal("the reader is not a kernel node of device 1")
	}
	if deps := must[[]*gg.Node](t)(reader.Dependencies()); !slices.Contains(deps, wn) {
		t.Fatalf("the reader depends on %v, not on the fill", deps)
	}
	x := must[*gg.Exec](t)(g.Instantiate(0))
	ok(t, x.Launch(s0))
	if err := s0.Synchronize(); err != nil {
		return err
	}
	peerCheck(t, d1, out, 5000)
	return nil
}

// checkPeerFactsCoverage checks rows against docs/driver-peer.txt: every
// row's fact is a fact of the file and its driver answer part of the
// file's answer; every fact of the file is a row or not applicable.
func checkPeerFactsCoverage(t *testing.T, rows []peerFactRow) {
	facts := peerFactsOfFile(t, "docs/driver-peer.txt")
	covered := map[string]bool{}
	for _, r := range rows {
		line := strings.TrimSpace(r.line)
		answers, found := facts[line]
		if !found {
			t.Errorf("row %q: no such fact in docs/driver-peer.txt", line)
			continue
		}
		if !slices.ContainsFunc(answers, func(a string) bool { return strings.Contains(a, r.driver) }) {
			t.Errorf("row %q: the driver answered %q, not %q", line, answers, r.driver)
		}
		if covered[line] {
			t.Errorf("row %q twice", line)
		}
		covered[line] = true
	}
	for line := range peerFactsNotApplicable {
		if _, found := facts[line]; !found {
			t.Errorf("not applicable %q: no such fact in docs/driver-peer.txt", line)
		}
		if covered[line] {
			t.Errorf("%q is both a row and not applicable", line)
		}
	}
	kernelFacts := 0
	for line := range facts {
		if _, na := peerFactsNotApplicable[line]; !covered[line] && !na {
			t.Errorf("fact %q of docs/driver-peer.txt is neither a row nor listed as not applicable", line)
		}
		if peerKernelFacts[line] {
			kernelFacts++
		}
	}
	if kernelFacts != 16 {
		t.Errorf("%d facts of the kernel-read section, want 16", kernelFacts)
	}
}

// peerKernelFacts is filled by peerFactsOfFile: the facts of the section
// "kernels on device 1 reading device 0's memory".
var peerKernelFacts = map[string]bool{}

// peerFactsOfFile returns the facts of the probe's output (its left
// column, printed %-49s, or on a line of its own when longer, the answer
// then on the next line after 50 spaces) with their answers.
func peerFactsOfFile(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	facts := map[string][]string{}
	pending, kernels := "", false
	add := func(fact, answer string) {
		fact = strings.TrimSpace(fact)
		facts[fact] = append(facts[fact], strings.TrimSpace(answer))
		if kernels && fact != "summary" { // the tally follows the last section
			peerKernelFacts[fact] = true
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		long := pending
		pending = ""
		switch {
		case strings.TrimSpace(line) == "", strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "=="):
			kernels = strings.Contains(line, "kernels on device 1 reading device 0's memory")
		case long != "" && strings.HasPrefix(line, strings.Repeat(" ", 50)):
			add(long, line)
		case len(line) > 50 && line[49] == ' ' && strings.TrimSpace(line[:49]) != "":
			add(line[:49], line[50:])
		default:
			pending = line // a long fact, if the next line is its answer
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return facts
}
