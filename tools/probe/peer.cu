// peer.cu asks the CUDA driver what peer access between two GPUs does, as
// seed 001 section 7 (graph memory nodes, Peer Access) and the CUDA runtime
// API (Peer Device Memory Access, Stream Ordered Memory Allocator, Graph
// Management) describe it, and checks every answer against what
// docs/driver-peer.txt says the driver does. One line per fact, in that
// file's `name  result` layout; a fact that docs/driver-peer.txt states is
// marked [= driver-peer.txt] when the driver agrees and
// [driver-peer.txt says: ...] when it does not, and the last line counts
// them. With fewer than two GPUs it says so and exits 0.
//
//	nvcc -O2 -o peer tools/probe/peer.cu && ./peer
//
// No -lcuda: the one driver call (cuMemGetAccess, the access a device has
// to an address) is looked up with cudaGetDriverEntryPointByVersion.
//
// Work that may fault a context (a kernel reading a peer's memory, a
// memset of it) runs in a child process, `peer child NAME`, which prints
// one line: the probe reports that line, and a fault there leaves this
// process's contexts intact.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <string>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime.h>

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); fflush(stdout); exit(1); } } while (0)
// TRY returns the error of a set-up call from a function returning cudaError_t.
#define TRY(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); return e_; } } while (0)

static const int N = 4096;               // ints a kernel writes and reads
static const size_t BYTES = 2 << 20;     // bytes of each allocation

__global__ void fill(int* p, int n, int base) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = base + 3 * i;
}

__global__ void copyk(const int* src, int* dst, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}

// ---- output ----

static int nfacts = 0, nchecked = 0, ndiffer = 0;

static void line(const std::string& name, const std::string& result) {
  if (name.size() > 49) printf("%s\n%-50s%s\n", name.c_str(), "", result.c_str());
  else printf("%-49s %s\n", name.c_str(), result.c_str());
  fflush(stdout);
}

// fact prints a fact; doc, when not null, is what docs/driver-peer.txt says
// and agrees whether the driver's answer matches it.
static void fact(const std::string& name, std::string result, const char* doc = nullptr, bool agrees = true) {
  nfacts++;
  if (doc) {
    nchecked++;
    if (agrees) result += "  [= driver-peer.txt]";
    else { result += std::string("  [driver-peer.txt says: ") + doc + "]"; ndiffer++; }
  }
  line(name, result);
}

static std::string err(cudaError_t e) { return cudaGetErrorName(e); }

// call reports a call's error and clears the runtime's last error.
static std::string call(cudaError_t e) { cudaGetLastError(); return err(e); }

static std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap; va_start(ap, f); vsnprintf(buf, sizeof buf, f, ap); va_end(ap);
  return buf;
}

// ---- cuMemGetAccess, through the runtime's driver entry point ----

typedef CUresult (*getAccessFn)(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr);
typedef CUresult (*errNameFn)(CUresult error, const char** pStr);
static getAccessFn cuGetAccess;
static errNameFn cuErrName;

static void loadDriver() {
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  void* f = nullptr;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAccess", &f, 12000, 0ULL, &q) == cudaSuccess && q == cudaDriverEntryPointSuccess)
    cuGetAccess = (getAccessFn)f;
  f = nullptr;
  if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &f, 12000, 0ULL, &q) == cudaSuccess && q == cudaDriverEntryPointSuccess)
    cuErrName = (errNameFn)f;
  cudaGetLastError();
}

static const char* flagName(unsigned long long f) {
  switch (f) {
  case 0: return "none";
  case 1: return "read";
  case 3: return "readwrite";
  }
  return "?";
}

// access is cuMemGetAccess(location = device dev, ptr): the access device
// dev has to the address, or the driver's error. *flags gets the flags, or
// -1 on error.
static std::string access(int dev, const void* p, long long* flags = nullptr) {
  if (flags) *flags = -1;
  if (!cuGetAccess) return "cuMemGetAccess not found";
  CUmemLocation loc;
  memset(&loc, 0, sizeof loc);
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = dev;
  unsigned long long f = 0;
  CUresult r = cuGetAccess(&f, &loc, (CUdeviceptr)(uintptr_t)p);
  if (r != CUDA_SUCCESS) {
    const char* s = "CUresult ?";
    if (cuErrName) cuErrName(r, &s);
    return s;
  }
  if (flags) *flags = (long long)f;
  return fmt("%llu (%s)", f, flagName(f));
}

// ptrAccess is cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS)
// with device dev current: a second opinion beside cuMemGetAccess, which
// answers "none" for graph allocations that kernels do read (the kernel
// reads at the end are the ground truth).
typedef CUresult (*ptrAttrFn)(void* data, CUpointer_attribute attribute, CUdeviceptr ptr);
static ptrAttrFn cuPtrAttr;

static std::string ptrAccess(int dev, const void* p) {
  if (!cuPtrAttr) {
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    void* f = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &f, 12000, 0ULL, &q) == cudaSuccess && q == cudaDriverEntryPointSuccess)
      cuPtrAttr = (ptrAttrFn)f;
    cudaGetLastError();
    if (!cuPtrAttr) return "cuPointerGetAttribute not found";
  }
  int cur = 0;
  cudaGetDevice(&cur);
  cudaSetDevice(dev);
  unsigned int f = 0;
  CUresult r = cuPtrAttr(&f, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, (CUdeviceptr)(uintptr_t)p);
  cudaSetDevice(cur);
  if (r != CUDA_SUCCESS) {
    const char* s = "CUresult ?";
    if (cuErrName) cuErrName(r, &s);
    return s;
  }
  return fmt("%u (%s)", f, flagName(f));
}

// ---- helpers ----

static cudaMemAccessDesc desc(int dev, cudaMemAccessFlags f) {
  cudaMemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location.type = cudaMemLocationTypeDevice;
  d.location.id = dev;
  d.flags = f;
  return d;
}

static cudaMemAllocNodeParams allocParams(int dev, const cudaMemAccessDesc* d, size_t nd) {
  cudaMemAllocNodeParams p;
  memset(&p, 0, sizeof p);
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = dev;
  p.accessDescs = const_cast<cudaMemAccessDesc*>(d);  // const in CUDA 12+ headers; the cast fits either
  p.accessDescCount = nd;
  p.bytesize = BYTES;
  return p;
}

static cudaMemPoolProps poolProps(int dev) {
  cudaMemPoolProps p;
  memset(&p, 0, sizeof p);
  p.allocType = cudaMemAllocationTypePinned;
  p.location.type = cudaMemLocationTypeDevice;
  p.location.id = dev;
  return p;
}

// addKernel adds a kernel node of the current device.
static cudaError_t addKernel(cudaGraphNode_t* n, cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd, void* f, void** args) {
  cudaKernelNodeParams k = {};
  k.func = f;
  k.gridDim = dim3(8);
  k.blockDim = dim3(256);
  k.kernelParams = args;
  return cudaGraphAddKernelNode(n, g, deps, nd, &k);
}

static cudaError_t addFill(cudaGraphNode_t* n, cudaGraph_t g, const cudaGraphNode_t* deps, size_t nd, void* p, int base) {
  int n_ = N;
  void* args[] = {&p, &n_, &base};  // copied when the node is added
  return addKernel(n, g, deps, nd, (void*)fill, args);
}

// check compares the N ints at out (memory of device dev) with fill's base.
static std::string check(int dev, const int* out, int base) {
  static int host[N];
  cudaSetDevice(dev);
  cudaError_t e = cudaMemcpy(host, out, N * sizeof(int), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return "copy back: " + err(e);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += host[i] != base + 3 * i;
  if (bad) return fmt("wrong values: %d of %d", bad, N);
  return fmt("ok, %d values checked", N);
}

// allocNodeAccess describes the access descriptors of a graph's first
// alloc node (cudaGraphMemAllocNodeGetParams).
static std::string allocNodeAccess(cudaGraph_t g) {
  size_t n = 0;
  cudaError_t e = cudaGraphGetNodes(g, nullptr, &n);
  if (e != cudaSuccess) return "cudaGraphGetNodes: " + call(e);
  cudaGraphNode_t nodes[64];
  if (n > 64) n = 64;
  if ((e = cudaGraphGetNodes(g, nodes, &n)) != cudaSuccess) return "cudaGraphGetNodes: " + call(e);
  for (size_t i = 0; i < n; i++) {
    cudaGraphNodeType t;
    if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess || t != cudaGraphNodeTypeMemAlloc) continue;
    cudaMemAllocNodeParams p;
    memset(&p, 0, sizeof p);
    if ((e = cudaGraphMemAllocNodeGetParams(nodes[i], &p)) != cudaSuccess) return "cudaGraphMemAllocNodeGetParams: " + call(e);
    std::string s = fmt("resident on %d, %zu descriptor(s)", p.poolProps.location.id, p.accessDescCount);
    for (size_t j = 0; j < p.accessDescCount; j++)
      s += fmt("%s device %d %s", j ? "," : ":", p.accessDescs[j].location.id, flagName((unsigned long long)p.accessDescs[j].flags));
    return s;
  }
  return "no alloc node";
}

static std::string graphMem() {
  std::string s;
  for (int d = 0; d < 2; d++) {
    unsigned long long used = 0, res = 0;
    cudaDeviceGetGraphMemAttribute(d, cudaGraphMemAttrUsedMemCurrent, &used);
    cudaDeviceGetGraphMemAttribute(d, cudaGraphMemAttrReservedMemCurrent, &res);
    s += fmt("%sdevice %d used %.0f MiB reserved %.0f MiB", d ? ", " : "", d, used / 1048576.0, res / 1048576.0);
  }
  cudaGetLastError();
  return s;
}

// ---- scenarios shared by the probe and its children ----

// Reuse (seed 001 §7): one graph of device 0 allocates A with access for
// device 1, writes it, frees it, then allocates B with no descriptor after
// the free, and leaves B live. The driver may give B A's address.
struct Reuse {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  void* a = nullptr;
  void* b = nullptr;
};

static cudaError_t buildReuse(Reuse& r, cudaStream_t s0) {
  TRY(cudaSetDevice(0));
  TRY(cudaGraphCreate(&r.g, 0));
  cudaMemAccessDesc d1 = desc(1, cudaMemAccessFlagsProtReadWrite);
  cudaMemAllocNodeParams pa = allocParams(0, &d1, 1);
  cudaGraphNode_t na, wa, fa, nb, wb;
  TRY(cudaGraphAddMemAllocNode(&na, r.g, nullptr, 0, &pa));
  r.a = pa.dptr;
  TRY(addFill(&wa, r.g, &na, 1, r.a, 1000));
  TRY(cudaGraphAddMemFreeNode(&fa, r.g, &wa, 1, r.a));
  cudaMemAllocNodeParams pb = allocParams(0, nullptr, 0);
  TRY(cudaGraphAddMemAllocNode(&nb, r.g, &fa, 1, &pb));
  r.b = pb.dptr;
  TRY(addFill(&wb, r.g, &nb, 1, r.b, 2000));
  TRY(cudaGraphInstantiate(&r.e, r.g, 0));
  TRY(cudaGraphLaunch(r.e, s0));
  return cudaStreamSynchronize(s0);
}

// Cap (seed 001 §7.2): a pool resident on device 0, accessible from device
// 0 only, captured into g1 (cudaMallocFromPoolAsync, fill); then the
// pool's access is set for device 1 and the same is captured into g2. Both
// graphs are launched and leave their allocations live.
struct Cap {
  cudaMemPool_t pool = nullptr;
  cudaGraph_t g1 = nullptr, g2 = nullptr;
  cudaGraphExec_t e1 = nullptr, e2 = nullptr;
  void* d1 = nullptr;
  void* d2 = nullptr;
  cudaError_t setAccess = cudaSuccess;
};

static cudaError_t buildCap(Cap& c, cudaStream_t s0) {
  TRY(cudaSetDevice(0));
  cudaMemPoolProps pp = poolProps(0);
  TRY(cudaMemPoolCreate(&c.pool, &pp));
  TRY(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
  TRY(cudaMallocFromPoolAsync(&c.d1, BYTES, c.pool, s0));
  fill<<<8, 256, 0, s0>>>((int*)c.d1, N, 3000);
  TRY(cudaStreamEndCapture(s0, &c.g1));
  cudaMemAccessDesc d1 = desc(1, cudaMemAccessFlagsProtReadWrite);
  c.setAccess = cudaMemPoolSetAccess(c.pool, &d1, 1);
  TRY(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
  TRY(cudaMallocFromPoolAsync(&c.d2, BYTES, c.pool, s0));
  fill<<<8, 256, 0, s0>>>((int*)c.d2, N, 4000);
  TRY(cudaStreamEndCapture(s0, &c.g2));
  TRY(cudaGraphInstantiate(&c.e1, c.g1, 0));
  TRY(cudaGraphInstantiate(&c.e2, c.g2, 0));
  TRY(cudaGraphLaunch(c.e1, s0));
  TRY(cudaGraphLaunch(c.e2, s0));
  return cudaStreamSynchronize(s0);
}

// ---- children: work that may fault a context ----

// readOn launches copyk on device dev, reading src (another device's
// memory) into dev's own memory, and checks what arrived.
static std::string readOn(int dev, const void* src, int base) {
  cudaSetDevice(dev);
  int* out = nullptr;
  cudaError_t e = cudaMalloc(&out, N * sizeof(int));
  if (e != cudaSuccess) return "cudaMalloc: " + err(e);
  cudaStream_t s;
  if ((e = cudaStreamCreate(&s)) != cudaSuccess) return "cudaStreamCreate: " + err(e);
  copyk<<<8, 256, 0, s>>>((const int*)src, out, N);
  if ((e = cudaGetLastError()) != cudaSuccess) return "launch: " + err(e);
  if ((e = cudaStreamSynchronize(s)) != cudaSuccess) return err(e) + " at synchronize";
  return check(dev, out, base);
}

// filled returns device dev's cudaMalloc memory holding fill(base).
static int* filled(int dev, int base) {
  cudaSetDevice(dev);
  int* p = nullptr;
  MUST(cudaMalloc(&p, BYTES));
  fill<<<8, 256>>>(p, N, base);
  MUST(cudaDeviceSynchronize());
  return p;
}

// nodeGraph builds a graph of device 0: an alloc node (descriptors d, nd),
// a kernel node of device 0 that fills it, and a kernel node of device 1
// that copies it into out (device 1's memory): added with device 1 current
// (explicit), or captured into the graph from a stream of device 1.
static std::string nodeGraph(const cudaMemAccessDesc* d, size_t nd, bool captured) {
  MUST(cudaSetDevice(1));
  int* out = nullptr;
  MUST(cudaMalloc(&out, N * sizeof(int)));
  cudaStream_t s1;
  MUST(cudaStreamCreate(&s1));
  MUST(cudaSetDevice(0));
  cudaStream_t s0;
  MUST(cudaStreamCreate(&s0));
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  cudaMemAllocNodeParams p = allocParams(0, d, nd);
  cudaGraphNode_t an, wn, rn;
  cudaError_t e = cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &p);
  if (e != cudaSuccess) return "alloc node: " + err(e);
  MUST(addFill(&wn, g, &an, 1, p.dptr, 5000));
  int n = N;
  void* src = p.dptr;
  if (captured) {
    MUST(cudaSetDevice(1));
    e = cudaStreamBeginCaptureToGraph(s1, g, &wn, nullptr, 1, cudaStreamCaptureModeGlobal);
    if (e != cudaSuccess) return "cudaStreamBeginCaptureToGraph (stream of device 1): " + err(e);
    copyk<<<8, 256, 0, s1>>>((const int*)src, out, n);
    cudaGraph_t same = nullptr;
    e = cudaStreamEndCapture(s1, &same);
    if (e != cudaSuccess) return "cudaStreamEndCapture: " + err(e);
  } else {
    MUST(cudaSetDevice(1));
    void* args[] = {&src, &out, &n};
    e = addKernel(&rn, g, &wn, 1, (void*)copyk, args);
    if (e != cudaSuccess) return "kernel node with device 1 current: " + err(e);
  }
  MUST(cudaSetDevice(0));
  cudaGraphExec_t x;
  e = cudaGraphInstantiate(&x, g, 0);
  if (e != cudaSuccess) return "instantiate: " + err(e);
  if ((e = cudaGraphLaunch(x, s0)) != cudaSuccess) return "launch: " + err(e);
  if ((e = cudaStreamSynchronize(s0)) != cudaSuccess) return err(e) + " at synchronize";
  return check(1, out, 5000);
}

static int child(const char* name) {
  alarm(60);  // a hang shows as no answer
  std::string r;
  const cudaMemAccessDesc d1 = desc(1, cudaMemAccessFlagsProtReadWrite);
  if (!strcmp(name, "read-no-peer")) {
    r = readOn(1, filled(0, 7), 7);
  } else if (!strcmp(name, "read-peer")) {
    cudaSetDevice(1);
    cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
    r = "enable 1->0: " + err(e) + "; " + readOn(1, filled(0, 7), 7);
  } else if (!strcmp(name, "oneway-forward")) {
    cudaSetDevice(0);
    cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    r = "enable 0->1: " + err(e) + "; " + readOn(0, filled(1, 9), 9);
  } else if (!strcmp(name, "oneway-reverse")) {
    cudaSetDevice(0);
    cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    r = "enable 0->1: " + err(e) + "; " + readOn(1, filled(0, 9), 9);
  } else if (!strcmp(name, "memset-no-peer")) {
    int* p = filled(0, 1);
    cudaSetDevice(1);
    cudaStream_t s1;
    MUST(cudaStreamCreate(&s1));
    cudaError_t e = cudaMemsetAsync(p, 7, BYTES, s1);
    cudaError_t e2 = cudaStreamSynchronize(s1);
    r = "issue " + err(e) + ", synchronize " + err(e2);
  } else if (!strcmp(name, "memset-peer") || !strcmp(name, "memset-node-peer") || !strcmp(name, "memset-node-no-peer")) {
    // The same memset with peer access 1 -> 0 enabled, from a stream of 1
    // and as a memset node of a graph of 1 (added with device 1 current).
    int* p = filled(0, 1);
    cudaSetDevice(1);
    cudaError_t ep = strcmp(name, "memset-node-no-peer") ? cudaDeviceEnablePeerAccess(0, 0) : cudaSuccess;
    cudaStream_t s1;
    MUST(cudaStreamCreate(&s1));
    if (!strcmp(name, "memset-peer")) {
      cudaError_t e = cudaMemsetAsync(p, 7, BYTES, s1);
      cudaError_t e2 = cudaStreamSynchronize(s1);
      r = "enable 1->0: " + err(ep) + "; issue " + err(e) + ", synchronize " + err(e2);
    } else {
      cudaGraph_t g;
      MUST(cudaGraphCreate(&g, 0));
      cudaMemsetParams mp = {};
      mp.dst = p; mp.value = 7; mp.elementSize = 1; mp.width = BYTES; mp.height = 1;
      cudaGraphNode_t n;
      cudaError_t e = cudaGraphAddMemsetNode(&n, g, nullptr, 0, &mp);
      cudaGraphExec_t x = nullptr;
      cudaError_t e2 = e == cudaSuccess ? cudaGraphInstantiate(&x, g, 0) : cudaErrorNotYetImplemented;
      cudaError_t e3 = e2 == cudaSuccess ? cudaGraphLaunch(x, s1) : cudaErrorNotYetImplemented;
      cudaError_t e4 = cudaStreamSynchronize(s1);
      r = "enable 1->0: " + err(ep) + "; add " + err(e) + ", instantiate " + err(e2) + ", launch " + err(e3) + ", synchronize " + err(e4);
      if (e4 == cudaSuccess && e3 == cudaSuccess) {
        unsigned char v = 0;
        cudaMemcpy(&v, p, 1, cudaMemcpyDefault);
        r += v == 7 ? "; written" : "; not written";
      }
    }
  } else if (!strcmp(name, "pool-peer-enabled")) {
    cudaSetDevice(1);
    cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
    cudaSetDevice(0);
    cudaMemPool_t pool;
    cudaMemPoolProps pp = poolProps(0);
    MUST(cudaMemPoolCreate(&pool, &pp));
    cudaStream_t s0;
    MUST(cudaStreamCreate(&s0));
    void* p;
    MUST(cudaMallocFromPoolAsync(&p, BYTES, pool, s0));
    fill<<<8, 256, 0, s0>>>((int*)p, N, 11);
    MUST(cudaStreamSynchronize(s0));
    r = "enable 1->0: " + err(e) + "; " + readOn(1, p, 11);
  } else if (!strcmp(name, "pool-access")) {
    cudaSetDevice(0);
    cudaMemPool_t pool;
    cudaMemPoolProps pp = poolProps(0);
    MUST(cudaMemPoolCreate(&pool, &pp));
    cudaError_t e = cudaMemPoolSetAccess(pool, &d1, 1);
    cudaStream_t s0;
    MUST(cudaStreamCreate(&s0));
    void* p;
    MUST(cudaMallocFromPoolAsync(&p, BYTES, pool, s0));
    fill<<<8, 256, 0, s0>>>((int*)p, N, 13);
    MUST(cudaStreamSynchronize(s0));
    r = "set access: " + err(e) + "; " + readOn(1, p, 13);
  } else if (!strcmp(name, "node-explicit")) {
    r = nodeGraph(&d1, 1, false);
  } else if (!strcmp(name, "node-captured")) {
    r = nodeGraph(&d1, 1, true);
  } else if (!strcmp(name, "node-no-access")) {
    r = nodeGraph(nullptr, 0, true);
  } else if (!strcmp(name, "reuse-extra")) {
    cudaSetDevice(0);
    cudaStream_t s0;
    MUST(cudaStreamCreate(&s0));
    Reuse re;
    cudaError_t e = buildReuse(re, s0);
    if (e != cudaSuccess) r = "set-up: " + err(e);
    else r = std::string(re.a == re.b ? "B at A's address; " : "B not at A's address; ") + readOn(1, re.b, 2000);
  } else if (!strcmp(name, "capture-before") || !strcmp(name, "capture-after")) {
    cudaSetDevice(0);
    cudaStream_t s0;
    MUST(cudaStreamCreate(&s0));
    Cap c;
    cudaError_t e = buildCap(c, s0);
    bool before = !strcmp(name, "capture-before");
    if (e != cudaSuccess) r = "set-up: " + err(e);
    else r = before ? readOn(1, c.d1, 3000) : readOn(1, c.d2, 4000);
  } else {
    r = std::string("unknown child ") + name;
  }
  printf("%s\n", r.c_str());
  return 0;
}

// runChild runs `self child name` and returns the last line it printed.
static char self[4096];

static std::string runChild(const char* name) {
  std::string cmd = std::string("'") + self + "' child " + name + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "popen failed";
  std::string last, cur;
  char buf[1024];
  while (fgets(buf, sizeof buf, f)) {
    cur = buf;
    while (!cur.empty() && (cur.back() == '\n' || cur.back() == '\r')) cur.pop_back();
    if (!cur.empty()) last = cur;
  }
  int st = pclose(f);
  if (last.empty()) return fmt("no answer (child status %d)", st);
  return last;
}

static bool isOk(const std::string& r) { return r.find("ok, ") != std::string::npos && r.find("wrong") == std::string::npos; }
static bool faulted(const std::string& r) { return r.find("cudaError") != std::string::npos && r.rfind("at synchronize") != std::string::npos; }

// ---- the probe ----

int main(int argc, char** argv) {
  if (argc >= 3 && !strcmp(argv[1], "child")) return child(argv[2]);
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) snprintf(self, sizeof self, "%s", argv[0]);
  else self[k] = 0;

  int drv = 0, rt = 0, count = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaError_t ce = cudaGetDeviceCount(&count);
  printf("# tools/probe/peer.cu: driver %d, runtime %d\n", drv, rt);
  if (ce != cudaSuccess || count < 2) {
    printf("%-49s %d (%s)\n", "cudaGetDeviceCount", count, cudaGetErrorName(ce));
    printf("peer access needs 2 GPUs: nothing to probe here\n");
    return 0;
  }
  for (int d = 0; d < count && d < 8; d++) {
    cudaDeviceProp p;
    MUST(cudaGetDeviceProperties(&p, d));
    char bus[32] = "?";
    cudaDeviceGetPCIBusId(bus, sizeof bus, d);
    printf("# device %d: %s, %.0f MiB, sm_%d%d, pci %s\n", d, p.name, p.totalGlobalMem / 1048576.0, p.major, p.minor, bus);
  }
  loadDriver();
  printf("# facts about devices 0 and 1; [= driver-peer.txt] marks agreement with that file's claims\n");

  MUST(cudaSetDevice(1));
  cudaStream_t s1;
  MUST(cudaStreamCreate(&s1));
  int* buf1;
  MUST(cudaMalloc(&buf1, BYTES));
  MUST(cudaSetDevice(0));
  cudaStream_t s0;
  MUST(cudaStreamCreate(&s0));
  int* buf0;
  MUST(cudaMalloc(&buf0, BYTES));

  printf("\n== peer access ==\n");
  fact("cudaGetDeviceCount", fmt("%d", count));
  int can01 = -1, can10 = -1, can00 = -1;
  cudaError_t c01 = cudaDeviceCanAccessPeer(&can01, 0, 1);
  cudaError_t c10 = cudaDeviceCanAccessPeer(&can10, 1, 0);
  cudaError_t c00 = cudaDeviceCanAccessPeer(&can00, 0, 0);
  fact("cudaDeviceCanAccessPeer(0, 1)", fmt("%d", can01) + " (" + call(c01) + ")");
  fact("cudaDeviceCanAccessPeer(1, 0)", fmt("%d", can10) + " (" + call(c10) + ")");
  fact("cudaDeviceCanAccessPeer(0, 0)", fmt("%d", can00) + " (" + call(c00) + ")", "0 (a device is not its own peer)", can00 == 0);
  MUST(cudaSetDevice(0));
  {
    cudaError_t e = cudaDeviceDisablePeerAccess(1);
    fact("cudaDeviceDisablePeerAccess(1) without enabling", call(e), "cudaErrorPeerAccessNotEnabled", e == cudaErrorPeerAccessNotEnabled);
    e = cudaDeviceEnablePeerAccess(1, 1);
    fact("cudaDeviceEnablePeerAccess(1, flags 1), device 0", call(e));  // the API: flags must be 0
    if (e == cudaSuccess) cudaDeviceDisablePeerAccess(1);
    e = cudaDeviceEnablePeerAccess(0, 0);
    fact("cudaDeviceEnablePeerAccess(0), device 0 (itself)", call(e), "cudaErrorPeerAccessUnsupported", e == cudaErrorPeerAccessUnsupported);
    e = cudaDeviceEnablePeerAccess(1, 0);
    fact("cudaDeviceEnablePeerAccess(1), device 0", call(e));
    cudaError_t e2 = cudaDeviceEnablePeerAccess(1, 0);
    fact("cudaDeviceEnablePeerAccess(1) twice", call(e2), "cudaErrorPeerAccessAlreadyEnabled", e2 == cudaErrorPeerAccessAlreadyEnabled);
    MUST(cudaSetDevice(1));
    cudaError_t e3 = cudaDeviceDisablePeerAccess(0);
    fact("  then cudaDeviceDisablePeerAccess(0), device 1", call(e3),
         "access is one way: enabling 0 -> 1 does not enable 1 -> 0 (cudaErrorPeerAccessNotEnabled)", e3 == cudaErrorPeerAccessNotEnabled);
    fact("  then cuMemGetAccess(device 1, cudaMalloc of 0)", access(1, buf0));
    fact("  then cuMemGetAccess(device 0, cudaMalloc of 1)", access(0, buf1));
    MUST(cudaSetDevice(0));
    cudaError_t e4 = cudaDeviceDisablePeerAccess(1);
    fact("cudaDeviceDisablePeerAccess(1), device 0", call(e4));
    cudaError_t e5 = cudaDeviceDisablePeerAccess(1);
    fact("cudaDeviceDisablePeerAccess(1) again", call(e5), "cudaErrorPeerAccessNotEnabled", e5 == cudaErrorPeerAccessNotEnabled);
  }

  printf("\n== copies and events between devices, no peer access ==\n");
  {
    fill<<<8, 256, 0, s0>>>(buf0, N, 100);
    MUST(cudaStreamSynchronize(s0));
    MUST(cudaSetDevice(1));
    MUST(cudaMemset(buf1, 0, BYTES));
    MUST(cudaSetDevice(0));
    cudaError_t e = cudaMemcpyPeerAsync(buf1, 1, buf0, 0, N * sizeof(int), s0);
    cudaError_t es = cudaStreamSynchronize(s0);
    std::string r = call(e) + ", synchronize " + call(es) + ", " + check(1, buf1, 100);
    fact("cudaMemcpyPeerAsync 0 -> 1 (stream of 0)", r, "needs no peer access", e == cudaSuccess && es == cudaSuccess && isOk(r));

    MUST(cudaSetDevice(1));
    MUST(cudaMemset(buf1, 0, BYTES));
    MUST(cudaSetDevice(0));
    fill<<<8, 256, 0, s0>>>(buf0, N, 150);
    MUST(cudaStreamSynchronize(s0));
    e = cudaMemcpy(buf1, buf0, N * sizeof(int), cudaMemcpyDefault);
    r = call(e) + ", " + check(1, buf1, 150);
    fact("cudaMemcpy(Default) 0 -> 1, device 0 current", r, "needs no peer access", e == cudaSuccess && isOk(r));

    MUST(cudaSetDevice(1));
    fill<<<8, 256, 0, s1>>>(buf1, N, 200);
    MUST(cudaStreamSynchronize(s1));
    MUST(cudaSetDevice(0));
    MUST(cudaMemset(buf0, 0, BYTES));
    e = cudaMemcpyAsync(buf0, buf1, N * sizeof(int), cudaMemcpyDefault, s0);
    es = cudaStreamSynchronize(s0);
    r = call(e) + ", synchronize " + call(es) + ", " + check(0, buf0, 200);
    fact("cudaMemcpyAsync(Default) 1 -> 0 (stream of 0)", r, "needs no peer access", e == cudaSuccess && es == cudaSuccess && isOk(r));

    MUST(cudaSetDevice(0));
    fill<<<8, 256, 0, s0>>>(buf0, N, 300);
    MUST(cudaStreamSynchronize(s0));
    MUST(cudaSetDevice(1));
    MUST(cudaMemset(buf1, 0, BYTES));
    MUST(cudaSetDevice(0));
    cudaGraph_t g;
    MUST(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n;
    e = cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, buf1, buf0, N * sizeof(int), cudaMemcpyDefault);
    r = "add " + call(e);
    bool good = e == cudaSuccess;
    if (good) {
      cudaGraphExec_t x;
      cudaError_t ei = cudaGraphInstantiate(&x, g, 0);
      r += ", instantiate " + call(ei);
      good = ei == cudaSuccess;
      if (good) {
        cudaError_t el = cudaGraphLaunch(x, s0);
        es = cudaStreamSynchronize(s0);
        r += ", launch " + call(el) + ", synchronize " + call(es) + ", " + check(1, buf1, 300);
        good = el == cudaSuccess && es == cudaSuccess && isOk(r);
        cudaGraphExecDestroy(x);
      }
    }
    cudaGraphDestroy(g);
    fact("memcpy node 0 -> 1 (cudaGraphAddMemcpyNode1D, Default)", r, "needs no peer access", good);

    cudaEvent_t ev0;
    MUST(cudaSetDevice(0));
    MUST(cudaEventCreateWithFlags(&ev0, cudaEventDisableTiming));
    MUST(cudaEventRecord(ev0, s0));
    MUST(cudaSetDevice(1));
    e = cudaStreamWaitEvent(s1, ev0, 0);
    es = cudaStreamSynchronize(s1);
    fact("cudaStreamWaitEvent(stream of 1, event of 0)", call(e) + ", synchronize " + call(es), "allowed", e == cudaSuccess);
    e = cudaEventRecord(ev0, s1);
    fact("cudaEventRecord(event of 0, stream of 1)", call(e), "an error: cudaEventRecord needs the stream's device", e != cudaSuccess);
    MUST(cudaSetDevice(0));
    cudaEventDestroy(ev0);
  }

  printf("\n== memory pools ==\n");
  {
    MUST(cudaSetDevice(0));
    cudaMemPool_t pool;
    cudaMemPoolProps pp = poolProps(0);
    MUST(cudaMemPoolCreate(&pool, &pp));
    void* p;
    MUST(cudaMallocFromPoolAsync(&p, BYTES, pool, s0));
    MUST(cudaStreamSynchronize(s0));
    cudaMemLocation l1;
    memset(&l1, 0, sizeof l1);
    l1.type = cudaMemLocationTypeDevice;
    l1.id = 1;
    auto get = [&]() {
      cudaMemAccessFlags f = cudaMemAccessFlagsProtNone;
      cudaError_t e = cudaMemPoolGetAccess(&f, pool, &l1);
      if (e != cudaSuccess) return call(e);
      return fmt("%d (%s)", (int)f, flagName((unsigned long long)f));
    };
    fact("cudaMemPoolGetAccess(pool of 0, device 1), new pool", get());
    fact("  cuMemGetAccess(device 1, allocation of it)", access(1, p));
    fact("  cuMemGetAccess(device 0, allocation of it)", access(0, p));
    MUST(cudaSetDevice(1));
    cudaError_t pe = cudaDeviceEnablePeerAccess(0, 0);
    MUST(cudaSetDevice(0));
    long long fl;
    std::string a = access(1, p, &fl);
    fact("with peer access 1 -> 0: device 1's pool access", get() + "; cuMemGetAccess(device 1) " + a + " (enabling: " + call(pe) + ")");
    MUST(cudaSetDevice(1));
    cudaDeviceDisablePeerAccess(0);
    cudaGetLastError();
    MUST(cudaSetDevice(0));

    cudaMemAccessDesc d = desc(1, cudaMemAccessFlagsProtReadWrite);
    cudaError_t e = cudaMemPoolSetAccess(pool, &d, 1);
    fact("cudaMemPoolSetAccess(device 1, ReadWrite)", call(e) + ", now " + get());
    a = access(1, p, &fl);
    fact("  cuMemGetAccess(device 1, allocation made before)", a);
    d = desc(1, cudaMemAccessFlagsProtRead);
    e = cudaMemPoolSetAccess(pool, &d, 1);
    fact("cudaMemPoolSetAccess(device 1, ReadOnly)", call(e) + ", now " + get(), "cudaErrorNotSupported (pools support read-write only)",
         e == cudaErrorNotSupported);
    d = desc(1, cudaMemAccessFlagsProtNone);
    e = cudaMemPoolSetAccess(pool, &d, 1);
    fact("cudaMemPoolSetAccess(device 1, None)", call(e) + ", now " + get());
    fact("  cuMemGetAccess(device 1, allocation made before)", access(1, p));
    d = desc(0, cudaMemAccessFlagsProtNone);
    e = cudaMemPoolSetAccess(pool, &d, 1);
    fact("cudaMemPoolSetAccess(device 0 = resident, None)", call(e), "cudaErrorInvalidDevice", e == cudaErrorInvalidDevice);
    d = desc(count, cudaMemAccessFlagsProtReadWrite);
    e = cudaMemPoolSetAccess(pool, &d, 1);
    fact("cudaMemPoolSetAccess(device count, ReadWrite)", call(e), "cudaErrorInvalidDevice", e == cudaErrorInvalidDevice);
    MUST(cudaFreeAsync(p, s0));
    MUST(cudaStreamSynchronize(s0));
    cudaMemPoolDestroy(pool);
    cudaMemPool_t pool1 = nullptr;
    pp = poolProps(1);
    e = cudaMemPoolCreate(&pool1, &pp);
    fact("cudaMemPoolCreate(resident on 1), device 0 current", call(e));
    if (pool1) cudaMemPoolDestroy(pool1);
    int* dm;
    MUST(cudaMalloc(&dm, 4096));
    fact("cuMemGetAccess(device 0, cudaMalloc memory of 0)", access(0, dm));
    cudaFree(dm);
  }

  printf("\n== graph memory nodes with access descriptors (CUDA guide, graph memory nodes, peer access with the graph node APIs) ==\n");
  {
    MUST(cudaSetDevice(0));
    auto tryAdd = [&](const char* what, const cudaMemAccessDesc* d, size_t nd, int resident, const char* doc, cudaError_t want) {
      cudaGraph_t g;
      MUST(cudaGraphCreate(&g, 0));
      cudaMemAllocNodeParams p = allocParams(resident, d, nd);
      cudaGraphNode_t n;
      cudaError_t e = cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p);
      std::string r = call(e);
      if (e == cudaSuccess) r += ", then " + allocNodeAccess(g);
      if (doc) fact(what, r, doc, want == cudaSuccess ? e == cudaSuccess : e != cudaSuccess);
      else fact(what, r);
      cudaGraphDestroy(g);
    };
    cudaMemAccessDesc rw1 = desc(1, cudaMemAccessFlagsProtReadWrite);
    cudaMemAccessDesc ro1 = desc(1, cudaMemAccessFlagsProtRead);
    cudaMemAccessDesc no1 = desc(1, cudaMemAccessFlagsProtNone);
    cudaMemAccessDesc rw0 = desc(0, cudaMemAccessFlagsProtReadWrite);
    cudaMemAccessDesc rwx = desc(count, cudaMemAccessFlagsProtReadWrite);
    cudaMemAccessDesc two[2] = {rw1, rw1};
    cudaMemAccessDesc both[2] = {rw0, rw1};
    tryAdd("alloc node on 0, no descriptor", nullptr, 0, 0, nullptr, cudaSuccess);
    tryAdd("alloc node on 0, {1 ReadWrite}", &rw1, 1, 0, "accepted: one descriptor per peer, read-write", cudaSuccess);
    tryAdd("alloc node on 0, {1 ReadOnly}", &ro1, 1, 0, "refused: read-write only", cudaErrorInvalidValue);
    tryAdd("alloc node on 0, {1 None}", &no1, 1, 0, nullptr, cudaSuccess);
    tryAdd("alloc node on 0, {0 ReadWrite} (the resident device)", &rw0, 1, 0, nullptr, cudaSuccess);
    tryAdd("alloc node on 0, {0 ReadWrite, 1 ReadWrite}", both, 2, 0, nullptr, cudaSuccess);
    tryAdd("alloc node on 0, {1 ReadWrite, 1 ReadWrite}", two, 2, 0, nullptr, cudaSuccess);
    tryAdd("alloc node on 0, {device count ReadWrite}", &rwx, 1, 0, nullptr, cudaSuccess);
    tryAdd("alloc node on 1 (device 0 current), no descriptor", nullptr, 0, 1, nullptr, cudaSuccess);

    cudaGraph_t g;
    MUST(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams p = allocParams(0, &rw1, 1);
    cudaGraphNode_t an, wn;
    cudaGraphExec_t x = nullptr;
    cudaError_t e = cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &p);
    if (e == cudaSuccess) e = addFill(&wn, g, &an, 1, p.dptr, 500);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
    if (e != cudaSuccess) {
      fact("graph of 0: alloc {1 ReadWrite}, fill", "set-up failed: " + call(e));
    } else {
      fact("graph of 0: alloc {1 ReadWrite}, fill; instantiated", graphMem());
      e = cudaGraphLaunch(x, s0);
      cudaError_t es = cudaStreamSynchronize(s0);
      fact("  launched (allocation left live)", call(e) + ", synchronize " + call(es) + "; " + graphMem());
      long long f0, f1;
      std::string a0 = access(0, p.dptr, &f0), a1 = access(1, p.dptr, &f1);
      (void)f0;
      (void)f1;
      fact("  cuMemGetAccess(device 0, the allocation)", a0 + "; pointer attribute " + ptrAccess(0, p.dptr));
      fact("  cuMemGetAccess(device 1, the allocation)", a1 + "; pointer attribute " + ptrAccess(1, p.dptr));
      MUST(cudaFree(p.dptr));
      cudaGraphExecDestroy(x);
    }
    cudaGraphDestroy(g);

    MUST(cudaGraphCreate(&g, 0));
    p = allocParams(0, nullptr, 0);
    MUST(cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &p));
    MUST(addFill(&wn, g, &an, 1, p.dptr, 600));
    MUST(cudaGraphInstantiate(&x, g, 0));
    e = cudaGraphLaunch(x, s0);
    cudaError_t es = cudaStreamSynchronize(s0);
    long long f1;
    std::string a1 = access(1, p.dptr, &f1);
    fact("graph of 0: alloc with no descriptor, launched", call(e) + "/" + call(es) + "; cuMemGetAccess(device 1) " + a1);
    MUST(cudaFree(p.dptr));
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
  }

  printf("\n== an address reused by allocations with different access (CUDA guide, graph memory nodes, peer access) ==\n");
  {
    Reuse r;
    cudaError_t e = buildReuse(r, s0);
    if (e != cudaSuccess) {
      fact("graph: A {1 ReadWrite}, free A, then B {}", "set-up failed: " + call(e));
    } else {
      fact("graph: A {1 ReadWrite}, fill, free A, then B {}", fmt("A %p, B %p: %s", r.a, r.b, r.a == r.b ? "B reuses A's address" : "distinct"));
      long long f1;
      std::string a1 = access(1, r.b, &f1);
      (void)f1;
      fact("  cuMemGetAccess(device 1, B) after the launch", a1 + "; pointer attribute " + ptrAccess(1, r.b));
      fact("  cuMemGetAccess(device 0, B)", access(0, r.b) + "; pointer attribute " + ptrAccess(0, r.b));
      fact("  graph memory", graphMem());
      MUST(cudaFree(r.b));
      cudaGraphExecDestroy(r.e);
      cudaGraphDestroy(r.g);
    }
  }

  printf("\n== stream capture from a pool whose access changes (CUDA guide, graph memory nodes, peer access with stream capture) ==\n");
  {
    Cap c;
    cudaError_t e = buildCap(c, s0);
    if (e != cudaSuccess) {
      fact("capture, set access, capture", "set-up failed: " + call(e));
    } else {
      fact("capture 1: cudaMallocFromPoolAsync, pool access {0}", allocNodeAccess(c.g1));
      fact("cudaMemPoolSetAccess(pool, device 1 ReadWrite)", call(c.setAccess));
      std::string n1 = allocNodeAccess(c.g1);
      fact("  capture 1's alloc node after that", n1, "unchanged: the node took the pool's access at the call",
           n1.find("device 1") == std::string::npos);
      std::string n2 = allocNodeAccess(c.g2);
      fact("capture 2: the same, after the access change", n2, "includes device 1", n2.find("device 1") != std::string::npos);
      long long f1, f2;
      std::string a1 = access(1, c.d1, &f1), a2 = access(1, c.d2, &f2);
      (void)f2;
      fact("  launched: cuMemGetAccess(device 1, capture 1's)", a1 + "; pointer attribute " + ptrAccess(1, c.d1), "no access for device 1", f1 == 0 || f1 == -1);
      fact("  launched: cuMemGetAccess(device 1, capture 2's)", a2 + "; pointer attribute " + ptrAccess(1, c.d2));
      MUST(cudaFree(c.d1));
      MUST(cudaFree(c.d2));
      cudaGraphExecDestroy(c.e1);
      cudaGraphExecDestroy(c.e2);
      cudaGraphDestroy(c.g1);
      cudaGraphDestroy(c.g2);
      cudaMemPoolDestroy(c.pool);
    }
  }

  printf("\n== kernels on device 1 reading device 0's memory (each in a child process) ==\n");
  printf("(the ground truth of access: cuMemGetAccess answers \"none\" for graph allocations, even for their own device,\n"
         " while these kernels read them; the driver maps graph memory without telling that query)\n");
  {
    struct {
      const char* child;
      const char* name;
      const char* doc;  // what driver-peer.txt says, or null
      int want;         // 1 read ok, 0 a fault, -1 no claim
    } cases[] = {
        {"read-no-peer", "cudaMalloc memory, no peer access", "a fault at run time (cudaErrorIllegalAddress)", 0},
        {"read-peer", "cudaMalloc memory, peer access 1 -> 0", "reads", 1},
        {"oneway-forward", "device 0 reads 1's, access 0 -> 1 only", "reads", 1},
        {"oneway-reverse", "device 1 reads 0's, access 0 -> 1 only", "a fault: access is one way", 0},
        {"memset-no-peer", "memset by device 1 of 0's memory, no peer access", nullptr, -1},
        {"memset-peer", "memset by device 1 of 0's memory, peer access 1 -> 0", nullptr, -1},
        {"memset-node-peer", "memset node of device 1 on 0's memory, peer access 1 -> 0", nullptr, -1},
        {"memset-node-no-peer", "memset node of device 1 on 0's memory, no peer access", nullptr, -1},
        {"pool-peer-enabled", "pool memory, peer access 1 -> 0, no pool access", nullptr, -1},
        {"pool-access", "pool memory, pool access {1 ReadWrite}", "reads", 1},
        {"node-explicit", "alloc node {1 RW}, reader node added with device 1 current", "reads", 1},
        {"node-captured", "alloc node {1 RW}, reader captured from a stream of 1", "reads", 1},
        {"node-no-access", "alloc node {}, reader captured from a stream of 1", "a fault", 0},
        {"reuse-extra", "B {} at A {1 RW}'s reused address", "mapped (relying on it is an error)", 1},
        {"capture-before", "captured before the pool's access for 1", "a fault: the node has no access for 1", 0},
        {"capture-after", "captured after the pool's access for 1", "reads", 1},
    };
    for (auto& c : cases) {
      std::string r = runChild(c.child);
      bool noClaim = c.want < 0 || r.find("not at A's address") != std::string::npos;  // §7's rule needs the reuse
      if (noClaim) fact(c.name, r);
      else fact(c.name, r, c.doc, c.want ? isOk(r) : faulted(r));
    }
  }

  printf("\n%-49s %d facts, %d stated by driver-peer.txt, %d of them differ\n", "summary", nfacts, nchecked, ndiffer);
  return 0;
}
