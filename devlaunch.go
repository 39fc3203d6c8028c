package gpugraph

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// InstantiateResult says why instantiation failed (cudaGraphInstantiateResult).
type InstantiateResult int

// Instantiation results.
const (
	InstantiateSuccess InstantiateResult = 0
	// InstantiateError: an invalid value or another failure, which the
	// returned error describes.
	InstantiateError InstantiateResult = 1
	// InstantiateInvalidStructure: the graph's structure is invalid, such
	// as a cycle; ErrNode is a node of it.
	InstantiateInvalidStructure InstantiateResult = 2
	// InstantiateNodeOperationNotSupported: instantiating for device launch,
	// ErrNode is of a type or does work that a device graph cannot have.
	InstantiateNodeOperationNotSupported InstantiateResult = 3
	// InstantiateMultipleDevicesNotSupported: instantiating for device
	// launch, the nodes are on different devices.
	InstantiateMultipleDevicesNotSupported InstantiateResult = 4
)

var instantiateResultNames = [...]string{"success", "error", "invalid structure",
	"node operation not supported", "multiple devices not supported"}

func (r InstantiateResult) String() string {
	if r >= 0 && int(r) < len(instantiateResultNames) {
		return instantiateResultNames[r]
	}
	return fmt.Sprintf("InstantiateResult(%d)", int(r))
}

// InstantiateParams are the parameters of InstantiateWithParams and what it
// reports back, as cudaGraphInstantiateParams.
type InstantiateParams struct {
	Flags InstantiateFlags
	// UploadStream is the stream that InstantiateUpload uploads the graph
	// into. It is needed with that flag and ignored without it.
	UploadStream *Stream

	// Set by InstantiateWithParams: why instantiation failed, and the node
	// that made it fail, if one did (the error names it too).
	Result  InstantiateResult
	ErrNode *Node
}

// InstantiateWithParams instantiates the graph as Instantiate does, with the
// flags of p, and reports why it failed in p.Result and p.ErrNode
// (cudaGraphInstantiateWithParams). With InstantiateUpload, the graph is
// uploaded into p.UploadStream once instantiated.
//
// With InstantiateDeviceLaunch the graph becomes a device graph, which kernels
// can launch (Block.LaunchGraph). Then, as CUDA requires, it can contain only
// kernel, memcpy, memset and child graph nodes, at least one of them not a
// child graph; memcpy nodes can copy only device memory (host slices are
// pageable host memory); the flag cannot be combined with
// InstantiateAutoFreeOnLaunch. Each is refused with ErrInvalidValue.
func (g *Graph) InstantiateWithParams(p *InstantiateParams) (*Exec, error) {
	const opName = "Graph.InstantiateWithParams"
	if p == nil {
		return nil, newErr(opName, ErrInvalidValue, "nil params")
	}
	p.Result, p.ErrNode = InstantiateSuccess, nil
	e, err := g.instantiate(opName, p, true)
	if err != nil && p.Result == InstantiateSuccess {
		p.Result, p.ErrNode = instantiateFailure(err)
	}
	return e, err
}

// instantiateFailure classifies an instantiation error of the host backend
// (the cuda backend reports the driver's own).
func instantiateFailure(err error) (InstantiateResult, *Node) {
	var e *Error
	if !errors.As(err, &e) || e.Node == nil {
		return InstantiateError, nil
	}
	g := e.Node.g
	g.mu.Lock()
	_, bad := topoOrder(g.nodes)
	g.mu.Unlock()
	if bad != nil {
		return InstantiateInvalidStructure, e.Node
	}
	return InstantiateError, e.Node
}

// fail records why instantiation failed and returns the error.
func (p *InstantiateParams) fail(r InstantiateResult, err *Error) *Error {
	p.Result, p.ErrNode = r, err.Node
	return err
}

// checkInstantiate checks the flags and, for a device graph, the graph: the
// one place these rules live, for both backends.
func (g *Graph) checkInstantiate(opName string, p *InstantiateParams, withParams bool) error {
	f := p.Flags
	if f&^(InstantiateAutoFreeOnLaunch|InstantiateUpload|InstantiateDeviceLaunch|InstantiateUseNodePriority) != 0 {
		return p.fail(InstantiateError, newErr(opName, ErrInvalidValue, "unknown flags %#x", uint(f)))
	}
	if f&InstantiateUpload != 0 {
		if !withParams {
			return p.fail(InstantiateError, newErr(opName, ErrInvalidValue, "InstantiateUpload needs InstantiateWithParams, with an UploadStream"))
		}
		if p.UploadStream == nil {
			return p.fail(InstantiateError, newErr(opName, ErrInvalidValue, "InstantiateUpload without an UploadStream"))
		}
		if err := p.UploadStream.check(opName); err != nil {
			return p.fail(InstantiateError, err.(*Error))
		}
		if p.UploadStream.dev != g.dev {
			return p.fail(InstantiateError, newErr(opName, ErrInvalidValue, "upload stream belongs to another device"))
		}
	}
	if f&InstantiateDeviceLaunch == 0 {
		return nil
	}
	if f&InstantiateAutoFreeOnLaunch != 0 {
		return p.fail(InstantiateError, newErr(opName, ErrInvalidValue, "InstantiateDeviceLaunch cannot be combined with InstantiateAutoFreeOnLaunch"))
	}
	work, unknown := 0, false
	var walk func(g *Graph) (*Error, error)
	walk = func(g *Graph) (*Error, error) {
		if err := g.lock(opName); err != nil {
			return nil, err
		}
		defer g.mu.Unlock()
		for _, n := range g.nodes {
			switch n.typ {
			case NodeKernel, NodeMemset:
			case NodeMemcpy:
				if c, ok := n.params.(MemcpyParams); ok && (c.DstHost != nil || c.SrcHost != nil) {
					return nodeErr(opName, n, ErrInvalidValue, "a device graph can copy only device memory, and host slices are pageable host memory"), nil
				}
			case NodeChildGraph:
				if n.child == nil { // a captured child graph on cuda: the driver checks it
					unknown = true
					continue
				}
				if bad, err := walk(n.child); bad != nil || err != nil {
					return bad, err
				}
				continue
			default:
				return nodeErr(opName, n, ErrInvalidValue, "a device graph can have only kernel, memcpy, memset and child graph nodes"), nil
			}
			work++
		}
		return nil, nil
	}
	bad, err := walk(g)
	switch {
	case err != nil:
		return err
	case bad != nil:
		return p.fail(InstantiateNodeOperationNotSupported, bad)
	case work == 0 && !unknown:
		return p.fail(InstantiateError, newErr(opName, ErrInvalidValue, "a device graph needs a kernel, memcpy or memset node"))
	}
	return nil
}

// instantiateUpload uploads a new host-backend executable graph into
// p.UploadStream if p asks for it; on failure the graph is destroyed.
func (e *Exec) instantiateUpload(opName string, p *InstantiateParams) error {
	if p.Flags&InstantiateUpload == 0 {
		return nil
	}
	if err := e.Upload(p.UploadStream); err != nil {
		e.Destroy()
		return p.fail(InstantiateError, withOp(opName, err).(*Error))
	}
	return nil
}

// DeviceLaunchMode is how a kernel launches a device graph. The values are
// the high byte of CUDA's named streams, so a CUDA body that gets a mode m
// as an argument launches with
// cudaGraphLaunch(graph, (cudaStream_t)((unsigned long long)m << 56)).
type DeviceLaunchMode uint8

// Device launch modes.
const (
	// TailLaunch runs the graph once the launching graph's execution is
	// complete (cudaStreamGraphTailLaunch).
	TailLaunch DeviceLaunchMode = 1
	// FireAndForget starts the graph at once, as a child of the launching
	// graph's execution (cudaStreamGraphFireAndForget).
	FireAndForget DeviceLaunchMode = 2
	// SiblingLaunch starts the graph at once, as a child of the launching
	// graph's parent environment (cudaStreamGraphFireAndForgetAsSibling).
	SiblingLaunch DeviceLaunchMode = 3
)

func (m DeviceLaunchMode) String() string {
	switch m {
	case TailLaunch:
		return "tail launch"
	case FireAndForget:
		return "fire-and-forget"
	case SiblingLaunch:
		return "sibling launch"
	}
	return fmt.Sprintf("DeviceLaunchMode(%d)", uint8(m))
}

// Limits of device launches, as CUDA's.
const (
	maxFireAndForget = 120 // fire-and-forget launches by one graph execution
	maxPendingTails  = 255 // tail launches queued by one graph execution
)

// devState is what an executable graph keeps for device graph launch.
type devState struct {
	launch   bool                   // instantiated with InstantiateDeviceLaunch: a device graph
	uploaded atomic.Bool            // uploaded at least once: the device may launch it
	upOps    []op                   // the op table as last uploaded, which device launches run (under mu)
	handle   atomic.Uint64          // its device handle, once asked for (host backend)
	env      atomic.Pointer[devEnv] // the environment of the execution running now, once it has one

	// Under Exec.mu:
	pending int  // device launches accepted and not complete, queued tail launches included
	running bool // a device launch is executing it
}

// devEnv is an execution environment: one execution of a graph (host or
// device launched), or the stream environment of a host launch (root),
// which holds all the work the launch gives rise to. On the host backend
// every device launch belongs to the stream environment of the host launch
// it descends from; the modes and their order are in the Device graph
// launch section of the package documentation.
type devEnv struct {
	parent *devEnv // nil for the stream environment
	root   *devEnv
	kids   sync.WaitGroup // fire-and-forget and sibling executions in it, not complete

	mu       sync.Mutex
	ff       int     // fire-and-forget and sibling launches into it so far
	tails    []*Exec // its graph's tail launches, in order
	selfTail bool    // its graph has queued itself

	err atomic.Pointer[Error] // root only: the first failure, which fails the host launch
}

func (r *devEnv) fail(err *Error) { r.err.CompareAndSwap(nil, err) }

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
func (env *devEnv) finish(err *Error) *Error {
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
		root.fail(newErr("Block.LaunchGraph", ErrInvalidValue, "a tail-launched graph was launched from the host while queued"))
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

// LaunchGraph launches the device graph whose handle is h (Exec.DeviceHandle,
// Block.CurrentGraphExec) from this kernel, in the given mode
// (cudaGraphLaunch on the device). Only a kernel node of a graph can launch
// graphs, and its Kernel must set DeviceRuntime.
//
// It returns ErrInvalidValue, and launches nothing, if h is not a live
// executable graph of this device, if the graph was not uploaded since it was
// instantiated or last updated (Exec.Upload, InstantiateUpload or a host
// launch upload it), if a launch of it is running or queued (a graph may
// queue itself for tail launch, once at a time), if this graph execution has
// already made 120 fire-and-forget launches or queued 255 tail launches, or
// if mode is not a DeviceLaunchMode. Such an error is the kernel's to handle:
// like the GPU, it fails nothing else. A graph that was not instantiated with
// InstantiateDeviceLaunch cannot be launched from the device: on the GPU the
// kernel faults, and so here the launch running the kernel fails with
// ErrIllegalAddress, reported once by the next synchronize: on the H100 the
// driver does not make this fault sticky.
func (b Block) LaunchGraph(h uint64, mode DeviceLaunchMode) error {
	const opName = "Block.LaunchGraph"
	c := b.ctx
	if c == nil {
		return newErr(opName, ErrNotSupported, "graphs are launched from the device by kernel nodes of graphs only")
	}
	src, node := c.e, c.e.nodes[c.node]
	if k := src.ops[c.node].kern.k; !k.DeviceRuntime {
		return nodeErr(opName, node, ErrNotSupported, "kernel %q launches graphs but does not set DeviceRuntime", k.Name)
	}
	if mode < TailLaunch || mode > SiblingLaunch {
		return nodeErr(opName, node, ErrInvalidValue, "invalid launch mode %v", mode)
	}
	x := execOfHandle(h)
	if x == nil || x.dev != src.dev {
		return nodeErr(opName, node, ErrInvalidValue, "%#x is not an executable graph of this device", h)
	}
	if !x.dl.launch {
		err := nodeErr(opName, node, ErrIllegalAddress, "launched a graph not instantiated with InstantiateDeviceLaunch")
		err.transient = true // the driver reports it once; later calls succeed
		src.failed.CompareAndSwap(nil, err)
		return err
	}
	if !x.dl.uploaded.Load() {
		return nodeErr(opName, node, ErrInvalidValue, "the graph was never uploaded")
	}
	env := src.env()
	if mode == TailLaunch {
		return env.tail(opName, node, src, x)
	}
	into := env
	if mode == SiblingLaunch {
		into = env.parent
	}
	into.mu.Lock()
	if into.ff >= maxFireAndForget {
		into.mu.Unlock()
		return nodeErr(opName, node, ErrInvalidValue, "over %d fire-and-forget launches in one graph execution", maxFireAndForget)
	}
	if err := x.acquire(opName, node, true); err != nil {
		into.mu.Unlock()
		return err
	}
	into.ff++
	into.kids.Add(1)
	into.mu.Unlock()
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
func (env *devEnv) tail(opName string, node *Node, src, x *Exec) error {
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(env.tails) >= maxPendingTails {
		return nodeErr(opName, node, ErrInvalidValue, "over %d pending tail launches", maxPendingTails)
	}
	if x == src {
		// The graph relaunching itself: allowed while it runs, once.
		if env.selfTail {
			return nodeErr(opName, node, ErrInvalidValue, "the graph has already queued itself for tail launch")
		}
		x.mu.Lock()
		x.dl.pending++
		x.mu.Unlock()
		env.selfTail = true
	} else if err := x.acquire(opName, node, false); err != nil {
		return err
	}
	env.tails = append(env.tails, x)
	return nil
}

// acquire accepts a device launch of x if no launch of it is running or
// queued, host launches included; run marks it executing at once.
func (x *Exec) acquire(opName string, node *Node, run bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.destroyed {
		return nodeErr(opName, node, ErrInvalidValue, "the graph is destroyed")
	}
	if x.dl.pending > 0 || x.issued.Load() != x.finished.Load() {
		return nodeErr(opName, node, ErrInvalidValue, "a launch of the graph is running or queued")
	}
	x.dl.pending++
	x.dl.running = run
	if run {
		x.runOps = x.dl.upOps
	}
	return nil
}

// CurrentGraphExec returns the device handle of the device graph running
// this kernel, the outermost one for a kernel in a child graph, or 0 if the
// kernel is not running in a device graph (cudaGetCurrentGraphExec). A
// kernel relaunches its own graph with LaunchGraph(b.CurrentGraphExec(),
// TailLaunch).
func (b Block) CurrentGraphExec() uint64 {
	if b.ctx == nil || !b.ctx.e.dl.launch {
		return 0
	}
	return b.ctx.e.deviceHandle()
}

// DeviceHandle returns the handle a kernel launches the graph with: pass it
// as a Uint64 argument, to Block.LaunchGraph in a Go body, or cast to
// cudaGraphExec_t in CUDA code (on the cuda backend it is the CUgraphExec).
// Any executable graph has one, but only those instantiated with
// InstantiateDeviceLaunch can be launched from the device.
func (e *Exec) DeviceHandle() (uint64, error) {
	if err := e.check("Exec.DeviceHandle"); err != nil {
		return 0, err
	}
	if e.be != nil {
		return e.be.DeviceHandle(), nil
	}
	return e.deviceHandle(), nil
}

// Host-backend device handles: numbers, looked up in execHandles.
var (
	execHandles    sync.Map // uint64 -> *Exec
	nextExecHandle atomic.Uint64
)

func (e *Exec) deviceHandle() uint64 {
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

// checkStreamLaunch refuses a kernel that launches graphs outside a graph:
// the GPU refuses to launch such a kernel into a stream
// (cudaErrorNotSupported) and the kernel does not run.
func checkStreamLaunch(opName string, p *KernelParams) error {
	if p.Kernel != nil && p.Kernel.DeviceRuntime {
		return newErr(opName, ErrNotSupported, "kernel %q launches graphs (DeviceRuntime): it runs only as a kernel node of a graph", p.Kernel.Name)
	}
	return nil
}
