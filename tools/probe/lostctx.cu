// lostctx.cu repeats, in C, the graph of the two-GPU differential run's
// input that loses the context most often (FuzzWholeGraphUpdate 914,
// docs/reliability.md "Open: a lost context"): a child graph that copies
// from host memory, a kernel that sets a WHILE loop's handle, two WHILE
// loops whose bodies count down and clear their handle; instantiated with
// auto-free on launch, launched, updated to a graph with other copy sizes
// and kernel parameters, launched, and the second graph instantiated and
// launched. Through gpugraph the context is lost (Xid 13,
// SKEDCHECK22_INVALIDATE_ACTIVE_QMD) in about one run of that input in ten;
// gpugraph now orders loops alone in the driver's graph (loops.go), which
// "chain" shows is enough.
// Options name what to change, to find what the fault needs:
//
//	nvcc -O2 -o lostctx tools/probe/lostctx.cu && ./lostctx [iters N] [pinned] [nowhile] [onewhile] [noupdate] [nochild] [noset]
//	    [nocopy] [same] [serial] [selfupdate] [upload] [setparams] [onestream]
//	./lostctx [iters N] mini W K while|if|switch CNT [chain] [other K2]   (the smallest graphs: see mini)
//
// It prints the iteration and the error at the first failure, or "kept".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, nullptr, n, p)
#else
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, n, p)
#endif
static int iter;
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("LOST at iteration %d: %s:%d %s: %s\n", iter, __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

__global__ void diff0(unsigned* d, const unsigned* s, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = d[i] * 33 + s[i] + k;
}
__global__ void diff3(unsigned* d, const unsigned* s, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = (d[i] ^ s[i]) + k * i;
}
__global__ void setc(cudaGraphConditionalHandle h, const unsigned* v, unsigned k, unsigned mod) {
  cudaGraphSetConditional(h, (v[0] + k) % mod);
}
__global__ void countdown(cudaGraphConditionalHandle h, int* c) {
  if (--c[0] <= 0) cudaGraphSetConditional(h, 0);
}

static bool pinned, nowhile, onewhile, noupdate, nochild, noset, nocopy, same, serial, selfupdate, upload, setparams, onestream;
static cudaGraphNode_t kernel2; // build's #2, of the last graph built
static unsigned *d0, *d1, *d2;
static int *c6, *c8;
static char* h3;

static cudaGraphNode_t kernel(cudaGraph_t g, const cudaGraphNode_t* deps, int nd, void* fn, int grid, int block, void** args) {
  cudaKernelNodeParams p = {};
  p.func = fn; p.gridDim = dim3(grid); p.blockDim = dim3(block); p.kernelParams = args;
  cudaGraphNode_t n;
  MUST(cudaGraphAddKernelNode(&n, g, deps, nd, &p));
  return n;
}
static cudaGraphNode_t memset4(cudaGraph_t g, const cudaGraphNode_t* deps, int nd, void* dst, unsigned v, int elem, size_t w) {
  cudaMemsetParams p = {};
  p.dst = dst; p.value = v; p.elementSize = elem; p.width = w; p.height = 1;
  cudaGraphNode_t n;
  MUST(cudaGraphAddMemsetNode(&n, g, deps, nd, &p));
  return n;
}
static cudaGraphNode_t whileNode(cudaGraph_t g, const cudaGraphNode_t* deps, int nd, cudaGraphConditionalHandle h, cudaGraph_t* body) {
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h;
  p.conditional.type = cudaGraphCondTypeWhile;
  p.conditional.size = 1;
  cudaGraphNode_t n;
  MUST(ADDNODE(&n, g, deps, nd, &p));
  *body = p.conditional.phGraph_out[0];
  return n;
}

// build makes the program's graph; b selects the updated version.
static cudaGraph_t build(bool b) {
  if (same) b = false;
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  // #0 child: memcpy d0+1 <- h3+1 (31 B; B: h3+8, 55 B), kernel diff0 d1 <- d2
  cudaGraphNode_t n0;
  static int n16 = 16, n9 = 9, n2 = 2;
  static unsigned k0a = 0xb50171f1, k0b = 0xfd013945, k2 = 0x6f006e32, k134 = 134, mod4 = 4;
  if (!nochild) {
    cudaGraph_t c;
    MUST(cudaGraphCreate(&c, 0));
    cudaGraphNode_t cp, kn;
    MUST(cudaGraphAddMemcpyNode1D(&cp, c, nullptr, 0, (char*)d0 + 1, h3 + (b ? 8 : 1), b ? 55 : 31, cudaMemcpyHostToDevice));
    void* a0[] = {&d1, &d2, b ? &n9 : &n16, b ? &k0b : &k0a};
    kn = kernel(c, &cp, 1, (void*)diff0, 2, 7, a0);
    (void)kn;
    MUST(cudaGraphAddChildGraphNode(&n0, g, nullptr, 0, c));
    MUST(cudaGraphDestroy(c));
  } else {
    MUST(cudaGraphAddEmptyNode(&n0, g, nullptr, 0));
  }
  // #1 memcpy d1+17 <- h3+42, 3 B (B: d1+1 <- h3+0, 28 B)
  cudaGraphNode_t n1;
  if (nocopy) MUST(cudaGraphAddEmptyNode(&n1, g, &n0, 1));
  else MUST(cudaGraphAddMemcpyNode1D(&n1, g, &n0, 1, (char*)d1 + (b ? 1 : 17), h3 + (b ? 0 : 42), b ? 28 : 3, cudaMemcpyHostToDevice));
  // #2 kernel diff3 d2 <- d1 n=2
  cudaGraphNode_t dep01[] = {n0, n1};
  void* a2[] = {&d2, &d1, &n2, &k2};
  cudaGraphNode_t n2n = kernel(g, dep01, 2, (void*)diff3, 1, 7, a2);
  kernel2 = n2n;
  if (nowhile) return g;
  // #3 memset c6 = 3; #4 WHILE H5 (default 2, assign) { countdown c6 }
  cudaGraphConditionalHandle h5, h7;
  cudaGraphNode_t n4 = nullptr;
  if (!onewhile) {
    MUST(cudaGraphConditionalHandleCreate(&h5, g, 2, cudaGraphCondAssignDefault));
    cudaGraphNode_t n3 = memset4(g, nullptr, 0, c6, 3, 4, 1);
    cudaGraph_t body;
    n4 = whileNode(g, &n3, 1, h5, &body);
    void* ac[] = {&h5, &c6};
    kernel(body, nullptr, 0, (void*)countdown, 1, 1, ac);
  }
  // #5 set H7 = (d0[0]+134)%4; #6 memset c8 = 0; #7 WHILE H7 (default 1) { countdown c8; memset d2+16 }
  MUST(cudaGraphConditionalHandleCreate(&h7, g, 1, 0));
  cudaGraphNode_t n5;
  if (!noset) {
    void* as[] = {&h7, &d0, &k134, &mod4};
    n5 = kernel(g, dep01, 2, (void*)setc, 1, 1, as);
  } else {
    MUST(cudaGraphAddEmptyNode(&n5, g, dep01, 2));
  }
  cudaGraphNode_t n6 = memset4(g, &n0, 1, c8, 0, 4, 1);
  cudaGraphNode_t dep7[] = {n2n, n5, n6, n1, n4};
  cudaGraph_t body;
  whileNode(g, dep7, serial && n4 ? 5 : 4, h7, &body);
  void* ac[] = {&h7, &c8};
  cudaGraphNode_t cd = kernel(body, nullptr, 0, (void*)countdown, 1, 1, ac);
  memset4(body, &cd, 1, (char*)d2 + 16, 0x7f, 1, 38);
  return g;
}

// mini makes the smallest graphs that show the fault: w conditional nodes
// of type ct, side by side (no edges between them), each after a memset of
// its counter to cnt and running the countdown kernel in its body (an IF
// runs it once), beside a chain of k kernels.
static int mw = -1, mk, mcnt = 1, mother;
static bool mchain; // every node after the one before it: nothing runs beside a loop
static cudaGraphConditionalNodeType mct = cudaGraphCondTypeWhile;
static int* mc; // mw counters
static cudaGraphNode_t chainEnd;
static cudaGraph_t mini() {
  chainEnd = nullptr;
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  static cudaGraphConditionalHandle h[16];
  static int* cs[16];
  for (int i = 0; i < mw; i++) {
    MUST(cudaGraphConditionalHandleCreate(&h[i], g, 1, cudaGraphCondAssignDefault));
    static cudaGraphNode_t last = nullptr;
    if (i == 0) last = nullptr;
    cudaGraphNode_t ms = memset4(g, mchain && last ? &last : nullptr, mchain && last ? 1 : 0, mc + i, mcnt, 4, 1);
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h[i];
    p.conditional.type = mct;
    p.conditional.size = 1;
    cudaGraphNode_t n;
    MUST(ADDNODE(&n, g, &ms, 1, &p));
    last = n;
    chainEnd = n;
    cs[i] = mc + i;
    void* ac[] = {&h[i], &cs[i]};
    kernel(p.conditional.phGraph_out[0], nullptr, 0, (void*)countdown, 1, 1, ac);
  }
  static int n16 = 16;
  static unsigned k = 3;
  cudaGraphNode_t prev = mchain ? chainEnd : nullptr;
  for (int i = 0; i < mk; i++) {
    void* a[] = {&d0, &d1, &n16, &k};
    prev = kernel(g, prev ? &prev : nullptr, prev ? 1 : 0, (void*)diff0, 1, 32, a);
  }
  return g;
}

int main(int argc, char** argv) {
  int iters = 2000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "pinned")) pinned = true;
    else if (!strcmp(argv[i], "nowhile")) nowhile = true;
    else if (!strcmp(argv[i], "onewhile")) onewhile = true;
    else if (!strcmp(argv[i], "noupdate")) noupdate = true;
    else if (!strcmp(argv[i], "nochild")) nochild = true;
    else if (!strcmp(argv[i], "noset")) noset = true;
    else if (!strcmp(argv[i], "nocopy")) nocopy = true;
    else if (!strcmp(argv[i], "same")) same = true;
    else if (!strcmp(argv[i], "serial")) serial = true;
    else if (!strcmp(argv[i], "selfupdate")) selfupdate = true;
    else if (!strcmp(argv[i], "upload")) upload = true;
    else if (!strcmp(argv[i], "setparams")) setparams = true;
    else if (!strcmp(argv[i], "onestream")) onestream = true;
    else if (!strcmp(argv[i], "chain")) mchain = true;
    else if (!strcmp(argv[i], "other") && i + 1 < argc) mother = atoi(argv[++i]);
    else if (!strcmp(argv[i], "mini") && i + 4 < argc) {
      mw = atoi(argv[++i]); mk = atoi(argv[++i]);
      const char* t = argv[++i];
      mct = !strcmp(t, "if") ? cudaGraphCondTypeIf : !strcmp(t, "switch") ? cudaGraphCondTypeSwitch : cudaGraphCondTypeWhile;
      mcnt = atoi(argv[++i]);
    }
    else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  MUST(cudaSetDevice(0));
  MUST(cudaMalloc(&d0, 64)); MUST(cudaMalloc(&d1, 64)); MUST(cudaMalloc(&d2, 64));
  MUST(cudaMalloc(&c6, 4)); MUST(cudaMalloc(&c8, 4));
  if (pinned) MUST(cudaMallocHost(&h3, 64));
  else h3 = (char*)malloc(64);
  for (int i = 0; i < 64; i++) h3[i] = (char)(i * 7 + 1);
  cudaStream_t s[2];
  MUST(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
  MUST(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
  if (mw >= 0) {
    MUST(cudaMalloc(&mc, 16 * sizeof(int)));
    for (iter = 0; iter < iters; iter++) {
      cudaGraph_t g = mini();
      cudaGraphExec_t e;
      MUST(cudaGraphInstantiate(&e, g, 0));
      for (int l = 0; l < 3; l++) {
        static int n16 = 16;
        static unsigned k = 5;
        for (int j = 0; j < mother; j++) { // work beside the graph, in another stream
          void* a[] = {&d2, &d1, &n16, &k};
          MUST(cudaLaunchKernel((void*)diff0, dim3(1), dim3(32), a, 0, s[1]));
        }
        MUST(cudaGraphLaunch(e, s[0]));
        MUST(cudaStreamSynchronize(s[0]));
        MUST(cudaStreamSynchronize(s[1]));
      }
      MUST(cudaGraphExecDestroy(e));
      MUST(cudaGraphDestroy(g));
    }
    printf("kept: %d iterations\n", iters);
    return 0;
  }
  for (iter = 0; iter < iters; iter++) {
    cudaGraph_t ga = build(false);
    cudaGraphNode_t ka = kernel2;
    cudaGraph_t gb = build(true);
    cudaGraphExec_t ea, eb;
    MUST(cudaGraphInstantiate(&ea, ga, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    MUST(cudaGraphLaunch(ea, s[onestream ? 0 : iter & 1]));
    MUST(cudaStreamSynchronize(s[onestream ? 0 : iter & 1]));
    if (!noupdate) {
      if (setparams) {
        static int n5 = 5;
        static unsigned k = 7;
        void* a[] = {&d2, &d1, &n5, &k};
        cudaKernelNodeParams p = {};
        p.func = (void*)diff3; p.gridDim = dim3(1); p.blockDim = dim3(7); p.kernelParams = a;
        MUST(cudaGraphExecKernelNodeSetParams(ea, ka, &p));
      } else {
        cudaGraphExecUpdateResultInfo info;
        MUST(cudaGraphExecUpdate(ea, selfupdate ? ga : gb, &info));
      }
      if (upload) {
        MUST(cudaGraphUpload(ea, s[onestream ? 0 : (iter >> 1) & 1]));
        MUST(cudaStreamSynchronize(s[onestream ? 0 : (iter >> 1) & 1]));
      }
      MUST(cudaGraphLaunch(ea, s[onestream ? 0 : (iter >> 1) & 1]));
      MUST(cudaStreamSynchronize(s[onestream ? 0 : (iter >> 1) & 1]));
    }
    MUST(cudaGraphInstantiate(&eb, gb, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    MUST(cudaGraphLaunch(eb, s[0]));
    MUST(cudaStreamSynchronize(s[0]));
    MUST(cudaGraphExecDestroy(ea)); MUST(cudaGraphExecDestroy(eb));
    MUST(cudaGraphDestroy(ga)); MUST(cudaGraphDestroy(gb));
  }
  printf("kept: %d iterations\n", iters);
  return 0;
}
