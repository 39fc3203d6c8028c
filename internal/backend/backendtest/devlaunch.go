package backendtest

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Kernels for device graph launch, each with a Go body and a CUDA body. A
// log in device memory records what ran: l[0] counts entries, l[1:] holds
// them. Launch results are stored as CUDA error numbers (0: success).

const logCap = 512

func logID(p gg.DevicePtr, id uint32) {
	l := gg.Slice[uint32](p, logCap)
	l[atomic.AddUint32(&l[0], 1)] = id
}

// errNum is the CUDA error number of err, as a CUDA body stores it.
func errNum(err error) int32 {
	var e *gg.Error
	if err == nil {
		return 0
	} else if errors.As(err, &e) {
		return int32(e.Code.Num())
	}
	return -1
}

// dlLog logs id.
var dlLog = &gg.Kernel{
	Name:   "dl_log",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go:     func(b gg.Block, a gg.Args) { logID(a.Ptr(0), uint32(a.Int32(1))) },
	CUDA: `extern "C" __global__ void dl_log(unsigned* l, int id) {
		l[atomicAdd(&l[0], 1u) + 1] = id;
	}`,
}

// dlLaunch logs id, then launches graphs a and b (those not 0) in mode,
// storing the results in errs[slot] and errs[slot+1].
var dlLaunch = &gg.Kernel{
	Name:   "dl_launch",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Uint64, gg.Uint64, gg.Uint32, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		logID(a.Ptr(0), uint32(a.Int32(1)))
		errs := gg.Slice[int32](a.Ptr(5), 64)
		mode := gg.DeviceLaunchMode(a.Uint32(4))
		for j := range 2 {
			if h := a.Uint64(2 + j); h != 0 {
				errs[a.Int(6)+j] = errNum(b.LaunchGraph(h, mode))
			}
		}
	},
	CUDA: `extern "C" __global__ void dl_launch(unsigned* l, int id, unsigned long long a, unsigned long long b,
			unsigned mode, int* errs, int slot) {
		l[atomicAdd(&l[0], 1u) + 1] = id;
		cudaStream_t s = (cudaStream_t)((unsigned long long)mode << 56);
		if (a) errs[slot] = (int)cudaGraphLaunch((cudaGraphExec_t)a, s);
		if (b) errs[slot + 1] = (int)cudaGraphLaunch((cudaGraphExec_t)b, s);
	}`,
	DeviceRuntime: true,
}

// dlMany launches the n graphs at h in mode; errs[slot] is the index of the
// first refused (-1 if none), errs[slot+1] its error.
var dlMany = &gg.Kernel{
	Name:   "dl_many",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Uint32, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		hs := gg.Slice[uint64](a.Ptr(0), a.Int(1))
		errs := gg.Slice[int32](a.Ptr(3), 64)
		first, code := int32(-1), int32(0)
		for i, h := range hs {
			if e := errNum(b.LaunchGraph(h, gg.DeviceLaunchMode(a.Uint32(2)))); e != 0 && first < 0 {
				first, code = int32(i), e
			}
		}
		errs[a.Int(4)], errs[a.Int(4)+1] = first, code
	},
	CUDA: `extern "C" __global__ void dl_many(const unsigned long long* h, int n, unsigned mode, int* errs, int slot) {
		cudaStream_t s = (cudaStream_t)((unsigned long long)mode << 56);
		int first = -1, code = 0;
		for (int i = 0; i < n; i++) {
			int e = (int)cudaGraphLaunch((cudaGraphExec_t)h[i], s);
			if (e != 0 && first < 0) { first = i; code = e; }
		}
		errs[slot] = first;
		errs[slot + 1] = code;
	}`,
	DeviceRuntime: true,
}

// dlSelf counts its runs in cnt[0] and logs 7; while fewer than times, it
// launches its own graph twice in mode, results in errs[0] and errs[1].
var dlSelf = &gg.Kernel{
	Name:   "dl_self",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Pointer, gg.Pointer, gg.Uint32},
	Go: func(b gg.Block, a gg.Args) {
		cnt := gg.Slice[uint32](a.Ptr(0), 1)
		n := atomic.AddUint32(&cnt[0], 1)
		logID(a.Ptr(3), 7)
		if int(n) < a.Int(1) {
			errs := gg.Slice[int32](a.Ptr(2), 2)
			mode := gg.DeviceLaunchMode(a.Uint32(4))
			errs[0] = errNum(b.LaunchGraph(b.CurrentGraphExec(), mode))
			errs[1] = errNum(b.LaunchGraph(b.CurrentGraphExec(), mode))
		}
	},
	CUDA: `extern "C" __global__ void dl_self(unsigned* cnt, int times, int* errs, unsigned* l, unsigned mode) {
		unsigned n = atomicAdd(&cnt[0], 1u) + 1;
		l[atomicAdd(&l[0], 1u) + 1] = 7;
		if ((int)n < times) {
			cudaStream_t s = (cudaStream_t)((unsigned long long)mode << 56);
			errs[0] = (int)cudaGraphLaunch(cudaGetCurrentGraphExec(), s);
			errs[1] = (int)cudaGraphLaunch(cudaGetCurrentGraphExec(), s);
		}
	}`,
	DeviceRuntime: true,
}

// dlCur stores the handle of the device graph running it in out[slot].
var dlCur = &gg.Kernel{
	Name:   "dl_cur",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go:     func(b gg.Block, a gg.Args) { gg.Slice[uint64](a.Ptr(0), 16)[a.Int(1)] = b.CurrentGraphExec() },
	CUDA: `extern "C" __global__ void dl_cur(unsigned long long* out, int slot) {
		out[slot] = (unsigned long long)cudaGetCurrentGraphExec();
	}`,
}

// devMem is a scenario's log and result slots in device memory.
type devMem struct {
	t         *testing.T
	d         *gg.Device
	log, errs gg.DevicePtr
}

func newDevMem(t *testing.T, d *gg.Device) *devMem {
	m := &devMem{t: t, d: d, log: Must[gg.DevicePtr](t)(d.Malloc(4 * logCap)), errs: Must[gg.DevicePtr](t)(d.Malloc(4 * 64))}
	m.reset()
	return m
}

// reset clears the log and sets every result slot to -2 (not written).
func (m *devMem) reset() {
	OK(m.t, m.d.Memset(gg.Memset8(m.log, 0, 4*logCap)))
	OK(m.t, m.d.Memset(gg.Memset32(m.errs, 0xfffffffe, 64)))
}

func (m *devMem) logged() []uint32 {
	m.t.Helper()
	l := make([]uint32, logCap)
	OK(m.t, m.d.Memcpy(gg.DtoH(gg.Bytes(l), m.log)))
	return l[1 : 1+l[0]]
}

func (m *devMem) wantLog(want ...uint32) {
	m.t.Helper()
	if got := m.logged(); !slices.Equal(got, want) {
		m.t.Fatalf("log %v, want %v", got, want)
	}
}

func (m *devMem) err(i int) int32 {
	m.t.Helper()
	e := make([]int32, 64)
	OK(m.t, m.d.Memcpy(gg.DtoH(gg.Bytes(e), m.errs)))
	return e[i]
}

func (m *devMem) wantErrs(from int, want ...int32) {
	m.t.Helper()
	for i, w := range want {
		if got := m.err(from + i); got != w {
			m.t.Fatalf("result slot %d is %d, want %d", from+i, got, w)
		}
	}
}

// Instantiate builds a graph of one kernel node and instantiates it.
func Instantiate(t *testing.T, d *gg.Device, flags gg.InstantiateFlags, p gg.KernelParams) *gg.Exec {
	t.Helper()
	g := NewGraph(t, d)
	Must[*gg.Node](t)(g.AddKernelNode(p))
	return Must[*gg.Exec](t)(g.Instantiate(flags))
}

// deviceGraph instantiates a one-kernel device graph and uploads it into s.
func deviceGraph(t *testing.T, s *gg.Stream, p gg.KernelParams) *gg.Exec {
	t.Helper()
	e := Instantiate(t, s.Device(), gg.InstantiateDeviceLaunch, p)
	OK(t, e.Upload(s))
	return e
}

// Handle returns e's device handle, or fails the test.
func Handle(t *testing.T, e *gg.Exec) uint64 {
	t.Helper()
	return Must[uint64](t)(e.DeviceHandle())
}

func run(t *testing.T, s *gg.Stream, e *gg.Exec) {
	t.Helper()
	OK(t, e.Launch(s))
	OK(t, s.Synchronize())
}

const cudaErrorInvalidValue = 1

func deviceLaunchInstantiate(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	buf := Must[gg.DevicePtr](t)(d.Malloc(256))
	host := make([]byte, 64)
	pinned := Must[[]byte](t)(d.MallocHost(64))
	defer d.FreeHost(pinned)
	ev := Must[*gg.Event](t)(d.NewEvent(0))
	kernel := func(g *gg.Graph) { Must[*gg.Node](t)(g.AddKernelNode(kp(KA))) }
	refused := []struct {
		name   string
		build  func(g *gg.Graph)
		flags  gg.InstantiateFlags
		result gg.InstantiateResult
		node   gg.NodeType // of ErrNode; -1: none
	}{
		{"host node", func(g *gg.Graph) { kernel(g); Must[*gg.Node](t)(g.AddHostNode(func() {})) }, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeHost},
		{"empty node", func(g *gg.Graph) { kernel(g); Must[*gg.Node](t)(g.AddEmptyNode()) }, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeEmpty},
		{"event record node", func(g *gg.Graph) { kernel(g); Must[*gg.Node](t)(g.AddEventRecordNode(ev)) }, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeEventRecord},
		{"event wait node", func(g *gg.Graph) { kernel(g); Must[*gg.Node](t)(g.AddEventWaitNode(ev)) }, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeEventWait},
		{"memcpy from pageable host memory", func(g *gg.Graph) { Must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(buf, host))) }, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeMemcpy},
		{"memcpy to pageable host memory", func(g *gg.Graph) { Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(host, buf))) }, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeMemcpy},
		{"memory alloc node", func(g *gg.Graph) {
			kernel(g)
			n, _, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 256})
			Must[*gg.Node](t)(n, err)
		}, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeMemAlloc},
		{"host node in a child graph", func(g *gg.Graph) {
			c := NewGraph(t, d)
			kernel(c)
			Must[*gg.Node](t)(c.AddHostNode(func() {}))
			Must[*gg.Node](t)(g.AddChildGraphNode(c))
		}, 0, gg.InstantiateNodeOperationNotSupported, gg.NodeHost},
		{"no nodes", func(g *gg.Graph) {}, 0, gg.InstantiateError, -1},
		{"only an empty child graph", func(g *gg.Graph) { Must[*gg.Node](t)(g.AddChildGraphNode(NewGraph(t, d))) }, 0, gg.InstantiateError, -1},
		{"with AutoFreeOnLaunch", kernel, gg.InstantiateAutoFreeOnLaunch, gg.InstantiateError, -1},
		{"unknown flag", kernel, 1 << 7, gg.InstantiateError, -1},
	}
	for _, c := range refused {
		g := NewGraph(t, d)
		c.build(g)
		p := &gg.InstantiateParams{Flags: gg.InstantiateDeviceLaunch | c.flags}
		e, err := g.InstantiateWithParams(p)
		if e != nil {
			t.Fatalf("%s: instantiated", c.name)
		}
		IsCode(t, err, gg.ErrInvalidValue)
		if p.Result != c.result {
			t.Errorf("%s: result %v, want %v", c.name, p.Result, c.result)
		}
		if c.node < 0 && p.ErrNode != nil || c.node >= 0 && (p.ErrNode == nil || p.ErrNode.Type() != c.node) {
			t.Errorf("%s: error node %v, want a %v node", c.name, p.ErrNode, c.node)
		}
		if c.node >= 0 && err.(*gg.Error).Node != p.ErrNode {
			t.Errorf("%s: the error names %v, not %v", c.name, err.(*gg.Error).Node, p.ErrNode)
		}
		// Instantiate applies the same rules.
		_, err = g.Instantiate(gg.InstantiateDeviceLaunch | c.flags)
		IsCode(t, err, gg.ErrInvalidValue)
	}

	// InstantiateUpload is InstantiateWithParams's, with a stream.
	g := NewGraph(t, d)
	kernel(g)
	_, err := g.Instantiate(gg.InstantiateDeviceLaunch | gg.InstantiateUpload)
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = g.Instantiate(gg.InstantiateUpload)
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = g.InstantiateWithParams(&gg.InstantiateParams{Flags: gg.InstantiateUpload})
	IsCode(t, err, gg.ErrInvalidValue)
	_, err = g.InstantiateWithParams(nil)
	IsCode(t, err, gg.ErrInvalidValue)

	accepted := []struct {
		name  string
		build func(g *gg.Graph)
	}{
		{"kernel", kernel},
		{"device-to-device memcpy", func(g *gg.Graph) { Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(buf+128, buf, 64))) }},
		// docs/driver-devlaunch.txt, "memcpy from pinned host memory".
		{"memcpy from pinned host memory", func(g *gg.Graph) { Must[*gg.Node](t)(g.AddMemcpyNode(gg.HtoD(buf, pinned))) }},
		{"memcpy to pinned host memory", func(g *gg.Graph) { Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoH(pinned, buf))) }},
		{"memset", func(g *gg.Graph) { Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(buf, 7, 16))) }},
		{"child graph", func(g *gg.Graph) {
			c := NewGraph(t, d)
			kernel(c)
			Must[*gg.Node](t)(g.AddChildGraphNode(c))
		}},
		{"all four", func(g *gg.Graph) {
			a := Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(buf, 7, 16)))
			b := Must[*gg.Node](t)(g.AddMemcpyNode(gg.DtoD(buf+128, buf, 64), a))
			c := NewGraph(t, d)
			kernel(c)
			Must[*gg.Node](t)(g.AddChildGraphNode(c, b))
		}},
	}
	for _, c := range accepted {
		g := NewGraph(t, d)
		c.build(g)
		p := &gg.InstantiateParams{Flags: gg.InstantiateDeviceLaunch | gg.InstantiateUpload, UploadStream: s}
		e, err := g.InstantiateWithParams(p)
		if err != nil || p.Result != gg.InstantiateSuccess || p.ErrNode != nil {
			t.Fatalf("%s: %v, result %v, node %v", c.name, err, p.Result, p.ErrNode)
		}
		run(t, s, e)
		OK(t, e.Destroy())
	}
}

func deviceLaunchModes(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	m := newDevMem(t, d)
	logGraph := func(id int) *gg.Exec { return deviceGraph(t, s, kp(dlLog, m.log, id)) }
	launcher := func(flags gg.InstantiateFlags, id int, a, b *gg.Exec, mode gg.DeviceLaunchMode, slot int) *gg.Exec {
		var ha, hb uint64
		if a != nil {
			ha = Handle(t, a)
		}
		if b != nil {
			hb = Handle(t, b)
		}
		e := Instantiate(t, d, flags, kp(dlLaunch, m.log, id, ha, hb, uint32(mode), m.errs, slot))
		if flags&gg.InstantiateDeviceLaunch != 0 {
			OK(t, e.Upload(s))
		}
		return e
	}

	// Tail launches run in order once the launching graph is done; those
	// a tail graph queues run before the ones queued ahead of it: A
	// queues B then C, B queues D then E: A B D E C.
	C, D, E := logGraph(3), logGraph(4), logGraph(5)
	B := launcher(gg.InstantiateDeviceLaunch, 2, D, E, gg.TailLaunch, 2)
	run(t, s, launcher(0, 1, B, C, gg.TailLaunch, 0))
	m.wantLog(1, 2, 4, 5, 3)
	m.wantErrs(0, 0, 0, 0, 0)

	// Whatever the mode, all of it runs before the stream's next work.
	for _, mode := range []gg.DeviceLaunchMode{gg.FireAndForget, gg.SiblingLaunch, gg.TailLaunch} {
		m.reset()
		OK(t, launcher(0, 1, logGraph(2), logGraph(3), mode, 0).Launch(s))
		OK(t, s.Launch(dlLog, one, one, m.log, 9))
		OK(t, s.Synchronize())
		got := m.logged()
		if len(got) != 4 || got[0] != 1 || got[1]+got[2] != 5 || got[3] != 9 || mode == gg.TailLaunch && got[1] != 2 {
			t.Fatalf("%v: log %v, want 1, then 2 and 3, then 9", mode, got)
		}
		m.wantErrs(0, 0, 0)
	}

	// A tail-launched device graph that launches another fire-and-forget;
	// a kernel in a device graph launched from the device.
	m.reset()
	inner := logGraph(8)
	mid := launcher(gg.InstantiateDeviceLaunch, 2, inner, nil, gg.FireAndForget, 2)
	run(t, s, launcher(gg.InstantiateDeviceLaunch, 1, mid, nil, gg.TailLaunch, 0))
	m.wantLog(1, 2, 8)
	m.wantErrs(0, 0)
	m.wantErrs(2, 0)
}

func deviceLaunchSelfTail(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	m := newDevMem(t, d)
	cnt := Must[gg.DevicePtr](t)(d.Malloc(4))
	loop := deviceGraph(t, s, kp(dlSelf, cnt, 4, m.errs, m.log, uint32(gg.TailLaunch)))
	// Launched from the host, and from the device: the graph relaunches
	// itself until it has run 4 times; a second self launch of one run is
	// refused.
	for _, from := range []string{"host", "device"} {
		m.reset()
		OK(t, d.Memset(gg.Memset32(cnt, 0, 1)))
		if from == "host" {
			run(t, s, loop)
			m.wantLog(7, 7, 7, 7)
		} else {
			run(t, s, Instantiate(t, d, 0, kp(dlLaunch, m.log, 1, Handle(t, loop), uint64(0), uint32(gg.FireAndForget), m.errs, 2)))
			m.wantLog(1, 7, 7, 7, 7)
			m.wantErrs(2, 0)
		}
		m.wantErrs(0, 0, cudaErrorInvalidValue)
	}
	// A graph launching itself fire-and-forget or as a sibling is already
	// running.
	for _, mode := range []gg.DeviceLaunchMode{gg.FireAndForget, gg.SiblingLaunch} {
		m.reset()
		OK(t, d.Memset(gg.Memset32(cnt, 0, 1)))
		run(t, s, deviceGraph(t, s, kp(dlSelf, cnt, 2, m.errs, m.log, uint32(mode))))
		m.wantLog(7)
		m.wantErrs(0, cudaErrorInvalidValue, cudaErrorInvalidValue)
	}
}

func deviceLaunchRefused(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	m := newDevMem(t, d)
	g := deviceGraph(t, s, kp(dlLog, m.log, 2))
	notUploaded := Instantiate(t, d, gg.InstantiateDeviceLaunch, kp(dlLog, m.log, 3))
	for _, c := range []struct {
		name string
		h    uint64
		mode gg.DeviceLaunchMode
	}{
		{"a graph not uploaded", Handle(t, notUploaded), gg.FireAndForget},
		{"mode 0", Handle(t, g), 0},
		{"mode 4", Handle(t, g), 4},
	} {
		m.reset()
		run(t, s, Instantiate(t, d, 0, kp(dlLaunch, m.log, 1, c.h, uint64(0), uint32(c.mode), m.errs, 0)))
		m.wantLog(1)
		if got := m.err(0); got != cudaErrorInvalidValue {
			t.Fatalf("%s: launch gave %d, want %d", c.name, got, cudaErrorInvalidValue)
		}
	}

	// One graph launched twice from one kernel: the second is refused,
	// in either mode.
	for _, mode := range []gg.DeviceLaunchMode{gg.FireAndForget, gg.TailLaunch} {
		m.reset()
		run(t, s, Instantiate(t, d, 0, kp(dlLaunch, m.log, 1, Handle(t, g), Handle(t, g), uint32(mode), m.errs, 0)))
		m.wantLog(1, 2)
		m.wantErrs(0, 0, cudaErrorInvalidValue)
	}

	// At most 120 fire-and-forget launches in one graph execution and 255
	// pending tail launches; the count starts again with the next launch.
	// A null handle is refused too.
	hs := Must[gg.DevicePtr](t)(d.Malloc(8 * 260))
	for _, c := range []struct {
		mode         gg.DeviceLaunchMode
		graphs, want int
	}{{gg.FireAndForget, 125, 120}, {gg.TailLaunch, 260, 255}, {gg.FireAndForget, 1, 0}} {
		handles := make([]uint64, c.graphs)
		for i := range handles {
			if c.graphs > 1 {
				handles[i] = Handle(t, deviceGraph(t, s, kp(dlLog, m.log, 5)))
			}
		}
		OK(t, d.Memcpy(gg.HtoD(hs, gg.Bytes(handles))))
		many := Instantiate(t, d, 0, kp(dlMany, hs, c.graphs, uint32(c.mode), m.errs, 0))
		for range 2 {
			m.reset()
			run(t, s, many)
			m.wantErrs(0, int32(c.want), cudaErrorInvalidValue)
			if n := len(m.logged()); n != c.want {
				t.Fatalf("%v: %d graphs ran, want %d", c.mode, n, c.want)
			}
		}
	}
}

func deviceLaunchUpload(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	m := newDevMem(t, d)
	fromDevice := func(e *gg.Exec) {
		t.Helper()
		run(t, s, Instantiate(t, d, 0, kp(dlLaunch, m.log, 1, Handle(t, e), uint64(0), uint32(gg.FireAndForget), m.errs, 0)))
	}
	// Uploaded by InstantiateWithParams.
	g := NewGraph(t, d)
	Must[*gg.Node](t)(g.AddKernelNode(kp(dlLog, m.log, 6)))
	p := &gg.InstantiateParams{Flags: gg.InstantiateDeviceLaunch | gg.InstantiateUpload, UploadStream: s}
	w := Must[*gg.Exec](t)(g.InstantiateWithParams(p))
	fromDevice(w)
	m.wantLog(1, 6)
	m.wantErrs(0, 0)
	// By Exec.Upload.
	m.reset()
	fromDevice(deviceGraph(t, s, kp(dlLog, m.log, 4)))
	m.wantLog(1, 4)
	m.wantErrs(0, 0)
	// By a host launch.
	m.reset()
	h := Instantiate(t, d, gg.InstantiateDeviceLaunch, kp(dlLog, m.log, 5))
	fromDevice(h)
	m.wantLog(1)
	m.wantErrs(0, cudaErrorInvalidValue)
	m.reset()
	run(t, s, h)
	fromDevice(h)
	m.wantLog(5, 1, 5)
	m.wantErrs(0, 0)
}

func deviceLaunchCurrentGraphExec(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	m := newDevMem(t, d)
	out := Must[gg.DevicePtr](t)(d.Malloc(8 * 16))
	OK(t, d.Memset(gg.Memset8(out, 0xff, 8*16)))
	OK(t, s.Launch(dlCur, one, one, out, 0))           // in a stream
	run(t, s, Instantiate(t, d, 0, kp(dlCur, out, 1))) // in a host graph
	dev := Instantiate(t, d, gg.InstantiateDeviceLaunch, kp(dlCur, out, 2))
	run(t, s, dev) // in a device graph launched from the host
	dev3 := deviceGraph(t, s, kp(dlCur, out, 3))
	run(t, s, Instantiate(t, d, 0, kp(dlLaunch, m.log, 1, Handle(t, dev3), uint64(0), uint32(gg.FireAndForget), m.errs, 0)))
	c := NewGraph(t, d)
	Must[*gg.Node](t)(c.AddKernelNode(kp(dlCur, out, 4)))
	outer := NewGraph(t, d)
	Must[*gg.Node](t)(outer.AddChildGraphNode(c))
	dev4 := Must[*gg.Exec](t)(outer.Instantiate(gg.InstantiateDeviceLaunch))
	run(t, s, dev4) // in a child graph of a device graph: the outer graph's
	got := make([]uint64, 5)
	OK(t, d.Memcpy(gg.DtoH(gg.Bytes(got), out)))
	want := []uint64{0, 0, Handle(t, dev), Handle(t, dev3), Handle(t, dev4)}
	if !slices.Equal(got, want) {
		t.Fatalf("current graphs %#x, want %#x", got, want)
	}
	m.wantErrs(0, 0)
}

func deviceLaunchKernelInStream(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	m := newDevMem(t, d)
	// A kernel that launches graphs runs only as a kernel node: the
	// stream launch is refused and the stream goes on.
	IsCode(t, s.Launch(dlLaunch, one, one, m.log, 1, uint64(0), uint64(0), uint32(gg.FireAndForget), m.errs, 0), gg.ErrNotSupported)
	OK(t, s.Launch(dlLog, one, one, m.log, 2))
	OK(t, s.Synchronize())
	m.wantLog(2)
}
