// freedset.cu asks the CUDA driver whether a per-node update
// (cudaGraphExecMemcpyNodeSetParams1D, cudaGraphExecMemsetNodeSetParams)
// of a node on a graph allocation depends on where the node is (the top
// graph, a child graph, an IF body) and on whether the graph frees the
// allocation: the two-GPU differential run found the driver refusing
// copies in child graphs and bodies whose allocation the graph frees, with
// the same sides and other offsets (condupdate.cu, where the graph frees
// nothing, found them taken). One line per case.
//
//	nvcc -O2 -o freedset tools/probe/freedset.cu && ./freedset
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, nullptr, n, p)
#else
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, n, p)
#endif
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

static char* a; // cudaMalloc memory

enum Where { Top, Child, Body };
static const char* whereName[] = {"top graph", "child graph", "IF body"};

static void run(Where w, bool freed) {
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  cudaMemAllocNodeParams ap = {};
  ap.poolProps.allocType = cudaMemAllocationTypePinned;
  ap.poolProps.location.type = cudaMemLocationTypeDevice;
  ap.poolProps.location.id = 0;
  ap.bytesize = 4096;
  cudaGraphNode_t alloc;
  MUST(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
  char* t = (char*)ap.dptr;
  cudaGraph_t target = g;
  cudaGraphNode_t holder = nullptr; // the child graph or conditional node
  cudaGraph_t child = nullptr;
  if (w == Child) {
    MUST(cudaGraphCreate(&child, 0));
    target = child;
  } else if (w == Body) {
    cudaGraphConditionalHandle hd;
    MUST(cudaGraphConditionalHandleCreate(&hd, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = hd;
    cp.conditional.type = cudaGraphCondTypeIf;
    cp.conditional.size = 1;
    MUST(ADDNODE(&holder, g, &alloc, 1, &cp));
    target = cp.conditional.phGraph_out[0];
  }
  bool top = w == Top;
  cudaGraphNode_t from, into, ms;
  MUST(cudaGraphAddMemcpyNode1D(&from, target, top ? &alloc : nullptr, top ? 1 : 0, a, t, 64, cudaMemcpyDeviceToDevice));
  MUST(cudaGraphAddMemcpyNode1D(&into, target, top ? &alloc : nullptr, top ? 1 : 0, t + 1024, a + 1024, 64, cudaMemcpyDeviceToDevice));
  cudaMemsetParams mp = {};
  mp.dst = t + 2048; mp.value = 1; mp.elementSize = 1; mp.width = 64; mp.height = 1;
  MUST(cudaGraphAddMemsetNode(&ms, target, top ? &alloc : nullptr, top ? 1 : 0, &mp));
  if (w == Child) {
    MUST(cudaGraphAddChildGraphNode(&holder, g, &alloc, 1, child));
    cudaGraph_t cc;
    MUST(cudaGraphChildGraphNodeGetGraph(holder, &cc));
    cudaGraphNode_t ns[3];
    size_t n = 3;
    MUST(cudaGraphGetNodes(cc, ns, &n));
    from = ns[0], into = ns[1], ms = ns[2];
  }
  if (freed) {
    cudaGraphNode_t deps[] = {top ? from : holder, into, ms};
    size_t nd = top ? 3 : 1;
    cudaGraphNode_t fn;
    MUST(cudaGraphAddMemFreeNode(&fn, g, deps, nd, t));
  }
  cudaGraphExec_t e;
  cudaError_t ei = cudaGraphInstantiate(&e, g, 0);
  char label[96];
  snprintf(label, sizeof label, "%s, %s", whereName[w], freed ? "the graph frees the allocation" : "no free node");
  if (ei != cudaSuccess) {
    printf("%-50s instantiate %s\n", label, cudaGetErrorName(ei));
    return;
  }
  printf("%-50s copy out, other offsets        %s\n", label, cudaGetErrorName(cudaGraphExecMemcpyNodeSetParams1D(e, from, a + 8, t + 16, 32, cudaMemcpyDeviceToDevice)));
  cudaGetLastError();
  printf("%-50s copy out, same params          %s\n", label, cudaGetErrorName(cudaGraphExecMemcpyNodeSetParams1D(e, from, a + 8, t + 16, 32, cudaMemcpyDeviceToDevice)));
  cudaGetLastError();
  printf("%-50s copy in, other offsets         %s\n", label, cudaGetErrorName(cudaGraphExecMemcpyNodeSetParams1D(e, into, t + 1032, a + 8, 32, cudaMemcpyDeviceToDevice)));
  cudaGetLastError();
  printf("%-50s copy out, other cudaMalloc dst %s\n", label, cudaGetErrorName(cudaGraphExecMemcpyNodeSetParams1D(e, from, a + 4096, t, 64, cudaMemcpyDeviceToDevice)));
  cudaGetLastError();
  cudaMemsetParams q = mp;
  q.value = 2;
  printf("%-50s memset, value                  %s\n", label, cudaGetErrorName(cudaGraphExecMemsetNodeSetParams(e, ms, &q)));
  cudaGetLastError();
  q.dst = t + 2056;
  printf("%-50s memset, offset +8              %s\n", label, cudaGetErrorName(cudaGraphExecMemsetNodeSetParams(e, ms, &q)));
  cudaGetLastError();
  cudaStream_t s;
  MUST(cudaStreamCreate(&s));
  cudaError_t el = cudaGraphLaunch(e, s);
  printf("%-50s launch after the updates       %s, %s\n", label, cudaGetErrorName(el), cudaGetErrorName(cudaStreamSynchronize(s)));
  cudaStreamDestroy(s);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  if (child) cudaGraphDestroy(child);
}

int main() {
  int drv = 0;
  cudaDriverGetVersion(&drv);
  printf("freedset.cu: driver %d\n", drv);
  MUST(cudaMalloc(&a, 1 << 16));
  for (int w = 0; w < 3; w++)
    for (int f = 0; f < 2; f++) run((Where)w, f);
  return 0;
}
