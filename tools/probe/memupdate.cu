// memupdate.cu asks the CUDA driver how cudaGraphExecUpdate treats graphs
// with memory alloc and free nodes: which updates it makes, what the
// executable graph's allocations are afterwards (their addresses), which
// node and UpdateResult it names when it refuses, and in which order it
// looks at the nodes. The host backend's update rule is checked against this
// output, committed in docs/driver-memnodes.txt ("update"). On a GPU:
//
//	nvcc -O2 -o memupdate memupdate.cu && ./memupdate
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

static const size_t MiB = 1 << 20;

// put writes v at p[0] and reports the address and what it read back.
__global__ void put(int* p, int v, unsigned long long* addr, int* val) {
  p[0] = v;
  *addr = (unsigned long long)p;
  *val = p[0];
}
__global__ void put2(int* p, int v, unsigned long long* addr, int* val) {  // another function
  p[0] = v + 1000;
  *addr = (unsigned long long)p;
  *val = p[0];
}

static unsigned long long* dAddr;
static int* dVal;

static cudaMemAllocNodeParams allocParams(size_t n) {
  cudaMemAllocNodeParams p = {};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = n;
  return p;
}

struct G {
  cudaGraph_t g = nullptr;
  cudaGraphNode_t alloc = nullptr, memset = nullptr, kernel = nullptr, free = nullptr;
  void* a = nullptr;
};

// build makes alloc -> memset -> kernel -> free; memsetOn / kernelOn /
// freeOn replace the node's address with another (nullptr: its own
// allocation); fn is the kernel's function; value its argument.
static int useMask = 3;  // 1: the memset node, 2: the kernel node (an empty node otherwise)

static G build(size_t size, void* memsetOn, void* kernelOn, void* freeOn, void* fn, int value, bool noFree = false) {
  G r;
  cudaGraphCreate(&r.g, 0);
  cudaMemAllocNodeParams ap = allocParams(size);
  cudaError_t e = cudaGraphAddMemAllocNode(&r.alloc, r.g, nullptr, 0, &ap);
  if (e != cudaSuccess) printf("  alloc node: %s\n", cudaGetErrorName(e));
  r.a = ap.dptr;
  cudaMemsetParams mp = {};
  mp.dst = memsetOn ? memsetOn : r.a;
  mp.value = 0;
  mp.elementSize = 4;
  mp.width = 16;
  mp.height = 1;
  e = (useMask & 1) ? cudaGraphAddMemsetNode(&r.memset, r.g, &r.alloc, 1, &mp) : cudaGraphAddEmptyNode(&r.memset, r.g, &r.alloc, 1);
  if (e != cudaSuccess) printf("  memset node: %s\n", cudaGetErrorName(e));
  int* p = (int*)(kernelOn ? kernelOn : r.a);
  void* args[] = {&p, &value, &dAddr, &dVal};
  cudaKernelNodeParams kp = {};
  kp.func = fn;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(1);
  kp.kernelParams = args;
  e = (useMask & 2) ? cudaGraphAddKernelNode(&r.kernel, r.g, &r.memset, 1, &kp) : cudaGraphAddEmptyNode(&r.kernel, r.g, &r.memset, 1);
  if (e != cudaSuccess) printf("  kernel node: %s\n", cudaGetErrorName(e));
  if (!noFree) {
    e = cudaGraphAddMemFreeNode(&r.free, r.g, &r.kernel, 1, freeOn ? freeOn : r.a);
    if (e != cudaSuccess) printf("  free node: %s\n", cudaGetErrorName(e));
  } else {
    cudaGraphAddEmptyNode(&r.free, r.g, &r.kernel, 1);
  }
  return r;
}

static const char* resultName(cudaGraphExecUpdateResult r) {
  switch (r) {
    case cudaGraphExecUpdateSuccess: return "Success";
    case cudaGraphExecUpdateError: return "Error";
    case cudaGraphExecUpdateErrorTopologyChanged: return "ErrorTopologyChanged";
    case cudaGraphExecUpdateErrorNodeTypeChanged: return "ErrorNodeTypeChanged";
    case cudaGraphExecUpdateErrorFunctionChanged: return "ErrorFunctionChanged";
    case cudaGraphExecUpdateErrorParametersChanged: return "ErrorParametersChanged";
    case cudaGraphExecUpdateErrorNotSupported: return "ErrorNotSupported";
    case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return "ErrorUnsupportedFunctionChange";
    case cudaGraphExecUpdateErrorAttributesChanged: return "ErrorAttributesChanged";
  }
  return "?";
}

static const char* nodeName(const G& g, cudaGraphNode_t n) {
  if (!n) return "none";
  if (n == g.alloc) return "alloc";
  if (n == g.memset) return "memset";
  if (n == g.kernel) return "kernel";
  if (n == g.free) return "free";
  return "other";
}

// run launches e and prints the address the kernel saw (A: the first
// graph's allocation, B: the second's) and the value it read.
static void run(cudaGraphExec_t e, cudaStream_t s, const G& a, const G& b) {
  cudaMemset(dVal, 0xff, 4);
  cudaError_t err = cudaGraphLaunch(e, s);
  cudaError_t serr = cudaStreamSynchronize(s);
  unsigned long long addr = 0;
  int val = 0;
  cudaMemcpy(&addr, dAddr, 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(&val, dVal, 4, cudaMemcpyDeviceToHost);
  const char* which = addr == (unsigned long long)a.a ? "A's" : addr == (unsigned long long)b.a ? "B's" : "another";
  printf("    launch %s, sync %s: kernel wrote at %s allocation, read %d\n", cudaGetErrorName(err), cudaGetErrorName(serr), which, val);
}

static void update(const char* name, G a, G b, unsigned flags = cudaGraphInstantiateFlagAutoFreeOnLaunch) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  printf("%s\n", name);
  cudaGraphExec_t e = nullptr;
  cudaError_t err = cudaGraphInstantiateWithFlags(&e, a.g, flags);
  if (err != cudaSuccess) {
    printf("  instantiate A: %s\n", cudaGetErrorName(err));
    cudaGetLastError();
    return;
  }
  run(e, s, a, b);
  cudaGraphExecUpdateResultInfo info = {};
  err = cudaGraphExecUpdate(e, b.g, &info);
  printf("  update A->B: %s, result %s, error node %s (of B), from %s\n", cudaGetErrorName(err), resultName(info.result),
         nodeName(b, info.errorNode), nodeName(b, info.errorFromNode));
  cudaGetLastError();
  run(e, s, a, b);
  cudaGraphExec_t e2 = nullptr;
  err = cudaGraphInstantiateWithFlags(&e2, b.g, flags);
  printf("  then instantiate B: %s\n", cudaGetErrorName(err));
  cudaGetLastError();
  if (e2) cudaGraphExecDestroy(e2);
  cudaGraphExec_t e3 = nullptr;
  err = cudaGraphInstantiateWithFlags(&e3, a.g, flags);
  printf("  then instantiate A again: %s\n", cudaGetErrorName(err));
  cudaGetLastError();
  if (e3) cudaGraphExecDestroy(e3);
  cudaGraphExecDestroy(e);
  cudaDeviceSynchronize();
  if (a.g != b.g) cudaGraphDestroy(b.g);
  cudaGraphDestroy(a.g);
  cudaDeviceSynchronize();
  cudaDeviceGraphMemTrim(0);
  cudaStreamDestroy(s);
}

int main() {
  cudaSetDevice(0);
  cudaMalloc(&dAddr, 8);
  cudaMalloc(&dVal, 4);
  void* f1 = (void*)put;
  void* f2 = (void*)put2;
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1), b = build(MiB, nullptr, nullptr, nullptr, f1, 2);
    update("1. B has its own alloc and free, same size", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1), b = build(2 * MiB, nullptr, nullptr, nullptr, f1, 2);
    update("2. B's alloc is twice the size", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    G b = build(MiB, a.a, nullptr, nullptr, f1, 2);
    update("3. B's memset is on A's allocation", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    G b = build(MiB, nullptr, a.a, nullptr, f1, 2);
    update("4. B's kernel is on A's allocation", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    G b = build(MiB, nullptr, nullptr, a.a, f1, 2);
    update("5. B's free node frees A's allocation", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    update("6. A updated from A", a, a);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    G b = build(MiB, a.a, nullptr, nullptr, f2, 2);
    update("7. B's memset on A's allocation (made first) and B's kernel another function (made later)", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    G b = build(MiB, nullptr, a.a, nullptr, f2, 2);
    update("8. B's kernel another function and on A's allocation", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1), b = build(MiB, nullptr, nullptr, nullptr, f1, 2);
    update("9. as 1, instantiated without auto-free", a, b, 0);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1, true), b = build(MiB, nullptr, nullptr, nullptr, f1, 2, true);
    update("10. no free nodes (allocations left live), B its own", a, b);
  }
  {
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1), b = build(MiB, nullptr, nullptr, nullptr, f2, 2);
    update("11. B's kernel another function only", a, b);
  }
  {
    // A graph with no memory nodes, updated to one the same but whose
    // memset and kernel are on a graph allocation of another graph.
    G c = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    cudaGraph_t plain, plain2;
    cudaGraphCreate(&plain, 0);
    cudaGraphCreate(&plain2, 0);
    int* buf;
    cudaMalloc(&buf, MiB);
    int v = 5;
    void* args1[] = {&buf, &v, &dAddr, &dVal};
    int* ca = (int*)c.a;
    void* args2[] = {&ca, &v, &dAddr, &dVal};
    cudaKernelNodeParams kp = {};
    kp.func = f1;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args1;
    cudaGraphNode_t n1, n2;
    cudaGraphAddKernelNode(&n1, plain, nullptr, 0, &kp);
    kp.kernelParams = args2;
    cudaGraphAddKernelNode(&n2, plain2, nullptr, 0, &kp);
    cudaGraphExec_t e;
    cudaGraphInstantiate(&e, plain, 0);
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t err = cudaGraphExecUpdate(e, plain2, &info);
    printf("12. kernel-only graph updated to a kernel on another graph's allocation\n  update: %s, result %s\n", cudaGetErrorName(err), resultName(info.result));
    cudaGetLastError();
  }
  // Which nodes an update from a graph with its own alloc and free nodes
  // refuses: memset only, kernel only, neither.
  const char* masks[] = {"", "memset only", "kernel only", "memset and kernel"};
  for (int m = 0; m < 4; m++) {
    useMask = m;
    char name[128];
    snprintf(name, sizeof name, "13.%d B its own alloc and free, users: %s", m, m ? masks[m] : "none (empty nodes)");
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1), b = build(MiB, nullptr, nullptr, nullptr, f1, 2);
    update(name, a, b);
    snprintf(name, sizeof name, "14.%d no free nodes, users: %s", m, m ? masks[m] : "none (empty nodes)");
    G c = build(MiB, nullptr, nullptr, nullptr, f1, 1, true), d = build(MiB, nullptr, nullptr, nullptr, f1, 2, true);
    update(name, c, d);
  }
  useMask = 3;
  {
    // The same graph twice from one recipe, but B's alloc node made with
    // the address A's returned free (A destroyed first is not possible
    // while its exec lives): B made after A's exec is destroyed.
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1);
    void* aa = a.a;
    cudaGraphDestroy(a.g);
    G b = build(MiB, nullptr, nullptr, nullptr, f1, 2);
    printf("15. a graph made after another is destroyed gets %s address\n", b.a == aa ? "the same" : "another");
    cudaGraphDestroy(b.g);
  }
  {
    // 16. a memcpy node (device to device, from a cudaMalloc buffer) into
    // B's own allocation, which B frees; the kernel on it too.
    int* src;
    cudaMalloc(&src, MiB);
    G gs[2];
    for (int i = 0; i < 2; i++) {
      G& r = gs[i];
      cudaGraphCreate(&r.g, 0);
      cudaMemAllocNodeParams ap = allocParams(MiB);
      cudaGraphAddMemAllocNode(&r.alloc, r.g, nullptr, 0, &ap);
      r.a = ap.dptr;
      cudaError_t e = cudaGraphAddMemcpyNode1D(&r.memset, r.g, &r.alloc, 1, r.a, src, 64, cudaMemcpyDeviceToDevice);
      if (e != cudaSuccess) printf("  memcpy node: %s\n", cudaGetErrorName(e));
      int* p = (int*)r.a;
      int v = i + 1;
      void* args[] = {&p, &v, &dAddr, &dVal};
      cudaKernelNodeParams kp = {};
      kp.func = f1;
      kp.gridDim = dim3(1);
      kp.blockDim = dim3(1);
      kp.kernelParams = args;
      cudaGraphAddKernelNode(&r.kernel, r.g, &r.memset, 1, &kp);
      cudaGraphAddMemFreeNode(&r.free, r.g, &r.kernel, 1, r.a);
    }
    update("16. a memcpy node into B's own allocation (the 'memset' position), which B frees", gs[0], gs[1]);
  }
  {
    // 17. two branches: a kernel of another function (made first), then
    // alloc -> memset -> free (made later): which node is named?
    G gs[2];
    for (int i = 0; i < 2; i++) {
      G& r = gs[i];
      cudaGraphCreate(&r.g, 0);
      int* buf;
      cudaMalloc(&buf, 64);
      int v = 1;
      void* args[] = {&buf, &v, &dAddr, &dVal};
      cudaKernelNodeParams kp = {};
      kp.func = i == 0 ? f1 : f2;
      kp.gridDim = dim3(1);
      kp.blockDim = dim3(1);
      kp.kernelParams = args;
      cudaGraphAddKernelNode(&r.kernel, r.g, nullptr, 0, &kp);
      cudaMemAllocNodeParams ap = allocParams(MiB);
      cudaGraphAddMemAllocNode(&r.alloc, r.g, nullptr, 0, &ap);
      r.a = ap.dptr;
      cudaMemsetParams mp = {};
      mp.dst = r.a;
      mp.elementSize = 4;
      mp.width = 16;
      mp.height = 1;
      cudaGraphAddMemsetNode(&r.memset, r.g, &r.alloc, 1, &mp);
      cudaGraphAddMemFreeNode(&r.free, r.g, &r.memset, 1, r.a);
    }
    update("17. kernel of another function (made first) beside alloc -> memset -> free (made later)", gs[0], gs[1]);
  }
  {
    // 18. the kernel-only case updated A -> B, then back B -> A.
    useMask = 2;
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1), b = build(MiB, nullptr, nullptr, nullptr, f1, 2);
    useMask = 3;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGraphExec_t e;
    cudaGraphInstantiateWithFlags(&e, a.g, cudaGraphInstantiateFlagAutoFreeOnLaunch);
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t err = cudaGraphExecUpdate(e, b.g, &info);
    printf("18. kernel users only: A -> B %s (%s)", cudaGetErrorName(err), resultName(info.result));
    err = cudaGraphExecUpdate(e, a.g, &info);
    printf(", then B -> A %s (%s)\n", cudaGetErrorName(err), resultName(info.result));
    cudaGetLastError();
    run(e, s, a, b);
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(a.g);
    cudaGraphDestroy(b.g);
  }
  {
    useMask = 2;
    G a = build(MiB, nullptr, nullptr, nullptr, f1, 1), b = build(2 * MiB, nullptr, nullptr, nullptr, f1, 2);
    update("19. kernel users only, B's alloc twice the size", a, b);
    G c = build(MiB, nullptr, nullptr, nullptr, f1, 1), d = build(MiB, nullptr, nullptr, nullptr, f2, 2);
    update("20. kernel users only, B's kernel another function", c, d);
    useMask = 3;
  }
  printf("done\n");
  return 0;
}
