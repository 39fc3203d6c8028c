package gpugraph

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// cudaInstantiateWithParams instantiates g natively with p's flags and
// reports the driver's result and error node in p. Device graph launch on
// the cuda backend instantiates through cuGraphInstantiateWithParams, which
// uploads with InstantiateUpload.
func (d *Device) cudaInstantiateWithParams(opName string, e *Exec, g *Graph, p *InstantiateParams) error {
	ip := driver.GraphInstantiateParams{Flags: uint64(p.Flags)}
	if p.Flags&InstantiateUpload != 0 {
		ip.UploadStream = p.UploadStream.cu
	}
	err := d.cuCall(opName, func() error {
		var err error
		e.cu, err = d.cuda.drv.InstantiateWithParams(g.cu, &ip)
		return err
	})
	p.Result = InstantiateResult(ip.Result)
	if ip.ErrNode != 0 {
		p.ErrNode = g.nodeOfHandle(ip.ErrNode)
	}
	if err != nil {
		if p.Result == InstantiateSuccess {
			p.Result = InstantiateError
		}
		var e *Error
		if errors.As(err, &e) && p.ErrNode != nil {
			e.Node = p.ErrNode
		}
	}
	return err
}

// nodeOfHandle finds the node of g, or of a graph embedded in it, whose
// native node is h.
func (g *Graph) nodeOfHandle(h uintptr) *Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.nodes {
		if n.cu == h {
			return n
		}
		if n.child != nil {
			if m := n.child.nodeOfHandle(h); m != nil {
				return m
			}
		}
	}
	return nil
}

// devRTPrelude declares what a kernel that launches graphs uses, for NVRTC
// versions that do not pre-include the device runtime header: the
// device-side cudaGraphLaunch (extern "C", defined in libcudadevrt),
// cudaGetCurrentGraphExec (the %current_graph_exec register) and the named
// streams of the launch modes, as cuda_device_runtime_api.h has them.
const devRTPrelude = `#ifndef cudaStreamGraphTailLaunch
struct CUgraphExec_st;
struct CUstream_st;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUstream_st *cudaStream_t;
extern "C" __device__ int cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
static inline __device__ cudaGraphExec_t cudaGetCurrentGraphExec(void) {
	unsigned long long h;
	asm("mov.u64 %0, %%current_graph_exec;" : "=l"(h));
	return (cudaGraphExec_t)h;
}
#define cudaStreamGraphTailLaunch (cudaStream_t)0x0100000000000000
#define cudaStreamGraphFireAndForget (cudaStream_t)0x0200000000000000
#define cudaStreamGraphFireAndForgetAsSibling (cudaStream_t)0x0300000000000000
#endif
#line 1
`

// devRTSource returns the source NVRTC compiles for k and the extra
// options: kernels that launch graphs are relocatable device code, with the
// prelude; kernels that only ask for their graph get the prelude.
func devRTSource(k *Kernel) (string, []string) {
	if !k.DeviceRuntime {
		if strings.Contains(k.CUDA, "cudaGetCurrentGraphExec") { // inline: no device runtime needed
			return devRTPrelude + k.CUDA, nil
		}
		return k.CUDA, nil
	}
	return devRTPrelude + k.CUDA, []string{"-rdc=true"}
}

// linkDevRT links the PTX of a kernel that launches graphs with the device
// runtime, libcudadevrt.a (the kernel was compiled as relocatable device
// code); other images are returned as they are. The context must be
// current.
func (c *cudaDev) linkDevRT(k *Kernel, image []byte) ([]byte, error) {
	if !k.DeviceRuntime || bytes.HasPrefix(image, []byte("\x7fELF")) {
		return image, nil
	}
	lib, err := driver.DevRTLibrary()
	if err != nil {
		return nil, fmt.Errorf("kernel %q launches graphs (DeviceRuntime): %v", k.Name, err)
	}
	out, err := c.drv.LinkDevRT(image, k.Name+".ptx", lib)
	if err != nil {
		return nil, fmt.Errorf("kernel %q: linking with %s: %w", k.Name, lib, err)
	}
	return out, nil
}
