// edgedata.cu asks the CUDA driver which edge data it accepts, how queries
// without edge data fail, how edge data goes through stream capture, and
// whether a programmatic edge lets the downstream kernel start early. The
// answers decide the rules in edgedata.go and the expectations of
// edgedata_conformance_test.go.
//
//	nvcc -O2 -arch=sm_90 -o edgedata edgedata.cu && ./edgedata
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-72s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %d %s: %s\n", __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)

// CUDA 13 gave the edge-data versions the plain names.
#if CUDART_VERSION >= 13000
#define ADD_DEPS cudaGraphAddDependencies
#define REMOVE_DEPS cudaGraphRemoveDependencies
#define GET_EDGES cudaGraphGetEdges
#define NODE_DEPS cudaGraphNodeGetDependencies
#define NODE_OUTS cudaGraphNodeGetDependentNodes
#define CAPTURE_INFO cudaStreamGetCaptureInfo
#define UPDATE_CAPTURE cudaStreamUpdateCaptureDependencies
#else
#define ADD_DEPS cudaGraphAddDependencies_v2
#define REMOVE_DEPS cudaGraphRemoveDependencies_v2
#define GET_EDGES cudaGraphGetEdges_v2
#define NODE_DEPS cudaGraphNodeGetDependencies_v2
#define NODE_OUTS cudaGraphNodeGetDependentNodes_v2
#define CAPTURE_INFO cudaStreamGetCaptureInfo_v3
#define UPDATE_CAPTURE cudaStreamUpdateCaptureDependencies_v2
#endif

__global__ void k() {}

__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// times[0] producer start, [1] producer trigger, [2] producer end,
// [3] consumer start, [4] consumer after GridDependencySynchronize.
__global__ void producer(unsigned long long* times, int* data, int trigger) {
  if (threadIdx.x == 0 && blockIdx.x == 0) times[0] = now();
  if (trigger) {
    if (threadIdx.x == 0 && blockIdx.x == 0) times[1] = now();
    cudaTriggerProgrammaticLaunchCompletion();
  }
  unsigned long long t0 = now();
  while (now() - t0 < 2000000ull) {}  // 2 ms of work after the trigger
  data[blockIdx.x * blockDim.x + threadIdx.x] = 1;
  __threadfence();
  if (threadIdx.x == 0 && blockIdx.x == 0) times[2] = now();
}

__global__ void consumer(unsigned long long* times, const int* data, int* bad) {
  if (threadIdx.x == 0 && blockIdx.x == 0) times[3] = now();
  cudaGridDependencySynchronize();
  if (threadIdx.x == 0 && blockIdx.x == 0) times[4] = now();
  if (data[blockIdx.x * blockDim.x + threadIdx.x] != 1) atomicAdd(bad, 1);
}

static cudaGraphNode_t kernelNode(cudaGraph_t g, void* fn, void** args) {
  cudaKernelNodeParams p = {};
  p.func = fn;
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = args;
  cudaGraphNode_t n = nullptr;
  cudaGraphAddKernelNode(&n, g, nullptr, 0, &p);
  return n;
}

static cudaGraphEdgeData ed(int from, int to, int type) {
  cudaGraphEdgeData d;
  memset(&d, 0, sizeof d);
  d.from_port = from;
  d.to_port = to;
  d.type = type;
  return d;
}

static void edge(const char* what, cudaGraph_t g, cudaGraphNode_t a, cudaGraphNode_t b, cudaGraphEdgeData d) {
  SAY(what, ADD_DEPS(g, &a, &b, &d, 1));
}

static const char* dataName(cudaGraphEdgeData d) {
  static char buf[64];
  snprintf(buf, sizeof buf, "{from %d to %d type %d}", d.from_port, d.to_port, d.type);
  return buf;
}

static void captureEnd(const char* what, cudaStream_t s) {
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamEndCapture(s, &g);
  cudaStreamCaptureStatus st;
  cudaStreamIsCapturing(s, &st);
  printf("%-72s %s, graph %s, stream %s\n", what, cudaGetErrorName(e), g ? "returned" : "NULL",
         st == cudaStreamCaptureStatusNone ? "not capturing" : "still capturing");
  if (g) cudaGraphDestroy(g);
  cudaGetLastError();
}

int main() {
  int drv, rt;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaDeviceProp prop;
  MUST(cudaGetDeviceProperties(&prop, 0));
  printf("driver %d runtime %d, %s sm_%d%d\n", drv, rt, prop.name, prop.major, prop.minor);
  const cudaGraphEdgeData prog = ed(cudaGraphKernelNodePortProgrammatic, 0, cudaGraphDependencyTypeProgrammatic);
  const cudaGraphEdgeData launch = ed(cudaGraphKernelNodePortLaunchCompletion, 0, cudaGraphDependencyTypeProgrammatic);
  const cudaGraphEdgeData launchDefault = ed(cudaGraphKernelNodePortLaunchCompletion, 0, cudaGraphDependencyTypeDefault);

  printf("\n== which edge data cudaGraphAddDependencies accepts ==\n");
  {
    cudaGraph_t g, child;
    MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphCreate(&child, 0));
    kernelNode(child, (void*)k, nullptr);
    cudaGraphNode_t k1 = kernelNode(g, (void*)k, nullptr), k2 = kernelNode(g, (void*)k, nullptr);
    cudaGraphNode_t e1, m1, h1, cg;
    MUST(cudaGraphAddEmptyNode(&e1, g, nullptr, 0));
    int* dp;
    MUST(cudaMalloc(&dp, 64));
    cudaMemsetParams ms = {};
    ms.dst = dp; ms.elementSize = 4; ms.width = 4; ms.height = 1;
    MUST(cudaGraphAddMemsetNode(&m1, g, nullptr, 0, &ms));
    MUST(cudaGraphAddChildGraphNode(&cg, g, nullptr, 0, child));
    (void)h1;
    struct { const char* what; cudaGraphNode_t a, b; cudaGraphEdgeData d; } cases[] = {
      {"kernel -> kernel, programmatic port, programmatic", k1, k2, prog},
      {"kernel -> kernel, launch completion port, programmatic", k1, k2, launch},
      {"kernel -> kernel, launch completion port, default type", k1, k2, launchDefault},
      {"kernel -> empty, launch completion port, default type", k1, e1, launchDefault},
      {"kernel -> memset, launch completion port, default type", k1, m1, launchDefault},
      {"kernel -> child graph, launch completion port, default type", k1, cg, launchDefault},
      {"kernel -> empty, programmatic", k1, e1, prog},
      {"kernel -> child graph, programmatic", k1, cg, prog},
      {"kernel -> memset, programmatic", k1, m1, prog},
      {"empty -> kernel, programmatic", e1, k1, prog},
      {"child graph -> kernel, programmatic", cg, k1, prog},
      {"empty -> kernel, launch completion port, default type", e1, k1, launchDefault},
      {"kernel -> kernel, programmatic port, default type", k1, k2, ed(1, 0, 0)},
      {"kernel -> kernel, default port, programmatic type", k1, k2, ed(0, 0, 1)},
      {"kernel -> kernel, to port 1", k1, k2, ed(0, 1, 0)},
      {"kernel -> kernel, from port 3, programmatic", k1, k2, ed(3, 0, 1)},
      {"kernel -> kernel, type 2, programmatic port", k1, k2, ed(1, 0, 2)},
    };
    for (auto& c : cases) {
      // Each case on a fresh pair of edges: remove what a success added.
      cudaError_t e = ADD_DEPS(g, &c.a, &c.b, &c.d, 1);
      printf("%-72s %s\n", c.what, cudaGetErrorName(e));
      cudaGetLastError();
      if (e == cudaSuccess) REMOVE_DEPS(g, &c.a, &c.b, &c.d, 1);
    }
    cudaGraphEdgeData bad = prog;
    bad.reserved[0] = 1;
    edge("kernel -> kernel, programmatic, reserved byte set", g, k1, k2, bad);
    REMOVE_DEPS(g, &k1, &k2, &bad, 1);
    cudaGetLastError();

    printf("\n-- one edge per pair? --\n");
    edge("k1 -> k2 default", g, k1, k2, ed(0, 0, 0));
    edge("  then k1 -> k2 programmatic", g, k1, k2, prog);
    size_t n = 0;
    GET_EDGES(g, nullptr, nullptr, nullptr, &n);
    printf("%-72s %zu\n", "  edges in the graph", n);
    SAY("  remove k1 -> k2 with programmatic data", REMOVE_DEPS(g, &k1, &k2, &prog, 1));
    SAY("  remove k1 -> k2 with default data (NULL)", REMOVE_DEPS(g, &k1, &k2, nullptr, 1));
    edge("k1 -> k2 programmatic", g, k1, k2, prog);
    edge("  then k1 -> k2 default", g, k1, k2, ed(0, 0, 0));
    edge("  then k1 -> k2 launch completion", g, k1, k2, launch);

    printf("\n-- queries --\n");
    cudaGraphNode_t deps[8];
    cudaGraphEdgeData data[8];
    n = 0;
    SAY("count k2's dependencies (NULL nodes, NULL data)", NODE_DEPS(k2, nullptr, nullptr, &n));
    printf("%-72s %zu\n", "  count", n);
    n = 8;
    SAY("k2's dependencies without data", NODE_DEPS(k2, deps, nullptr, &n));
    n = 8;
    SAY("k2's dependencies with data", NODE_DEPS(k2, deps, data, &n));
    printf("%-72s %s\n", "  data", dataName(data[0]));
    n = 8;
    SAY("k1's dependents without data", NODE_OUTS(k1, deps, nullptr, &n));
    cudaGraphNode_t from[8], to[8];
    n = 8;
    SAY("the graph's edges without data", GET_EDGES(g, from, to, nullptr, &n));
    n = 8;
    SAY("the graph's edges with data", GET_EDGES(g, from, to, data, &n));
    SAY("remove k1 -> k2 with NULL data", REMOVE_DEPS(g, &k1, &k2, nullptr, 1));
    SAY("remove k1 -> k2 with launch completion data", REMOVE_DEPS(g, &k1, &k2, &launch, 1));

    printf("\n-- clone, DOT --\n");
    cudaGraph_t cl;
    SAY("clone a graph with a programmatic edge", cudaGraphClone(&cl, g));
    cudaGraphNode_t ck2;
    cudaGraphNodeFindInClone(&ck2, k2, cl);
    n = 8;
    NODE_DEPS(ck2, deps, data, &n);
    printf("%-72s %zu, %s\n", "  clone's edges into k2", n, n ? dataName(data[0]) : "-");
    SAY("DOT print to edgedata.dot", cudaGraphDebugDotPrint(g, "edgedata.dot", cudaGraphDebugDotFlagsVerbose));
    FILE* f = fopen("edgedata.dot", "r");
    if (f) {
      char line[512];
      while (fgets(line, sizeof line, f))
        if (strstr(line, "->")) printf("  dot: %s", line);
      fclose(f);
    }

    printf("\n-- child graphs, instantiation --\n");
    cudaGraph_t outer;
    MUST(cudaGraphCreate(&outer, 0));
    cudaGraphNode_t on;
    SAY("a graph with a programmatic edge as a child graph", cudaGraphAddChildGraphNode(&on, outer, nullptr, 0, g));
    cudaGraphExec_t ex;
    SAY("instantiate the outer graph", cudaGraphInstantiate(&ex, outer, 0));
    SAY("instantiate the graph", cudaGraphInstantiate(&ex, g, 0));
    SAY("instantiate it for device launch", cudaGraphInstantiate(&ex, g, cudaGraphInstantiateFlagDeviceLaunch));

    printf("\n-- update --\n");
    cudaGraph_t g2;
    MUST(cudaGraphCreate(&g2, 0));
    cudaGraphNode_t a2 = kernelNode(g2, (void*)k, nullptr), b2 = kernelNode(g2, (void*)k, nullptr);
    cudaGraphEdgeData d0 = ed(0, 0, 0);
    ADD_DEPS(g2, &a2, &b2, &d0, 1);
    cudaGraphExec_t ex2;
    MUST(cudaGraphInstantiate(&ex2, g2, 0));
    REMOVE_DEPS(g2, &a2, &b2, &d0, 1);
    ADD_DEPS(g2, &a2, &b2, &prog, 1);
    cudaGraphExecUpdateResultInfo info;
    SAY("update an exec whose edge became programmatic", cudaGraphExecUpdate(ex2, g2, &info));
    printf("%-72s %d\n", "  result", (int)info.result);
  }

  printf("\n== stream capture with edge data ==\n");
  {
    cudaStream_t s, s2;
    MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    MUST(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t ev;
    MUST(cudaEventCreate(&ev));
    cudaGraph_t g;
    MUST(cudaGraphCreate(&g, 0));
    cudaGraphNode_t k1 = kernelNode(g, (void*)k, nullptr), e1;
    MUST(cudaGraphAddEmptyNode(&e1, g, nullptr, 0));
    SAY("begin capture to graph after an empty node, programmatic", cudaStreamBeginCaptureToGraph(s, g, &e1, &prog, 1, cudaStreamCaptureModeGlobal));
    captureEnd("  end", s);
    SAY("begin capture to graph after a kernel, programmatic", cudaStreamBeginCaptureToGraph(s, g, &k1, &prog, 1, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus st;
    unsigned long long id;
    cudaGraph_t cg;
    const cudaGraphNode_t* deps;
    const cudaGraphEdgeData* data;
    size_t n;
    SAY("  capture info without edge data", CAPTURE_INFO(s, &st, &id, &cg, &deps, nullptr, &n));
    SAY("  capture info with edge data", CAPTURE_INFO(s, &st, &id, &cg, &deps, &data, &n));
    printf("%-72s %zu, %s\n", "  dependencies", n, n ? dataName(data[0]) : "-");
    k<<<1, 1, 0, s>>>();
    SAY("  capture a kernel", cudaGetLastError());
    SAY("  capture info after it", CAPTURE_INFO(s, &st, &id, &cg, &deps, &data, &n));
    printf("%-72s %zu, data %s\n", "  dependencies", n, data ? dataName(data[0]) : "NULL");
    captureEnd("  end", s);

    int* dp;
    MUST(cudaMalloc(&dp, 64));
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k<<<1, 1, 0, s>>>();
    CAPTURE_INFO(s, &st, &id, &cg, &deps, &data, &n);
    cudaGraphNode_t ka = deps[0];
    SAY("set capture dependencies to the kernel, programmatic", UPDATE_CAPTURE(s, &ka, &prog, 1, cudaStreamSetCaptureDependencies));
    SAY("  capture a memset behind the programmatic half edge", cudaMemsetAsync(dp, 0, 64, s));
    CAPTURE_INFO(s, &st, &id, &cg, &deps, &data, &n);
    printf("%-72s %d\n", "  capture status after that (1 active, 2 invalidated)", (int)st);
    captureEnd("  end", s);

    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k<<<1, 1, 0, s>>>();
    CAPTURE_INFO(s, &st, &id, &cg, &deps, &data, &n);
    ka = deps[0];
    cudaGraphNode_t empty;
    MUST(cudaGraphAddEmptyNode(&empty, cg, nullptr, 0));
    SAY("update capture dependencies with an empty node, programmatic", UPDATE_CAPTURE(s, &empty, &prog, 1, cudaStreamAddCaptureDependencies));
    SAY("update capture dependencies, kernel, programmatic (set)", UPDATE_CAPTURE(s, &ka, &prog, 1, cudaStreamSetCaptureDependencies));
    SAY("  then add the same kernel with default data", UPDATE_CAPTURE(s, &ka, nullptr, 1, cudaStreamAddCaptureDependencies));
    CAPTURE_INFO(s, &st, &id, &cg, &deps, &data, &n);
    printf("%-72s %zu, %s\n", "  dependencies", n, n && data ? dataName(data[0]) : "-");
    SAY("  set it back to programmatic", UPDATE_CAPTURE(s, &ka, &prog, 1, cudaStreamSetCaptureDependencies));
    captureEnd("end with the programmatic half edge pending", s);

    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k<<<1, 1, 0, s>>>();
    CAPTURE_INFO(s, &st, &id, &cg, &deps, &data, &n);
    ka = deps[0];
    UPDATE_CAPTURE(s, &ka, &prog, 1, cudaStreamSetCaptureDependencies);
    SAY("record an event behind a programmatic half edge", cudaEventRecord(ev, s));
    SAY("  wait on it in another stream", cudaStreamWaitEvent(s2, ev, 0));
    CAPTURE_INFO(s2, &st, &id, &cg, &deps, &data, &n);
    printf("%-72s %zu, %s\n", "  the other stream's dependencies", n, n && data ? dataName(data[0]) : "data NULL");
    k<<<1, 1, 0, s2>>>();
    MUST(cudaEventRecord(ev, s2));
    MUST(cudaStreamWaitEvent(s, ev, 0));
    k<<<1, 1, 0, s>>>();
    captureEnd("  join and end", s);

    // A programmatic join: stream 2's work joins the origin only through a
    // programmatic half edge.
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k<<<1, 1, 0, s>>>();
    MUST(cudaEventRecord(ev, s));
    MUST(cudaStreamWaitEvent(s2, ev, 0));
    k<<<1, 1, 0, s2>>>();
    CAPTURE_INFO(s2, &st, &id, &cg, &deps, &data, &n);
    cudaGraphNode_t kb = deps[0];
    SAY("origin adds stream 2's kernel as a programmatic dependency", UPDATE_CAPTURE(s, &kb, &prog, 1, cudaStreamAddCaptureDependencies));
    k<<<1, 1, 0, s>>>();
    captureEnd("  capture a kernel in the origin and end", s);
  }

  printf("\n== programmatic launch on the GPU ==\n");
  {
    unsigned long long* times;
    int *data, *bad;
    MUST(cudaMalloc(&times, 5 * sizeof(unsigned long long)));
    MUST(cudaMalloc(&data, 4 * 128 * sizeof(int)));
    MUST(cudaMalloc(&bad, sizeof(int)));
    cudaStream_t s;
    MUST(cudaStreamCreate(&s));
    struct { const char* what; cudaGraphEdgeData d; int trigger; } cases[] = {
      {"default edge", ed(0, 0, 0), 1},
      {"programmatic port, programmatic", prog, 1},
      {"programmatic port, no trigger", prog, 0},
      {"launch completion port, programmatic", launch, 1},
      {"launch completion port, default type", launchDefault, 1},
    };
    for (auto& c : cases) {
      cudaGraph_t g;
      MUST(cudaGraphCreate(&g, 0));
      cudaKernelNodeParams p = {};
      void* pargs[] = {&times, &data, &c.trigger};
      p.func = (void*)producer; p.gridDim = dim3(4); p.blockDim = dim3(128); p.kernelParams = pargs;
      cudaGraphNode_t pn, cn;
      MUST(cudaGraphAddKernelNode(&pn, g, nullptr, 0, &p));
      void* cargs[] = {&times, &data, &bad};
      p.func = (void*)consumer; p.kernelParams = cargs;
      MUST(cudaGraphAddKernelNode(&cn, g, nullptr, 0, &p));
      cudaError_t e = ADD_DEPS(g, &pn, &cn, &c.d, 1);
      if (e != cudaSuccess) {
        printf("%-40s edge refused: %s\n", c.what, cudaGetErrorName(e));
        cudaGetLastError();
        continue;
      }
      cudaGraphExec_t ex;
      MUST(cudaGraphInstantiate(&ex, g, 0));
      for (int rep = 0; rep < 3; rep++) {
        MUST(cudaMemset(times, 0, 5 * sizeof(unsigned long long)));
        MUST(cudaMemset(data, 0, 4 * 128 * sizeof(int)));
        MUST(cudaMemset(bad, 0, sizeof(int)));
        MUST(cudaGraphLaunch(ex, s));
        MUST(cudaStreamSynchronize(s));
        unsigned long long t[5];
        int b;
        MUST(cudaMemcpy(t, times, sizeof t, cudaMemcpyDeviceToHost));
        MUST(cudaMemcpy(&b, bad, sizeof b, cudaMemcpyDeviceToHost));
        long long cs = (long long)(t[3] - t[2]), cw = (long long)(t[4] - t[2]);
        printf("%-40s consumer start %+8lld ns, after sync %+8lld ns (vs producer end); stale reads %d\n", c.what, cs, cw, b);
      }
      cudaGraphExecDestroy(ex);
      cudaGraphDestroy(g);
    }
  }
  return 0;
}
