// Follow-up questions: when do the stats change, does a full pool wait for a
// pending free in another stream, does same-stream reuse split a larger block.
#include <cstdio>
#include <cstdint>
#include <unistd.h>
#include <cuda_runtime.h>
#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-62s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)
static const size_t MiB = 1 << 20;
static void CUDART_CB sleepFn(void*) { usleep(500 * 1000); }
static void stats(cudaMemPool_t p, const char* what) {
  uint64_t rc = 0, uc = 0;
  cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemCurrent, &rc);
  cudaMemPoolGetAttribute(p, cudaMemPoolAttrUsedMemCurrent, &uc);
  printf("%-62s reserved %llu used %llu\n", what, (unsigned long long)rc, (unsigned long long)uc);
}
static cudaMemPool_t mk(size_t max) {
  cudaMemPoolProps p = {}; p.allocType = cudaMemAllocationTypePinned;
  p.location.type = cudaMemLocationTypeDevice; p.location.id = 0; p.maxSize = max;
  cudaMemPool_t mp; cudaMemPoolCreate(&mp, &p); return mp;
}
int main() {
  cudaStream_t s1, s2; MUST(cudaStreamCreate(&s1)); MUST(cudaStreamCreate(&s2));
  printf("== stats while the stream is blocked ==\n");
  {
    cudaMemPool_t mp = mk(0);
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    void* a; MUST(cudaMallocFromPoolAsync(&a, 3 * MiB, mp, s1));
    stats(mp, "3 MiB allocated behind a sleeping host function");
    MUST(cudaFreeAsync(a, s1));
    stats(mp, "freed, the free not yet run");
    printf("s1 query %s\n", cudaGetErrorName(cudaStreamQuery(s1)));
    MUST(cudaMemPoolTrimTo(mp, 0)); stats(mp, "TrimTo(0) with the free pending");
    MUST(cudaStreamSynchronize(s1)); stats(mp, "synchronized");
    cudaMemPoolDestroy(mp);
  }
  printf("\n== same stream: smaller allocations out of a pending larger block ==\n");
  {
    cudaMemPool_t mp = mk(0);
    void *a, *b, *c, *d; MUST(cudaMallocFromPoolAsync(&a, 3 * MiB, mp, s1));
    MUST(cudaMallocFromPoolAsync(&d, 1 * MiB, mp, s1));
    MUST(cudaStreamSynchronize(s1));
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    MUST(cudaFreeAsync(a, s1));
    MUST(cudaMallocFromPoolAsync(&b, 1 * MiB, mp, s1));
    MUST(cudaMallocFromPoolAsync(&c, 1 * MiB, mp, s1));
    printf("a %p (3 MiB), d %p; after free of a: b %p c %p (b-a %td, c-a %td)\n", a, d, b, c, (char*)b - (char*)a, (char*)c - (char*)a);
    MUST(cudaStreamSynchronize(s1));
    cudaFreeAsync(b, s1); cudaFreeAsync(c, s1); cudaFreeAsync(d, s1); cudaStreamSynchronize(s1);
    cudaMemPoolDestroy(mp);
  }
  printf("\n== full pool, free pending in another stream ==\n");
  {
    cudaMemPool_t mp = mk(64 * MiB);
    void *a, *b = nullptr; MUST(cudaMallocFromPoolAsync(&a, 48 * MiB, mp, s1));
    MUST(cudaStreamSynchronize(s1));
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    MUST(cudaFreeAsync(a, s1));
    SAY("48 MiB in s2 while s1's free of 48 MiB is pending", cudaMallocFromPoolAsync(&b, 48 * MiB, mp, s2));
    printf("b %p (== a? %s), s2 query %s, s1 query %s\n", b, a == b ? "yes" : "no", cudaGetErrorName(cudaStreamQuery(s2)), cudaGetErrorName(cudaStreamQuery(s1)));
    cudaDeviceSynchronize(); cudaGetLastError();
    if (b) cudaFreeAsync(b, s2);
    cudaDeviceSynchronize();
    // The same with an event making s2 wait for s1 after the free.
    MUST(cudaMallocFromPoolAsync(&a, 48 * MiB, mp, s1));
    MUST(cudaStreamSynchronize(s1));
    cudaEvent_t e; MUST(cudaEventCreate(&e));
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    MUST(cudaFreeAsync(a, s1)); MUST(cudaEventRecord(e, s1)); MUST(cudaStreamWaitEvent(s2, e, 0));
    b = nullptr;
    SAY("48 MiB in s2 waiting on an event after s1's free", cudaMallocFromPoolAsync(&b, 48 * MiB, mp, s2));
    printf("b %p (== a? %s)\n", b, a == b ? "yes" : "no");
    cudaDeviceSynchronize();
  }
  printf("\n== unbounded pool, free pending in another stream, event dependency ==\n");
  {
    cudaMemPool_t mp = mk(0);
    void *a, *b; MUST(cudaMallocFromPoolAsync(&a, 8 * MiB, mp, s1)); MUST(cudaStreamSynchronize(s1));
    cudaEvent_t e; MUST(cudaEventCreate(&e));
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    MUST(cudaFreeAsync(a, s1)); MUST(cudaEventRecord(e, s1)); MUST(cudaStreamWaitEvent(s2, e, 0));
    MUST(cudaMallocFromPoolAsync(&b, 8 * MiB, mp, s2));
    printf("b %p (== a? %s)\n", b, a == b ? "yes" : "no");
    cudaDeviceSynchronize();
  }
  printf("\ndone\n");
  return 0;
}
