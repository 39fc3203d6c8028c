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
//     ExecSetParamsAcrossDevices), without and with peer access.
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
  MUST(cudaSetDevice(0));
  MUST(cudaDeviceEnablePeerAccess(1, 0));
  MUST(cudaSetDevice(1));
  MUST(cudaDeviceEnablePeerAccess(0, 0));
  updates("peer access both ways", a0, a0b, a1, a1b, pinned);
  return 0;
}
