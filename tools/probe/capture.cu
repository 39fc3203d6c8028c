// capture.cu asks the CUDA driver what stream capture refuses and with which
// error, whether the refusal invalidates the capture, and what nodes
// capturing stream-ordered allocation and graph launches makes. Output:
// docs/driver-capture.txt.
//
//	nvcc -O2 -o capture capture.cu -lpthread && ./capture
#include <cstdio>
#include <thread>
#include <cuda_runtime.h>

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-64s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %d %s: %s\n", __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)

__global__ void k(int* p) { if (p) *p = 1; }

static const char* status(cudaStream_t s) {
  cudaStreamCaptureStatus st;
  cudaError_t e = cudaStreamIsCapturing(s, &st);
  if (e != cudaSuccess) return cudaGetErrorName(e);
  return st == cudaStreamCaptureStatusNone ? "none" : st == cudaStreamCaptureStatusActive ? "active" : "invalidated";
}

static void end(const char* what, cudaStream_t s) {
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamEndCapture(s, &g);
  printf("%-64s %s, graph %s, stream now %s\n", what, cudaGetErrorName(e), g ? "returned" : "NULL", status(s));
  if (g) cudaGraphDestroy(g);
  cudaGetLastError();
}

static void nodes(const char* what, cudaGraph_t g) {
  size_t n = 0;
  cudaGraphGetNodes(g, nullptr, &n);
  cudaGraphNode_t ns[64];
  if (n > 64) n = 64;
  cudaGraphGetNodes(g, ns, &n);
  printf("%-64s", what);
  for (size_t i = 0; i < n; i++) {
    cudaGraphNodeType t; cudaGraphNodeGetType(ns[i], &t);
    printf(" %d", (int)t);
  }
  printf("  (types: 0 kernel 1 memcpy 2 memset 3 host 4 graph 5 empty 6 wait 7 record 10 alloc 11 free)\n");
}

int main() {
  cudaStream_t s1, s2, s3, snb;
  MUST(cudaStreamCreate(&s1)); MUST(cudaStreamCreate(&s2)); MUST(cudaStreamCreate(&s3));
  MUST(cudaStreamCreateWithFlags(&snb, cudaStreamNonBlocking));
  cudaEvent_t ev, outside; MUST(cudaEventCreate(&ev)); MUST(cudaEventCreate(&outside));
  MUST(cudaEventRecord(outside, s3)); MUST(cudaDeviceSynchronize());
  int* dp; MUST(cudaMalloc(&dp, 4));
  int drv; cudaDriverGetVersion(&drv);
  printf("driver %d\n", drv);

  printf("\n== begin ==\n");
  SAY("begin capture on the legacy stream", cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal));
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  SAY("begin capture on a stream already capturing", cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);

  printf("\n== prohibited on the capturing stream ==\n");
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal)); k<<<1, 1, 0, s1>>>(dp);
  SAY("synchronize the capturing stream", cudaStreamSynchronize(s1));
  printf("%-64s %s\n", "  stream after that", status(s1));
  k<<<1, 1, 0, s1>>>(dp); SAY("  launch into it after that", cudaGetLastError());
  end("  end", s1);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  SAY("query the capturing stream", cudaStreamQuery(s1));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);

  printf("\n== captured events ==\n");
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal)); k<<<1, 1, 0, s1>>>(dp);
  MUST(cudaEventRecord(ev, s1));
  SAY("query a captured event", cudaEventQuery(ev));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal)); MUST(cudaEventRecord(ev, s1));
  SAY("synchronize a captured event", cudaEventSynchronize(ev));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  SAY("query the event after the capture ended", cudaEventQuery(ev));
  cudaEvent_t t0, t1; MUST(cudaEventCreate(&t0)); MUST(cudaEventCreate(&t1));
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal)); MUST(cudaEventRecord(t0, s1)); MUST(cudaEventRecord(t1, s1));
  float ms; SAY("elapsed time between captured events", cudaEventElapsedTime(&ms, t0, t1));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);

  printf("\n== waits ==\n");
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  SAY("wait on an event recorded outside the capture", cudaStreamWaitEvent(s1, outside, 0));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  SAY("wait on an outside event with cudaEventWaitExternal", cudaStreamWaitEvent(s1, outside, cudaEventWaitExternal));
  SAY("record an event with cudaEventRecordExternal", cudaEventRecordWithFlags(ev, s1, cudaEventRecordExternal));
  {
    cudaGraph_t g = nullptr; SAY("  end", cudaStreamEndCapture(s1, &g));
    if (g) { nodes("  nodes", g); cudaGraphDestroy(g); }
  }
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal)); MUST(cudaEventRecord(ev, s1));
  MUST(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
  SAY("wait on an event of another capture", cudaStreamWaitEvent(s2, ev, 0));
  printf("%-64s %s / %s\n", "  streams after that", status(s1), status(s2));
  end("  end s2", s2); end("  end s1", s1);

  printf("\n== fork and join ==\n");
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal)); k<<<1, 1, 0, s1>>>(dp);
  MUST(cudaEventRecord(ev, s1)); MUST(cudaStreamWaitEvent(s2, ev, 0));
  printf("%-64s %s\n", "stream 2 after waiting on a captured event", status(s2));
  k<<<1, 1, 0, s2>>>(dp);
  end("end in stream 2 (not the origin)", s2);
  printf("%-64s %s / %s\n", "  streams after that", status(s1), status(s2));
  end("end in the origin without joining stream 2", s1);
  printf("%-64s %s\n", "  stream 2 after that", status(s2));
  k<<<1, 1, 0, s2>>>(dp); SAY("  launch into stream 2 after that", cudaGetLastError());
  MUST(cudaStreamSynchronize(s2));
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal)); k<<<1, 1, 0, s1>>>(dp);
  MUST(cudaEventRecord(ev, s1)); MUST(cudaStreamWaitEvent(s2, ev, 0));
  end("end with stream 2 joined but idle (no work after the wait)", s1);
  printf("%-64s %s\n", "  stream 2 after that", status(s2));

  printf("\n== unsafe calls ==\n");
  const char* modes[] = {"global", "thread-local", "relaxed"};
  cudaStreamCaptureMode ms_[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
  for (int m = 0; m < 3; m++) {
    char buf[128];
    void* p = nullptr;
    MUST(cudaStreamBeginCapture(s1, ms_[m]));
    snprintf(buf, sizeof buf, "cudaMalloc in the capturing thread, %s capture", modes[m]);
    SAY(buf, cudaMalloc(&p, 16));
    printf("%-64s %s\n", "  stream after that", status(s1));
    end("  end", s1);
    if (p) cudaFree(p);
    p = nullptr;
    MUST(cudaStreamBeginCapture(s1, ms_[m]));
    cudaError_t other;
    std::thread([&] { other = cudaMalloc(&p, 16); }).join();
    snprintf(buf, sizeof buf, "cudaMalloc in another thread, %s capture", modes[m]);
    printf("%-64s %s\n", buf, cudaGetErrorName(other));
    printf("%-64s %s\n", "  stream after that", status(s1));
    end("  end", s1);
    if (p) cudaFree(p);
  }
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  SAY("cudaFree during a global capture", cudaFree(dp));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  int h = 0;
  SAY("synchronous cudaMemcpy during a global capture", cudaMemcpy(&h, dp, 4, cudaMemcpyDeviceToHost));
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  MUST(cudaStreamBeginCapture(snb, cudaStreamCaptureModeGlobal));
  SAY("synchronous cudaMemcpy, capture on a non-blocking stream", cudaMemcpy(&h, dp, 4, cudaMemcpyDeviceToHost));
  printf("%-64s %s\n", "  stream after that", status(snb));
  end("  end", snb);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  SAY("cudaDeviceSynchronize during a capture", cudaDeviceSynchronize());
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
  SAY("cudaDeviceSynchronize during a relaxed capture", cudaDeviceSynchronize());
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  k<<<1, 1>>>(dp); SAY("launch into the legacy stream during a capture", cudaGetLastError());
  printf("%-64s %s\n", "  stream after that", status(s1));
  end("  end", s1);
  MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  {
    cudaError_t e; cudaGraph_t g = nullptr;
    std::thread([&] { e = cudaStreamEndCapture(s1, &g); }).join();
    printf("%-64s %s\n", "end a global capture from another thread", cudaGetErrorName(e));
    printf("%-64s %s\n", "  stream after that", status(s1));
    if (status(s1)[0] == 'a') end("  end", s1);
  }

  printf("\n== memory and graphs in capture ==\n");
  void* before; MUST(cudaMallocAsync(&before, 64, s1)); MUST(cudaStreamSynchronize(s1));
  {
    MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    void* p; MUST(cudaMallocAsync(&p, 1 << 20, s1));
    k<<<1, 1, 0, s1>>>((int*)p);
    MUST(cudaFreeAsync(p, s1));
    cudaGraph_t g; MUST(cudaStreamEndCapture(s1, &g));
    nodes("mallocAsync, kernel, freeAsync", g);
    cudaGraphExec_t ge; MUST(cudaGraphInstantiate(&ge, g, 0));
    MUST(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    SAY("graph launch during capture", cudaGraphLaunch(ge, s1));
    SAY("free of memory allocated before the capture", cudaFreeAsync(before, s1));
    printf("%-64s %s\n", "  stream after that", status(s1));
    cudaGraph_t g2 = nullptr; cudaError_t e = cudaStreamEndCapture(s1, &g2);
    printf("%-64s %s\n", "  end", cudaGetErrorName(e));
    if (g2) nodes("  nodes", g2);
    cudaStreamCaptureStatus st; unsigned long long id = 0; cudaGraph_t cg; const cudaGraphNode_t* deps; size_t nd;
    SAY("capture info of a stream not capturing", cudaStreamGetCaptureInfo(s1, &st, &id, &cg, &deps, nullptr, &nd));
    printf("  status %d id %llu\n", (int)st, id);
  }
  printf("\ndone\n");
  return 0;
}
