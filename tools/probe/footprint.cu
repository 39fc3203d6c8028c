// footprint.cu builds the graphs of `gpugraph mem` (internal/footprint) with
// the CUDA driver and prints the graph memory it reserves for each, launched
// alone into a fresh stream after a trim, then all into one stream, then
// each into a stream of its own. Output: docs/driver-footprint.txt.
//
//	nvcc -O2 -o footprint footprint.cu && ./footprint
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)
static const size_t MiB = 1 << 20;

__global__ void work() {}

struct Builder {
  cudaGraph_t g;
  bool serial = false;
  cudaGraphNode_t last = nullptr;
  std::vector<cudaGraphNode_t> deps(std::vector<cudaGraphNode_t> ds) {
    std::vector<cudaGraphNode_t> out;
    for (auto d : ds) if (d) out.push_back(d);
    if (serial && last) {
      bool has = false;
      for (auto d : out) has |= d == last;
      if (!has) out.push_back(last);
    }
    return out;
  }
  cudaGraphNode_t alloc(size_t n, std::vector<cudaGraphNode_t> ds, void** p) {
    auto d = deps(ds);
    cudaMemAllocNodeParams a = {};
    a.poolProps.allocType = cudaMemAllocationTypePinned;
    a.poolProps.location.type = cudaMemLocationTypeDevice;
    a.poolProps.location.id = 0;
    a.bytesize = n;
    cudaGraphNode_t node;
    MUST(cudaGraphAddMemAllocNode(&node, g, d.data(), d.size(), &a));
    *p = a.dptr;
    return last = node;
  }
  cudaGraphNode_t free(void* p, std::vector<cudaGraphNode_t> ds) {
    auto d = deps(ds);
    cudaGraphNode_t node;
    MUST(cudaGraphAddMemFreeNode(&node, g, d.data(), d.size(), p));
    return last = node;
  }
  cudaGraphNode_t kernel(std::vector<cudaGraphNode_t> ds) {
    auto d = deps(ds);
    cudaKernelNodeParams k = {};
    k.func = (void*)work;
    k.gridDim = dim3(1);
    k.blockDim = dim3(1);
    void* args[1] = {nullptr};
    k.kernelParams = args;
    cudaGraphNode_t node;
    MUST(cudaGraphAddKernelNode(&node, g, d.data(), d.size(), &k));
    return last = node;
  }
  cudaGraphNode_t use(size_t n, std::vector<cudaGraphNode_t> ds) {
    void* p;
    cudaGraphNode_t a = alloc(n, ds, &p);
    return free(p, {kernel({a})});
  }
};

static void chain(Builder& b) { cudaGraphNode_t prev = nullptr; for (int i = 0; i < 8; i++) prev = b.use(64 * MiB, {prev}); }
static void parallel(Builder& b) { for (int i = 0; i < 8; i++) b.use(64 * MiB, {}); }
static void diamond(Builder& b) {
  auto fa = b.use(64 * MiB, {});
  auto fb = b.use(64 * MiB, {fa});
  auto fc = b.use(64 * MiB, {fa});
  b.use(128 * MiB, {fb, fc});
}
static void seed31(Builder& b) {
  void* p; auto an = b.alloc(64 * MiB, {}, &p);
  auto ka = b.kernel({an}); auto kb = b.kernel({ka}); auto kc = b.kernel({ka});
  b.free(p, {kb, kc}); b.kernel({kc}); b.kernel({});
}
static void seed41(Builder& b) {
  auto f1 = b.use(64 * MiB, {});
  void* p2; auto a2 = b.alloc(64 * MiB, {f1}, &p2);
  b.free(p2, {b.kernel({a2})});
  b.use(64 * MiB, {a2});
}
static void mlp(Builder& b) {
  const int L = 12; const size_t act = 512 * 1024 * 4, wgt = 1024 * 1024 * 4;
  std::vector<void*> z(L + 1), a(L + 1);
  cudaGraphNode_t prev = nullptr;
  for (int l = 1; l <= L; l++) {
    auto zn = b.alloc(act, {prev}, &z[l]);
    auto zk = b.kernel({zn, prev});
    auto an = b.alloc(act, {zk}, &a[l]);
    prev = b.kernel({an, zk});
  }
  void* g; auto gn = b.alloc(act, {prev}, &g);
  auto gk = b.kernel({gn, prev});
  b.free(a[L], {gk});
  for (int l = L; l >= 1; l--) {
    void* dz; auto dzn = b.alloc(act, {gk}, &dz);
    auto dzk = b.kernel({dzn, gk});
    b.free(g, {dzk});
    b.free(z[l], {dzk});
    void* dw; auto dwn = b.alloc(wgt, {dzk}, &dw);
    auto dwk = b.kernel({dwn, dzk});
    if (l > 1) b.free(a[l - 1], {dwk});
    auto upd = b.kernel({dwk});
    b.free(dw, {upd});
    if (l > 1) {
      auto gn2 = b.alloc(act, {dzk}, &g);
      gk = b.kernel({gn2, dzk});
      b.free(dz, {gk, dwk});
    } else {
      b.free(dz, {dwk});
    }
  }
}
static void mlpSerial(Builder& b) { b.serial = true; mlp(b); }

static uint64_t reservedHigh() {
  uint64_t v = 0;
  cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &v);
  return v;
}
static void reset() {
  MUST(cudaDeviceSynchronize());
  MUST(cudaDeviceGraphMemTrim(0));
  uint64_t z = 0;
  MUST(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &z));
}

int main() {
  struct Sc { const char* name; void (*build)(Builder&); };
  Sc scs[] = {{"chain: 8 x (alloc 64 MiB, kernel, free)", chain}, {"parallel: 8 independent 64 MiB", parallel},
              {"diamond: 64 | 64+64 | 128 MiB", diamond}, {"fan-out, freed after it: alloc; a; b, c; free", seed31},
              {"reuse: alloc 1, free 1, alloc 2; alloc 3 not after free 2", seed41},
              {"mlp step, data dependencies only (60 allocations)", mlp},
              {"mlp step, in one stream's order (60 allocations)", mlpSerial}};
  const int n = sizeof(scs) / sizeof(scs[0]);
  std::vector<cudaGraphExec_t> execs;
  std::vector<cudaStream_t> streams(n);
  for (auto& s : streams) MUST(cudaStreamCreate(&s));
  cudaDeviceProp prop; MUST(cudaGetDeviceProperties(&prop, 0));
  int drv; cudaDriverGetVersion(&drv);
  printf("device %s, driver %d\n", prop.name, drv);
  uint64_t sum = 0, largest = 0;
  for (int i = 0; i < n; i++) {
    Builder b; MUST(cudaGraphCreate(&b.g, 0));
    scs[i].build(b);
    cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, b.g, 0));
    execs.push_back(e);
    reset();
    MUST(cudaGraphLaunch(e, streams[0]));
    MUST(cudaDeviceSynchronize());
    uint64_t r = reservedHigh();
    sum += r; largest = r > largest ? r : largest;
    printf("%-70s reserved %6.0f MiB\n", scs[i].name, r / double(MiB));
  }
  reset();
  for (auto e : execs) MUST(cudaGraphLaunch(e, streams[0]));
  MUST(cudaDeviceSynchronize());
  printf("%-70s reserved %6.0f MiB (largest %.0f, sum %.0f)\n", "all graphs, one stream", reservedHigh() / double(MiB), largest / double(MiB), sum / double(MiB));
  reset();
  for (int i = 0; i < n; i++) MUST(cudaGraphLaunch(execs[i], streams[i]));
  MUST(cudaDeviceSynchronize());
  printf("%-70s reserved %6.0f MiB\n", "all graphs, a stream each", reservedHigh() / double(MiB));
  return 0;
}
