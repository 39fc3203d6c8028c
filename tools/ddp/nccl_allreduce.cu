// nccl_allreduce.cu: NCCL's own all-reduce bandwidth on every GPU of this
// machine, one process and one thread (ncclCommInitAll, each iteration's
// calls in one ncclGroupStart/End), on the message sizes BenchmarkAllReduce
// (coll/bench_test.go) and tools/ddp/train_ddp.py use: the reference
// model's gradients (one per layer, and all in one buffer), then powers of
// two from 4 KiB to 256 MiB. float32 sum, in place. Each size: warm-up,
// then ITERS iterations, each timed with CUDA events on every GPU's stream;
// an iteration's time is its slowest GPU's, the size's the median.
// algbw = bytes/time, busbw = algbw*2(n-1)/n (nccl-tests' definitions).
//
//	nvcc -O2 -o nccl_allreduce tools/ddp/nccl_allreduce.cu -lnccl    (or -L DIR -l:libnccl.so.2)
//	./nccl_allreduce [iters 20] [max bytes 268435456]
//
// Prints a table and one "BW nccl BYTES NAME US ALGBW BUSBW" line per size.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)
#define NCCL(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); exit(1); } } while (0)

struct Size { size_t bytes; std::string name; };

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20;
  size_t maxBytes = argc > 2 ? strtoull(argv[2], nullptr, 10) : (size_t)256 << 20;
  const int warmup = 5;
  int n = 0;
  CUDA(cudaGetDeviceCount(&n));
  int ver = 0;
  NCCL(ncclGetVersion(&ver));

  // internal/train/config.go Reference(): 256 -> 1024 x4 -> 10.
  const int dims[] = {256, 1024, 1024, 1024, 1024, 10};
  std::vector<Size> sizes;
  size_t total = 0;
  for (int l = 0; l < 5; l++) {
    size_t b = 4 * ((size_t)dims[l + 1] * dims[l] + dims[l + 1]);
    total += b;
    sizes.push_back({b, "grad-layer" + std::to_string(l)});
  }
  sizes.push_back({total, "grad-all"});
  for (size_t s = 4 << 10; s <= maxBytes; s *= 2)
    sizes.push_back({s, s >= (1 << 20) ? std::to_string(s >> 20) + "MiB" : std::to_string(s >> 10) + "KiB"});

  std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<cudaStream_t> streams(n);
  std::vector<float*> bufs(n, nullptr);
  for (int i = 0; i < n; i++) {
    CUDA(cudaSetDevice(i));
    CUDA(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  }
  printf("all_reduce: NCCL %d.%d.%d (ncclCommInitAll, one thread), %d GPU(s), float32 sum in place, median of %d after %d warm-up\n",
         ver / 10000, (ver / 100) % 100, ver % 100, n, iters, warmup);
  printf("%12s %-12s %12s %12s %12s\n", "bytes", "", "time us", "algbw GB/s", "busbw GB/s");
  std::vector<std::string> lines;
  for (const Size& sz : sizes) {
    size_t count = sz.bytes / 4;
    for (int i = 0; i < n; i++) {
      CUDA(cudaSetDevice(i));
      CUDA(cudaMalloc(&bufs[i], sz.bytes));
      CUDA(cudaMemset(bufs[i], 0, sz.bytes));
    }
    auto once = [&]() {
      NCCL(ncclGroupStart());
      for (int i = 0; i < n; i++) NCCL(ncclAllReduce(bufs[i], bufs[i], count, ncclFloat32, ncclSum, comms[i], streams[i]));
      NCCL(ncclGroupEnd());
    };
    for (int w = 0; w < warmup; w++) once();
    for (int i = 0; i < n; i++) { CUDA(cudaSetDevice(i)); CUDA(cudaStreamSynchronize(streams[i])); }
    // ev[i][2k], ev[i][2k+1]: iteration k's start and end on GPU i.
    std::vector<std::vector<cudaEvent_t>> ev(n, std::vector<cudaEvent_t>(2 * iters));
    for (int i = 0; i < n; i++) {
      CUDA(cudaSetDevice(i));
      for (auto& e : ev[i]) CUDA(cudaEventCreate(&e));
    }
    for (int k = 0; k < iters; k++) {
      for (int i = 0; i < n; i++) { CUDA(cudaSetDevice(i)); CUDA(cudaEventRecord(ev[i][2 * k], streams[i])); }
      once();
      for (int i = 0; i < n; i++) { CUDA(cudaSetDevice(i)); CUDA(cudaEventRecord(ev[i][2 * k + 1], streams[i])); }
    }
    std::vector<float> per(iters, 0);
    for (int i = 0; i < n; i++) {
      CUDA(cudaSetDevice(i));
      CUDA(cudaStreamSynchronize(streams[i]));
      for (int k = 0; k < iters; k++) {
        float ms = 0;
        CUDA(cudaEventElapsedTime(&ms, ev[i][2 * k], ev[i][2 * k + 1]));
        per[k] = std::max(per[k], ms);
      }
      for (auto& e : ev[i]) cudaEventDestroy(e);
      CUDA(cudaFree(bufs[i]));
    }
    std::sort(per.begin(), per.end());
    double ms = iters % 2 ? per[iters / 2] : 0.5 * (per[iters / 2 - 1] + per[iters / 2]);
    double us = ms * 1e3;
    double alg = sz.bytes / (us * 1e-6) / 1e9;
    double bus = alg * 2.0 * (n - 1) / n;
    printf("%12zu %-12s %12.2f %12.3f %12.3f\n", sz.bytes, sz.name.c_str(), us, alg, bus);
    char buf[256];
    snprintf(buf, sizeof buf, "BW nccl %zu %s %.3f %.4f %.4f", sz.bytes, sz.name.c_str(), us, alg, bus);
    lines.push_back(buf);
  }
  printf("\n");
  for (auto& l : lines) printf("%s\n", l.c_str());
  for (int i = 0; i < n; i++) ncclCommDestroy(comms[i]);
  return 0;
}
