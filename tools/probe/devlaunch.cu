// devlaunch.cu asks the CUDA driver how device graph launch behaves, for
// the rules the host backend implements (devlaunch.go): what instantiation
// for device launch refuses (error, result_out, error node), what a
// device-side cudaGraphLaunch refuses and with which error, the limits, the
// order of fire-and-forget, tail and sibling launches, upload and update,
// and cudaGetCurrentGraphExec. Each line prints what the driver did and, in
// brackets, what the host backend does; "DIFFERS" marks a disagreement.
// Output: docs/driver-devlaunch.txt. Build and run on a GPU machine:
//
//	nvcc -O2 -rdc=true -o devlaunch devlaunch.cu -lcudadevrt && ./devlaunch
//	./devlaunch host-handle   # a host graph launched from the device (kills the context)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#ifndef cudaStreamGraphFireAndForgetAsSibling
#define cudaStreamGraphFireAndForgetAsSibling (cudaStream_t)0x0300000000000000
#endif

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

static int differs = 0;

// expect prints a driver answer next to the host backend's.
static void expect(const char* what, const char* got, const char* host) {
  bool same = strcmp(got, host) == 0;
  if (!same) differs++;
  printf("%-64s %-30s [host: %s]%s\n", what, got, host, same ? "" : "  DIFFERS");
}
static void expectErr(const char* what, int got, cudaError_t host) {
  expect(what, cudaGetErrorName((cudaError_t)got), cudaGetErrorName(host));
}
static void expectInt(const char* what, long long got, long long host) {
  char g[32], h[32];
  snprintf(g, sizeof g, "%lld", got);
  snprintf(h, sizeof h, "%lld", host);
  expect(what, g, h);
}

// Device-side state: a log of ids, launch results, current graph handles.
__device__ unsigned d_log[1024];
__device__ unsigned d_n;
__device__ unsigned d_runs;
__device__ int d_res[64];
__device__ unsigned long long d_cur[16];
__device__ unsigned d_flag;

__device__ void note(unsigned id) { d_log[atomicAdd(&d_n, 1u)] = id; }

__global__ void log_id(int id) { note(id); }
__global__ void cur(int slot) { d_cur[slot] = (unsigned long long)cudaGetCurrentGraphExec(); }
__global__ void launch_one(cudaGraphExec_t g, cudaStream_t s, int slot) { d_res[slot] = cudaGraphLaunch(g, s); }
__global__ void launch_two(cudaGraphExec_t a, cudaGraphExec_t b, cudaStream_t s, int slot, int id) {
  note(id);
  d_res[slot] = cudaGraphLaunch(a, s);
  d_res[slot + 1] = cudaGraphLaunch(b, s);
}
// Launches g[0..n) in s; d_res[slot] = index of the first refused (-1: none), d_res[slot+1] = its error.
__global__ void launch_array(const cudaGraphExec_t* g, int n, cudaStream_t s, int slot) {
  int first = -1, code = 0;
  for (int i = 0; i < n; i++) {
    int e = cudaGraphLaunch(g[i], s);
    if (e != 0 && first < 0) { first = i; code = e; }
  }
  d_res[slot] = first;
  d_res[slot + 1] = code;
}
// Runs `times` times by relaunching itself in s; the second self launch of a run goes to d_res[1].
__global__ void self_launch(cudaStream_t s, int times) {
  unsigned n = atomicAdd(&d_runs, 1u) + 1;
  note(7);
  if ((int)n < times) {
    d_res[0] = cudaGraphLaunch(cudaGetCurrentGraphExec(), s);
    d_res[1] = cudaGraphLaunch(cudaGetCurrentGraphExec(), s);
  }
}
__global__ void launch_then_last_error(cudaGraphExec_t g) {
  d_res[0] = cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
  d_res[1] = cudaGetLastError();
}
__global__ void cdp_child() {}
__global__ void cdp_parent() { cdp_child<<<1, 1>>>(); }
// Waits up to 200 ms for d_flag; d_res[slot] = 1 if it timed out.
__global__ void wait_flag(int slot, int id) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  int timed_out = 0;
  while (atomicAdd(&d_flag, 0u) == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > 200000000ull) { timed_out = 1; break; }
  }
  d_res[slot] = timed_out;
  note(id);
}
__global__ void set_flag(int id) { note(id); atomicExch(&d_flag, 1u); }

static cudaStream_t st;
static const unsigned long long DL = cudaGraphInstantiateFlagDeviceLaunch;
static cudaStream_t FAF = cudaStreamGraphFireAndForget, TAIL = cudaStreamGraphTailLaunch, SIB = cudaStreamGraphFireAndForgetAsSibling;

static cudaGraphNode_t lastNode;
static cudaGraph_t kgraph(const void* f, void** args) {
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  cudaKernelNodeParams p = {};
  p.func = const_cast<void*>(f);
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = args;
  MUST(cudaGraphAddKernelNode(&lastNode, g, nullptr, 0, &p));
  return g;
}
static cudaGraphExec_t inst(cudaGraph_t g, unsigned long long flags, bool upload) {
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, flags));
  if (upload) MUST(cudaGraphUpload(e, st));
  return e;
}
static cudaGraphExec_t logGraph(int id, bool upload = true) {
  void* a[] = {&id};
  return inst(kgraph((const void*)log_id, a), DL, upload);
}
static cudaGraphExec_t launcher(cudaGraphExec_t g, cudaStream_t s, int slot, unsigned long long flags = 0) {
  void* a[] = {&g, &s, &slot};
  return inst(kgraph((const void*)launch_one, a), flags, flags != 0);
}
static void reset() {
  static unsigned zero[1024];
  static int minus2[64];
  for (int& x : minus2) x = -2;
  unsigned z = 0;
  MUST(cudaMemcpyToSymbol(d_log, zero, sizeof zero));
  MUST(cudaMemcpyToSymbol(d_n, &z, 4));
  MUST(cudaMemcpyToSymbol(d_runs, &z, 4));
  MUST(cudaMemcpyToSymbol(d_flag, &z, 4));
  MUST(cudaMemcpyToSymbol(d_res, minus2, sizeof minus2));
  MUST(cudaMemcpyToSymbol(d_cur, zero, sizeof(unsigned long long) * 16));
}
static void run(cudaGraphExec_t e) {
  MUST(cudaGraphLaunch(e, st));
  MUST(cudaStreamSynchronize(st));
}
static int res(int i) {
  int r[64];
  MUST(cudaMemcpyFromSymbol(r, d_res, sizeof r));
  return r[i];
}
static int logged() {
  unsigned n;
  MUST(cudaMemcpyFromSymbol(&n, d_n, 4));
  return (int)n;
}
static const char* logString() {
  static char s[512];
  unsigned l[64], n = logged();
  MUST(cudaMemcpyFromSymbol(l, d_log, sizeof l));
  s[0] = 0;
  for (unsigned i = 0; i < n && i < 64; i++) snprintf(s + strlen(s), sizeof s - strlen(s), "%s%u", i ? " " : "", l[i]);
  return s;
}

static const char* typeName(cudaGraphNodeType t) {
  switch (t) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeGraph: return "child graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "event wait";
    case cudaGraphNodeTypeEventRecord: return "event record";
    case cudaGraphNodeTypeMemAlloc: return "mem alloc";
    case cudaGraphNodeTypeMemFree: return "mem free";
    default: return "other";
  }
}

// inst_probe instantiates with cudaGraphInstantiateWithParams and prints the
// error, result_out and the error node's type, next to the host backend's.
static void inst_probe(const char* what, cudaGraph_t g, unsigned long long flags, const char* host) {
  cudaGraphInstantiateParams p = {};
  p.flags = flags;
  p.uploadStream = st;
  cudaGraphExec_t e = nullptr;
  cudaError_t rc = cudaGraphInstantiateWithParams(&e, g, &p);
  char got[128];
  const char* nt = "none";
  if (p.errNode_out) {
    cudaGraphNodeType t;
    cudaGraphNodeGetType(p.errNode_out, &t);
    nt = typeName(t);
  }
  snprintf(got, sizeof got, "%s/%d/%s", cudaGetErrorName(rc), (int)p.result_out, nt);
  expect(what, got, host);
  if (e) cudaGraphExecDestroy(e);
  cudaGetLastError();
}

static cudaGraph_t withKernel() {
  int id = 1;
  void* a[] = {&id};
  return kgraph((const void*)log_id, a);
}

int main(int argc, char** argv) {
  MUST(cudaStreamCreate(&st));
  int drv = 0, dev = 0;
  cudaDriverGetVersion(&drv);
  cudaDeviceProp prop;
  MUST(cudaGetDeviceProperties(&prop, dev));
  printf("driver %d, %s\n", drv, prop.name);
  reset();

  if (argc > 1 && strcmp(argv[1], "host-handle") == 0) {
    printf("\n== a host graph launched from the device ==\n");
    cudaGraphExec_t h = inst(withKernel(), 0, false);
    MUST(cudaGraphLaunch(launcher(h, FAF, 0), st));
    expectErr("stream synchronize after the device launched a host graph", cudaStreamSynchronize(st), cudaErrorIllegalAddress);
    expectErr("  a later call (is the error sticky?)", cudaMemset(nullptr, 0, 0), cudaErrorIllegalAddress);
    printf("%d differences\n", differs);
    return 0;
  }

  printf("\n== instantiation for device launch: error/result_out/error node ==\n");
  {
    const char* refused = "cudaErrorInvalidValue/3/%s";
    char h[96];
    cudaGraph_t g;
    cudaGraphNode_t n;
    MUST(cudaGraphCreate(&g, 0));
    inst_probe("no nodes", g, DL, "cudaErrorInvalidValue/1/none");
    MUST(cudaGraphAddEmptyNode(&n, g, nullptr, 0));
    inst_probe("an empty node alone", g, DL, "cudaErrorInvalidValue/3/empty");
    g = withKernel();
    MUST(cudaGraphAddEmptyNode(&n, g, nullptr, 0));
    snprintf(h, sizeof h, refused, "empty");
    inst_probe("a kernel and an empty node", g, DL, h);
    g = withKernel();
    cudaHostNodeParams hp = {};
    hp.fn = [](void*) {};
    MUST(cudaGraphAddHostNode(&n, g, nullptr, 0, &hp));
    snprintf(h, sizeof h, refused, "host");
    inst_probe("a kernel and a host node", g, DL, h);
    cudaEvent_t ev;
    MUST(cudaEventCreate(&ev));
    g = withKernel();
    MUST(cudaGraphAddEventRecordNode(&n, g, nullptr, 0, ev));
    snprintf(h, sizeof h, refused, "event record");
    inst_probe("a kernel and an event record node", g, DL, h);
    g = withKernel();
    MUST(cudaGraphAddEventWaitNode(&n, g, nullptr, 0, ev));
    snprintf(h, sizeof h, refused, "event wait");
    inst_probe("a kernel and an event wait node", g, DL, h);
    g = withKernel();
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = dev;
    ap.bytesize = 1 << 20;
    MUST(cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &ap));
    snprintf(h, sizeof h, refused, "mem alloc");
    inst_probe("a kernel and a mem alloc node", g, DL, h);

    char* dptr;
    char* pinned;
    static char pageable[256];
    MUST(cudaMalloc(&dptr, 256));
    MUST(cudaMallocHost(&pinned, 256));
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, dptr, pageable, 64, cudaMemcpyHostToDevice));
    snprintf(h, sizeof h, refused, "memcpy");
    inst_probe("memcpy from pageable host memory", g, DL, h);
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, pageable, dptr, 64, cudaMemcpyDeviceToHost));
    inst_probe("memcpy to pageable host memory", g, DL, h);
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, dptr, pinned, 64, cudaMemcpyHostToDevice));
    inst_probe("memcpy from pinned host memory (no host slices in gpugraph)", g, DL, "cudaSuccess/0/none");
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, dptr + 128, dptr, 64, cudaMemcpyDeviceToDevice));
    inst_probe("memcpy device to device", g, DL, "cudaSuccess/0/none");
    MUST(cudaGraphCreate(&g, 0));
    cudaMemsetParams mp = {};
    mp.dst = dptr;
    mp.value = 7;
    mp.elementSize = 4;
    mp.width = 16;
    mp.height = 1;
    MUST(cudaGraphAddMemsetNode(&n, g, nullptr, 0, &mp));
    inst_probe("memset of device memory", g, DL, "cudaSuccess/0/none");
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphAddChildGraphNode(&n, g, nullptr, 0, withKernel()));
    inst_probe("a child graph with a kernel", g, DL, "cudaSuccess/0/none");
    cudaGraph_t empty;
    MUST(cudaGraphCreate(&empty, 0));
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphAddChildGraphNode(&n, g, nullptr, 0, empty));
    inst_probe("only an empty child graph", g, DL, "cudaErrorInvalidValue/1/none");
    cudaGraph_t c = withKernel();
    MUST(cudaGraphAddHostNode(&n, c, nullptr, 0, &hp));
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphAddChildGraphNode(&n, g, nullptr, 0, c));
    snprintf(h, sizeof h, refused, "host");
    inst_probe("a child graph with a host node", g, DL, h);
    cudaGraphExec_t none = nullptr;
    int slot = 0;
    void* la[] = {&none, &FAF, &slot};
    inst_probe("a kernel calling cudaGraphLaunch", kgraph((const void*)launch_one, la), DL, "cudaSuccess/0/none");
    snprintf(h, sizeof h, refused, "kernel");
    inst_probe("a kernel using dynamic parallelism", kgraph((const void*)cdp_parent, nullptr), DL, h);
    inst_probe("DeviceLaunch | AutoFreeOnLaunch", withKernel(), DL | cudaGraphInstantiateFlagAutoFreeOnLaunch, "cudaErrorInvalidValue/1/none");
    inst_probe("DeviceLaunch | Upload, with a stream", withKernel(), DL | cudaGraphInstantiateFlagUpload, "cudaSuccess/0/none");
    cudaGraphExec_t e = nullptr;
    expectErr("cudaGraphInstantiate with Upload", cudaGraphInstantiate(&e, withKernel(), cudaGraphInstantiateFlagUpload), cudaErrorInvalidValue);
    expectErr("cudaGraphInstantiate with DeviceLaunch | Upload", cudaGraphInstantiate(&e, withKernel(), DL | cudaGraphInstantiateFlagUpload), cudaErrorInvalidValue);
    expectErr("cudaGraphInstantiate with flag 8 (UseNodePriority: gpugraph refuses it)", cudaGraphInstantiate(&e, withKernel(), 8), cudaErrorInvalidValue);
    cudaGetLastError();
  }

  printf("\n== what a device launch refuses ==\n");
  {
    cudaGraphExec_t d = logGraph(1), notUp = logGraph(2, false);
    cudaStream_t user;
    MUST(cudaStreamCreate(&user));
    struct { const char* what; cudaGraphExec_t g; cudaStream_t s; } cases[] = {
        {"a graph never uploaded", notUp, FAF},
        {"a null handle", nullptr, FAF},
        {"stream 0 (mode 0)", d, (cudaStream_t)0},
        {"a user stream", d, user},
        {"mode 4 (0x04 << 56)", d, (cudaStream_t)0x0400000000000000ull},
    };
    for (auto& c : cases) {
      reset();
      run(launcher(c.g, c.s, 0));
      expectErr(c.what, res(0), cudaErrorInvalidValue);
    }
    reset();
    void* la[] = {&notUp};
    run(inst(kgraph((const void*)launch_then_last_error, la), 0, false));
    expectErr("  cudaGetLastError after a refused launch", res(1), cudaSuccess);

    for (cudaStream_t mode : {FAF, TAIL, SIB}) {
      const char* name = mode == FAF ? "fire-and-forget" : mode == TAIL ? "tail" : "sibling";
      char what[96];
      reset();
      int slot = 0, id = 9;
      void* a[] = {&d, &d, &mode, &slot, &id};
      run(inst(kgraph((const void*)launch_two, a), 0, false));
      snprintf(what, sizeof what, "one graph launched twice by one kernel (%s): first", name);
      expectErr(what, res(0), cudaSuccess);
      snprintf(what, sizeof what, "  second");
      expectErr(what, res(1), cudaErrorInvalidValue);

      reset();
      int times = 2;
      void* s[] = {&mode, &times};
      run(inst(kgraph((const void*)self_launch, s), DL, true));
      snprintf(what, sizeof what, "a graph launching itself (%s): first", name);
      expectErr(what, res(0), mode == TAIL ? cudaSuccess : cudaErrorInvalidValue);
      expectErr("  second", res(1), cudaErrorInvalidValue);
    }
    MUST(cudaStreamDestroy(user));
  }

  printf("\n== limits ==\n");
  {
    static cudaGraphExec_t many[260];
    for (auto& x : many) x = logGraph(5);
    cudaGraphExec_t* dmany;
    MUST(cudaMalloc(&dmany, sizeof many));
    MUST(cudaMemcpy(dmany, many, sizeof many, cudaMemcpyHostToDevice));
    struct { const char* what; cudaStream_t s; int n, host; } cases[] = {
        {"fire-and-forget launches by one kernel: first refused", FAF, 125, 120},
        {"sibling launches by one kernel (host-launched graph): first refused", SIB, 125, 120},
        {"tail launches by one kernel: first refused", TAIL, 260, 255},
    };
    for (auto& c : cases) {
      int slot = 0;
      void* a[] = {&dmany, &c.n, &c.s, &slot};
      cudaGraphExec_t o = inst(kgraph((const void*)launch_array, a), 0, false);
      for (int again = 0; again < 2; again++) {
        reset();
        run(o);
        expectInt(again ? "  launched again: first refused" : c.what, res(0), c.host);
        if (res(0) >= 0) expectErr("  its error", res(1), cudaErrorInvalidValue);
      }
    }
    // Sibling launches from a device graph launched fire-and-forget: does
    // the 120 apply to the launching graph or to its parent?
    {
      int n = 125, slot = 0;
      void* a[] = {&dmany, &n, &SIB, &slot};
      cudaGraphExec_t sib = inst(kgraph((const void*)launch_array, a), DL, true);
      reset();
      run(launcher(sib, FAF, 2));
      expectInt("sibling launches by a device graph: first refused", res(0), 120);
    }
    // Two kernel nodes of one graph, 70 fire-and-forget launches each: is the
    // 120 per graph execution?
    {
      cudaGraph_t g;
      MUST(cudaGraphCreate(&g, 0));
      int n = 70, s0 = 0, s1 = 2;
      cudaGraphExec_t* second = dmany + 70;
      void* a0[] = {&dmany, &n, &FAF, &s0};
      void* a1[] = {&second, &n, &FAF, &s1};
      cudaKernelNodeParams p = {};
      p.func = (void*)launch_array;
      p.gridDim = p.blockDim = dim3(1);
      cudaGraphNode_t k0, k1;
      p.kernelParams = a0;
      MUST(cudaGraphAddKernelNode(&k0, g, nullptr, 0, &p));
      p.kernelParams = a1;
      MUST(cudaGraphAddKernelNode(&k1, g, &k0, 1, &p));
      reset();
      run(inst(g, 0, false));
      expectInt("70 + 70 fire-and-forget by two kernel nodes: first refused in the second", res(2), 50);
    }
    MUST(cudaFree(dmany));
  }

  printf("\n== order ==\n");
  {
    // A queues B then C; B queues D then E.
    reset();
    cudaGraphExec_t C = logGraph(3), D = logGraph(4), E = logGraph(5);
    int sb = 4, ib = 2, sa = 0, ia = 1;
    void* ab[] = {&D, &E, &TAIL, &sb, &ib};
    cudaGraphExec_t B = inst(kgraph((const void*)launch_two, ab), DL, true);
    void* aa[] = {&B, &C, &TAIL, &sa, &ia};
    run(inst(kgraph((const void*)launch_two, aa), 0, false));
    expect("tail launches: A queues B, C; B queues D, E", logString(), "1 2 4 5 3");
    for (cudaStream_t mode : {FAF, SIB, TAIL}) {
      reset();
      cudaGraphExec_t x = logGraph(2), y = logGraph(3);
      int slot = 0, id = 1;
      void* a[] = {&x, &y, &mode, &slot, &id};
      MUST(cudaGraphLaunch(inst(kgraph((const void*)launch_two, a), 0, false), st));
      log_id<<<1, 1, 0, st>>>(9);
      MUST(cudaStreamSynchronize(st));
      char what[96];
      snprintf(what, sizeof what, "%s launches of 2, 3, then a stream kernel 9",
               mode == FAF ? "fire-and-forget" : mode == TAIL ? "tail" : "sibling");
      const char* l = logString();
      expect(what, strcmp(l, "1 2 3 9") == 0 || strcmp(l, "1 3 2 9") == 0 ? "1 {2 3} 9" : l, "1 {2 3} 9");
    }
    // The sibling waits (200 ms at most) for a flag that the launching
    // graph's tail launch sets: a sibling does not hold back tail launches.
    for (cudaStream_t mode : {SIB, FAF}) {
      reset();
      int slot = 0, wid = 1, sid = 2;
      void* aw[] = {&slot, &wid};
      void* as[] = {&sid};
      cudaGraphExec_t w = inst(kgraph((const void*)wait_flag, aw), DL, true);
      cudaGraphExec_t t = inst(kgraph((const void*)set_flag, as), DL, true);
      // Kernel node 1 launches w in `mode`, kernel node 2 queues t.
      int s1 = 4, s2 = 6;
      void* a1[] = {&w, &mode, &s1};
      void* a2[] = {&t, &TAIL, &s2};
      cudaGraph_t g;
      MUST(cudaGraphCreate(&g, 0));
      cudaKernelNodeParams p = {};
      p.func = (void*)launch_one;
      p.gridDim = p.blockDim = dim3(1);
      cudaGraphNode_t k0, k1;
      p.kernelParams = a1;
      MUST(cudaGraphAddKernelNode(&k0, g, nullptr, 0, &p));
      p.kernelParams = a2;
      MUST(cudaGraphAddKernelNode(&k1, g, &k0, 1, &p));
      run(inst(g, 0, false));
      expect(mode == SIB ? "sibling waiting for the tail graph: log (1 waiter, 2 tail)"
                         : "fire-and-forget waiting for the tail graph: log",
             logString(), mode == SIB ? "2 1" : "1 2");
    }
    // A device graph launched as a tail launch that launches another fire-and-forget.
    reset();
    cudaGraphExec_t inner = logGraph(8);
    cudaGraphExec_t mid = launcher(inner, FAF, 3, DL);
    run(launcher(mid, TAIL, 4, DL));
    expect("tail-launched graph launching fire-and-forget: log", logString(), "8");
  }

  printf("\n== self tail launch ==\n");
  {
    reset();
    int times = 4;
    void* a[] = {&TAIL, &times};
    cudaGraphExec_t g = inst(kgraph((const void*)self_launch, a), DL, true);
    run(g);
    expect("a graph relaunching itself 4 times, launched from the host", logString(), "7 7 7 7");
    expectErr("  the first self launch of a run", res(0), cudaSuccess);
    expectErr("  a second self launch of the same run", res(1), cudaErrorInvalidValue);
    reset();
    run(launcher(g, FAF, 2));
    expect("  launched from the device", logString(), "7 7 7 7");
  }

  printf("\n== upload and update ==\n");
  {
    reset();
    int one = 1, two = 2;
    void* a1[] = {&one};
    cudaGraph_t g = kgraph((const void*)log_id, a1);
    cudaGraphNode_t n = lastNode;
    cudaGraphExec_t d = inst(g, DL, true);
    cudaKernelNodeParams p = {};
    p.func = (void*)log_id;
    p.gridDim = p.blockDim = dim3(1);
    void* a2[] = {&two};
    p.kernelParams = a2;
    MUST(cudaGraphExecKernelNodeSetParams(d, n, &p));
    cudaGraphExec_t o = launcher(d, FAF, 0);
    run(o);
    char got[64];
    snprintf(got, sizeof got, "%s, log %s", cudaGetErrorName((cudaError_t)res(0)), logString());
    expect("device launch after SetParams, no upload: result, log (1 old, 2 new)", got, "cudaErrorInvalidValue, log ");
    reset();
    MUST(cudaGraphUpload(d, st));
    run(o);
    snprintf(got, sizeof got, "%s, log %s", cudaGetErrorName((cudaError_t)res(0)), logString());
    expect("  after cudaGraphUpload", got, "cudaSuccess, log 2");
    reset();
    MUST(cudaGraphExecKernelNodeSetParams(d, n, &p));
    run(d);
    run(o);
    expect("  after an update and a host launch", logString(), "2 2");
    reset();
    cudaGraphInstantiateParams ip = {};
    ip.flags = DL | cudaGraphInstantiateFlagUpload;
    ip.uploadStream = st;
    cudaGraphExec_t w;
    MUST(cudaGraphInstantiateWithParams(&w, kgraph((const void*)log_id, a2), &ip));
    run(launcher(w, FAF, 0));
    expect("uploaded by cudaGraphInstantiateWithParams", logString(), "2");
  }

  printf("\n== cudaGetCurrentGraphExec ==\n");
  {
    reset();
    int s0 = 0, s1 = 1, s2 = 2, s3 = 3, s4 = 4;
    cur<<<1, 1, 0, st>>>(s0);
    MUST(cudaStreamSynchronize(st));
    void* a1[] = {&s1};
    run(inst(kgraph((const void*)cur, a1), 0, false));
    void* a2[] = {&s2};
    cudaGraphExec_t d2 = inst(kgraph((const void*)cur, a2), DL, false);
    run(d2);
    void* a3[] = {&s3};
    cudaGraphExec_t d3 = inst(kgraph((const void*)cur, a3), DL, true);
    run(launcher(d3, FAF, 0));
    void* a4[] = {&s4};
    cudaGraph_t outer;
    cudaGraphNode_t n;
    MUST(cudaGraphCreate(&outer, 0));
    MUST(cudaGraphAddChildGraphNode(&n, outer, nullptr, 0, kgraph((const void*)cur, a4)));
    cudaGraphExec_t d4 = inst(outer, DL, false);
    run(d4);
    unsigned long long c[16];
    MUST(cudaMemcpyFromSymbol(c, d_cur, sizeof c));
    expect("in a stream kernel", c[0] ? "a handle" : "0", "0");
    expect("in a host graph", c[1] ? "a handle" : "0", "0");
    expect("in a device graph launched from the host", c[2] == (unsigned long long)d2 ? "its handle" : "other", "its handle");
    expect("in a device graph launched from the device", c[3] == (unsigned long long)d3 ? "its handle" : "other", "its handle");
    expect("in a child graph of a device graph", c[4] == (unsigned long long)d4 ? "the outer handle" : "other", "the outer handle");
  }

  printf("\n== a kernel that launches graphs, launched into a stream ==\n");
  {
    reset();
    cudaGraphExec_t d = logGraph(1);
    int slot = 0;
    launch_one<<<1, 1, 0, st>>>(d, FAF, slot);
    expectErr("the launch", cudaGetLastError(), cudaErrorNotSupported);
    expectErr("  stream synchronize", cudaStreamSynchronize(st), cudaSuccess);
    expectInt("  graphs it launched", logged(), 0);
    log_id<<<1, 1, 0, st>>>(3);
    expectErr("  another kernel of the module", cudaStreamSynchronize(st), cudaSuccess);
  }

  printf("\n%d differences\n", differs);
  return 0;
}
