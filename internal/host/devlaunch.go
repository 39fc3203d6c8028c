package host

import (
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Device launch modes, the high byte of CUDA's named streams.
const (
	TailLaunch    = 1 // cudaStreamGraphTailLaunch
	FireAndForget = 2 // cudaStreamGraphFireAndForget
	SiblingLaunch = 3 // cudaStreamGraphFireAndForgetAsSibling
)

// Limits of device launches, as CUDA's.
const (
	maxFireAndForget = 120 // fire-and-forget launches by one graph execution
	maxPendingTails  = 255 // tail launches queued by one graph execution
)

// devState is what an executable graph keeps for device graph launch.
type devState struct {
	launch   bool                   // instantiated for device launch: a device graph
	uploaded atomic.Bool            // uploaded at least once: the device may launch it
	upOps    []op                   // the op table as last uploaded, which device launches run (under mu)
	handle   atomic.Uint64          // its device handle, once asked for
	env      atomic.Pointer[devEnv] // the environment of the execution running now, once it has one

	// Under Exec.mu:
	pending int  // device launches accepted and not complete, queued tail launches included
	running bool // a device launch is executing it
}

// devEnv is an execution environment: one execution of a graph (host or
// device launched), or the stream environment of a host launch (root),
// which holds all the work the launch gives rise to. Every device launch
// belongs to the stream environment of the host launch it descends from;
// the modes and their order are in the Device graph launch section of the
// gpugraph package documentation.
type devEnv struct {
	parent *devEnv // nil for the stream environment
	root   *devEnv
	kids   sync.WaitGroup // fire-and-forget and sibling executions in it, not complete

	mu       sync.Mutex
	ff       int     // fire-and-forget and sibling launches into it so far
	tails    []*Exec // its graph's tail launches, in order
	selfTail bool    // its graph has queued itself

	err atomic.Pointer[backend.Error] // root only: the first failure, which fails the host launch
}

func (r *devEnv) fail(err *backend.Error) { r.err.CompareAndSwap(nil, err) }

// env returns the environment of e's current execution. A device execution
// sets it before running; a host launch gets one on its first device
// launch, in a new stream environment.
func (e *Exec) env() *devEnv {
	if env := e.dl.env.Load(); env != nil {
		return env
	}
	root := &devEnv{}
	root.root = root
	env := &devEnv{parent: root, root: root}
	if e.dl.env.CompareAndSwap(nil, env) {
		return env
	}
	return e.dl.env.Load()
}

// settleDeviceLaunches ends a host launch's graph execution: it waits for
// the fire-and-forget work the graph launched and returns its environment,
// or nil if the graph launched nothing from the device.
func (e *Exec) settleDeviceLaunches() *devEnv {
	env := e.dl.env.Swap(nil)
	if env != nil {
		env.kids.Wait()
	}
	return env
}

// finish runs what remains of a host launch after its graph's execution
// (failed with err, or not): the tail launches, in the stream environment,
// then waits for the sibling launches there. It returns the launch's error.
func (env *devEnv) finish(err *backend.Error) *backend.Error {
	root := env.root
	if err != nil {
		root.fail(err)
	}
	runTails(env.tails, root)
	root.kids.Wait()
	return root.err.Load()
}

// runTails executes tail launches in CUDA's order, each in place of the last
// in parent: those a tail graph queues run before the rest of the queue.
func runTails(queue []*Exec, parent *devEnv) {
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if !x.startDevice(parent.root) {
			continue
		}
		if tails := x.execDevice(parent).tails; len(tails) > 0 {
			queue = append(tails, queue...)
		}
	}
}

// startDevice marks a queued tail launch of x as executing. A host launch of
// x running now (launched from both sides at once: undefined in CUDA) fails
// the stream launch instead.
func (x *Exec) startDevice(root *devEnv) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cur != nil || x.dl.running {
		x.dl.pending--
		err := backend.Errorf(backend.ErrInvalidValue, "a tail-launched graph was launched from the host while queued")
		err.Op = "Block.LaunchGraph"
		root.fail(err)
		return false
	}
	x.dl.running = true
	x.runOps = x.dl.upOps
	return true
}

// execDevice executes one device launch of x, already marked running, in
// parent, and returns its environment once complete: x's nodes and the
// fire-and-forget work they launched. After a failure anywhere in the stream
// launch, it only retires the launch.
func (x *Exec) execDevice(parent *devEnv) *devEnv {
	env := &devEnv{parent: parent, root: parent.root}
	if env.root.err.Load() == nil {
		x.failed.Store(nil)
		x.dl.env.Store(env)
		x.run.Run()
		x.dl.env.Store(nil)
		env.kids.Wait()
		if err := x.failed.Load(); err != nil {
			env.root.fail(err)
		}
	}
	x.mu.Lock()
	x.dl.running = false
	x.dl.pending--
	x.cond.Broadcast() // host launches wait for device ones
	x.mu.Unlock()
	if env.root.err.Load() != nil {
		x.retire(env.tails)
		env.tails = nil
	}
	return env
}

// retire drops queued tail launches that will not run.
func (x *Exec) retire(tails []*Exec) {
	for _, t := range tails {
		t.mu.Lock()
		t.dl.pending--
		t.mu.Unlock()
	}
}

// launchErr is a failure of LaunchGraph about the kernel node c runs.
func launchErr(c *kernelCtx, code *backend.Code, format string, args ...any) *backend.Error {
	err := backend.Errorf(code, format, args...)
	err.Op = "Block.LaunchGraph"
	err.Node = c.e.nodes[c.node].tag
	return err
}

// LaunchGraph launches the device graph whose handle is h from the kernel
// running the block, in mode (Block.LaunchGraph documents the rules).
func (rt Runtime) LaunchGraph(h uint64, mode uint8) error {
	c := rt.ctx
	if c == nil {
		err := backend.Errorf(backend.ErrNotSupported, "graphs are launched from the device by kernel nodes of graphs only")
		err.Op = "Block.LaunchGraph"
		return err
	}
	src := c.e
	if k := &src.runOps[c.node].kern; !k.devRT { // the op running, which an update may have replaced in ops since
		return launchErr(c, backend.ErrNotSupported, "kernel %q launches graphs but does not set DeviceRuntime", k.name)
	}
	if mode < TailLaunch || mode > SiblingLaunch {
		return launchErr(c, backend.ErrInvalidValue, "invalid launch mode DeviceLaunchMode(%d)", mode)
	}
	x := execOfHandle(h)
	if x == nil || x.dev != src.dev {
		return launchErr(c, backend.ErrInvalidValue, "%#x is not an executable graph of this device", h)
	}
	if !x.dl.launch {
		err := launchErr(c, backend.ErrIllegalAddress, "launched a graph not instantiated with InstantiateDeviceLaunch")
		err.Transient = true // the driver reports it once; later calls succeed
		src.failed.CompareAndSwap(nil, err)
		return err
	}
	if !x.dl.uploaded.Load() {
		return launchErr(c, backend.ErrInvalidValue, "the graph was never uploaded")
	}
	env := src.env()
	if mode == TailLaunch {
		return env.tail(c, src, x)
	}
	into := env
	if mode == SiblingLaunch {
		into = env.parent
	}
	into.mu.Lock()
	if into.ff >= maxFireAndForget {
		into.mu.Unlock()
		return launchErr(c, backend.ErrInvalidValue, "over %d fire-and-forget launches in one graph execution", maxFireAndForget)
	}
	if err := x.acquire(c, true); err != nil {
		into.mu.Unlock()
		return err
	}
	into.ff++
	into.kids.Add(1)
	into.mu.Unlock()
	c.hold(x)
	go func() {
		defer into.kids.Done()
		debug.SetPanicOnFault(true) // kernels run here too: faults become errors
		if tails := x.execDevice(into).tails; len(tails) > 0 {
			runTails(tails, into)
		}
	}()
	return nil
}

// tail queues a tail launch of x from an execution of src in env.
func (env *devEnv) tail(c *kernelCtx, src, x *Exec) error {
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(env.tails) >= maxPendingTails {
		return launchErr(c, backend.ErrInvalidValue, "over %d pending tail launches", maxPendingTails)
	}
	if x == src {
		// The graph relaunching itself: allowed while it runs, once.
		if env.selfTail {
			return launchErr(c, backend.ErrInvalidValue, "the graph has already queued itself for tail launch")
		}
		x.mu.Lock()
		x.dl.pending++
		x.mu.Unlock()
		env.selfTail = true
	} else if err := x.acquire(c, false); err != nil {
		return err
	}
	env.tails = append(env.tails, x)
	return nil
}

// acquire accepts a device launch of x if no launch of it is running or
// queued, host launches included; run marks it executing at once.
func (x *Exec) acquire(c *kernelCtx, run bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.destroyed {
		return launchErr(c, backend.ErrInvalidValue, "the graph is destroyed")
	}
	if x.dl.pending > 0 || x.issued.Load() != x.finished.Load() {
		return launchErr(c, backend.ErrInvalidValue, "a launch of the graph is running or queued")
	}
	x.dl.pending++
	x.dl.running = run
	if run {
		x.runOps = x.dl.upOps
	}
	return nil
}

// CurrentGraphExec returns the device handle of the device graph running
// the block, the outermost one for a kernel in a child graph, or 0 if the
// kernel is not running in a device graph.
func (rt Runtime) CurrentGraphExec() uint64 {
	if rt.ctx == nil || !rt.ctx.e.dl.launch {
		return 0
	}
	return rt.ctx.e.DeviceHandle()
}

// Device handles: numbers, looked up in execHandles.
var (
	execHandles    sync.Map // uint64 -> *Exec
	nextExecHandle atomic.Uint64
)

// DeviceHandle is the handle kernels launch e with.
func (e *Exec) DeviceHandle() uint64 {
	if h := e.dl.handle.Load(); h != 0 {
		return h
	}
	h := nextExecHandle.Add(1)
	if !e.dl.handle.CompareAndSwap(0, h) {
		return e.dl.handle.Load()
	}
	execHandles.Store(h, e)
	return h
}

func execOfHandle(h uint64) *Exec {
	if v, ok := execHandles.Load(h); ok {
		return v.(*Exec)
	}
	return nil
}

// dropDeviceHandle forgets a destroyed graph's handle: launching it from the
// device then fails with ErrInvalidValue.
func (e *Exec) dropDeviceHandle() {
	if h := e.dl.handle.Load(); h != 0 {
		execHandles.Delete(h)
	}
}

// uploadedLocked records that launch or upload l uploaded e: device
// launches run l's op table from now on. e.mu is held.
func (e *Exec) uploadedLocked(l *launch) {
	e.dl.upOps = l.ops
	e.dl.uploaded.Store(true)
}
