// peerreenable.cu asks the driver whether a kernel node that works on a
// peer device's memory runs again once re-enabled (cudaGraphNodeSetEnabled
// off, a launch, on, a launch): a two-GPU differential input (a graph
// captured on device 0 with kernels on device 1's memory) found the
// re-enabled kernel's output missing. Captured and added nodes, device 1's
// memory and device 0's (the control). One line per case. Needs two GPUs
// with peer access.
//
//	nvcc -O2 -o peerreenable tools/probe/peerreenable.cu -lcuda -lnvrtc && ./peerreenable
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <nvrtc.h>
#include <cuda_runtime.h>

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

__global__ void add1(int* p) { p[threadIdx.x] += 1; }

static void run(bool captured, int memDev, bool setFirst) {
  MUST(cudaSetDevice(memDev));
  int* p;
  MUST(cudaMalloc(&p, 64));
  MUST(cudaMemset(p, 0, 64));
  MUST(cudaDeviceSynchronize());
  MUST(cudaSetDevice(0));
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphNode_t k;
  if (captured) {
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    add1<<<1, 4, 0, s>>>(p);
    MUST(cudaStreamEndCapture(s, &g));
    size_t n = 1;
    MUST(cudaGraphGetNodes(g, &k, &n));
  } else {
    MUST(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams kp = {};
    void* args[] = {&p};
    kp.func = (void*)add1;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(4);
    kp.kernelParams = args;
    MUST(cudaGraphAddKernelNode(&k, g, nullptr, 0, &kp));
  }
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, 0));
  if (setFirst) { // the same parameters again, as the differential input did
    cudaKernelNodeParams kp = {};
    void* args[] = {&p};
    kp.func = (void*)add1;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(4);
    kp.kernelParams = args;
    MUST(cudaGraphExecKernelNodeSetParams(e, k, &kp));
  }
  int got[4];
  const char* step[] = {"enabled", "disabled", "enabled again"};
  printf("%-8s kernel on device %d's memory%s:", captured ? "captured" : "added", memDev, setFirst ? ", SetParams first" : "");
  for (int i = 0; i < 3; i++) {
    if (i > 0) MUST(cudaGraphNodeSetEnabled(e, k, i == 1 ? 0 : 1));
    MUST(cudaGraphLaunch(e, s));
    MUST(cudaStreamSynchronize(s));
    MUST(cudaMemcpy(got, p, sizeof got, cudaMemcpyDefault));
    printf("  %s -> %d", step[i], got[0]);
  }
  printf("  (want 1, 1, 2)\n");
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(p);
}

// multiDevice is the differential input's shape (FuzzDifferential 2977): a
// capture on device 0 forks a kernel onto a stream of device 1, so the
// graph spans both devices, all on device 1's memory. Kernel k2 (device 0)
// is captured over the first 2 elements; it is launched, then updated to
// cover 4 (cuGraphExecKernelNodeSetParams) and, if disable, disabled for
// one launch and enabled again; the launches alternate between two streams.
// With onOne, the whole graph is captured on device 1 (one device).
__global__ void addFrom(int* d, const int* s) { d[threadIdx.x] += s[threadIdx.x] + 1; }

static void multiDevice(bool disable, bool onOne, bool drvUpdate) {
  int dev0 = onOne ? 1 : 0;
  MUST(cudaSetDevice(1));
  int *a, *b, *c;
  MUST(cudaMalloc(&a, 64));
  MUST(cudaMalloc(&b, 64));
  MUST(cudaMalloc(&c, 64));
  MUST(cudaMemset(a, 0, 64));
  MUST(cudaMemset(b, 0, 64));
  MUST(cudaMemset(c, 0, 64));
  cudaStream_t s1;
  MUST(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  MUST(cudaDeviceSynchronize());
  MUST(cudaSetDevice(dev0));
  cudaStream_t s0, t0;
  MUST(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  MUST(cudaStreamCreateWithFlags(&t0, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  MUST(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  MUST(cudaSetDevice(1));
  MUST(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  MUST(cudaSetDevice(dev0));
  cudaGraph_t g;
  MUST(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
  addFrom<<<1, 4, 0, s0>>>(a, b); // k0: a += b + 1
  MUST(cudaEventRecord(fork, s0));
  MUST(cudaSetDevice(1));
  MUST(cudaStreamWaitEvent(s1, fork, 0));
  addFrom<<<1, 4, 0, s1>>>(c, a); // k1 on device 1: c += a + 1
  MUST(cudaEventRecord(join, s1));
  MUST(cudaSetDevice(dev0));
  addFrom<<<1, 2, 0, s0>>>(b, a); // k2: b += a + 1, elements 0 and 1
  MUST(cudaStreamWaitEvent(s0, join, 0));
  MUST(cudaStreamEndCapture(s0, &g));
  cudaGraphNode_t nodes[8];
  size_t n = 8;
  MUST(cudaGraphGetNodes(g, nodes, &n));
  cudaGraphNode_t k2 = nullptr;
  for (size_t i = 0; i < n; i++) {
    cudaKernelNodeParams kp;
    if (cudaGraphKernelNodeGetParams(nodes[i], &kp) == cudaSuccess && *(int**)kp.kernelParams[0] == b) k2 = nodes[i];
    cudaGetLastError();
  }
  if (!k2) {
    printf("k2 not found among %zu nodes\n", n);
    return;
  }
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, g, 0));
  // The reference, launch by launch, for elements 0 (k2 always covers it)
  // and 3 (only once updated); a, b, c start at 0.
  int ra[4] = {}, rb[4] = {}, rc[4] = {};
  int got[3][4];
  const char* step[] = {"as captured", disable ? "updated, disabled" : "updated", disable ? "enabled again" : "again"};
  printf("%s graph, k2 updated%s%s:", onOne ? "one-device" : "two-device", drvUpdate ? " (cuGraphExecKernelNodeSetParams, CUfunction)" : "", disable ? ", disabled, enabled" : "");
  for (int l = 0; l < 3; l++) {
    if (l == 1) {
      cudaKernelNodeParams kp = {};
      void* args[] = {&b, &a};
      kp.func = (void*)addFrom;
      kp.gridDim = dim3(1);
      kp.blockDim = dim3(4);
      kp.kernelParams = args;
      if (drvUpdate) {
        // As gpugraph does: the driver's call, with the CUfunction of the
        // kernel in the capturing device's context.
        cudaFunction_t f;
        MUST(cudaSetDevice(dev0));
        MUST(cudaGetFuncBySymbol(&f, (const void*)addFrom));
        CUDA_KERNEL_NODE_PARAMS dp = {};
        dp.func = (CUfunction)f;
        dp.gridDimX = dp.gridDimY = dp.gridDimZ = 1;
        dp.blockDimX = 4;
        dp.blockDimY = dp.blockDimZ = 1;
        dp.kernelParams = args;
        CUresult r = cuGraphExecKernelNodeSetParams((CUgraphExec)e, (CUgraphNode)k2, &dp);
        if (r != CUDA_SUCCESS) {
          printf("cuGraphExecKernelNodeSetParams: %d\n", (int)r);
          exit(1);
        }
      } else {
        MUST(cudaGraphExecKernelNodeSetParams(e, k2, &kp));
      }
    }
    if (l > 0 && disable) MUST(cudaGraphNodeSetEnabled(e, k2, l == 1 ? 0 : 1));
    MUST(cudaGraphLaunch(e, l % 2 ? t0 : s0));
    MUST(cudaStreamSynchronize(l % 2 ? t0 : s0));
    MUST(cudaDeviceSynchronize());
    for (int i = 0; i < 4; i++) {
      ra[i] += rb[i] + 1;
      rc[i] += ra[i] + 1;
      bool runs = !(l == 1 && disable) && (l > 0 || i < 2);
      if (runs) rb[i] += ra[i] + 1;
    }
    MUST(cudaMemcpy(got[0], a, 16, cudaMemcpyDefault));
    MUST(cudaMemcpy(got[1], b, 16, cudaMemcpyDefault));
    MUST(cudaMemcpy(got[2], c, 16, cudaMemcpyDefault));
    bool ok = true;
    for (int i = 0; i < 4; i++) ok = ok && got[0][i] == ra[i] && got[1][i] == rb[i] && got[2][i] == rc[i];
    printf("  %s -> b[0] %d b[3] %d (want %d %d)%s", step[l], got[1][0], got[1][3], rb[0], rb[3], ok ? "" : " WRONG");
  }
  printf("\n");
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
}

// explicitDriver builds k0 -> k2 with the driver's API, both nodes given
// the CUfunction of the kernel (as gpugraph adds kernels: a function of a
// module, not the runtime's CUkernel), k2 over the first 4 of 16 elements;
// launches, updates k2 to all 16 (cuGraphExecKernelNodeSetParams with the
// same function) and disables it (or disables, then updates) for one
// launch, enables it again and launches.
// nvrtcFunction compiles addFrom with NVRTC to PTX and loads it with
// cuModuleLoadData, as gpugraph loads its kernels (a JIT-compiled module).
static CUfunction nvrtcFunction() {
  static CUfunction f;
  if (f) return f;
  const char* src = "extern \"C\" __global__ void addFrom(int* d, const int* s) { d[threadIdx.x] += s[threadIdx.x] + 1; }";
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src, "addFrom.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) exit(1);
  int major = 0, minor = 0;
  MUST(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  MUST(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  char arch[64];
  snprintf(arch, sizeof arch, "--gpu-architecture=compute_%d%d", major, minor);
  const char* opts[] = {arch, "--std=c++17"};
  if (nvrtcCompileProgram(prog, 2, opts) != NVRTC_SUCCESS) {
    printf("nvrtc compile failed\n");
    exit(1);
  }
  size_t n;
  nvrtcGetPTXSize(prog, &n);
  char* ptx = (char*)malloc(n);
  nvrtcGetPTX(prog, ptx);
  nvrtcDestroyProgram(&prog);
  CUmodule m;
  if (cuModuleLoadData(&m, ptx) != CUDA_SUCCESS || cuModuleGetFunction(&f, m, "addFrom") != CUDA_SUCCESS) {
    printf("module load failed\n");
    exit(1);
  }
  free(ptx);
  return f;
}

// explicitDriver with nvrtc takes the kernel from nvrtcFunction, and with
// withParams instantiates with cuGraphInstantiateWithParams, as gpugraph
// does (else cuGraphInstantiate).
static void explicitDriver(bool disableFirst, bool nvrtc = false, bool withParams = false) {
  MUST(cudaSetDevice(0));
  int *a, *b;
  MUST(cudaMalloc(&a, 64));
  MUST(cudaMalloc(&b, 64));
  MUST(cudaMemset(a, 0, 64));
  MUST(cudaMemset(b, 0, 64));
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaFunction_t f;
  if (nvrtc) {
    f = (cudaFunction_t)nvrtcFunction();
  } else {
    MUST(cudaGetFuncBySymbol(&f, (const void*)addFrom));
  }
  CUgraph g;
  if (cuGraphCreate(&g, 0) != CUDA_SUCCESS) exit(1);
  auto params = [&](int* d, int* src, unsigned block, void** args) {
    args[0] = d == a ? (void*)&a : (void*)&b;
    args[1] = src == a ? (void*)&a : (void*)&b;
    CUDA_KERNEL_NODE_PARAMS p = {};
    p.func = (CUfunction)f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = block;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    return p;
  };
  void *a0[2], *a2[2], *a2b[2];
  CUDA_KERNEL_NODE_PARAMS p0 = params(a, b, 16, a0), p2 = params(b, a, 4, a2), p2b = params(b, a, 16, a2b);
  CUgraphNode k0, k2;
  CUresult r = cuGraphAddKernelNode(&k0, g, nullptr, 0, &p0);
  if (r == CUDA_SUCCESS) r = cuGraphAddKernelNode(&k2, g, &k0, 1, &p2);
  CUgraphExec e;
  if (r == CUDA_SUCCESS && withParams) {
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {};
    r = cuGraphInstantiateWithParams(&e, g, &ip);
  } else if (r == CUDA_SUCCESS) {
    r = cuGraphInstantiate(&e, g, 0);
  }
  if (r != CUDA_SUCCESS) {
    printf("driver graph: %d\n", (int)r);
    exit(1);
  }
  int ra[16] = {}, rb[16] = {};
  printf("one device, driver API, %s, %s, k2 %s, enabled:", nvrtc ? "NVRTC module's CUfunction" : "runtime's CUfunction",
         withParams ? "cuGraphInstantiateWithParams" : "cuGraphInstantiate", disableFirst ? "disabled, updated" : "updated, disabled");
  for (int l = 0; l < 3; l++) {
    if (l == 1) {
      if (disableFirst) r = cuGraphNodeSetEnabled(e, k2, 0);
      if (r == CUDA_SUCCESS) r = cuGraphExecKernelNodeSetParams(e, k2, &p2b);
      if (r == CUDA_SUCCESS && !disableFirst) r = cuGraphNodeSetEnabled(e, k2, 0);
    }
    if (l == 2) r = cuGraphNodeSetEnabled(e, k2, 1);
    if (r == CUDA_SUCCESS) r = cuGraphLaunch(e, (CUstream)s);
    if (r != CUDA_SUCCESS) {
      printf(" call failed: %d\n", (int)r);
      exit(1);
    }
    MUST(cudaStreamSynchronize(s));
    for (int i = 0; i < 16; i++) {
      ra[i] += rb[i] + 1;
      if (l == 0 ? i < 4 : l == 2) rb[i] += ra[i] + 1;
    }
    int got[16];
    MUST(cudaMemcpy(got, b, 64, cudaMemcpyDefault));
    bool ok = true;
    for (int i = 0; i < 16; i++) ok = ok && got[i] == rb[i];
    printf("  launch %d -> b[0] %d b[8] %d (want %d %d)%s", l, got[0], got[8], rb[0], rb[8], ok ? "" : " WRONG");
  }
  printf("\n");
  cuGraphExecDestroy(e);
  cuGraphDestroy(g);
}

int main() {
  int drv = 0, n = 0, can = 0;
  cudaDriverGetVersion(&drv);
  MUST(cudaGetDeviceCount(&n));
  printf("peerreenable.cu: %d GPU(s), driver %d\n", n, drv);
  if (n < 2) return 0;
  MUST(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) {
    printf("device 0 cannot access device 1\n");
    return 0;
  }
  MUST(cudaSetDevice(0));
  MUST(cudaDeviceEnablePeerAccess(1, 0));
  MUST(cudaSetDevice(1));
  MUST(cudaDeviceEnablePeerAccess(0, 0));
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 2; c++)
      for (int m = 1; m >= 0; m--) run(c, m, f);
  for (int one = 0; one < 2; one++)
    for (int dis = 0; dis < 2; dis++)
      for (int drv = 0; drv < 2; drv++) multiDevice(dis, one, drv);
  explicitDriver(false);
  explicitDriver(true);
  explicitDriver(false, true, false);
  explicitDriver(false, false, true);
  explicitDriver(false, true, true);
  explicitDriver(true, true, true);
  return 0;
}
