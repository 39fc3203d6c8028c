package cuda

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

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
func devRTSource(k *backend.Kernel) (string, []string) {
	if !k.DeviceRuntime {
		if strings.Contains(k.Source, "cudaGetCurrentGraphExec") { // inline: no device runtime needed
			return devRTPrelude + k.Source, nil
		}
		return k.Source, nil
	}
	return devRTPrelude + k.Source, []string{"-rdc=true"}
}

// linkDevRT links the PTX of a kernel that launches graphs with the device
// runtime, libcudadevrt.a (the kernel was compiled as relocatable device
// code); other images are returned as they are. The context must be
// current.
func (d *Device) linkDevRT(k *backend.Kernel, image []byte) ([]byte, error) {
	if !k.DeviceRuntime || bytes.HasPrefix(image, []byte("\x7fELF")) {
		return image, nil
	}
	lib, err := driver.DevRTLibrary()
	if err != nil {
		return nil, fmt.Errorf("kernel %q launches graphs (DeviceRuntime): %v", k.Name, err)
	}
	out, err := d.drv.LinkDevRT(image, k.Name+".ptx", lib)
	if err != nil {
		return nil, fmt.Errorf("kernel %q: linking with %s: %w", k.Name, lib, err)
	}
	return out, nil
}
