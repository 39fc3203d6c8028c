// launchloop.c: the native side of BenchmarkCUDALaunchPath, loaded into the
// Go test process: the same cuLaunchKernel and cuGraphLaunch loops in C, on
// the same function, executable graph, stream and thread, so the only
// difference left is the Go call path.
//
//	gcc -O2 -shared -fPIC -I/usr/local/cuda/include -o /tmp/liblaunchloop.so launchloop.c -L/usr/local/cuda/lib64/stubs -lcuda
//	GG_LAUNCH_LOOP=/tmp/liblaunchloop.so gpugraph.test -test.bench CUDALaunchPath
#include <cuda.h>

// gg_launch_loop launches f (no arguments, one block of one thread) into s
// n times; it returns the first CUresult other than CUDA_SUCCESS, or 0.
int gg_launch_loop(CUfunction f, CUstream s, int n) {
  for (int i = 0; i < n; i++) {
    CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, 0, 0);
    if (r != CUDA_SUCCESS) return (int)r;
  }
  return 0;
}

// gg_graph_launch_loop launches e into s n times; it returns the first
// CUresult other than CUDA_SUCCESS, or 0.
int gg_graph_launch_loop(CUgraphExec e, CUstream s, int n) {
  for (int i = 0; i < n; i++) {
    CUresult r = cuGraphLaunch(e, s);
    if (r != CUDA_SUCCESS) return (int)r;
  }
  return 0;
}

// gg_ctx_set_current makes c the calling thread's current context, as the
// Go side's thread has it for its launches.
int gg_ctx_set_current(CUcontext c) { return (int)cuCtxSetCurrent(c); }
