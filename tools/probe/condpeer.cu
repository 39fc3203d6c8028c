// condpeer.cu asks the CUDA driver, on two GPUs with peer access both ways,
// what becomes of copies, memsets and kernels on device 1's memory in a
// conditional body of a graph of device 0, against the same nodes outside a
// conditional node: a differential input (two devices, a 39-byte copy at odd
// offsets in a child graph in an IF body) ended in cudaErrorLaunchFailure on
// the GPU while the host backend ran it. Each case runs in a forked child
// process, because a fault destroys the context; one line per case:
// "case  add, instantiate, launch, synchronize, what the memory holds".
//
//	nvcc -O2 -o condpeer tools/probe/condpeer.cu && ./condpeer
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, nullptr, n, p)
#else
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, n, p)
#endif

static const size_t B = 256;

__global__ void fill(unsigned char* p, int n, unsigned char v) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = v;
}

enum Where { Plain, Body, ChildInBody };
enum What { Kernel, Copy64, Copy39Odd, CopyAcross39, Memset1D, Memset2D };

static const char* whereName[] = {"a plain graph", "an IF body", "a child graph in an IF body"};
static const char* whatName[] = {"kernel", "copy 64 B", "copy 39 B at offsets 10 <- 24", "copy 39 B device 0 <- device 1",
                                 "memset 1D 4 x 4 B", "memset 2D 1 x 4 B x 2 rows, pitch 12"};

// add puts the node of kind w on memory m (mem0 for the device 0 copy's
// destination) into graph g.
static cudaError_t add(cudaGraph_t g, What w, unsigned char* m, unsigned char* m0) {
  cudaGraphNode_t n;
  switch (w) {
  case Kernel: {
    int cnt = 64;
    unsigned char v = 5;
    void* args[] = {&m, &cnt, &v};
    cudaKernelNodeParams kp = {};
    kp.func = (void*)fill; kp.gridDim = dim3(1); kp.blockDim = dim3(32); kp.kernelParams = args;
    return cudaGraphAddKernelNode(&n, g, nullptr, 0, &kp);
  }
  case Copy64: return cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, m, m + 128, 64, cudaMemcpyDeviceToDevice);
  case Copy39Odd: return cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, m + 10, m + 24, 39, cudaMemcpyDeviceToDevice);
  case CopyAcross39: return cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, m0 + 10, m + 24, 39, cudaMemcpyDeviceToDevice);
  case Memset1D: {
    cudaMemsetParams p = {};
    p.dst = m + 16; p.value = 0x2c013f91; p.elementSize = 4; p.width = 4; p.height = 1;
    return cudaGraphAddMemsetNode(&n, g, nullptr, 0, &p);
  }
  case Memset2D: {
    cudaMemsetParams p = {};
    p.dst = m + 16; p.value = 0x2c013f91; p.elementSize = 4; p.width = 1; p.height = 2; p.pitch = 12;
    return cudaGraphAddMemsetNode(&n, g, nullptr, 0, &p);
  }
  }
  return cudaErrorInvalidValue;
}

static int runCase(Where where, What what, int memDev) {
  cudaSetDevice(1);
  cudaDeviceEnablePeerAccess(0, 0);
  cudaSetDevice(0);
  cudaDeviceEnablePeerAccess(1, 0);
  unsigned char *m, *m0;
  cudaSetDevice(memDev);
  cudaMalloc(&m, B);
  cudaMemset(m, 0x11, B);
  cudaSetDevice(0);
  cudaMalloc(&m0, B);
  cudaMemset(m0, 0x22, B);
  cudaDeviceSynchronize();
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t g;
  cudaGraphCreate(&g, 0);
  cudaGraph_t target = g;
  cudaError_t ea = cudaSuccess;
  if (where != Plain) {
    cudaGraphConditionalHandle h;
    cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault);
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h;
    cp.conditional.type = cudaGraphCondTypeIf;
    cp.conditional.size = 1;
    cudaGraphNode_t cn;
    ea = ADDNODE(&cn, g, nullptr, 0, &cp);
    if (ea == cudaSuccess) target = cp.conditional.phGraph_out[0];
  }
  cudaGraph_t child = nullptr;
  if (ea == cudaSuccess && where == ChildInBody) {
    cudaGraphCreate(&child, 0);
    ea = add(child, what, m, m0);
    cudaGraphNode_t n;
    if (ea == cudaSuccess) ea = cudaGraphAddChildGraphNode(&n, target, nullptr, 0, child);
  } else if (ea == cudaSuccess) {
    ea = add(target, what, m, m0);
  }
  cudaGraphExec_t x = nullptr;
  cudaError_t ei = ea == cudaSuccess ? cudaGraphInstantiate(&x, g, 0) : cudaErrorNotYetImplemented;
  cudaError_t el = ei == cudaSuccess ? cudaGraphLaunch(x, s) : cudaErrorNotYetImplemented;
  cudaError_t es = cudaStreamSynchronize(s);
  char what2[64] = "";
  if (es == cudaSuccess && el == cudaSuccess) {
    unsigned char h[B];
    cudaMemcpy(h, what == CopyAcross39 ? m0 : m, B, cudaMemcpyDefault);
    snprintf(what2, sizeof what2, ", bytes 10 16 20 28: %02x %02x %02x %02x", h[10], h[16], h[20], h[28]);
  }
  char name[160];
  snprintf(name, sizeof name, "%s in %s, memory of device %d", whatName[what], whereName[where], memDev);
  printf("%-84s add %s, instantiate %s, launch %s, synchronize %s%s\n", name, cudaGetErrorName(ea), cudaGetErrorName(ei),
         cudaGetErrorName(el), cudaGetErrorName(es), what2);
  fflush(stdout);
  return 0;
}

int main() {
  int n = 0;
  if (fork() == 0) { // no CUDA in the parent: each child starts clean
    cudaGetDeviceCount(&n);
    int drv = 0;
    cudaDriverGetVersion(&drv);
    printf("condpeer.cu: %d GPU(s), driver %d\n", n, drv);
    fflush(stdout);
    _exit(n < 2 ? 3 : 0);
  }
  int st = 0;
  wait(&st);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("needs two GPUs\n");
    return 0;
  }
  for (int where = 0; where < 3; where++) {
    for (int what = 0; what < 6; what++) {
      for (int dev = 0; dev < 2; dev++) {
        if (what == CopyAcross39 && dev == 0) continue;
        pid_t pid = fork();
        if (pid == 0) _exit(runCase((Where)where, (What)what, dev));
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) printf("  (child ended with status %d)\n", st);
      }
    }
  }
  return 0;
}
