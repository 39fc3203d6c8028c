// pageable.cu asks the CUDA driver when a graph's memcpy nodes read and
// write pageable host memory: a node copying from pageable memory reads it
// at cudaGraphLaunch (gpugraph's reference assumes so, from differential
// inputs with host nodes writing the source), but differential inputs with
// a copy *into* pageable memory followed, in the same launch, by a copy
// from the same bytes disagreed with that model (FuzzDifferential 466 and
// 1678 of the 3000-input run, docs/reliability.md). One line per case:
// what the later copy delivered, compared with the bytes before the launch
// (old) and the bytes the earlier node wrote (new). Pinned memory is the
// control: a node reads it when it runs.
//
//	nvcc -O2 -o pageable tools/probe/pageable.cu && ./pageable
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

static const size_t B = 64;

static void CUDART_CB writeHost(void* p) { memset(p, 0x33, B); }

// what names the 64 bytes dst holds: all old, all new, or mixed.
static const char* what(const unsigned char* got, unsigned char oldv, unsigned char newv) {
  bool allOld = true, allNew = true;
  for (size_t i = 0; i < B; i++) {
    allOld = allOld && got[i] == oldv;
    allNew = allNew && got[i] == newv;
  }
  return allOld ? "the bytes before the launch" : allNew ? "the bytes the earlier node wrote" : "mixed";
}

// run: graph = earlier node (a copy device->h, or a host node writing h)
// -> copy h -> device e; h pinned or pageable. Prints what e got.
static void run(const char* name, bool pinned, bool hostNode, int launches) {
  unsigned char* h;
  if (pinned) MUST(cudaMallocHost(&h, B));
  else h = (unsigned char*)malloc(B);
  unsigned char *d, *e;
  MUST(cudaMalloc(&d, B));
  MUST(cudaMalloc(&e, B));
  MUST(cudaMemset(d, 0xAA, B));
  MUST(cudaMemset(e, 0, B));
  memset(h, 0x11, B);
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  cudaGraphNode_t first, second;
  if (hostNode) {
    cudaHostNodeParams hp = {};
    hp.fn = writeHost;
    hp.userData = h;
    MUST(cudaGraphAddHostNode(&first, g, nullptr, 0, &hp));
  } else {
    MUST(cudaGraphAddMemcpyNode1D(&first, g, nullptr, 0, h, d, B, cudaMemcpyDeviceToHost));
  }
  MUST(cudaGraphAddMemcpyNode1D(&second, g, &first, 1, e, h, B, cudaMemcpyHostToDevice));
  cudaGraphExec_t x;
  MUST(cudaGraphInstantiate(&x, g, 0));
  unsigned char newv = hostNode ? 0x33 : 0xAA;
  for (int l = 0; l < launches; l++) {
    if (l > 0) {
      memset(h, 0x11, B); // the host resets h between launches
      MUST(cudaMemset(e, 0, B));
    }
    MUST(cudaGraphLaunch(x, s));
    MUST(cudaStreamSynchronize(s));
    unsigned char got[B];
    MUST(cudaMemcpy(got, e, B, cudaMemcpyDeviceToHost));
    printf("%-62s launch %d: the later copy delivered %s; h after: %02x\n", name, l, what(got, 0x11, newv), h[0]);
  }
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(d);
  cudaFree(e);
  if (pinned) cudaFreeHost(h);
  else free(h);
}

// chain: a kernel writes d (0x55) -> copy d->h -> host node records h[0]
// (and, if overwrite, writes 0x33 to h) -> copy h->e. h pageable or
// pinned. Says when the device-to-host copy wrote h and what the
// host-to-device copy read.
__global__ void fill(unsigned char* d, unsigned char v) {
  long long t = clock64();
  while (clock64() - t < 2000000) {
  }
  for (int i = 0; i < (int)B; i++) d[i] = v;
}
static unsigned char seen;
static void CUDART_CB record(void* p) { seen = ((unsigned char*)p)[0]; }
static void CUDART_CB recordAndWrite(void* p) { seen = ((unsigned char*)p)[0]; memset(p, 0x33, B); }

static void chain(const char* name, bool pinned, bool overwrite) {
  unsigned char* h;
  if (pinned) MUST(cudaMallocHost(&h, B));
  else h = (unsigned char*)malloc(B);
  unsigned char *d, *e;
  MUST(cudaMalloc(&d, B));
  MUST(cudaMalloc(&e, B));
  MUST(cudaMemset(d, 0xAA, B));
  MUST(cudaMemset(e, 0, B));
  MUST(cudaDeviceSynchronize());
  memset(h, 0x11, B);
  cudaStream_t s;
  MUST(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  cudaGraphNode_t k, c1, hn, c2;
  unsigned char v = 0x55;
  void* args[] = {&d, &v};
  cudaKernelNodeParams kp = {};
  kp.func = (void*)fill;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(1);
  kp.kernelParams = args;
  MUST(cudaGraphAddKernelNode(&k, g, nullptr, 0, &kp));
  MUST(cudaGraphAddMemcpyNode1D(&c1, g, &k, 1, h, d, B, cudaMemcpyDeviceToHost));
  cudaHostNodeParams hp = {};
  hp.fn = overwrite ? recordAndWrite : record;
  hp.userData = h;
  MUST(cudaGraphAddHostNode(&hn, g, &c1, 1, &hp));
  MUST(cudaGraphAddMemcpyNode1D(&c2, g, &hn, 1, e, h, B, cudaMemcpyHostToDevice));
  cudaGraphExec_t x;
  MUST(cudaGraphInstantiate(&x, g, 0));
  MUST(cudaGraphLaunch(x, s));
  MUST(cudaStreamSynchronize(s));
  unsigned char got[B];
  MUST(cudaMemcpy(got, e, B, cudaMemcpyDeviceToHost));
  printf("%-62s host node saw h=%02x; h->e delivered %02x; h after: %02x\n", name, seen, got[0], h[0]);
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(d);
  cudaFree(e);
  if (pinned) cudaFreeHost(h);
  else free(h);
}

int main() {
  int drv = 0;
  cudaDriverGetVersion(&drv);
  printf("pageable.cu: driver %d\n", drv);
  run("copy device->pageable, then pageable->device", false, false, 2);
  run("copy device->pinned, then pinned->device (control)", true, false, 2);
  run("host node writes pageable, then pageable->device", false, true, 2);
  run("host node writes pinned, then pinned->device (control)", true, true, 2);
  // h starts 11, d AA before the launch, the kernel writes 55 to d.
  chain("kernel->d, d->pageable h, host node, h->e", false, false);
  chain("kernel->d, d->pinned h, host node, h->e (control)", true, false);
  chain("kernel->d, d->pageable h, host node writes 33, h->e", false, true);
  chain("kernel->d, d->pinned h, host node writes 33, h->e (control)", true, true);
  return 0;
}
