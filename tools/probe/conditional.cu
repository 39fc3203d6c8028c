// conditional.cu asks the CUDA driver what it does with conditional graph
// nodes: which calls it refuses and with which error (and whether when a
// node is added or at instantiation), what handle values look like, and
// what a condition value is at the start of a launch without
// cudaGraphCondAssignDefault. The host backend's rules (conditional.go) are
// checked against this output; commit it as docs/driver-conditional.txt.
// Build and run on a GPU machine (CUDA 12.8+ for IF/ELSE and SWITCH):
//
//	nvcc -O2 -o conditional conditional.cu && ./conditional
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, nullptr, n, p)
#define CAPTURE_TO(s, g, mode) cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, mode)
#define CAPINFO(s, st, g, deps, n) cudaStreamGetCaptureInfo(s, st, nullptr, g, deps, nullptr, n)
#define UPDATE_DEPS(s, deps, n, f) cudaStreamUpdateCaptureDependencies(s, deps, nullptr, n, f)
#else
#define ADDNODE(pn, g, deps, n, p) cudaGraphAddNode(pn, g, deps, n, p)
#define CAPTURE_TO(s, g, mode) cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, mode)
#define CAPINFO(s, st, g, deps, n) cudaStreamGetCaptureInfo(s, st, nullptr, g, deps, n)
#define UPDATE_DEPS(s, deps, n, f) cudaStreamUpdateCaptureDependencies(s, deps, n, f)
#endif

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-66s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

__global__ void nop() {}
__global__ void setv(cudaGraphConditionalHandle h, unsigned v) { cudaGraphSetConditional(h, v); }
__global__ void bump(int* p, int i) { p[i] += 1; }

static cudaGraphNode_t addKernel(cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd, void* f, void** args) {
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeKernel;
  p.kernel.func = f;
  p.kernel.gridDim = dim3(1);
  p.kernel.blockDim = dim3(1);
  p.kernel.kernelParams = args;
  cudaGraphNode_t n = nullptr;
  MUST(ADDNODE(&n, g, deps, nd, &p));
  return n;
}

static cudaGraphNode_t addNop(cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd) {
  return addKernel(g, deps, nd, (void*)nop, nullptr);
}

static cudaGraphNode_t addSet(cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd, cudaGraphConditionalHandle* h, unsigned* v) {
  void* args[] = {h, v};
  return addKernel(g, deps, nd, (void*)setv, args);
}

static cudaGraphNode_t addBump(cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd, int** p, int* i) {
  void* args[] = {p, i};
  return addKernel(g, deps, nd, (void*)bump, args);
}

// cond adds a conditional node; bodies receives phGraph_out.
static cudaError_t cond(cudaGraphNode_t* n, cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd,
                        cudaGraphConditionalHandle h, cudaGraphConditionalNodeType t, unsigned size, cudaGraph_t* bodies) {
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h;
  p.conditional.type = t;
  p.conditional.size = size;
  cudaError_t e = ADDNODE(n, g, deps, nd, &p);
  if (e == cudaSuccess && bodies)
    for (unsigned i = 0; i < size; i++) bodies[i] = p.conditional.phGraph_out[i];
  return e;
}

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

// instantiate reports what instantiating g does, with the result code.
static void instantiate(const char* what, cudaGraph_t g) {
  cudaGraphInstantiateParams ip = {};
  cudaGraphExec_t e = nullptr;
  cudaError_t err = cudaGraphInstantiateWithParams(&e, g, &ip);
  printf("%-66s %s (%s)\n", what, cudaGetErrorName(err), resultName(ip.result_out));
  cudaGetLastError();
  if (e) cudaGraphExecDestroy(e);
}

// bodyRule adds a node to the body of a fresh IF node with add, and if
// that is accepted, reports what instantiating the graph does.
template <class F>
static void bodyRule(const char* what, F add) {
  cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h; MUST(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNode_t n; cudaGraph_t body;
  MUST(cond(&n, g, nullptr, 0, h, cudaGraphCondTypeIf, 1, &body));
  cudaError_t e = add(body);
  printf("%-66s %s\n", what, cudaGetErrorName(e));
  cudaGetLastError();
  if (e == cudaSuccess) {
    char buf[160]; snprintf(buf, sizeof buf, "  then instantiate");
    instantiate(buf, g);
  }
  cudaGraphDestroy(g);
}

int main() {
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaDeviceProp prop;
  MUST(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, driver %d, runtime %d\n", prop.name, drv, rt);
  cudaStream_t s; MUST(cudaStreamCreate(&s));
  int* d; MUST(cudaMalloc(&d, 64 * sizeof(int)));

  printf("\n== handles ==\n");
  {
    cudaGraph_t g, g2; MUST(cudaGraphCreate(&g, 0)); MUST(cudaGraphCreate(&g2, 0));
    cudaGraphConditionalHandle h[3], x;
    for (int i = 0; i < 3; i++) MUST(cudaGraphConditionalHandleCreate(&h[i], g, 0, 0));
    MUST(cudaGraphConditionalHandleCreate(&x, g2, 0, 0));
    printf("handle values: %#llx %#llx %#llx; another graph's first: %#llx\n", h[0], h[1], h[2], x);
    SAY("handle create, flags 2", cudaGraphConditionalHandleCreate(&x, g, 0, 2));
    SAY("handle create, flags cudaGraphCondAssignDefault", cudaGraphConditionalHandleCreate(&x, g, 7, cudaGraphCondAssignDefault));
    cudaGraphDestroy(g); cudaGraphDestroy(g2);
  }

  printf("\n== node parameters and handle ownership ==\n");
  {
    cudaGraph_t g, other; MUST(cudaGraphCreate(&g, 0)); MUST(cudaGraphCreate(&other, 0));
    cudaGraphConditionalHandle h, ho;
    MUST(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    MUST(cudaGraphConditionalHandleCreate(&ho, other, 0, 0));
    cudaGraphNode_t n;
    SAY("IF of size 0", cond(&n, g, nullptr, 0, h, cudaGraphCondTypeIf, 0, nullptr));
    SAY("IF of size 3", cond(&n, g, nullptr, 0, h, cudaGraphCondTypeIf, 3, nullptr));
    SAY("WHILE of size 2", cond(&n, g, nullptr, 0, h, cudaGraphCondTypeWhile, 2, nullptr));
    SAY("SWITCH of size 0", cond(&n, g, nullptr, 0, h, cudaGraphCondTypeSwitch, 0, nullptr));
    SAY("type 3", cond(&n, g, nullptr, 0, h, (cudaGraphConditionalNodeType)3, 1, nullptr));
    SAY("handle of another graph", cond(&n, g, nullptr, 0, ho, cudaGraphCondTypeIf, 1, nullptr));
    SAY("handle value that was never created (h + 1000)", cond(&n, g, nullptr, 0, h + 1000, cudaGraphCondTypeIf, 1, nullptr));
    cudaGraph_t body[1];
    SAY("WHILE of size 1", cond(&n, g, nullptr, 0, h, cudaGraphCondTypeWhile, 1, body));
    cudaGraphNode_t n2;
    SAY("second node with the same handle", cond(&n2, g, nullptr, 0, h, cudaGraphCondTypeIf, 1, nullptr));
    SAY("node in the body with the same handle", cond(&n2, body[0], nullptr, 0, h, cudaGraphCondTypeIf, 1, nullptr));
    cudaGraphConditionalHandle hp, hb;
    MUST(cudaGraphConditionalHandleCreate(&hp, g, 0, 0));
    SAY("node in the body with a handle of the enclosing graph", cond(&n2, body[0], nullptr, 0, hp, cudaGraphCondTypeIf, 1, nullptr));
    SAY("handle created on the body graph", cudaGraphConditionalHandleCreate(&hb, body[0], 0, 0));
    SAY("node in the enclosing graph with the body's handle", cond(&n2, g, nullptr, 0, hb, cudaGraphCondTypeIf, 1, nullptr));
    instantiate("instantiate with the body's handle unused", g);
    cudaGraph_t inner[1];
    SAY("node in the body with the body's handle", cond(&n2, body[0], nullptr, 0, hb, cudaGraphCondTypeIf, 1, inner));
    instantiate("instantiate with every handle used", g);
    cudaGraph_t clone;
    SAY("clone of a graph with conditional nodes", cudaGraphClone(&clone, g));
    cudaGraph_t parent; MUST(cudaGraphCreate(&parent, 0));
    SAY("child graph node of a graph with conditional nodes", cudaGraphAddChildGraphNode(&n2, parent, nullptr, 0, g));
    cudaGraphExec_t e1, e2;
    SAY("first instantiation", cudaGraphInstantiate(&e1, g, 0));
    SAY("second instantiation while the first exists", cudaGraphInstantiate(&e2, g, 0));
    SAY("instantiate the body graph on its own", cudaGraphInstantiate(&e2, body[0], 0));
    cudaGraphExecDestroy(e1);
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h; p.conditional.type = cudaGraphCondTypeWhile; p.conditional.size = 1;
    SAY("cudaGraphNodeSetParams on the conditional node (same params)", cudaGraphNodeSetParams(n, &p));
    SAY("destroy the WHILE node", cudaGraphDestroyNode(n));
    SAY("node with its handle after that", cond(&n2, g, nullptr, 0, h, cudaGraphCondTypeIf, 1, nullptr));
    instantiate("instantiate after that (hp and hb lost their nodes)", g);
    cudaGraphDestroy(g); cudaGraphDestroy(other); cudaGraphDestroy(parent);

    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    MUST(cond(&n, g, nullptr, 0, h, cudaGraphCondTypeIf, 1, body));
    SAY("cudaGraphDestroy of a body graph", cudaGraphDestroy(body[0]));
    printf("(the graph with the IF node is leaked: destroying it after that may not be safe)\n");
  }

  printf("\n== unused handle, conditional node in an embedded graph ==\n");
  {
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    addNop(g, nullptr, 0);
    cudaGraphConditionalHandle h; MUST(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
    instantiate("graph with a handle and no conditional node", g);
    cudaGraphDestroy(g);

    cudaGraph_t parent, child, emb; MUST(cudaGraphCreate(&parent, 0)); MUST(cudaGraphCreate(&child, 0));
    addNop(child, nullptr, 0);
    cudaGraphNode_t cn; MUST(cudaGraphAddChildGraphNode(&cn, parent, nullptr, 0, child));
    MUST(cudaGraphChildGraphNodeGetGraph(cn, &emb));
    cudaGraphConditionalHandle he, hp;
    SAY("handle on a graph embedded in a child graph node", cudaGraphConditionalHandleCreate(&he, emb, 0, 0));
    cudaGraphNode_t n;
    SAY("conditional node in the embedded graph", cond(&n, emb, nullptr, 0, he, cudaGraphCondTypeIf, 1, nullptr));
    MUST(cudaGraphConditionalHandleCreate(&hp, parent, 0, 0));
    SAY("conditional node in the embedded graph with the parent's handle", cond(&n, emb, nullptr, 0, hp, cudaGraphCondTypeIf, 1, nullptr));
    cudaGraphDestroy(parent); cudaGraphDestroy(child);
  }

  printf("\n== body contents (added to the body of an IF node) ==\n");
  {
    void* pageable = malloc(64);
    void* pinned; MUST(cudaMallocHost(&pinned, 64));
    cudaEvent_t ev; MUST(cudaEventCreate(&ev));
    bodyRule("kernel", [&](cudaGraph_t b) {
      cudaKernelNodeParams k = {}; k.func = (void*)nop; k.gridDim = dim3(1); k.blockDim = dim3(1);
      cudaGraphNode_t n; return cudaGraphAddKernelNode(&n, b, nullptr, 0, &k); });
    bodyRule("empty", [&](cudaGraph_t b) { cudaGraphNode_t n; return cudaGraphAddEmptyNode(&n, b, nullptr, 0); });
    bodyRule("memset of device memory", [&](cudaGraph_t b) {
      cudaMemsetParams m = {}; m.dst = d; m.value = 1; m.elementSize = 1; m.width = 64; m.height = 1;
      cudaGraphNode_t n; return cudaGraphAddMemsetNode(&n, b, nullptr, 0, &m); });
    bodyRule("memcpy device to device", [&](cudaGraph_t b) {
      cudaGraphNode_t n; return cudaGraphAddMemcpyNode1D(&n, b, nullptr, 0, d + 16, d, 64, cudaMemcpyDeviceToDevice); });
    bodyRule("memcpy from pageable host memory", [&](cudaGraph_t b) {
      cudaGraphNode_t n; return cudaGraphAddMemcpyNode1D(&n, b, nullptr, 0, d, pageable, 64, cudaMemcpyHostToDevice); });
    bodyRule("memcpy to pageable host memory", [&](cudaGraph_t b) {
      cudaGraphNode_t n; return cudaGraphAddMemcpyNode1D(&n, b, nullptr, 0, pageable, d, 64, cudaMemcpyDeviceToHost); });
    bodyRule("memcpy from pinned host memory", [&](cudaGraph_t b) {
      cudaGraphNode_t n; return cudaGraphAddMemcpyNode1D(&n, b, nullptr, 0, d, pinned, 64, cudaMemcpyHostToDevice); });
    bodyRule("host node", [&](cudaGraph_t b) {
      cudaHostNodeParams hp = {}; hp.fn = [](void*) {};
      cudaGraphNode_t n; return cudaGraphAddHostNode(&n, b, nullptr, 0, &hp); });
    bodyRule("event record node", [&](cudaGraph_t b) { cudaGraphNode_t n; return cudaGraphAddEventRecordNode(&n, b, nullptr, 0, ev); });
    bodyRule("event wait node", [&](cudaGraph_t b) { cudaGraphNode_t n; return cudaGraphAddEventWaitNode(&n, b, nullptr, 0, ev); });
    bodyRule("mem alloc node", [&](cudaGraph_t b) {
      cudaMemAllocNodeParams a = {}; a.poolProps.allocType = cudaMemAllocationTypePinned;
      a.poolProps.location.type = cudaMemLocationTypeDevice; a.poolProps.location.id = 0; a.bytesize = 1 << 20;
      cudaGraphNode_t n; return cudaGraphAddMemAllocNode(&n, b, nullptr, 0, &a); });
    bodyRule("child graph of a kernel", [&](cudaGraph_t b) {
      cudaGraph_t c; cudaGraphCreate(&c, 0); addNop(c, nullptr, 0);
      cudaGraphNode_t n; cudaError_t e = cudaGraphAddChildGraphNode(&n, b, nullptr, 0, c); cudaGraphDestroy(c); return e; });
    bodyRule("child graph of a host node", [&](cudaGraph_t b) {
      cudaGraph_t c; cudaGraphCreate(&c, 0);
      cudaHostNodeParams hp = {}; hp.fn = [](void*) {}; cudaGraphNode_t hn; cudaGraphAddHostNode(&hn, c, nullptr, 0, &hp);
      cudaGraphNode_t n; cudaError_t e = cudaGraphAddChildGraphNode(&n, b, nullptr, 0, c); cudaGraphDestroy(c); return e; });
    bodyRule("host node in a child graph already in the body", [&](cudaGraph_t b) {
      cudaGraph_t c, emb; cudaGraphCreate(&c, 0); addNop(c, nullptr, 0);
      cudaGraphNode_t n; MUST(cudaGraphAddChildGraphNode(&n, b, nullptr, 0, c)); cudaGraphDestroy(c);
      MUST(cudaGraphChildGraphNodeGetGraph(n, &emb));
      cudaHostNodeParams hp = {}; hp.fn = [](void*) {}; cudaGraphNode_t hn;
      return cudaGraphAddHostNode(&hn, emb, nullptr, 0, &hp); });
    bodyRule("host node captured into the body", [&](cudaGraph_t b) {
      cudaStream_t cs; cudaStreamCreate(&cs);
      MUST(CAPTURE_TO(cs, b, cudaStreamCaptureModeRelaxed));
      cudaError_t e = cudaLaunchHostFunc(cs, [](void*) {}, nullptr);
      cudaGraph_t out = nullptr; cudaError_t e2 = cudaStreamEndCapture(cs, &out);
      printf("  (end capture: %s)\n", cudaGetErrorName(e2));
      cudaStreamDestroy(cs);
      return e; });
    cudaEventDestroy(ev); cudaFreeHost(pinned); free(pageable);
  }

  printf("\n== condition values ==\n");
  {
    // IF body bumps d[0]; a kernel after the IF sets the handle to 0.
    for (int flags = 0; flags <= 1; flags++) {
      cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
      cudaGraphConditionalHandle h; MUST(cudaGraphConditionalHandleCreate(&h, g, 1, flags ? cudaGraphCondAssignDefault : 0));
      cudaGraphNode_t n; cudaGraph_t body;
      MUST(cond(&n, g, nullptr, 0, h, cudaGraphCondTypeIf, 1, &body));
      int i0 = 0; addBump(body, nullptr, 0, &d, &i0);
      unsigned zero = 0; addSet(g, &n, 1, &h, &zero);
      cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, g, 0));
      MUST(cudaMemset(d, 0, sizeof(int)));
      int runs[3];
      for (int l = 0; l < 3; l++) {
        MUST(cudaGraphLaunch(e, s)); MUST(cudaStreamSynchronize(s));
        MUST(cudaMemcpy(&runs[l], d, sizeof(int), cudaMemcpyDeviceToHost));
      }
      printf("default 1, %s, set to 0 after the IF: body runs after launches 1..3: %d %d %d\n",
             flags ? "cudaGraphCondAssignDefault" : "no flag", runs[0], runs[1], runs[2]);
      cudaGraphExecDestroy(e);
      MUST(cudaGraphInstantiate(&e, g, 0));
      MUST(cudaGraphLaunch(e, s)); MUST(cudaStreamSynchronize(s));
      int r; MUST(cudaMemcpy(&r, d, sizeof(int), cudaMemcpyDeviceToHost));
      printf("  a new executable graph, launched once: %d\n", r);
      cudaGraphExecDestroy(e); cudaGraphDestroy(g);
    }
    // SWITCH of 3 bodies, each bumping d[i], after a kernel that sets the
    // value to v = 0..4.
    {
      MUST(cudaMemset(d, 0, 3 * sizeof(int)));
      for (unsigned v = 0; v < 5; v++) {
        cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
        cudaGraphConditionalHandle h; MUST(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
        cudaGraphNode_t k = addSet(g, nullptr, 0, &h, &v);
        cudaGraphNode_t n; cudaGraph_t bodies[3];
        MUST(cond(&n, g, &k, 1, h, cudaGraphCondTypeSwitch, 3, bodies));
        int idx[3] = {0, 1, 2};
        for (int i = 0; i < 3; i++) addBump(bodies[i], nullptr, 0, &d, &idx[i]);
        cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, g, 0));
        MUST(cudaGraphLaunch(e, s)); MUST(cudaStreamSynchronize(s));
        int r[3]; MUST(cudaMemcpy(r, d, sizeof r, cudaMemcpyDeviceToHost));
        printf("SWITCH of 3 with value %u: body runs so far %d %d %d\n", v, r[0], r[1], r[2]);
        cudaGraphExecDestroy(e); cudaGraphDestroy(g);
      }
    }
    // WHILE with value 0: the body does not run.
    {
      cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
      cudaGraphConditionalHandle h; MUST(cudaGraphConditionalHandleCreate(&h, g, 0, cudaGraphCondAssignDefault));
      cudaGraphNode_t n; cudaGraph_t body;
      MUST(cond(&n, g, nullptr, 0, h, cudaGraphCondTypeWhile, 1, &body));
      int i0 = 0; addBump(body, nullptr, 0, &d, &i0);
      MUST(cudaMemset(d, 0, sizeof(int)));
      cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, g, 0));
      MUST(cudaGraphLaunch(e, s)); MUST(cudaStreamSynchronize(s));
      int r; MUST(cudaMemcpy(&r, d, sizeof(int), cudaMemcpyDeviceToHost));
      printf("WHILE with default 0: body ran %d times\n", r);
      cudaGraphExecDestroy(e); cudaGraphDestroy(g);
      cudaGraph_t g2; MUST(cudaGraphCreate(&g2, 0));
      cudaGraphConditionalHandle h2; MUST(cudaGraphConditionalHandleCreate(&h2, g2, 0, 0));
      cudaGraphNode_t n2; MUST(cond(&n2, g2, nullptr, 0, h2, cudaGraphCondTypeIf, 1, nullptr));
      instantiate("IF with an empty body: instantiate", g2);
      cudaGraphDestroy(g2);
    }
  }

  printf("\n== capture ==\n");
  {
    // capturedWhileGraph's insertion pattern, then launching an executable
    // graph with conditional nodes into a capture.
    cudaStream_t cs; MUST(cudaStreamCreate(&cs));
    MUST(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus st; cudaGraph_t cg; const cudaGraphNode_t* deps; size_t nd;
    nop<<<1, 1, 0, cs>>>();
    MUST(CAPINFO(cs, &st, &cg, &deps, &nd));
    cudaGraphConditionalHandle h; MUST(cudaGraphConditionalHandleCreate(&h, cg, 0, 0));
    cudaGraphNode_t n; cudaGraph_t body;
    SAY("conditional node added to the capture graph", cond(&n, cg, deps, nd, h, cudaGraphCondTypeIf, 1, &body));
    SAY("update capture dependencies to it", UPDATE_DEPS(cs, &n, 1, cudaStreamSetCaptureDependencies));
    nop<<<1, 1, 0, cs>>>();
    cudaGraph_t g = nullptr;
    SAY("end capture", cudaStreamEndCapture(cs, &g));
    cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, g, 0));
    MUST(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    SAY("launch a graph with conditional nodes into a capture", cudaGraphLaunch(e, cs));
    cudaGraph_t g2 = nullptr;
    SAY("  end capture", cudaStreamEndCapture(cs, &g2));
    if (g2) cudaGraphDestroy(g2);
    cudaGraphExecDestroy(e); cudaGraphDestroy(g); cudaStreamDestroy(cs);
  }

  printf("\n== setting handles from outside the graph (last: may fault) ==\n");
  {
    cudaGraph_t a, b; MUST(cudaGraphCreate(&a, 0)); MUST(cudaGraphCreate(&b, 0));
    cudaGraphConditionalHandle ha, hb;
    MUST(cudaGraphConditionalHandleCreate(&ha, a, 0, 0)); MUST(cudaGraphConditionalHandleCreate(&hb, b, 0, 0));
    cudaGraphNode_t n;
    MUST(cond(&n, a, nullptr, 0, ha, cudaGraphCondTypeIf, 1, nullptr));
    unsigned one = 1;
    cudaGraphNode_t k = addSet(b, nullptr, 0, &ha, &one);
    MUST(cond(&n, b, &k, 1, hb, cudaGraphCondTypeIf, 1, nullptr));
    cudaGraphExec_t ea, eb; MUST(cudaGraphInstantiate(&ea, a, 0)); MUST(cudaGraphInstantiate(&eb, b, 0));
    SAY("launch a graph whose kernel sets another graph's handle", cudaGraphLaunch(eb, s));
    SAY("  synchronize", cudaStreamSynchronize(s));
    setv<<<1, 1, 0, s>>>(ha, 1);
    SAY("kernel in a stream setting a handle", cudaGetLastError());
    SAY("  synchronize", cudaStreamSynchronize(s));
  }
  return 0;
}
