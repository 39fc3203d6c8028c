// condupdate.cu asks the CUDA driver which per-node updates
// (cudaGraphExecMemcpyNodeSetParams, cudaGraphExecMemsetNodeSetParams) it
// takes for a memcpy or memset node in a conditional body, against the same
// node in a plain graph: differential inputs found cuda refusing updates of
// copies in bodies that the host backend took. One line per case.
//
//	nvcc -O2 -o condupdate tools/probe/condupdate.cu && ./condupdate
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, nullptr, n, p)
#else
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, n, p)
#endif
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

static char *a, *b, *c; // cudaMalloc buffers
static char* h;          // pinned host memory

struct Copy { const char* name; char* dst; char* src; size_t n; cudaMemcpyKind kind; };

static void run(bool inBody, bool graphMem) {
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  cudaGraph_t target = g;
  cudaGraphNode_t alloc = nullptr;
  char* t = nullptr; // a graph allocation of the top graph
  if (graphMem) {
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = 1 << 16;
    MUST(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
    t = (char*)ap.dptr;
  }
  cudaGraphNode_t cn = nullptr;
  if (inBody) {
    cudaGraphConditionalHandle hd;
    MUST(cudaGraphConditionalHandleCreate(&hd, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = hd;
    cp.conditional.type = cudaGraphCondTypeIf;
    cp.conditional.size = 1;
    MUST(ADDNODE(&cn, g, alloc ? &alloc : nullptr, alloc ? 1 : 0, &cp));
    target = cp.conditional.phGraph_out[0];
  }
  char* src = graphMem ? t : b;
  cudaGraphNode_t cpy, ms;
  MUST(cudaGraphAddMemcpyNode1D(&cpy, target, inBody || !alloc ? nullptr : &alloc, inBody || !alloc ? 0 : 1, a, src, 64, cudaMemcpyDeviceToDevice));
  cudaMemsetParams mp = {};
  mp.dst = graphMem ? t + 256 : c; mp.value = 1; mp.elementSize = 1; mp.width = 64; mp.height = 1;
  MUST(cudaGraphAddMemsetNode(&ms, target, inBody || !alloc ? nullptr : &alloc, inBody || !alloc ? 0 : 1, &mp));
  cudaGraphExec_t e;
  cudaError_t ei = cudaGraphInstantiate(&e, g, 0);
  const char* where = inBody ? "in an IF body" : "in a plain graph";
  const char* mem = graphMem ? "graph memory" : "cudaMalloc memory";
  if (ei != cudaSuccess) {
    printf("%s, %s: instantiate %s\n", where, mem, cudaGetErrorName(ei));
    return;
  }
  const Copy copies[] = {
      {"copy: same sides, same size", a, src, 64, cudaMemcpyDeviceToDevice},
      {"copy: same sides, other offsets", a + 8, src + 16, 64, cudaMemcpyDeviceToDevice},
      {"copy: same sides, size 64 -> 32", a, src, 32, cudaMemcpyDeviceToDevice},
      {"copy: same sides, odd offsets and size (+17, +5, 3 B)", a + 17, src + 5, 3, cudaMemcpyDeviceToDevice},
      {"copy: destination to another cudaMalloc buffer", c, src, 64, cudaMemcpyDeviceToDevice},
      {"copy: source to another cudaMalloc buffer", a, c, 64, cudaMemcpyDeviceToDevice},
      {"copy: source to pinned host memory", a, h, 64, cudaMemcpyHostToDevice},
  };
  for (const Copy& x : copies) {
    cudaError_t r = cudaGraphExecMemcpyNodeSetParams1D(e, cpy, x.dst, x.src, x.n, x.kind);
    cudaGetLastError();
    printf("%-18s %-18s %-48s %s\n", where, mem, x.name, cudaGetErrorName(r));
  }
  // The copy the other way: into graph memory (or cudaMalloc memory).
  {
    char* dst = graphMem ? t + 1024 : b + 1024;
    cudaGraph_t g2;
    MUST(cudaGraphCreate(&g2, 0));
    cudaGraph_t target2 = g2;
    cudaGraphNode_t alloc2 = nullptr;
    char* t2 = nullptr;
    if (graphMem) {
      cudaMemAllocNodeParams ap = {};
      ap.poolProps.allocType = cudaMemAllocationTypePinned;
      ap.poolProps.location.type = cudaMemLocationTypeDevice;
      ap.poolProps.location.id = 0;
      ap.bytesize = 1 << 16;
      MUST(cudaGraphAddMemAllocNode(&alloc2, g2, nullptr, 0, &ap));
      t2 = (char*)ap.dptr;
      dst = t2;
    }
    if (inBody) {
      cudaGraphConditionalHandle hd;
      MUST(cudaGraphConditionalHandleCreate(&hd, g2, 1, cudaGraphCondAssignDefault));
      cudaGraphNodeParams cp = {};
      cp.type = cudaGraphNodeTypeConditional;
      cp.conditional.handle = hd;
      cp.conditional.type = cudaGraphCondTypeIf;
      cp.conditional.size = 1;
      cudaGraphNode_t cn2;
      MUST(ADDNODE(&cn2, g2, alloc2 ? &alloc2 : nullptr, alloc2 ? 1 : 0, &cp));
      target2 = cp.conditional.phGraph_out[0];
    }
    cudaGraphNode_t cpy2;
    bool dep = !inBody && alloc2;
    MUST(cudaGraphAddMemcpyNode1D(&cpy2, target2, dep ? &alloc2 : nullptr, dep ? 1 : 0, dst, a, 64, cudaMemcpyDeviceToDevice));
    cudaGraphExec_t e2;
    MUST(cudaGraphInstantiate(&e2, g2, 0));
    const Copy into[] = {
        {"copy into: same sides, other offsets", dst + 8, a + 16, 64, cudaMemcpyDeviceToDevice},
        {"copy into: same sides, size 64 -> 32", dst, a, 32, cudaMemcpyDeviceToDevice},
        {"copy into: odd offsets and size (+17, +5, 3 B)", dst + 17, a + 5, 3, cudaMemcpyDeviceToDevice},
        {"copy into: destination to a cudaMalloc buffer", c, a, 64, cudaMemcpyDeviceToDevice},
        {"copy into: source to another cudaMalloc buffer", dst, c, 64, cudaMemcpyDeviceToDevice},
    };
    for (const Copy& x : into) {
      cudaError_t r = cudaGraphExecMemcpyNodeSetParams1D(e2, cpy2, x.dst, x.src, x.n, x.kind);
      cudaGetLastError();
      printf("%-18s %-18s %-48s %s\n", where, mem, x.name, cudaGetErrorName(r));
    }
    // Disabled first, then updated (updates of a disabled node apply when
    // it is enabled again, CUDA says).
    cudaError_t rd = cudaGraphNodeSetEnabled(e2, cpy2, 0);
    cudaError_t ru = cudaGraphExecMemcpyNodeSetParams1D(e2, cpy2, dst + 8, a + 8, 32, cudaMemcpyDeviceToDevice);
    cudaGetLastError();
    printf("%-18s %-18s %-48s disable %s, update %s\n", where, mem, "copy into: disabled, then other offsets", cudaGetErrorName(rd), cudaGetErrorName(ru));
    cudaGraphExecDestroy(e2);
    cudaGraphDestroy(g2);
  }
  cudaMemsetParams q = mp;
  q.value = 2;
  printf("%-18s %-18s %-48s %s\n", where, mem, "memset: value", cudaGetErrorName(cudaGraphExecMemsetNodeSetParams(e, ms, &q)));
  cudaGetLastError();
  q.dst = (char*)mp.dst + 8;
  printf("%-18s %-18s %-48s %s\n", where, mem, "memset: offset +8", cudaGetErrorName(cudaGraphExecMemsetNodeSetParams(e, ms, &q)));
  cudaGetLastError();
  q.dst = b;
  printf("%-18s %-18s %-48s %s\n", where, mem, "memset: to another cudaMalloc buffer", cudaGetErrorName(cudaGraphExecMemsetNodeSetParams(e, ms, &q)));
  cudaGetLastError();
  cudaStream_t s;
  MUST(cudaStreamCreate(&s));
  cudaError_t el = cudaGraphLaunch(e, s);
  printf("%-18s %-18s %-48s %s, %s\n", where, mem, "launch after the updates", cudaGetErrorName(el), cudaGetErrorName(cudaStreamSynchronize(s)));
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
}

int main() {
  int drv = 0;
  cudaDriverGetVersion(&drv);
  printf("condupdate.cu: driver %d\n", drv);
  MUST(cudaMalloc(&a, 1 << 16));
  MUST(cudaMalloc(&b, 1 << 16));
  MUST(cudaMalloc(&c, 1 << 16));
  MUST(cudaMallocHost(&h, 1 << 16));
  for (int body = 0; body < 2; body++)
    for (int gm = 0; gm < 2; gm++) run(body, gm);
  return 0;
}
