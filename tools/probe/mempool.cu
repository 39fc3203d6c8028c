// mempool.cu asks the CUDA driver what it does with stream-ordered allocation
// (cudaMallocAsync, cudaFreeAsync, cudaMemPool_t): refusals and their errors,
// reuse of freed blocks within and across streams, and pool statistics.
//
//	nvcc -O2 -o mempool mempool.cu && ./mempool
#include <cstdio>
#include <cstdint>
#include <unistd.h>
#include <cuda_runtime.h>

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-62s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)

static const size_t MiB = 1 << 20;

static void CUDART_CB sleepFn(void*) { usleep(300 * 1000); }

static void stats(cudaMemPool_t p, const char* what) {
  uint64_t rc = 0, rh = 0, uc = 0, uh = 0;
  cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemCurrent, &rc);
  cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemHigh, &rh);
  cudaMemPoolGetAttribute(p, cudaMemPoolAttrUsedMemCurrent, &uc);
  cudaMemPoolGetAttribute(p, cudaMemPoolAttrUsedMemHigh, &uh);
  printf("%-62s reserved %llu (high %llu) used %llu (high %llu)\n", what,
         (unsigned long long)rc, (unsigned long long)rh, (unsigned long long)uc, (unsigned long long)uh);
}

static cudaMemPoolProps props(int dev) {
  cudaMemPoolProps p = {};
  p.allocType = cudaMemAllocationTypePinned;
  p.location.type = cudaMemLocationTypeDevice;
  p.location.id = dev;
  return p;
}

int main() {
  int drv = 0, rt = 0, n = 0;
  cudaDriverGetVersion(&drv); cudaRuntimeGetVersion(&rt); cudaGetDeviceCount(&n);
  cudaDeviceProp prop; MUST(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, driver %d, runtime %d, devices %d\n", prop.name, drv, rt, n);
  cudaStream_t s1, s2; MUST(cudaStreamCreate(&s1)); MUST(cudaStreamCreate(&s2));
  cudaMemPool_t def; MUST(cudaDeviceGetDefaultMemPool(&def, 0));

  printf("\n== refusals ==\n");
  void* z = (void*)0x1234;
  SAY("cudaMallocAsync 0 bytes", cudaMallocAsync(&z, 0, s1));
  printf("  pointer after it: %p\n", z);
  z = (void*)0x1234;
  SAY("cudaMallocFromPoolAsync 0 bytes", cudaMallocFromPoolAsync(&z, 0, def, s1));
  printf("  pointer after it: %p\n", z);
  SAY("cudaFreeAsync(NULL)", cudaFreeAsync(nullptr, s1));
  SAY("cudaMemPoolDestroy(default pool)", cudaMemPoolDestroy(def));
  cudaMemPool_t bad = nullptr; cudaMemPoolProps pb = props(n);
  SAY("cudaMemPoolCreate at device ordinal == count", cudaMemPoolCreate(&bad, &pb));
  pb = props(-1);
  SAY("cudaMemPoolCreate at device ordinal -1", cudaMemPoolCreate(&bad, &pb));
  cudaMemPool_t mp; cudaMemPoolProps pp = props(0); MUST(cudaMemPoolCreate(&mp, &pp));
  cudaMemLocation l0 = {cudaMemLocationTypeDevice, 0}, lx = {cudaMemLocationTypeDevice, n};
  cudaMemAccessFlags f = cudaMemAccessFlagsProtNone;
  SAY("cudaMemPoolGetAccess(dev 0)", cudaMemPoolGetAccess(&f, mp, &l0));
  printf("  flags: %d (0 none, 1 read, 3 readwrite)\n", (int)f);
  cudaMemAccessDesc d = {l0, cudaMemAccessFlagsProtRead};
  SAY("cudaMemPoolSetAccess(dev 0, read)", cudaMemPoolSetAccess(mp, &d, 1));
  d.flags = cudaMemAccessFlagsProtNone;
  SAY("cudaMemPoolSetAccess(dev 0, none)", cudaMemPoolSetAccess(mp, &d, 1));
  d.flags = cudaMemAccessFlagsProtReadWrite;
  SAY("cudaMemPoolSetAccess(dev 0, readwrite)", cudaMemPoolSetAccess(mp, &d, 1));
  d = {lx, cudaMemAccessFlagsProtReadWrite};
  SAY("cudaMemPoolSetAccess(dev == count, readwrite)", cudaMemPoolSetAccess(mp, &d, 1));
  d = {lx, cudaMemAccessFlagsProtNone};
  SAY("cudaMemPoolSetAccess(dev == count, none)", cudaMemPoolSetAccess(mp, &d, 1));
  SAY("cudaMemPoolGetAccess(dev == count)", cudaMemPoolGetAccess(&f, mp, &lx));
  if (n > 1) {
    cudaMemLocation l1 = {cudaMemLocationTypeDevice, 1};
    d = {l1, cudaMemAccessFlagsProtRead};
    SAY("cudaMemPoolSetAccess(dev 1, read)", cudaMemPoolSetAccess(mp, &d, 1));
  }
  uint64_t thr = 12345;
  SAY("get release threshold (default pool)", cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, &thr));
  printf("  value: %llu\n", (unsigned long long)thr);
  uint64_t v = 5;
  SAY("set ReservedMemHigh to 5 (nonzero)", cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReservedMemHigh, &v));
  SAY("set ReservedMemCurrent", cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReservedMemCurrent, &v));

  printf("\n== addresses ==\n");
  {
    void *a, *b, *c, *x, *y;
    MUST(cudaMallocFromPoolAsync(&a, 1, mp, s1));
    MUST(cudaMallocFromPoolAsync(&b, 1, mp, s1));
    MUST(cudaMallocFromPoolAsync(&c, 3 * MiB, mp, s1));
    printf("1 B, 1 B, 3 MiB: %p %p %p (spacing %td, %td)\n", a, b, c, (char*)b - (char*)a, (char*)c - (char*)b);
    MUST(cudaStreamSynchronize(s1));
    stats(mp, "after 1 B, 1 B, 3 MiB");
    // Same stream, free still pending behind a sleeping host function.
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    MUST(cudaFreeAsync(c, s1));
    MUST(cudaMallocFromPoolAsync(&x, 3 * MiB, mp, s1));
    printf("same stream, free pending: %p (reuses c? %s)\n", x, x == c ? "yes" : "no");
    MUST(cudaMallocFromPoolAsync(&y, 1 * MiB, mp, s1));
    MUST(cudaStreamSynchronize(s1));
    // Another stream, free pending.
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    MUST(cudaFreeAsync(x, s1));
    void* w; MUST(cudaMallocFromPoolAsync(&w, 3 * MiB, mp, s2));
    printf("other stream, free pending: %p (reuses x? %s), s2 query %s\n", w, w == x ? "yes" : "no", cudaGetErrorName(cudaStreamQuery(s2)));
    MUST(cudaStreamSynchronize(s1)); MUST(cudaStreamSynchronize(s2));
    // Another stream, free executed (observed by sync).
    MUST(cudaFreeAsync(w, s2)); MUST(cudaStreamSynchronize(s2));
    void* u; MUST(cudaMallocFromPoolAsync(&u, 3 * MiB, mp, s1));
    printf("other stream, free done: %p (reuses w? %s)\n", u, u == w ? "yes" : "no");
    // Smaller request after a larger free in the same stream.
    MUST(cudaLaunchHostFunc(s1, sleepFn, nullptr));
    MUST(cudaFreeAsync(u, s1));
    void* t; MUST(cudaMallocFromPoolAsync(&t, 1 * MiB, mp, s1));
    printf("same stream, 1 MiB after 3 MiB free pending: %p (at u? %s)\n", t, t == u ? "yes" : "no");
    MUST(cudaStreamSynchronize(s1));
    stats(mp, "before frees");
    MUST(cudaFreeAsync(a, s1)); MUST(cudaFreeAsync(b, s1)); MUST(cudaFreeAsync(y, s1)); MUST(cudaFreeAsync(t, s1));
    stats(mp, "all freed, not synchronized");
    MUST(cudaStreamSynchronize(s1));
    stats(mp, "all freed, stream synchronized (threshold 0)");
  }

  printf("\n== stats and release ==\n");
  {
    void *p, *q;
    MUST(cudaMallocFromPoolAsync(&p, 1, mp, s1)); MUST(cudaStreamSynchronize(s1)); stats(mp, "1 B live");
    MUST(cudaMallocFromPoolAsync(&q, 5 * MiB + 1, mp, s1)); MUST(cudaStreamSynchronize(s1)); stats(mp, "+ 5 MiB + 1 live");
    MUST(cudaFreeAsync(q, s1)); stats(mp, "5 MiB+1 freed, unsynchronized");
    MUST(cudaStreamSynchronize(s1)); stats(mp, "stream synchronized (threshold 0)");
    uint64_t big = UINT64_MAX; MUST(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &big));
    MUST(cudaMallocFromPoolAsync(&q, 64 * MiB, mp, s1)); MUST(cudaStreamSynchronize(s1)); stats(mp, "64 MiB live (threshold max)");
    MUST(cudaFreeAsync(q, s1)); MUST(cudaStreamSynchronize(s1)); stats(mp, "64 MiB freed, synchronized (threshold max)");
    uint64_t zero = 0;
    MUST(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReservedMemHigh, &zero));
    MUST(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrUsedMemHigh, &zero)); stats(mp, "high marks reset");
    MUST(cudaMemPoolTrimTo(mp, 32 * MiB)); stats(mp, "TrimTo(32 MiB)");
    MUST(cudaMemPoolTrimTo(mp, 0)); stats(mp, "TrimTo(0)");
    MUST(cudaMallocFromPoolAsync(&q, 64 * MiB, mp, s1)); MUST(cudaFreeAsync(q, s1));
    MUST(cudaMemPoolTrimTo(mp, 0)); stats(mp, "64 MiB alloc+free queued, TrimTo(0) unsynchronized");
    MUST(cudaStreamSynchronize(s1)); MUST(cudaMemPoolTrimTo(mp, 0)); stats(mp, "synchronized, TrimTo(0)");
    MUST(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &zero));
    MUST(cudaMallocFromPoolAsync(&q, 64 * MiB, mp, s1)); MUST(cudaFreeAsync(q, s1));
    cudaEvent_t e; MUST(cudaEventCreate(&e)); MUST(cudaEventRecord(e, s1));
    MUST(cudaEventSynchronize(e)); stats(mp, "64 MiB freed, event synchronized (threshold 0)");
    MUST(cudaMallocFromPoolAsync(&q, 64 * MiB, mp, s1)); MUST(cudaFreeAsync(q, s1));
    while (cudaStreamQuery(s1) == cudaErrorNotReady) {}
    stats(mp, "64 MiB freed, stream queried done (threshold 0)");
    MUST(cudaDeviceSynchronize()); stats(mp, "device synchronized (threshold 0)");
    MUST(cudaFreeAsync(p, s1)); MUST(cudaStreamSynchronize(s1)); stats(mp, "all freed, synchronized");
  }

  printf("\n== max size ==\n");
  {
    cudaMemPoolProps sp = props(0); sp.maxSize = 64 * MiB;
    cudaMemPool_t small; SAY("create pool with maxSize 64 MiB", cudaMemPoolCreate(&small, &sp));
    void *p = nullptr, *q = nullptr;
    SAY("allocate 48 MiB", cudaMallocFromPoolAsync(&p, 48 * MiB, small, s1));
    SAY("allocate 32 MiB more", cudaMallocFromPoolAsync(&q, 32 * MiB, small, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
    cudaFreeAsync(p, s1); cudaStreamSynchronize(s1);
    cudaMemPoolDestroy(small);
  }

  printf("\n== destroy with live allocation ==\n");
  {
    cudaMemPool_t dp; cudaMemPoolProps p2 = props(0); MUST(cudaMemPoolCreate(&dp, &p2));
    void* p; MUST(cudaMallocFromPoolAsync(&p, 4 * MiB, dp, s1)); MUST(cudaStreamSynchronize(s1));
    SAY("destroy pool with a live allocation", cudaMemPoolDestroy(dp));
    SAY("cudaFreeAsync of that allocation", cudaFreeAsync(p, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
  }

  printf("\n== bad frees (last: may poison the context) ==\n");
  {
    void* p; MUST(cudaMallocFromPoolAsync(&p, 4 * MiB, mp, s1)); MUST(cudaStreamSynchronize(s1));
    SAY("cudaFreeAsync of an interior pointer", cudaFreeAsync((char*)p + 512, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
    SAY("cudaFreeAsync", cudaFreeAsync(p, s1));
    SAY("cudaFreeAsync again (double free)", cudaFreeAsync(p, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
    SAY("cudaFreeAsync of a bogus address", cudaFreeAsync((void*)0x1000, s1));
    SAY("  synchronize", cudaStreamSynchronize(s1));
  }
  printf("\ndone\n");
  return 0;
}
