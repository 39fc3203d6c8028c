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

// multiDevice is the differential input's shape (FuzzDifferential 2977): a
// capture on device 0 forks a kernel onto a stream of device 1, so the
// graph spans both devices, all on device 1's memory; kernel k2 (device
// 0) is updated with its own parameters, disabled for one launch and
// enabled again, the launches alternating between two streams.
__global__ void addFrom(int* d, const int* s) { d[threadIdx.x] += s[threadIdx.x] + 1; }

static void multiDevice() {
  MUST(cudaSetDevice(1));
  int *a, *b, *c;
  MUST(cudaMalloc(&a, 64));
  MUST(cudaMalloc(&b, 64));
  MUST(cudaMalloc(&c, 64));
  MUST(cudaMemset(a, 0, 64));
  MUST(cudaMemset(b, 0, 64));
  MUST(cudaMemset(c, 0, 64));
  cudaStream_t s1;
  MUST(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  MUST(cudaDeviceSynchronize());
  MUST(cudaSetDevice(0));
  cudaStream_t s0, t0;
  MUST(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  MUST(cudaStreamCreateWithFlags(&t0, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  MUST(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  MUST(cudaSetDevice(1));
  MUST(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  MUST(cudaSetDevice(0));
  cudaGraph_t g;
  MUST(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
  addFrom<<<1, 4, 0, s0>>>(a, b); // k0: a += b + 1
  MUST(cudaEventRecord(fork, s0));
  MUST(cudaSetDevice(1));
  MUST(cudaStreamWaitEvent(s1, fork, 0));
  addFrom<<<1, 4, 0, s1>>>(c, a); // k1 on device 1: c += a + 1
  MUST(cudaEventRecord(join, s1));
  MUST(cudaSetDevice(0));
  addFrom<<<1, 4, 0, s0>>>(b, a); // k2: b += a + 1
  MUST(cudaStreamWaitEvent(s0, join, 0));
  MUST(cudaStreamEndCapture(s0, &g));
  cudaGraphNode_t nodes[8];
  size_t n = 8;
  MUST(cudaGraphGetNodes(g, nodes, &n));
  cudaGraphNode_t k2 = nullptr;
  for (size_t i = 0; i < n; i++) {
    cudaKernelNodeParams kp;
    if (cudaGraphKernelNodeGetParams(nodes[i], &kp) == cudaSuccess && *(int**)kp.kernelParams[0] == b) k2 = nodes[i];
    cudaGetLastError();
  }
  if (!k2) {
    printf("multi-device graph: k2 not found among %zu nodes\n", n);
    return;
  }
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, 0));
  // The reference, launch by launch (a, b, c start at 0).
  int ra = 0, rb = 0, rc = 0;
  int got[3][4];
  const char* step[] = {"enabled", "disabled", "enabled again"};
  printf("multi-device graph, k2 updated, disabled, enabled:");
  for (int l = 0; l < 3; l++) {
    if (l == 0) {
      cudaKernelNodeParams kp = {};
      void* args[] = {&b, &a};
      kp.func = (void*)addFrom;
      kp.gridDim = dim3(1);
      kp.blockDim = dim3(4);
      kp.kernelParams = args;
      MUST(cudaGraphExecKernelNodeSetParams(e, k2, &kp));
    }
    if (l > 0) MUST(cudaGraphNodeSetEnabled(e, k2, l == 1 ? 0 : 1));
    MUST(cudaGraphLaunch(e, l % 2 ? t0 : s0));
    MUST(cudaStreamSynchronize(l % 2 ? t0 : s0));
    MUST(cudaDeviceSynchronize());
    ra += rb + 1;
    rc += ra + 1;
    if (l != 1) rb += ra + 1;
    MUST(cudaMemcpy(got[0], a, 16, cudaMemcpyDefault));
    MUST(cudaMemcpy(got[1], b, 16, cudaMemcpyDefault));
    MUST(cudaMemcpy(got[2], c, 16, cudaMemcpyDefault));
    printf("  %s -> a %d b %d c %d (want %d %d %d)", step[l], got[0][0], got[1][0], got[2][0], ra, rb, rc);
  }
  printf("\n");
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
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
  multiDevice();
  return 0;
}
