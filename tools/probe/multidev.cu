// multidev.cu asks the CUDA driver, on two GPUs, what gpugraph's rules for
// work of several devices in one graph assume:
//
//   - a conditional body holding a node of another device than the
//     conditional node's (added with that device current, or captured in a
//     stream of it): refused when added, at instantiation, or not at all
//     (gpugraph refuses it at instantiation: conditional.go,
//     condDeviceRuleLocked; scenario CaptureAcrossDevicesIntoBody);
//   - which context the driver gives a kernel node captured in a stream of
//     device 1 during a capture begun on device 0 (gpugraph reports such a
//     node as device 1's: mirror.go, nativeWork);
//   - an update of an executable graph's memset or memcpy node that moves
//     its memory to the other device, per node and by whole-graph update
//     (gpugraph refuses the per-node one: memholders.go; scenario
//     ExecSetParamsAcrossDevices), without and with peer access;
//   - the same for every combination: the node's context, the memory each
//     side is on (device 0, device 1, pinned or pageable host memory) and
//     where an update moves it (matrix);
//   - which shape changes an update of a memset node on another device's
//     memory takes (memsetShapes), and of one captured (capturedMemsets).
//
// One line per fact, "name  result". With fewer than two GPUs it says so
// and exits 0. Build and run on a GPU machine:
//
//	nvcc -O2 -o multidev tools/probe/multidev.cu -lcuda && ./multidev
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, nullptr, n, p)
#define CAPTURE_TO(s, g, mode) cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, mode)
#define CAPINFO(s, st, g, deps, n) cudaStreamGetCaptureInfo(s, st, nullptr, g, deps, nullptr, n)
#else
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, n, p)
#define CAPTURE_TO(s, g, mode) cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, mode)
#define CAPINFO(s, st, g, deps, n) cudaStreamGetCaptureInfo(s, st, nullptr, g, deps, n)
#endif

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-72s %s\n", name, cudaGetErrorName(e_)); fflush(stdout); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

static const size_t N = 1024; // ints per buffer

__global__ void nop() {}

static const char* resultName(cudaGraphInstantiateResult r) {
  switch (r) {
  case cudaGraphInstantiateSuccess: return "success";
  case cudaGraphInstantiateError: return "error";
  case cudaGraphInstantiateInvalidStructure: return "invalid structure";
  case cudaGraphInstantiateNodeOperationNotSupported: return "node operation not supported";
  case cudaGraphInstantiateMultipleDevicesNotSupported: return "multiple devices not supported";
#if CUDART_VERSION >= 12040
  case cudaGraphInstantiateConditionalHandleUnused: return "conditional handle unused";
#endif
  }
  return "?";
}

static const char* updateName(cudaGraphExecUpdateResult r) {
  switch (r) {
  case cudaGraphExecUpdateSuccess: return "success";
  case cudaGraphExecUpdateError: return "error";
  case cudaGraphExecUpdateErrorTopologyChanged: return "topology changed";
  case cudaGraphExecUpdateErrorNodeTypeChanged: return "node type changed";
  case cudaGraphExecUpdateErrorFunctionChanged: return "function changed";
  case cudaGraphExecUpdateErrorParametersChanged: return "parameters changed";
  case cudaGraphExecUpdateErrorNotSupported: return "not supported";
  case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return "unsupported function change";
  case cudaGraphExecUpdateErrorAttributesChanged: return "attributes changed";
  }
  return "?";
}

// instantiate reports what instantiating g does, with the result code.
static void instantiate(const char* what, cudaGraph_t g) {
  cudaGraphInstantiateParams ip = {};
  cudaGraphExec_t e = nullptr;
  cudaError_t err = cudaGraphInstantiateWithParams(&e, g, &ip);
  printf("%-72s %s (%s)\n", what, cudaGetErrorName(err), resultName(ip.result_out));
  fflush(stdout);
  cudaGetLastError();
  if (e) cudaGraphExecDestroy(e);
}

// ifNode makes a graph of the current device with an IF node, its body in
// *body.
static cudaGraph_t ifNode(cudaGraph_t* body) {
  cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h; MUST(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h;
  p.conditional.type = cudaGraphCondTypeIf;
  p.conditional.size = 1;
  cudaGraphNode_t n;
  MUST(ADDNODE(&n, g, nullptr, 0, &p));
  *body = p.conditional.phGraph_out[0];
  return g;
}

static cudaError_t addNop(cudaGraphNode_t* n, cudaGraph_t g) {
  cudaKernelNodeParams p = {};
  p.func = (void*)nop;
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  return cudaGraphAddKernelNode(n, g, nullptr, 0, &p);
}

static cudaMemsetParams memsetOf(int* dst, int v) {
  cudaMemsetParams p = {};
  p.dst = dst;
  p.value = (unsigned)v;
  p.elementSize = 4;
  p.width = N;
  p.height = 1;
  return p;
}

static void bodies(int* a1) {
  printf("\n== a conditional body of device 0 with work of device 1 ==\n");
  {
    cudaGraph_t body, g = ifNode(&body);
    MUST(cudaSetDevice(1));
    cudaGraphNode_t n;
    cudaError_t e = addNop(&n, body);
    MUST(cudaSetDevice(0));
    printf("%-72s %s\n", "kernel node added to the body with device 1 current", cudaGetErrorName(e));
    cudaGetLastError();
    if (e == cudaSuccess) instantiate("  then instantiate", g);
    cudaGraphDestroy(g);
  }
  {
    cudaGraph_t body, g = ifNode(&body);
    MUST(cudaSetDevice(1));
    cudaGraphNode_t n;
    cudaMemsetParams mp = memsetOf(a1, 7);
    cudaError_t e = cudaGraphAddMemsetNode(&n, body, nullptr, 0, &mp);
    MUST(cudaSetDevice(0));
    printf("%-72s %s\n", "memset node of device 1's memory added with device 1 current", cudaGetErrorName(e));
    cudaGetLastError();
    if (e == cudaSuccess) instantiate("  then instantiate", g);
    cudaGraphDestroy(g);
  }
  {
    cudaGraph_t body, g = ifNode(&body);
    cudaStream_t s0, s1;
    cudaEvent_t fork, join;
    MUST(cudaStreamCreate(&s0));
    MUST(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    MUST(cudaSetDevice(1));
    MUST(cudaStreamCreate(&s1));
    MUST(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    MUST(cudaSetDevice(0));
    MUST(CAPTURE_TO(s0, body, cudaStreamCaptureModeGlobal));
    MUST(cudaEventRecord(fork, s0));
    MUST(cudaSetDevice(1));
    SAY("capture into the body: device 1's stream waits on the fork", cudaStreamWaitEvent(s1, fork, 0));
    nop<<<1, 1, 0, s1>>>();
    SAY("capture into the body: a kernel in device 1's stream", cudaGetLastError());
    SAY("capture into the body: device 1's stream records the join", cudaEventRecord(join, s1));
    MUST(cudaSetDevice(0));
    SAY("capture into the body: device 0's stream waits on the join", cudaStreamWaitEvent(s0, join, 0));
    cudaGraph_t out = nullptr;
    cudaError_t e = cudaStreamEndCapture(s0, &out);
    printf("%-72s %s\n", "capture into the body: end", cudaGetErrorName(e));
    cudaGetLastError();
    if (e == cudaSuccess) {
      instantiate("  then instantiate the graph", g);
      cudaGraphDestroy(g);
    } // else the driver destroyed the body, and destroying g would crash in it (graph.go, destroyedByCapture): left
    cudaStreamDestroy(s0);
    cudaStreamDestroy(s1);
  }
}

static void capturedContext() {
  printf("\n== the context of a kernel captured in device 1's stream, in a capture begun on device 0 ==\n");
  cudaStream_t s0, s1;
  cudaEvent_t fork, join;
  MUST(cudaSetDevice(0));
  MUST(cudaStreamCreate(&s0));
  MUST(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  MUST(cudaSetDevice(1));
  MUST(cudaStreamCreate(&s1));
  MUST(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  MUST(cudaSetDevice(0));
  MUST(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
  MUST(cudaEventRecord(fork, s0));
  MUST(cudaSetDevice(1));
  MUST(cudaStreamWaitEvent(s1, fork, 0));
  nop<<<1, 1, 0, s1>>>();
  MUST(cudaGetLastError());
  cudaStreamCaptureStatus st;
  const cudaGraphNode_t* deps = nullptr;
  size_t nd = 0;
  MUST(CAPINFO(s1, &st, nullptr, &deps, &nd));
  cudaGraphNode_t k = nd == 1 ? deps[0] : nullptr;
  MUST(cudaEventRecord(join, s1));
  MUST(cudaSetDevice(0));
  MUST(cudaStreamWaitEvent(s0, join, 0));
  cudaGraph_t g;
  MUST(cudaStreamEndCapture(s0, &g));
  CUcontext c0 = nullptr, c1 = nullptr;
  cuDevicePrimaryCtxRetain(&c0, 0);
  cuDevicePrimaryCtxRetain(&c1, 1);
  CUDA_KERNEL_NODE_PARAMS kp = {};
  CUresult r = k ? cuGraphKernelNodeGetParams((CUgraphNode)k, &kp) : CUDA_ERROR_INVALID_VALUE;
  const char* which = kp.ctx == c1 ? "device 1's" : kp.ctx == c0 ? "device 0's" : kp.ctx == nullptr ? "none" : "another";
  printf("%-72s %d, ctx %s\n", "cuGraphKernelNodeGetParams of the kernel node", (int)r, which);
  cuDevicePrimaryCtxRelease(0);
  cuDevicePrimaryCtxRelease(1);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s0);
  cudaStreamDestroy(s1);
}

static void updates(const char* access, int* a0, int* a0b, int* a1, int* a1b, int* pinned) {
  printf("\n== updates of an executable graph of device 0 across devices, %s ==\n", access);
  MUST(cudaSetDevice(0));
  // build: memset of a0, then a copy a0 -> a1.
  auto build = [](int* ms, int* dst, int* src) {
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    cudaGraphNode_t m, c;
    cudaMemsetParams mp = memsetOf(ms, 1);
    MUST(cudaGraphAddMemsetNode(&m, g, nullptr, 0, &mp));
    MUST(cudaGraphAddMemcpyNode1D(&c, g, &m, 1, dst, src, N * sizeof(int), cudaMemcpyDeviceToDevice));
    return g;
  };
  cudaGraph_t g = build(a0, a1, a0);
  size_t n = 2;
  cudaGraphNode_t nodes[2];
  MUST(cudaGraphGetNodes(g, nodes, &n));
  cudaGraphNode_t ms = nodes[0], cp = nodes[1];
  cudaGraphNodeType t;
  MUST(cudaGraphNodeGetType(ms, &t));
  if (t != cudaGraphNodeTypeMemset) { cudaGraphNode_t x = ms; ms = cp; cp = x; }
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, 0));
  cudaMemsetParams p;
  p = memsetOf(a0b, 2);
  SAY("memset: destination to another allocation of device 0", cudaGraphExecMemsetNodeSetParams(e, ms, &p));
  p = memsetOf(a1, 2);
  SAY("memset: destination to memory of device 1", cudaGraphExecMemsetNodeSetParams(e, ms, &p));
  const size_t B = N * sizeof(int);
  SAY("memcpy: destination to another allocation of device 1", cudaGraphExecMemcpyNodeSetParams1D(e, cp, a1b, a0, B, cudaMemcpyDeviceToDevice));
  SAY("memcpy: destination to memory of device 0", cudaGraphExecMemcpyNodeSetParams1D(e, cp, a0b, a0, B, cudaMemcpyDeviceToDevice));
  SAY("memcpy: source to another allocation of device 0", cudaGraphExecMemcpyNodeSetParams1D(e, cp, a1, a0b, B, cudaMemcpyDeviceToDevice));
  SAY("memcpy: source to memory of device 1", cudaGraphExecMemcpyNodeSetParams1D(e, cp, a1, a1b, B, cudaMemcpyDeviceToDevice));
  SAY("memcpy: source to pinned host memory", cudaGraphExecMemcpyNodeSetParams1D(e, cp, a1, pinned, B, cudaMemcpyHostToDevice));
  SAY("memcpy: source to pinned host memory, cudaMemcpyDefault", cudaGraphExecMemcpyNodeSetParams1D(e, cp, a1, pinned, B, cudaMemcpyDefault));
  {
    cudaGraph_t g2 = build(a1, a1, a0); // the memset on device 1's memory
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t err = cudaGraphExecUpdate(e, g2, &info);
    printf("%-72s %s (%s)\n", "whole-graph update: the memset's destination to memory of device 1", cudaGetErrorName(err), updateName(info.result));
    cudaGetLastError();
    cudaGraphDestroy(g2);
  }
  {
    cudaGraph_t g2 = build(a0b, a1b, a0); // within the same devices
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t err = cudaGraphExecUpdate(e, g2, &info);
    printf("%-72s %s (%s)\n", "whole-graph update: within the same devices", cudaGetErrorName(err), updateName(info.result));
    cudaGetLastError();
    cudaGraphDestroy(g2);
  }
  {
    cudaGraph_t g2 = build(a0, a0b, a0); // the copy's destination to device 0
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t err = cudaGraphExecUpdate(e, g2, &info);
    printf("%-72s %s (%s)\n", "whole-graph update: the copy's destination to memory of device 0", cudaGetErrorName(err), updateName(info.result));
    cudaGetLastError();
    cudaGraphDestroy(g2);
  }
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
}


// matrix answers, for every combination gpugraph's rule must decide, which
// updates of an executable graph's memset or memcpy node the driver takes:
// the node made in context ctx (as the cuda backend makes it: the driver
// API, explicit context, host sides as CU_MEMORYTYPE_HOST), on memory of
// device 0, device 1, pinned host memory (H) or pageable host memory (P);
// then one side moved to another allocation of each kind, per node
// (cuGraphExec*NodeSetParams, "node") and by whole-graph update
// (cuGraphExecUpdate, "graph": ok or the update result). "-" is a node the
// driver would not add or instantiate (the reason follows).
struct Mem { const char* name; void* a; void* b; bool host; };

static const char* shortErr(CUresult r) {
  if (r == CUDA_SUCCESS) return "ok";
  const char* s = nullptr;
  cuGetErrorName(r, &s);
  return s ? s : "?";
}

static const char* shortUpdate(CUresult r, CUgraphExecUpdateResultInfo& info) {
  if (r == CUDA_SUCCESS) return "ok";
  switch (info.result) {
  case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: return "ParametersChanged";
  case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "NotSupported";
  case CU_GRAPH_EXEC_UPDATE_ERROR: return "Error";
  default: return shortErr(r);
  }
}

static CUDA_MEMCPY3D copyOf(const Mem& dst, void* d, const Mem& src, void* s, size_t bytes) {
  CUDA_MEMCPY3D c = {};
  if (src.host) { c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = s; }
  else { c.srcMemoryType = CU_MEMORYTYPE_DEVICE; c.srcDevice = (CUdeviceptr)s; }
  if (dst.host) { c.dstMemoryType = CU_MEMORYTYPE_HOST; c.dstHost = d; }
  else { c.dstMemoryType = CU_MEMORYTYPE_DEVICE; c.dstDevice = (CUdeviceptr)d; }
  c.WidthInBytes = bytes; c.Height = 1; c.Depth = 1;
  return c;
}

static CUDA_MEMSET_NODE_PARAMS setOf(void* d, unsigned v) {
  CUDA_MEMSET_NODE_PARAMS p = {};
  p.dst = (CUdeviceptr)d; p.value = v; p.elementSize = 4; p.width = N; p.height = 1; p.pitch = N * 4;
  return p;
}

static void matrix(const char* access, CUcontext* ctx, Mem* kinds, int nk) {
  printf("\n== per-node and whole-graph updates of memset and memcpy nodes, %s ==\n", access);
  const size_t B = N * sizeof(int);
  for (int c = 0; c < 2; c++) {
    cuCtxSetCurrent(ctx[c]);
    for (int o = 0; o < nk; o++) { // memsets: device memory only
      if (kinds[o].host) continue;
      printf("ctx %d memset on %s:", c, kinds[o].name);
      for (int n = -1; n < nk; n++) {
        if (n >= 0 && kinds[n].host) continue;
        CUgraph g; cuGraphCreate(&g, 0);
        CUgraphNode node;
        CUDA_MEMSET_NODE_PARAMS p = setOf(kinds[o].a, 1);
        CUresult r = cuGraphAddMemsetNode(&node, g, nullptr, 0, &p, ctx[c]);
        CUgraphExec e = nullptr;
        if (r == CUDA_SUCCESS) r = cuGraphInstantiate(&e, g, 0);
        if (r != CUDA_SUCCESS) { printf(" - (%s)", shortErr(r)); cuGraphDestroy(g); break; }
        CUDA_MEMSET_NODE_PARAMS q = setOf(n < 0 ? kinds[o].a : kinds[n].b, 2);
        CUresult rn = cuGraphExecMemsetNodeSetParams(e, node, &q, ctx[c]);
        CUgraph g2; cuGraphCreate(&g2, 0);
        CUgraphNode node2;
        cuGraphAddMemsetNode(&node2, g2, nullptr, 0, &q, ctx[c]);
        CUgraphExec e2 = nullptr;
        cuGraphInstantiate(&e2, g, 0);
        CUgraphExecUpdateResultInfo info = {};
        CUresult rg = cuGraphExecUpdate(e2, g2, &info);
        printf(" | %s: node %s, graph %s", n < 0 ? "same, value" : kinds[n].name, shortErr(rn), shortUpdate(rg, info));
        cuGraphExecDestroy(e); cuGraphExecDestroy(e2); cuGraphDestroy(g); cuGraphDestroy(g2);
        cuCtxSetCurrent(ctx[c]);
      }
      printf("\n");
    }
    for (int s = 0; s < nk; s++) {
      for (int d = 0; d < nk; d++) {
        if (kinds[s].host && kinds[d].host) continue;
        printf("ctx %d copy %s->%s:", c, kinds[s].name, kinds[d].name);
        for (int side = 0; side < 2; side++) {
          for (int n = 0; n < nk; n++) {
            int ns = side == 0 ? n : s, nd = side == 1 ? n : d;
            if (kinds[ns].host && kinds[nd].host) continue;
            CUgraph g; cuGraphCreate(&g, 0);
            CUgraphNode node;
            CUDA_MEMCPY3D p = copyOf(kinds[d], kinds[d].a, kinds[s], kinds[s].a, B);
            CUresult r = cuGraphAddMemcpyNode(&node, g, nullptr, 0, &p, ctx[c]);
            CUgraphExec e = nullptr;
            if (r == CUDA_SUCCESS) r = cuGraphInstantiate(&e, g, 0);
            if (r != CUDA_SUCCESS) { printf(" - (%s)", shortErr(r)); cuGraphDestroy(g); side = 2; break; }
            CUDA_MEMCPY3D q = copyOf(kinds[nd], side == 1 ? kinds[nd].b : kinds[nd].a, kinds[ns], side == 0 ? kinds[ns].b : kinds[ns].a, B);
            CUresult rn = cuGraphExecMemcpyNodeSetParams(e, node, &q, ctx[c]);
            CUgraph g2; cuGraphCreate(&g2, 0);
            CUgraphNode node2;
            cuGraphAddMemcpyNode(&node2, g2, nullptr, 0, &q, ctx[c]);
            CUgraphExec e2 = nullptr;
            cuGraphInstantiate(&e2, g, 0);
            CUgraphExecUpdateResultInfo info = {};
            CUresult rg = cuGraphExecUpdate(e2, g2, &info);
            printf(" | %s %s: node %s, graph %s", side == 0 ? "src" : "dst", kinds[n].name, shortErr(rn), shortUpdate(rg, info));
            cuGraphExecDestroy(e); cuGraphExecDestroy(e2); cuGraphDestroy(g); cuGraphDestroy(g2);
            cuCtxSetCurrent(ctx[c]);
          }
        }
        printf("\n");
      }
    }
  }
  fflush(stdout);
}

// memsetShapes answers which changes of a memset node's shape an update
// takes when the node's memory is another device's (a peer memset node,
// which cuGraphAddMemsetNode accepts), against the same changes on the
// node's own memory: value, offset, width, element size, and a 2D memset's
// address.
static void memsetShapes(CUcontext* ctx, void* mem0, void* mem1) {
  printf("\n== per-node updates of a memset node's shape, own memory and a peer's ==\n");
  struct Change { const char* name; size_t off; unsigned es; size_t w, h, pitch; };
  const Change from1D = {"", 0, 4, 16, 1, 64};
  const Change from2D = {"", 0, 4, 4, 3, 64};
  const Change changes[] = {
      {"1D: value only", 0, 4, 16, 1, 64},
      {"1D: offset +64", 64, 4, 16, 1, 64},
      {"1D: width 16 -> 8", 0, 4, 8, 1, 32},
      {"1D: width 16 -> 32", 0, 4, 32, 1, 128},
      {"1D: element size 4 -> 1 (width 64)", 0, 1, 64, 1, 64},
      {"1D: element size 4 -> 2 (width 32)", 0, 2, 32, 1, 64},
      {"2D: value only", 0, 4, 4, 3, 64},
      {"2D: offset +64", 64, 4, 4, 3, 64},
  };
  for (int c = 0; c < 2; c++) {
    for (int m = 0; m < 2; m++) {
      char* mem = (char*)(m ? mem1 : mem0);
      for (const Change& ch : changes) {
        const Change& f = ch.h > 1 ? from2D : from1D;
        cuCtxSetCurrent(ctx[c]);
        CUDA_MEMSET_NODE_PARAMS p = {};
        p.dst = (CUdeviceptr)mem; p.value = 1; p.elementSize = f.es; p.width = f.w; p.height = f.h; p.pitch = f.pitch;
        CUgraph g; cuGraphCreate(&g, 0);
        CUgraphNode n;
        CUresult r = cuGraphAddMemsetNode(&n, g, nullptr, 0, &p, ctx[c]);
        CUgraphExec e = nullptr;
        if (r == CUDA_SUCCESS) r = cuGraphInstantiate(&e, g, 0);
        CUresult ru = CUDA_ERROR_NOT_PERMITTED;
        if (r == CUDA_SUCCESS) {
          CUDA_MEMSET_NODE_PARAMS q = {};
          q.dst = (CUdeviceptr)(mem + ch.off); q.value = 2; q.elementSize = ch.es; q.width = ch.w; q.height = ch.h; q.pitch = ch.pitch;
          ru = cuGraphExecMemsetNodeSetParams(e, n, &q, ctx[c]);
        }
        char name[128];
        snprintf(name, sizeof name, "ctx %d, memory of device %d, %s", c, m, ch.name);
        printf("%-72s add+instantiate %s, update %s\n", name, shortErr(r), shortErr(ru));
        if (e) cuGraphExecDestroy(e);
        cuGraphDestroy(g);
      }
    }
  }
  fflush(stdout);
}

// capturedMemsets answers how an update of a memset node captured in a
// stream of device 0 goes, on the device's own memory and on device 1's
// (peer access enabled), given either device's context: a differential
// input found cuda refusing such updates that host took.
static void capturedMemsets(CUcontext* ctx, void* mem0, void* mem1) {
  printf("\n== per-node updates of memset nodes captured in a stream of device 0 ==\n");
  for (int m = 0; m < 2; m++) {
    for (int shape = 0; shape < 2; shape++) {
      MUST(cudaSetDevice(0));
      cudaStream_t st;
      MUST(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      char* mem = (char*)(m ? mem1 : mem0);
      MUST(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      cudaError_t ec = shape ? cudaMemset2DAsync(mem + 61, 1, 0xf4, 1, 3, st) : cudaMemsetAsync(mem + 20, 0x15, 28, st);
      cudaGraph_t g = nullptr;
      MUST(cudaStreamEndCapture(st, &g));
      size_t nn = 1;
      CUgraphNode node = nullptr;
      cuGraphGetNodes((CUgraph)g, &node, &nn);
      CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
      if (node) cuGraphNodeGetType(node, &t);
      CUgraphExec e = nullptr;
      CUresult ri = cuGraphInstantiate(&e, (CUgraph)g, 0);
      CUDA_MEMSET_NODE_PARAMS p = {};
      CUresult rg = cuGraphMemsetNodeGetParams(node, &p);
      char name[128];
      snprintf(name, sizeof name, "captured %s memset of device %d's memory", shape ? "2D" : "1D", m);
      printf("%-72s capture %s, node type %d, instantiate %s, get params %s (w %zu h %zu pitch %zu es %u)\n", name,
             cudaGetErrorName(ec), (int)t, shortErr(ri), shortErr(rg), (size_t)p.width, (size_t)p.height, (size_t)p.pitch, p.elementSize);
      for (int c = 0; c < 2 && ri == CUDA_SUCCESS; c++) {
        CUDA_MEMSET_NODE_PARAMS q = p;
        q.value = 7;
        CUresult r1 = cuGraphExecMemsetNodeSetParams(e, node, &q, ctx[c]);
        CUDA_MEMSET_NODE_PARAMS q2 = p;
        q2.elementSize = 1; q2.width = shape ? 1 : 9; q2.pitch = shape ? p.pitch : 9;
        CUresult r2 = cuGraphExecMemsetNodeSetParams(e, node, &q2, ctx[c]);
        printf("  update with device %d's context: value %s, width %s\n", c, shortErr(r1), shortErr(r2));
      }
      if (e) cuGraphExecDestroy(e);
      cudaGraphDestroy(g);
      cudaStreamDestroy(st);
    }
  }
  fflush(stdout);
}

int main() {
  int n = 0, drv = 0, rt = 0;
  cudaGetDeviceCount(&n);
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  printf("multidev.cu: %d GPU(s), driver %d, runtime %d\n", n, drv, rt);
  if (n < 2) {
    printf("needs two GPUs\n");
    return 0;
  }
  int *a0, *a0b, *a1, *a1b, *pinned;
  MUST(cudaSetDevice(1));
  MUST(cudaMalloc(&a1, N * sizeof(int)));
  MUST(cudaMalloc(&a1b, N * sizeof(int)));
  MUST(cudaSetDevice(0));
  MUST(cudaMalloc(&a0, N * sizeof(int)));
  MUST(cudaMalloc(&a0b, N * sizeof(int)));
  MUST(cudaMallocHost(&pinned, N * sizeof(int)));

  bodies(a1);
  capturedContext();
  updates("no peer access", a0, a0b, a1, a1b, pinned);
  int *pinnedb, *pageable, *pageableb;
  MUST(cudaMallocHost(&pinnedb, N * sizeof(int)));
  pageable = (int*)malloc(N * sizeof(int));
  pageableb = (int*)malloc(N * sizeof(int));
  Mem kinds[] = {{"0", a0, a0b, false}, {"1", a1, a1b, false}, {"H", pinned, pinnedb, true}, {"P", pageable, pageableb, true}};
  CUcontext ctx[2];
  cuDevicePrimaryCtxRetain(&ctx[0], 0);
  cuDevicePrimaryCtxRetain(&ctx[1], 1);
  matrix("no peer access", ctx, kinds, 4);
  memsetShapes(ctx, a0, a1);
  MUST(cudaSetDevice(0));
  MUST(cudaDeviceEnablePeerAccess(1, 0));
  MUST(cudaSetDevice(1));
  MUST(cudaDeviceEnablePeerAccess(0, 0));
  updates("peer access both ways", a0, a0b, a1, a1b, pinned);
  matrix("peer access both ways", ctx, kinds, 4);
  memsetShapes(ctx, a0, a1);
  capturedMemsets(ctx, a0, a1);
  return 0;
}
