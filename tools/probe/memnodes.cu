// memnodes.cu asks the CUDA driver what it does with graph memory nodes:
// which calls it refuses (and with which error), how it assigns and reuses
// addresses, and how much physical memory it reserves. The host backend's
// rules and footprint are checked against this output, which is committed in
// docs/driver-memnodes.txt. Build and run on a GPU machine:
//
//	nvcc -O2 -o memnodes memnodes.cu && ./memnodes
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define EDGES(g, from, to, n) g, from, to, nullptr, n
#else
#define EDGES(g, from, to, n) g, from, to, n
#endif

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-58s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)

static const size_t MiB = 1 << 20;

__global__ void touch(char* p, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = 1;
}

static cudaMemAllocNodeParams allocParams(size_t n) {
  cudaMemAllocNodeParams p = {};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = n;
  return p;
}

static cudaGraphNode_t addAlloc(cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd, size_t n, void** out) {
  cudaMemAllocNodeParams p = allocParams(n);
  cudaGraphNode_t node = nullptr;
  cudaError_t e = cudaGraphAddMemAllocNode(&node, g, deps, nd, &p);
  if (e != cudaSuccess) printf("  addAlloc(%zu): %s\n", n, cudaGetErrorName(e));
  *out = p.dptr;
  return node;
}

static cudaGraphNode_t addTouch(cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd, void* p, size_t n) {
  cudaKernelNodeParams k = {};
  void* args[] = {&p, &n};
  k.func = (void*)touch;
  k.gridDim = dim3(64);
  k.blockDim = dim3(256);
  k.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  cudaGraphAddKernelNode(&node, g, deps, nd, &k);
  return node;
}

static void mem(const char* what) {
  cudaDeviceSynchronize();
  uint64_t rc = 0, rh = 0, uc = 0, uh = 0;
  cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &rc);
  cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &rh);
  cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &uc);
  cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &uh);
  printf("%-58s reserved %6.1f MiB (high %6.1f), used %6.1f MiB (high %6.1f)\n", what,
         rc / double(MiB), rh / double(MiB), uc / double(MiB), uh / double(MiB));
}

static void resetHigh() {
  uint64_t z = 0;
  cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &z);
  cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &z);
}

int main() {
  int drv = 0, rt = 0, pools = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaDeviceProp prop;
  MUST(cudaGetDeviceProperties(&prop, 0));
  cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0);
  printf("device %s, driver %d, runtime %d, memory pools supported %d\n", prop.name, drv, rt, pools);
  cudaStream_t s1, s2;
  MUST(cudaStreamCreate(&s1));
  MUST(cudaStreamCreate(&s2));

  printf("\n== refusals ==\n");
  {
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams p = allocParams(0);
    cudaGraphNode_t n;
    SAY("alloc node of 0 bytes", cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p));
    void* a; cudaGraphNode_t an = addAlloc(g, nullptr, 0, 1 * MiB, &a);
    cudaGraphNode_t fn;
    SAY("free node of the allocation", cudaGraphAddMemFreeNode(&fn, g, &an, 1, a));
    SAY("second free node of the same allocation", cudaGraphAddMemFreeNode(&n, g, &fn, 1, a));
    SAY("free node of an interior address", cudaGraphAddMemFreeNode(&n, g, &an, 1, (char*)a + 256));
    void* dm; MUST(cudaMalloc(&dm, MiB));
    SAY("free node of a cudaMalloc address", cudaGraphAddMemFreeNode(&n, g, nullptr, 0, dm));
    SAY("free node of a bogus address", cudaGraphAddMemFreeNode(&n, g, nullptr, 0, (void*)0x1000));
    void* b; cudaGraphNode_t bn = addAlloc(g, nullptr, 0, 1 * MiB, &b);
    SAY("free node not ordered after its alloc node", cudaGraphAddMemFreeNode(&n, g, nullptr, 0, b));
    cudaGraph_t c;
    SAY("clone of a graph with memory nodes", cudaGraphClone(&c, g));
    cudaGraph_t parent; MUST(cudaGraphCreate(&parent, 0));
    SAY("child graph node (cloned) of a graph with memory nodes", cudaGraphAddChildGraphNode(&n, parent, nullptr, 0, g));
    cudaGraphExec_t e1, e2;
    SAY("first instantiation", cudaGraphInstantiate(&e1, g, 0));
    SAY("second instantiation while the first exists", cudaGraphInstantiate(&e2, g, 0));
    SAY("destroy node in a graph with memory nodes", cudaGraphDestroyNode(fn));
    SAY("remove edge in a graph with memory nodes", cudaGraphRemoveDependencies(EDGES(g, &an, &fn, 1)));
    cudaGraphNode_t e0; MUST(cudaGraphAddEmptyNode(&e0, g, nullptr, 0));
    SAY("add edge in a graph with memory nodes", cudaGraphAddDependencies(EDGES(g, &e0, &bn, 1)));
    SAY("destroy the first executable graph", cudaGraphExecDestroy(e1));
    SAY("instantiate again after that", cudaGraphInstantiate(&e2, g, 0));
    cudaGraphExecDestroy(e2);
    SAY("instantiate with AutoFreeOnLaunch|DeviceLaunch", cudaGraphInstantiate(&e2, g, cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagDeviceLaunch));
    SAY("instantiate with DeviceLaunch", cudaGraphInstantiate(&e2, g, cudaGraphInstantiateFlagDeviceLaunch));
    cudaGraphDestroy(g);
    cudaFree(dm);

    // A graph whose only node is a free of another graph's allocation.
    cudaGraph_t ga, gf; MUST(cudaGraphCreate(&ga, 0)); MUST(cudaGraphCreate(&gf, 0));
    void* x; addAlloc(ga, nullptr, 0, 4 * MiB, &x);
    SAY("free node in another graph", cudaGraphAddMemFreeNode(&n, gf, nullptr, 0, x));
    cudaGraphExec_t ea, ef; MUST(cudaGraphInstantiate(&ea, ga, 0)); MUST(cudaGraphInstantiate(&ef, gf, 0));
    SAY("launch allocating graph", cudaGraphLaunch(ea, s1));
    SAY("relaunch with the allocation live (no auto free)", cudaGraphLaunch(ea, s1));
    SAY("  stream after that", cudaStreamSynchronize(s1));
    SAY("launch the freeing graph", cudaGraphLaunch(ef, s1));
    SAY("relaunch allocating graph after the free", cudaGraphLaunch(ea, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
    SAY("cudaFreeAsync of the graph allocation", cudaFreeAsync(x, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
    SAY("relaunch allocating graph again", cudaGraphLaunch(ea, s1));
    SAY("destroy the graph and executable with the allocation live", (cudaGraphExecDestroy(ea), cudaGraphDestroy(ga)));
    SAY("cudaFree of the still-live graph allocation", cudaFree(x));
    SAY("cudaFree of it again", cudaFree(x));
    cudaGraphExecDestroy(ef); cudaGraphDestroy(gf);

    cudaGraph_t gx; MUST(cudaGraphCreate(&gx, 0));
    void* y; addAlloc(gx, nullptr, 0, 4 * MiB, &y);
    cudaGraphExec_t ex; MUST(cudaGraphInstantiateWithFlags(&ex, gx, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    SAY("AutoFreeOnLaunch: launch", cudaGraphLaunch(ex, s1));
    SAY("AutoFreeOnLaunch: relaunch with the allocation live", cudaGraphLaunch(ex, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
    SAY("cudaFree after that", cudaFree(y));
    cudaGraphExecDestroy(ex); cudaGraphDestroy(gx);
  }

  printf("\n== addresses ==\n");
  {
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    void *a, *b, *c, *d;
    cudaGraphNode_t an = addAlloc(g, nullptr, 0, 3 * MiB, &a);
    cudaGraphNode_t fa; MUST(cudaGraphAddMemFreeNode(&fa, g, &an, 1, a));
    cudaGraphNode_t bn = addAlloc(g, &fa, 1, 3 * MiB, &b);        // after the free: may reuse a
    cudaGraphNode_t cn = addAlloc(g, &an, 1, 3 * MiB, &c);        // not after the free: must not
    cudaGraphNode_t fb; MUST(cudaGraphAddMemFreeNode(&fb, g, &bn, 1, b));
    cudaGraphNode_t dn = addAlloc(g, &fb, 1, 1 * MiB, &d);        // smaller, after b's free
    void* e; cudaGraphNode_t deps[2] = {fb, cn};
    addAlloc(g, deps, 2, 8 * MiB, &e);                            // larger than the freed ranges
    printf("a %p\nb %p (after free of a: reuses a? %s)\nc %p (concurrent with a: %s)\nd %p (1 MiB after free of b: reuses? %s)\ne %p (8 MiB)\n",
           a, b, a == b ? "yes" : "no", c, c == a ? "SAME AS a" : "distinct", d, d == b ? "yes" : "no", e);
    void *p1, *p2, *p3;
    cudaGraph_t h; MUST(cudaGraphCreate(&h, 0));
    addAlloc(h, nullptr, 0, 1, &p1); addAlloc(h, nullptr, 0, 1, &p2); addAlloc(h, nullptr, 0, 5 * MiB + 1, &p3);
    printf("three roots of 1 B, 1 B, 5 MiB+1: %p %p %p (spacing %td, %td)\n", p1, p2, p3, (char*)p2 - (char*)p1, (char*)p3 - (char*)p2);
    (void)dn;
    cudaGraphDestroy(g); cudaGraphDestroy(h);
  }

  printf("\n== footprint ==\n");
  {
    cudaDeviceGraphMemTrim(0); resetHigh();
    mem("start");
    const int K = 8; const size_t S = 64 * MiB;
    // Chain: alloc_i -> touch -> free_i -> alloc_{i+1} ...
    cudaGraph_t chain; MUST(cudaGraphCreate(&chain, 0));
    cudaGraphNode_t prev = nullptr;
    for (int i = 0; i < K; i++) {
      void* p; cudaGraphNode_t a = addAlloc(chain, prev ? &prev : nullptr, prev ? 1 : 0, S, &p);
      cudaGraphNode_t t = addTouch(chain, &a, 1, p, S);
      MUST(cudaGraphAddMemFreeNode(&prev, chain, &t, 1, p));
    }
    cudaGraphExec_t ec; MUST(cudaGraphInstantiate(&ec, chain, 0));
    mem("chain of 8 x 64 MiB instantiated");
    MUST(cudaGraphLaunch(ec, s1)); mem("chain launched");
    // Parallel: 8 roots, each alloc -> touch -> free.
    cudaGraph_t par; MUST(cudaGraphCreate(&par, 0));
    for (int i = 0; i < K; i++) {
      void* p; cudaGraphNode_t a = addAlloc(par, nullptr, 0, S, &p);
      cudaGraphNode_t t = addTouch(par, &a, 1, p, S);
      cudaGraphNode_t f; MUST(cudaGraphAddMemFreeNode(&f, par, &t, 1, p));
    }
    cudaGraphExec_t ep; MUST(cudaGraphInstantiate(&ep, par, 0));
    MUST(cudaGraphLaunch(ep, s1)); mem("parallel 8 x 64 MiB launched (same stream)");
    MUST(cudaGraphLaunch(ec, s1)); mem("chain relaunched (same stream)");
    cudaDeviceGraphMemTrim(0); mem("trim");
    resetHigh();
    MUST(cudaGraphLaunch(ec, s1)); mem("chain launched after trim");
    MUST(cudaGraphLaunch(ep, s1)); mem("parallel launched after trim");
    resetHigh(); mem("high-water reset");
    // Two graphs into two streams at once.
    MUST(cudaGraphLaunch(ec, s1)); MUST(cudaGraphLaunch(ep, s2)); mem("chain in s1 and parallel in s2 together");
    MUST(cudaGraphLaunch(ec, s2)); MUST(cudaGraphLaunch(ep, s2)); mem("both again, in s2");
    cudaDeviceGraphMemTrim(0); mem("trim");
    // Diamond: a, then b and c in parallel (a freed before both), then d.
    cudaGraph_t dia; MUST(cudaGraphCreate(&dia, 0));
    void *pa, *pb, *pc, *pd;
    cudaGraphNode_t na = addAlloc(dia, nullptr, 0, S, &pa);
    cudaGraphNode_t ta = addTouch(dia, &na, 1, pa, S);
    cudaGraphNode_t fa; MUST(cudaGraphAddMemFreeNode(&fa, dia, &ta, 1, pa));
    cudaGraphNode_t nb = addAlloc(dia, &fa, 1, S, &pb);
    cudaGraphNode_t nc = addAlloc(dia, &fa, 1, S, &pc);
    cudaGraphNode_t tb = addTouch(dia, &nb, 1, pb, S), tc = addTouch(dia, &nc, 1, pc, S);
    cudaGraphNode_t fb, fc; MUST(cudaGraphAddMemFreeNode(&fb, dia, &tb, 1, pb)); MUST(cudaGraphAddMemFreeNode(&fc, dia, &tc, 1, pc));
    cudaGraphNode_t j[2] = {fb, fc};
    cudaGraphNode_t nd = addAlloc(dia, j, 2, 2 * S, &pd);
    cudaGraphNode_t td = addTouch(dia, &nd, 1, pd, 2 * S);
    cudaGraphNode_t fd; MUST(cudaGraphAddMemFreeNode(&fd, dia, &td, 1, pd));
    printf("diamond addresses: a %p b %p c %p d %p\n", pa, pb, pc, pd);
    cudaGraphExec_t ed; MUST(cudaGraphInstantiate(&ed, dia, 0));
    resetHigh(); MUST(cudaGraphLaunch(ed, s1)); mem("diamond 64 | 64+64 | 128 MiB launched");
    cudaDeviceGraphMemTrim(0); mem("trim");
    // Upload binds the stream and maps ahead of launch.
    resetHigh(); SAY("upload diamond into s2", cudaGraphUpload(ed, s2)); mem("after upload");
    MUST(cudaGraphLaunch(ed, s2)); mem("launched in s2 after upload");
    // Unfreed allocation stays mapped until freed.
    cudaGraph_t lv; MUST(cudaGraphCreate(&lv, 0));
    void* pl; addAlloc(lv, nullptr, 0, S, &pl);
    cudaGraphExec_t el; MUST(cudaGraphInstantiate(&el, lv, 0));
    MUST(cudaGraphLaunch(el, s1)); mem("graph leaving 64 MiB live");
    cudaDeviceGraphMemTrim(0); mem("trim with it live");
    MUST(cudaFreeAsync(pl, s1)); cudaDeviceGraphMemTrim(0); mem("freed and trimmed");
    SAY("exec destroy", cudaGraphExecDestroy(ec));
  }
  printf("\ndone\n");
  return 0;
}
