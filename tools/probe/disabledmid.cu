// disabledmid.cu asks the driver whether a node disabled with
// cudaGraphNodeSetEnabled still orders its dependencies before its
// dependents: a slow kernel writes x, the disabled node (a memset, a
// memcpy or a kernel) follows it, and a kernel after that copies x to z; z
// must be x's new value. Two differential inputs (docs/reliability.md)
// suggested the driver drops the ordering of a disabled memset node, as it
// drops that of a child graph node whose nodes are all disabled
// (disabledchild.cu). One line per case. On a GPU:
//
//	nvcc -O2 -o disabledmid tools/probe/disabledmid.cu && ./disabledmid
#include <cstdio>
#include <cuda_runtime.h>

__global__ void slowSet(int* x, int v) {
  long long t = clock64();
  while (clock64() - t < 20000000) {
  }
  *x = v;
}
__global__ void copy(int* z, const int* x) { *z = *x; }
__global__ void nop(int* y) { y[1] = 1; }

static cudaGraphNode_t kernel(cudaGraph_t g, const cudaGraphNode_t* deps, size_t n, void* fn, void** args) {
  cudaKernelNodeParams kp = {};
  kp.func = fn;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(1);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  cudaGraphAddKernelNode(&node, g, deps, n, &kp);
  return node;
}

enum Mid { Memset1D, Memset2D, Memcpy, Kernel, Memset1D4, Memset1DSink };
static const char* midName[] = {"memset 1D", "memset 2D", "memcpy device to device", "kernel", "memset 1D of 4-byte elements", "memset 1D (a sink; copy after the slow kernel)"};

static void run(Mid mid, bool disable, bool launchedBefore) {
  int *x, *z, *y;
  cudaMalloc(&x, 4);
  cudaMalloc(&z, 4);
  cudaMalloc(&y, 256);
  cudaMemset(x, 0, 4);
  cudaMemset(z, 0, 4);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t g;
  cudaGraphCreate(&g, 0);
  int v = 42;
  void* a1[] = {&x, &v};
  cudaGraphNode_t k1 = kernel(g, nullptr, 0, (void*)slowSet, a1);
  cudaGraphNode_t m = nullptr;
  switch (mid) {
  case Memset1D:
  case Memset1D4:
  case Memset1DSink:
  case Memset2D: {
    cudaMemsetParams mp = {};
    mp.dst = y;
    mp.value = 7;
    mp.elementSize = mid == Memset1D4 ? 4 : 1;
    mp.width = mid == Memset2D ? 4 : mid == Memset1D4 ? 16 : 64;
    mp.height = mid == Memset2D ? 3 : 1;
    mp.pitch = mid == Memset2D ? 16 : 0;
    cudaGraphAddMemsetNode(&m, g, &k1, 1, &mp);
    break;
  }
  case Memcpy:
    cudaGraphAddMemcpyNode1D(&m, g, &k1, 1, y + 32, y, 64, cudaMemcpyDeviceToDevice);
    break;
  case Kernel: {
    void* a[] = {&y};
    m = kernel(g, &k1, 1, (void*)nop, a);
    break;
  }
  }
  void* a2[] = {&z, &x};
  kernel(g, mid == Memset1DSink ? &k1 : &m, 1, (void*)copy, a2);
  cudaGraphExec_t e;
  cudaGraphInstantiate(&e, g, 0);
  if (launchedBefore) {
    cudaGraphLaunch(e, s);
    cudaStreamSynchronize(s);
    cudaMemset(x, 0, 4);
    cudaMemset(z, 0, 4);
  }
  if (disable) {
    cudaError_t err = cudaGraphNodeSetEnabled(e, m, 0);
    if (err != cudaSuccess) printf("  SetEnabled: %s\n", cudaGetErrorName(err));
  }
  cudaGraphLaunch(e, s);
  cudaError_t err = cudaStreamSynchronize(s);
  int hz = -1, hx = -1;
  cudaMemcpy(&hz, z, 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&hx, x, 4, cudaMemcpyDeviceToHost);
  char name[128];
  snprintf(name, sizeof name, "slow kernel -> %s%s%s -> copy", midName[mid], disable ? " (disabled)" : "",
           launchedBefore ? ", launched enabled before" : "");
  printf("%-78s x=%d z=%d (%s) %s\n", name, hx, hz, cudaGetErrorName(err), hz == 42 ? "ordered" : "NOT ORDERED");
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
}

int main() {
  int drv = 0;
  cudaDriverGetVersion(&drv);
  printf("disabledmid.cu: driver %d\n", drv);
  for (int mid = 0; mid < 6; mid++) {
    run((Mid)mid, false, false);
    run((Mid)mid, true, false);
    run((Mid)mid, true, true);
  }
  return 0;
}
