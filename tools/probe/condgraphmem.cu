// condgraphmem.cu asks whether a kernel in a conditional body may read a
// graph allocation of the graph holding it when earlier graphs left
// allocations live: the two-GPU differential run (docs/reliability.md)
// lost the context ("unspecified launch failure", nothing for
// compute-sanitizer) on such a graph only after inputs that left graph
// allocations live under AutoFreeOnLaunch. One line per case.
//
//	nvcc -O2 -arch=sm_90 -o condgraphmem tools/probe/condgraphmem.cu && ./condgraphmem
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, nullptr, n, p)
#else
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, n, p)
#endif
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

__global__ void countdown(cudaGraphConditionalHandle h, int* c) {
  if (--c[0] <= 0) cudaGraphSetConditional(h, 0);
}
__global__ void readInto(unsigned* d, const unsigned* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] += s[i];
}

static cudaGraphNode_t kernel(cudaGraph_t g, const cudaGraphNode_t* deps, size_t n, void* fn, void** args, int grid, int block) {
  cudaKernelNodeParams kp = {};
  kp.func = fn;
  kp.gridDim = dim3(grid);
  kp.blockDim = dim3(block);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  MUST(cudaGraphAddKernelNode(&node, g, deps, n, &kp));
  return node;
}

static cudaGraphNode_t alloc(cudaGraph_t g, const cudaGraphNode_t* deps, size_t n, size_t size, void** p) {
  cudaMemAllocNodeParams ap = {};
  ap.poolProps.allocType = cudaMemAllocationTypePinned;
  ap.poolProps.location.type = cudaMemLocationTypeDevice;
  ap.poolProps.location.id = 0;
  ap.bytesize = size;
  cudaGraphNode_t node;
  MUST(cudaGraphAddMemAllocNode(&node, g, deps, n, &ap));
  *p = ap.dptr;
  return node;
}

// leak launches, once, a graph that allocates size bytes and leaves them
// live (AutoFreeOnLaunch), then destroys it: the allocation stays.
static int freeLeaked; // 1: cudaFree the leaked allocation; 2: and cudaDeviceGraphMemTrim

static void leak(size_t size, cudaStream_t s) {
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  void* p;
  cudaGraphNode_t a = alloc(g, nullptr, 0, size, &p);
  cudaMemsetParams mp = {};
  mp.dst = p; mp.value = 0; mp.elementSize = 1; mp.width = size; mp.height = 1;
  cudaGraphNode_t m;
  MUST(cudaGraphAddMemsetNode(&m, g, &a, 1, &mp));
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  MUST(cudaGraphLaunch(e, s));
  MUST(cudaStreamSynchronize(s));
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  if (freeLeaked) MUST(cudaFree(p));
  if (freeLeaked > 1) MUST(cudaDeviceGraphMemTrim(0));
}

// leakCond is leak with an IF node after the memset whose body sets other
// memory o (as the differential inputs before a lost context had: a
// SWITCH or IF node beside an allocation left live), launched launches
// times under AutoFreeOnLaunch; then, as gpugraph's Device.Close does,
// cudaFree of the live allocation if freeIt, the executable graph and the
// graph destroyed, and the graph memory trimmed.
static void leakCond(cudaStream_t s, unsigned* o, int launches, bool freeIt) {
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  void* p;
  cudaGraphNode_t a = alloc(g, nullptr, 0, 48, &p);
  cudaMemsetParams mp = {};
  mp.dst = p; mp.value = 0; mp.elementSize = 4; mp.width = 12; mp.height = 1;
  cudaGraphNode_t m;
  MUST(cudaGraphAddMemsetNode(&m, g, &a, 1, &mp));
  cudaGraphConditionalHandle h;
  MUST(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeIf;
  cp.conditional.size = 1;
  cudaGraphNode_t cn;
  MUST(ADDNODE(&cn, g, &m, 1, &cp));
  cudaMemsetParams bp = {};
  bp.dst = o; bp.value = 7; bp.elementSize = 4; bp.width = 4; bp.height = 1;
  cudaGraphNode_t bm;
  MUST(cudaGraphAddMemsetNode(&bm, cp.conditional.phGraph_out[0], nullptr, 0, &bp));
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  for (int l = 0; l < launches; l++) {
    MUST(cudaGraphLaunch(e, s));
    MUST(cudaStreamSynchronize(s));
  }
  if (freeIt) MUST(cudaFree(p));
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  MUST(cudaDeviceGraphMemTrim(0));
}

// run builds alloc t -> memset t -> WHILE (or IF) { countdown; read t } ->
// read t -> free t, and launches it twice.
static void run(const char* name, int leaks, bool upload, bool loop, bool bodyReads, cudaStream_t s, unsigned* d, int* c) {
  for (int i = 0; i < leaks; i++) leak(4 << (i % 6), s);
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  void* t;
  cudaGraphNode_t a = alloc(g, nullptr, 0, 64, &t);
  cudaMemsetParams mp = {};
  mp.dst = t; mp.value = 1; mp.elementSize = 4; mp.width = 16; mp.height = 1;
  cudaGraphNode_t m;
  MUST(cudaGraphAddMemsetNode(&m, g, &a, 1, &mp));
  cudaGraphConditionalHandle h;
  MUST(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = loop ? cudaGraphCondTypeWhile : cudaGraphCondTypeIf;
  cp.conditional.size = 1;
  cudaGraphNode_t cn;
  MUST(ADDNODE(&cn, g, &m, 1, &cp));
  cudaGraph_t body = cp.conditional.phGraph_out[0];
  void* ca[] = {&h, &c};
  kernel(body, nullptr, 0, (void*)countdown, ca, 1, 1);
  int n = 16;
  void* ra[] = {&d, &t, &n};
  if (bodyReads) kernel(body, nullptr, 0, (void*)readInto, ra, 2, 8);
  cudaGraphNode_t r = kernel(g, &cn, 1, (void*)readInto, ra, 1, 16);
  cudaGraphNode_t f;
  MUST(cudaGraphAddMemFreeNode(&f, g, &r, 1, t));
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, 0));
  cudaError_t eu = upload ? cudaGraphUpload(e, s) : cudaSuccess;
  cudaError_t el = cudaSuccess, es = cudaSuccess;
  for (int l = 0; l < 2 && el == cudaSuccess && es == cudaSuccess; l++) {
    MUST(cudaMemsetAsync(c, 0, 4, s));
    int two = 2;
    MUST(cudaMemcpyAsync(c, &two, 4, cudaMemcpyHostToDevice, s));
    el = cudaGraphLaunch(e, s);
    es = cudaStreamSynchronize(s);
  }
  printf("%-72s upload %s, launch %s, synchronize %s\n", name, cudaGetErrorName(eu), cudaGetErrorName(el), cudaGetErrorName(es));
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  if (es != cudaSuccess) {
    printf("the context is lost: the cases after this one cannot run\n");
    exit(0);
  }
}

int main() {
  int drv = 0;
  cudaDriverGetVersion(&drv);
  printf("condgraphmem.cu: driver %d\n", drv);
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* d;
  int* c;
  MUST(cudaMalloc(&d, 64));
  MUST(cudaMalloc(&c, 4));
  run("no leaked allocation, WHILE body reads it, upload", 0, true, true, true, s, d, c);
  run("no leaked allocation, WHILE body reads it", 0, false, true, true, s, d, c);
  run("after 1 leaked allocation, WHILE body does not read it, upload", 1, true, true, false, s, d, c);
  run("after 1 leaked allocation, IF body reads it, upload", 1, true, false, true, s, d, c);
  run("after 1 leaked allocation, WHILE body reads it", 1, false, true, true, s, d, c);
  run("after 1 leaked allocation, WHILE body reads it, upload", 1, true, true, true, s, d, c);
  run("after 8 leaked allocations, WHILE body reads it, upload", 8, true, true, true, s, d, c);
  run("after 64 leaked allocations, WHILE body reads it, upload", 64, true, true, true, s, d, c);
  run("after 64 leaked allocations, WHILE body reads it", 64, false, true, true, s, d, c);
  unsigned* o;
  MUST(cudaMalloc(&o, 64));
  for (int launches = 1; launches <= 2; launches++)
    for (int f = 0; f < 2; f++) {
      leakCond(s, o, launches, f);
      char name[128];
      snprintf(name, sizeof name, "after an IF graph leaked one (%d launches, cudaFree'd %d), WHILE body reads it, upload", launches, f);
      run(name, 0, true, true, true, s, d, c);
      leakCond(s, o, launches, f);
      snprintf(name, sizeof name, "after an IF graph leaked one (%d launches, cudaFree'd %d), WHILE body reads it", launches, f);
      run(name, 0, false, true, true, s, d, c);
    }
  freeLeaked = 1;
  run("after 1 allocation leaked and cudaFree'd, WHILE body reads it, upload", 1, true, true, true, s, d, c);
  run("after 1 allocation leaked and cudaFree'd, WHILE body reads it", 1, false, true, true, s, d, c);
  freeLeaked = 2;
  run("after 1 leaked, cudaFree'd, trimmed: IF body reads it, upload", 1, true, false, true, s, d, c);
  run("after 1 leaked, cudaFree'd, trimmed: WHILE body does not read it, upload", 1, true, true, false, s, d, c);
  run("after 1 leaked, cudaFree'd, trimmed: WHILE body reads it", 1, false, true, true, s, d, c);
  run("after 1 leaked, cudaFree'd, trimmed: WHILE body reads it, upload", 1, true, true, true, s, d, c);
  return 0;
}
