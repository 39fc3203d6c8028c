// foreignmem.cu asks the CUDA driver when it refuses a memset or memcpy
// node of one graph on the memory of another graph's alloc node: gpugraph
// applies the answer in graphallocs.go (checkForeignCopy) for both
// backends. The allocating graph A either keeps the allocation (no free
// node), frees it itself, or leaves the free to a third graph; the node is
// added to a graph B before A is instantiated, after, and after A ran; and
// A's free node may come after B's node exists. Also: B embedded as a
// child graph of A, and a capture instead of the explicit API.
//
// One line per fact, "name  result". Build and run on a GPU machine:
//
//	nvcc -O2 -o foreignmem tools/probe/foreignmem.cu && ./foreignmem
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-78s %s\n", name, cudaGetErrorName(e_)); fflush(stdout); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

static const size_t BYTES = 1 << 20;
static void* buf;     // cudaMalloc memory: the other side of copies
static cudaStream_t s;

__global__ void touch(char* p) { p[threadIdx.x] = 1; }

static cudaGraphNode_t addAlloc(cudaGraph_t g, void** out) {
  cudaMemAllocNodeParams p = {};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = BYTES;
  cudaGraphNode_t n;
  MUST(cudaGraphAddMemAllocNode(&n, g, nullptr, 0, &p));
  *out = p.dptr;
  return n;
}

static cudaError_t addMemset(cudaGraph_t g, void* x, cudaGraphNode_t* out = nullptr) {
  cudaMemsetParams p = {};
  p.dst = x; p.value = 3; p.elementSize = 1; p.width = 64; p.height = 1;
  cudaGraphNode_t n;
  return cudaGraphAddMemsetNode(out ? out : &n, g, nullptr, 0, &p);
}

// users tries each kind of node on x in a fresh graph.
static void users(const char* when, void* x) {
  char name[160];
  const char* what[] = {"memset node", "memcpy node into it", "memcpy node from it", "kernel node on it"};
  for (int k = 0; k < 4; k++) {
    cudaGraph_t b;
    MUST(cudaGraphCreate(&b, 0));
    cudaGraphNode_t n;
    cudaError_t e;
    switch (k) {
    case 0: e = addMemset(b, x); break;
    case 1: e = cudaGraphAddMemcpyNode1D(&n, b, nullptr, 0, x, buf, 64, cudaMemcpyDeviceToDevice); break;
    case 2: e = cudaGraphAddMemcpyNode1D(&n, b, nullptr, 0, buf, x, 64, cudaMemcpyDeviceToDevice); break;
    default: {
      void* args[] = {&x};
      cudaKernelNodeParams kp = {};
      kp.func = (void*)touch; kp.gridDim = dim3(1); kp.blockDim = dim3(32); kp.kernelParams = args;
      e = cudaGraphAddKernelNode(&n, b, nullptr, 0, &kp);
    }
    }
    snprintf(name, sizeof name, "%s: %s", when, what[k]);
    SAY(name, e);
    cudaGraphDestroy(b);
  }
}

// Where the allocation's free is.
enum Free { NoFree, FreeInA, FreeElsewhere };

static void variant(const char* title, Free f) {
  printf("\n== A allocates x; %s ==\n", title);
  cudaGraph_t a, c;
  MUST(cudaGraphCreate(&a, 0));
  MUST(cudaGraphCreate(&c, 0));
  void* x;
  cudaGraphNode_t an = addAlloc(a, &x), fn;
  if (f == FreeInA) MUST(cudaGraphAddMemFreeNode(&fn, a, &an, 1, x));
  if (f == FreeElsewhere) MUST(cudaGraphAddMemFreeNode(&fn, c, nullptr, 0, x));
  users("A not instantiated", x);
  char name[160];
  snprintf(name, sizeof name, "%s", "  a memset 32 bytes before x, 64 bytes long");
  cudaGraph_t b;
  MUST(cudaGraphCreate(&b, 0));
  {
    cudaMemsetParams p = {};
    p.dst = (char*)x - 32; p.value = 3; p.elementSize = 1; p.width = 64; p.height = 1;
    cudaGraphNode_t n;
    SAY(name, cudaGraphAddMemsetNode(&n, b, nullptr, 0, &p));
  }
  cudaGraphDestroy(b);
  cudaGraphExec_t ea, ec = nullptr;
  MUST(cudaGraphInstantiate(&ea, a, 0));
  users("A instantiated", x);
  MUST(cudaGraphLaunch(ea, s));
  MUST(cudaStreamSynchronize(s));
  users("A launched", x);
  if (f == FreeElsewhere) {
    MUST(cudaGraphInstantiate(&ec, c, 0));
    MUST(cudaGraphLaunch(ec, s));
    MUST(cudaStreamSynchronize(s));
    users("the other graph's free launched", x);
    cudaGraphExecDestroy(ec);
  }
  cudaGraphExecDestroy(ea);
  users("A's executable graph destroyed", x);
  cudaGraphDestroy(a);
  users("A destroyed", x);
  cudaGraphDestroy(c);
}

int main() {
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  printf("foreignmem.cu: driver %d, runtime %d\n", drv, rt);
  MUST(cudaSetDevice(0));
  MUST(cudaMalloc(&buf, BYTES));
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  variant("no free node anywhere", NoFree);
  variant("A frees x", FreeInA);
  variant("a third graph frees x", FreeElsewhere);

  printf("\n== B's node is added first, then A's free node ==\n");
  {
    cudaGraph_t a, b, b2;
    MUST(cudaGraphCreate(&a, 0));
    MUST(cudaGraphCreate(&b, 0));
    MUST(cudaGraphCreate(&b2, 0));
    void* x;
    cudaGraphNode_t an = addAlloc(a, &x), fn, mn;
    SAY("memset node of B on x (A has no free node yet)", addMemset(b, x, &mn));
    SAY("memcpy node of B2 into x (A has no free node yet)", cudaGraphAddMemcpyNode1D(&mn, b2, nullptr, 0, x, buf, 64, cudaMemcpyDeviceToDevice));
    SAY("then A's free node", cudaGraphAddMemFreeNode(&fn, a, &an, 1, x));
    cudaGraphExec_t eb = nullptr, ea = nullptr, eb2 = nullptr;
    SAY("then instantiate B", cudaGraphInstantiate(&eb, b, 0));
    SAY("then instantiate B2", cudaGraphInstantiate(&eb2, b2, 0));
    SAY("instantiate A", cudaGraphInstantiate(&ea, a, 0));
    if (eb) {
      SAY("launch B", cudaGraphLaunch(eb, s));
      SAY("  synchronize", cudaStreamSynchronize(s));
    }
    SAY("a memset node of B on x now", addMemset(b, x));
    cudaGraphNode_t child;
    SAY("B (memset on x) embedded in A as a child graph node", cudaGraphAddChildGraphNode(&child, a, &an, 1, b));
    if (ea) cudaGraphExecDestroy(ea);
    if (eb) cudaGraphExecDestroy(eb);
    if (eb2) cudaGraphExecDestroy(eb2);
    cudaGraphDestroy(a); cudaGraphDestroy(b); cudaGraphDestroy(b2);
  }

  printf("\n== A's own nodes and its embedded child graph ==\n");
  {
    cudaGraph_t a, empty;
    MUST(cudaGraphCreate(&a, 0));
    MUST(cudaGraphCreate(&empty, 0));
    void* x;
    cudaGraphNode_t an = addAlloc(a, &x), fn, child;
    MUST(cudaGraphAddMemFreeNode(&fn, a, &an, 1, x));
    SAY("memset node of A on x (A frees x)", addMemset(a, x));
    MUST(cudaGraphAddChildGraphNode(&child, a, &an, 1, empty));
    cudaGraph_t emb;
    MUST(cudaGraphChildGraphNodeGetGraph(child, &emb));
    SAY("memset node added to A's embedded child graph on x", addMemset(emb, x));
    cudaGraph_t b;
    MUST(cudaGraphCreate(&b, 0));
    cudaGraphNode_t n;
    SAY("memcpy node of B into x", cudaGraphAddMemcpyNode1D(&n, b, nullptr, 0, x, buf, 64, cudaMemcpyDeviceToDevice));
    cudaGraphDestroy(b);
    cudaGraphDestroy(a); cudaGraphDestroy(empty);
  }

  printf("\n== captured allocations (cudaMallocAsync in a capture of A) ==\n");
  for (int freed = 0; freed < 2; freed++) {
    cudaGraph_t a;
    void* x;
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    MUST(cudaMallocAsync(&x, BYTES, s));
    MUST(cudaMemsetAsync(x, 0, 64, s));
    if (freed) MUST(cudaFreeAsync(x, s));
    MUST(cudaStreamEndCapture(s, &a));
    users(freed ? "captured, A frees x" : "captured, A keeps x", x);
    cudaGraphExec_t ea;
    MUST(cudaGraphInstantiate(&ea, a, 0));
    MUST(cudaGraphLaunch(ea, s));
    MUST(cudaStreamSynchronize(s));
    if (!freed) {
      MUST(cudaFree(x));
    }
    cudaGraphExecDestroy(ea);
    cudaGraphDestroy(a);
  }
  return 0;
}
