// extsem.cu asks the CUDA driver what it does with external semaphore calls
// that gpugraph checks before they reach it, and with imports of file
// descriptors that are no semaphore: the GPU machine has no Vulkan to
// export a real one. Questions:
//   - signal/wait/node with no semaphores (numExtSems 0): refused, or a no-op?
//   - a NULL semaphore handle in the array: which error?
//   - the same calls in a capturing stream: is the capture invalidated?
//   - an import of fd -1 or of /dev/null's fd: which error?
// gpugraph refuses empty arrays (ErrInvalidValue) and nil handles
// (ErrInvalidResourceHandle for stream calls, ErrInvalidValue for nodes).
//
//	nvcc -O2 -o extsem extsem.cu -lpthread && ./extsem
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <cuda_runtime.h>

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-64s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %d %s: %s\n", __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)

static const char* status(cudaStream_t s) {
  cudaStreamCaptureStatus st;
  cudaError_t e = cudaStreamIsCapturing(s, &st);
  if (e != cudaSuccess) return cudaGetErrorName(e);
  return st == cudaStreamCaptureStatusNone ? "none" : st == cudaStreamCaptureStatusActive ? "active" : "invalidated";
}

static void end(const char* what, cudaStream_t s) {
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamEndCapture(s, &g);
  size_t n = 0;
  if (g) cudaGraphGetNodes(g, nullptr, &n);
  printf("%-64s %s, graph %s (%zu nodes)\n", what, cudaGetErrorName(e), g ? "returned" : "NULL", n);
  if (g) cudaGraphDestroy(g);
  cudaGetLastError();
}

static void import(const char* what, cudaExternalSemaphoreHandleType type, int fd) {
  cudaExternalSemaphoreHandleDesc d;
  memset(&d, 0, sizeof d);
  d.type = type;
  d.handle.fd = fd;
  cudaExternalSemaphore_t sem = nullptr;
  cudaError_t e = cudaImportExternalSemaphore(&sem, &d);
  printf("%-64s %s\n", what, cudaGetErrorName(e));
  cudaGetLastError();
  if (e == cudaSuccess) cudaDestroyExternalSemaphore(sem);
}

int main() {
  MUST(cudaFree(0));
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaExternalSemaphoreSignalParams sp;
  cudaExternalSemaphoreWaitParams wp;
  memset(&sp, 0, sizeof sp);
  memset(&wp, 0, sizeof wp);
  cudaExternalSemaphore_t none[1] = {nullptr};

  printf("== stream calls ==\n");
  SAY("signal, 0 semaphores, NULL arrays", cudaSignalExternalSemaphoresAsync(nullptr, nullptr, 0, s));
  SAY("wait, 0 semaphores, NULL arrays", cudaWaitExternalSemaphoresAsync(nullptr, nullptr, 0, s));
  SAY("signal, 1 NULL handle", cudaSignalExternalSemaphoresAsync(none, &sp, 1, s));
  SAY("wait, 1 NULL handle", cudaWaitExternalSemaphoresAsync(none, &wp, 1, s));
  SAY("stream synchronize after them", cudaStreamSynchronize(s));

  printf("\n== graph nodes ==\n");
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  cudaGraphNode_t n = nullptr;
  cudaExternalSemaphoreSignalNodeParams snp = {nullptr, nullptr, 0};
  cudaExternalSemaphoreWaitNodeParams wnp = {nullptr, nullptr, 0};
  SAY("add signal node, 0 semaphores", cudaGraphAddExternalSemaphoresSignalNode(&n, g, nullptr, 0, &snp));
  SAY("add wait node, 0 semaphores", cudaGraphAddExternalSemaphoresWaitNode(&n, g, nullptr, 0, &wnp));
  snp = {none, &sp, 1};
  wnp = {none, &wp, 1};
  SAY("add signal node, 1 NULL handle", cudaGraphAddExternalSemaphoresSignalNode(&n, g, nullptr, 0, &snp));
  SAY("add wait node, 1 NULL handle", cudaGraphAddExternalSemaphoresWaitNode(&n, g, nullptr, 0, &wnp));
  size_t count = 0;
  cudaGraphGetNodes(g, nullptr, &count);
  printf("%-64s %zu\n", "nodes in the graph", count);
  if (count > 0) {
    cudaGraphExec_t e = nullptr;
    SAY("instantiate it", cudaGraphInstantiate(&e, g, 0));
    if (e) {
      SAY("launch it", cudaGraphLaunch(e, s));
      SAY("synchronize", cudaStreamSynchronize(s));
      cudaGraphExecDestroy(e);
    }
  }
  cudaGraphDestroy(g);

  printf("\n== in a capture ==\n");
  MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  SAY("capture: signal, 0 semaphores", cudaSignalExternalSemaphoresAsync(nullptr, nullptr, 0, s));
  printf("%-64s %s\n", "  capture status", status(s));
  SAY("capture: wait, 1 NULL handle", cudaWaitExternalSemaphoresAsync(none, &wp, 1, s));
  printf("%-64s %s\n", "  capture status", status(s));
  end("end capture", s);

  printf("\n== imports of descriptors that are no semaphore ==\n");
  import("import timeline fd -1", cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd, -1);
  import("import opaque fd -1", cudaExternalSemaphoreHandleTypeOpaqueFd, -1);
  int fd = open("/dev/null", O_RDONLY);
  import("import timeline fd of /dev/null", cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd, fd);
  import("import opaque fd of /dev/null", cudaExternalSemaphoreHandleTypeOpaqueFd, fd);
  close(fd);
  SAY("device still usable (cudaDeviceSynchronize)", cudaDeviceSynchronize());
  return 0;
}
