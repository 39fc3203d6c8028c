// launchloop.c: the native side of BenchmarkCUDALaunchPath, loaded into the
// Go test process: the same cuLaunchKernel loop in C, on the same function,
// stream and thread, so the only difference left is the Go call path.
//
//	gcc -O2 -shared -fPIC -I/usr/local/cuda/include -o /tmp/liblaunchloop.so launchloop.c -lcuda
//	GG_LAUNCH_LOOP=/tmp/liblaunchloop.so gpugraph.test -test.bench CUDALaunchPath
#include <cuda.h>

int gg_launch_loop(CUfunction f, CUstream s, int n) {
  for (int i = 0; i < n; i++) {
    CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, 0, 0);
    if (r != CUDA_SUCCESS) return (int)r;
  }
  return 0;
}
