// peerreenable.cu asks the driver whether a kernel node that works on a
// peer device's memory runs again once re-enabled (cudaGraphNodeSetEnabled
// off, a launch, on, a launch): a two-GPU differential input (a graph
// captured on device 0 with kernels on device 1's memory) found the
// re-enabled kernel's output missing. Captured and added nodes, device 1's
// memory and device 0's (the control). One line per case. Needs two GPUs
// with peer access.
//
//	nvcc -O2 -o peerreenable tools/probe/peerreenable.cu && ./peerreenable
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

__global__ void add1(int* p) { p[threadIdx.x] += 1; }

static void run(bool captured, int memDev, bool setFirst) {
  MUST(cudaSetDevice(memDev));
  int* p;
  MUST(cudaMalloc(&p, 64));
  MUST(cudaMemset(p, 0, 64));
  MUST(cudaDeviceSynchronize());
  MUST(cudaSetDevice(0));
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphNode_t k;
  if (captured) {
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    add1<<<1, 4, 0, s>>>(p);
    MUST(cudaStreamEndCapture(s, &g));
    size_t n = 1;
    MUST(cudaGraphGetNodes(g, &k, &n));
  } else {
    MUST(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams kp = {};
    void* args[] = {&p};
    kp.func = (void*)add1;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(4);
    kp.kernelParams = args;
    MUST(cudaGraphAddKernelNode(&k, g, nullptr, 0, &kp));
  }
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, 0));
  if (setFirst) { // the same parameters again, as the differential input did
    cudaKernelNodeParams kp = {};
    void* args[] = {&p};
    kp.func = (void*)add1;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(4);
    kp.kernelParams = args;
    MUST(cudaGraphExecKernelNodeSetParams(e, k, &kp));
  }
  int got[4];
  const char* step[] = {"enabled", "disabled", "enabled again"};
  printf("%-8s kernel on device %d's memory%s:", captured ? "captured" : "added", memDev, setFirst ? ", SetParams first" : "");
  for (int i = 0; i < 3; i++) {
    if (i > 0) MUST(cudaGraphNodeSetEnabled(e, k, i == 1 ? 0 : 1));
    MUST(cudaGraphLaunch(e, s));
    MUST(cudaStreamSynchronize(s));
    MUST(cudaMemcpy(got, p, sizeof got, cudaMemcpyDefault));
    printf("  %s -> %d", step[i], got[0]);
  }
  printf("  (want 1, 1, 2)\n");
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(p);
}

int main() {
  int drv = 0, n = 0, can = 0;
  cudaDriverGetVersion(&drv);
  MUST(cudaGetDeviceCount(&n));
  printf("peerreenable.cu: %d GPU(s), driver %d\n", n, drv);
  if (n < 2) return 0;
  MUST(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) {
    printf("device 0 cannot access device 1\n");
    return 0;
  }
  MUST(cudaSetDevice(0));
  MUST(cudaDeviceEnablePeerAccess(1, 0));
  MUST(cudaSetDevice(1));
  MUST(cudaDeviceEnablePeerAccess(0, 0));
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 2; c++)
      for (int m = 1; m >= 0; m--) run(c, m, f);
  return 0;
}
