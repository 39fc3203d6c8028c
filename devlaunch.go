package gpugraph

import (
	"errors"
	"fmt"
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
	// launch, the nodes are on different devices; or a conditional body
	// holds a node of another device than its conditional node's.
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
	work, unknown, root := 0, false, g
	var multi *Node // a node of another device than the graph's
	var walk func(g *Graph) (*Error, error)
	walk = func(g *Graph) (*Error, error) {
		if err := g.lock(opName); err != nil {
			return nil, err
		}
		defer g.mu.Unlock()
		for _, n := range g.nodes {
			if n.dev != nil && n.dev != root.dev && multi == nil {
				multi = n
			}
			switch n.typ {
			case NodeKernel, NodeMemset:
			case NodeMemcpy:
				if c, ok := n.params.(MemcpyParams); ok && g.dev.pageableCopy(&c) {
					return nodeErr(opName, n, ErrInvalidValue, "a device graph can copy device memory and pinned host memory, not pageable host memory"), nil
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
	case multi != nil:
		// "The graph's nodes must all reside on a single device" (the
		// CUDA programming guide's device graph requirements).
		return p.fail(InstantiateMultipleDevicesNotSupported, nodeErr(opName, multi, ErrInvalidValue,
			"runs on device %d: a device graph's nodes run on its device (%d)", multi.dev.props.Ordinal, root.dev.props.Ordinal))
	case work == 0 && !unknown:
		return p.fail(InstantiateError, newErr(opName, ErrInvalidValue, "a device graph needs a kernel, memcpy or memset node"))
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
	return backendErr("Block.LaunchGraph", b.rt.LaunchGraph(h, uint8(mode)))
}

// CurrentGraphExec returns the device handle of the device graph running
// this kernel, the outermost one for a kernel in a child graph, or 0 if the
// kernel is not running in a device graph (cudaGetCurrentGraphExec). A
// kernel relaunches its own graph with LaunchGraph(b.CurrentGraphExec(),
// TailLaunch).
func (b Block) CurrentGraphExec() uint64 { return b.rt.CurrentGraphExec() }

// DeviceHandle returns the handle a kernel launches the graph with: pass it
// as a Uint64 argument, to Block.LaunchGraph in a Go body, or cast to
// cudaGraphExec_t in CUDA code (on the cuda backend it is the CUgraphExec).
// Any executable graph has one, but only those instantiated with
// InstantiateDeviceLaunch can be launched from the device.
func (e *Exec) DeviceHandle() (uint64, error) {
	if err := e.check("Exec.DeviceHandle"); err != nil {
		return 0, err
	}
	return e.be.DeviceHandle(), nil
}

// checkStreamLaunch refuses a kernel that launches graphs outside a graph:
// the GPU refuses to launch such a kernel into a stream
// (cudaErrorNotSupported) and the kernel does not run.
func checkStreamLaunch(p *KernelParams) (*Code, string) {
	if p.Kernel != nil && p.Kernel.DeviceRuntime {
		return ErrNotSupported, fmt.Sprintf("kernel %q launches graphs (DeviceRuntime): it runs only as a kernel node of a graph", p.Kernel.Name)
	}
	return nil, ""
}
