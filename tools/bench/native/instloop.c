// instloop.c: the native side of BenchmarkInstantiate and
// BenchmarkUpdateSplit, loaded into the Go test process: cuGraphInstantiate
// (and destroy) and cuGraphExecUpdate loops in C on the same CUgraphs, so
// the only difference left is the Go path above the driver. The benchmarks
// call each loop for one iteration per timed iteration, on the thread that
// runs the API's side, with the context current there; for updates they
// pass the graph of that update as both g and h, alternating the two
// graphs as the API's side does, so both sides change every node's
// parameters at every update.
//
//	gcc -O2 -shared -fPIC -I/usr/local/cuda/include -o /tmp/libinstloop.so instloop.c -L/usr/local/cuda/lib64/stubs -lcuda
//	GG_INST_LOOP=/tmp/libinstloop.so gpugraph.test -test.bench Instantiate
#include <cuda.h>

// gg_instantiate_loop instantiates g and destroys the result n times.
int gg_instantiate_loop(CUgraph g, int n) {
  for (int i = 0; i < n; i++) {
    CUgraphExec e;
    CUresult r = cuGraphInstantiate(&e, g, 0);
    if (r != CUDA_SUCCESS) return (int)r;
    r = cuGraphExecDestroy(e);
    if (r != CUDA_SUCCESS) return (int)r;
  }
  return 0;
}

// gg_update_loop makes n updates of e: from g, then h, then g, ... (update
// i is from h when i is odd). With n = 1 the update is from g alone.
int gg_update_loop(CUgraphExec e, CUgraph g, CUgraph h, int n) {
  for (int i = 0; i < n; i++) {
    CUgraphExecUpdateResultInfo info;
    CUresult r = cuGraphExecUpdate(e, (i & 1) ? h : g, &info);
    if (r != CUDA_SUCCESS) return (int)r;
  }
  return 0;
}
