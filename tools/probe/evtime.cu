// Timing events recorded by graph nodes: cudaEventElapsedTime between
// event record nodes of an explicit graph, of a capture (external
// records), and between a node's record and a stream's. Answers in
// docs/driver-capture.txt ("event timing in graphs").
// nvcc -O2 -o evtime evtime.cu && ./evtime
#include <cstdio>
#include <cuda_runtime.h>
__global__ void spin(long long n){ long long t=clock64(); while(clock64()-t<n); }
#define P(x) do{cudaError_t e=(x); printf("%-60s %s\n", #x, cudaGetErrorName(e));}while(0)
int main(){
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t a,b,c; cudaEventCreate(&a); cudaEventCreate(&b); cudaEventCreate(&c);
  float ms=-1;
  // plain stream records
  cudaEventRecord(a,s); spin<<<1,1,0,s>>>(1000000); cudaEventRecord(b,s); cudaStreamSynchronize(s);
  P(cudaEventElapsedTime(&ms,a,b)); printf("  stream a->b %.3f ms\n", ms);
  P(cudaEventElapsedTime(&ms,a,a)); printf("  stream a->a %.3f ms\n", ms);
  // explicit graph with record nodes
  cudaGraph_t g; cudaGraphCreate(&g,0);
  cudaGraphNode_t n1,n2,n3;
  P(cudaGraphAddEventRecordNode(&n1,g,NULL,0,a));
  long long n=1000000; void* args[]={&n};
  cudaKernelNodeParams kp={}; kp.func=(void*)spin; kp.gridDim=dim3(1); kp.blockDim=dim3(1); kp.kernelParams=args;
  P(cudaGraphAddKernelNode(&n2,g,&n1,1,&kp));
  P(cudaGraphAddEventRecordNode(&n3,g,&n2,1,b));
  cudaGraphExec_t ge; P(cudaGraphInstantiate(&ge,g,0));
  P(cudaGraphLaunch(ge,s)); cudaStreamSynchronize(s);
  ms=-1; P(cudaEventElapsedTime(&ms,a,b)); printf("  explicit graph a->b %.3f ms\n", ms);
  ms=-1; P(cudaEventElapsedTime(&ms,a,a)); printf("  explicit graph a->a %.3f ms\n", ms);
  // capture with external records
  cudaGraph_t g2; cudaGraphExec_t ge2;
  P(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  P(cudaEventRecordWithFlags(a,s,cudaEventRecordExternal));
  spin<<<1,1,0,s>>>(1000000);
  P(cudaEventRecordWithFlags(c,s,cudaEventRecordExternal));
  P(cudaStreamEndCapture(s,&g2));
  P(cudaGraphInstantiate(&ge2,g2,0));
  P(cudaGraphLaunch(ge2,s)); cudaStreamSynchronize(s);
  ms=-1; P(cudaEventElapsedTime(&ms,a,c)); printf("  captured external a->c %.3f ms\n", ms);
  // a record node event vs a stream record
  cudaEventRecord(b,s); cudaStreamSynchronize(s);
  ms=-1; P(cudaEventElapsedTime(&ms,a,b)); printf("  graph a -> stream b %.3f ms\n", ms);
  return 0;
}
