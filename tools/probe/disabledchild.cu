// disabledchild.cu asks the driver whether a child graph node still orders
// its dependencies and its dependents when the nodes inside it are disabled
// (cudaGraphNodeSetEnabled on a node of the embedded graph): a slow kernel
// writes x, the child graph node after it holds a memset, and a kernel after
// the child copies x to z. z must be x's new value. Answers in
// docs/driver-capture.txt ("disabled nodes in a child graph"). On a GPU:
//
//	nvcc -O2 -o disabledchild disabledchild.cu && ./disabledchild
#include <cstdio>
#include <cuda_runtime.h>

__global__ void slowSet(int* x, int v) {
  long long t = clock64();
  while (clock64() - t < 20000000) {
  }
  *x = v;
}
__global__ void copy(int* z, const int* x) { *z = *x; }

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

// run builds slowSet(x) -> child{inner nodes} -> copy(z <- x), disables
// the child's nodes (all of them, or the first only), launches, and prints z.
static void run(const char* name, int inner, int disable, bool capture) {
  int *x, *z, *y;
  cudaMalloc(&x, 4);
  cudaMalloc(&z, 4);
  cudaMalloc(&y, 64);
  cudaMemset(x, 0, 4);
  cudaMemset(z, 0, 4);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t child;
  cudaGraphCreate(&child, 0);
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < inner; i++) {
    cudaMemsetParams mp = {};
    mp.dst = y + 4 * i;
    mp.value = 7;
    mp.elementSize = 2;
    mp.width = 14;
    mp.height = 1;
    cudaGraphAddMemsetNode(&prev, child, nullptr, 0, &mp);
  }
  cudaGraph_t g;
  cudaGraphCreate(&g, 0);
  int v = 42;
  void* a1[] = {&x, &v};
  cudaGraphNode_t k1 = kernel(g, nullptr, 0, (void*)slowSet, a1);
  cudaGraphNode_t cn;
  cudaGraphAddChildGraphNode(&cn, g, &k1, 1, child);
  void* a2[] = {&z, &x};
  kernel(g, &cn, 1, (void*)copy, a2);
  cudaGraph_t emb;
  cudaGraphChildGraphNodeGetGraph(cn, &emb);
  size_t n = 0;
  cudaGraphGetNodes(emb, nullptr, &n);
  cudaGraphNode_t nodes[16];
  cudaGraphGetNodes(emb, nodes, &n);
  cudaGraphExec_t e;
  cudaGraphInstantiate(&e, g, 0);
  if (capture) {  // the same exec, launched once enabled first
    cudaGraphLaunch(e, s);
    cudaStreamSynchronize(s);
    cudaMemset(x, 0, 4);
    cudaMemset(z, 0, 4);
  }
  for (int i = 0; i < disable && i < (int)n; i++) {
    cudaError_t err = cudaGraphNodeSetEnabled(e, nodes[i], 0);
    if (err != cudaSuccess) printf("  SetEnabled: %s\n", cudaGetErrorName(err));
  }
  cudaGraphLaunch(e, s);
  cudaError_t err = cudaStreamSynchronize(s);
  int hz = -1, hx = -1;
  cudaMemcpy(&hz, z, 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(&hx, x, 4, cudaMemcpyDeviceToHost);
  printf("%-70s x=%d z=%d (%s) %s\n", name, hx, hz, cudaGetErrorName(err), hz == 42 ? "ordered" : "NOT ORDERED");
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaGraphDestroy(child);
  cudaStreamDestroy(s);
}

int main() {
  run("child of 1 memset, none disabled", 1, 0, false);
  run("child of 1 memset, disabled", 1, 1, false);
  run("child of 1 memset, disabled after a first launch", 1, 1, true);
  run("child of 2 memsets, 1 disabled", 2, 1, false);
  run("child of 2 memsets, both disabled", 2, 2, false);
  run("child of 2 memsets, both disabled after a first launch", 2, 2, true);
  return 0;
}
