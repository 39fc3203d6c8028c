// launch.cu is the native reference for `gpugraph bench --backend cuda`:
// the host cost of N empty-kernel launches into a stream against one launch
// of an N-node graph of empty kernels (chain), and the GPU time per node of
// the graph, measured the same way as internal/bench (medians of runs, each
// run timing a loop of launches plus one synchronize).
//
//	nvcc -O2 -o launch launch.cu && ./launch
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <cuda_runtime.h>

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %d %s: %s\n", __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)

__global__ void empty() {}

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main() {
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  empty<<<1, 1, 0, s>>>();
  MUST(cudaStreamSynchronize(s));
  if (getenv("OTHER_STREAM")) {
    // What the Go harness did before each graph benchmark: kernel launches in
    // another stream, synchronized, then that stream destroyed.
    cudaStream_t o;
    MUST(cudaStreamCreateWithFlags(&o, cudaStreamNonBlocking));
    for (int it = 0; it < 100; it++) {
      for (int i = 0; i < 1000; i++) empty<<<1, 1, 0, o>>>();
      MUST(cudaStreamSynchronize(o));
    }
    MUST(cudaStreamDestroy(o));
    printf("(after 100000 launches in another stream, since destroyed)\n");
  }
  const int sizes[] = {1, 10, 100, 1000};
  const int runs = 7;
  printf("native CUDA C++ (runtime API), graphs built by %s, medians of %d runs\n", getenv("EXPLICIT") ? "cudaGraphAddKernelNode" : "stream capture", runs);
  printf("%6s %14s %16s %16s %18s\n", "N", "stream us/op", "graph us/launch", "graph us/node", "GPU us/node(graph)");
  for (int n : sizes) {
    cudaGraph_t g;
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; i++) empty<<<1, 1, 0, s>>>();
    MUST(cudaStreamEndCapture(s, &g));
    if (getenv("EXPLICIT")) {  // the same chain built with cudaGraphAddKernelNode
      cudaGraphDestroy(g);
      MUST(cudaGraphCreate(&g, 0));
      cudaGraphNode_t prev = nullptr;
      cudaKernelNodeParams kp = {};
      kp.func = (void*)empty; kp.gridDim = dim3(1); kp.blockDim = dim3(1);
      for (int i = 0; i < n; i++) {
        cudaGraphNode_t node;
        MUST(cudaGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &kp));
        prev = node;
      }
    }
    cudaGraphExec_t e;
    MUST(cudaGraphInstantiate(&e, g, 0));
    MUST(cudaGraphLaunch(e, s));
    MUST(cudaStreamSynchronize(s));
    int iters = std::max(20, 20000 / n);
    std::vector<double> st, gt, gpu;
    cudaEvent_t a, b;
    MUST(cudaEventCreate(&a)); MUST(cudaEventCreate(&b));
    for (int r = 0; r < runs; r++) {
      double t0 = now();
      for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) empty<<<1, 1, 0, s>>>();
        MUST(cudaStreamSynchronize(s));
      }
      st.push_back((now() - t0) / iters / n);
      t0 = now();
      for (int it = 0; it < iters; it++) {
        MUST(cudaGraphLaunch(e, s));
        MUST(cudaStreamSynchronize(s));
      }
      gt.push_back((now() - t0) / iters);
      MUST(cudaEventRecord(a, s));
      for (int it = 0; it < 20; it++) MUST(cudaGraphLaunch(e, s));
      MUST(cudaEventRecord(b, s));
      MUST(cudaEventSynchronize(b));
      float ms; MUST(cudaEventElapsedTime(&ms, a, b));
      gpu.push_back(ms * 1e-3 / 20 / n);
    }
    std::sort(st.begin(), st.end()); std::sort(gt.begin(), gt.end()); std::sort(gpu.begin(), gpu.end());
    printf("%6d %14.3f %16.3f %16.4f %18.4f\n", n, st[runs / 2] * 1e6, gt[runs / 2] * 1e6, gt[runs / 2] * 1e6 / n, gpu[runs / 2] * 1e6);
    // Host cost of the launch call alone, without the synchronize.
    double t0 = now();
    for (int it = 0; it < 1000; it++) MUST(cudaGraphLaunch(e, s));
    double call = (now() - t0) / 1000;
    MUST(cudaStreamSynchronize(s));
    t0 = now();
    for (int it = 0; it < 1000; it++) empty<<<1, 1, 0, s>>>();
    double scall = (now() - t0) / 1000;
    MUST(cudaStreamSynchronize(s));
    printf("       call only: stream launch %.3f us, graph launch %.3f us\n", scall * 1e6, call * 1e6);
    // One launch between events, then synchronize: GPU time of a single launch.
    std::vector<double> one;
    for (int r = 0; r < 50; r++) {
      MUST(cudaEventRecord(a, s)); MUST(cudaGraphLaunch(e, s)); MUST(cudaEventRecord(b, s));
      MUST(cudaStreamSynchronize(s));
      float ms; MUST(cudaEventElapsedTime(&ms, a, b)); one.push_back(ms * 1e3);
    }
    std::sort(one.begin(), one.end());
    printf("       single launch between events: %.3f us GPU\n", one[25]);
    cudaGraphExecDestroy(e); cudaGraphDestroy(g);
  }
  return 0;
}
