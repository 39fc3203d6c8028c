// userobj.cu asks the CUDA driver what the documentation leaves open about
// user objects: which arguments are refused and with which error (the
// missing cudaUserObjectNoDestructorSync flag above all), whether a graph
// may release more references than it owns, on which thread and when
// destructors run (inside the API call that releases the last reference?),
// whether releases are deferred past a queued launch, how child graph nodes
// and stream capture hold references, and what a destructor that calls the
// API gets. Calls whose outcome may be undefined behaviour (releasing
// references nobody owns, API calls from a destructor) run in a child
// process each, under a timeout. Output: docs/driver-userobj.txt.
//
//	nvcc -O2 -o userobj userobj.cu -lpthread && ./userobj
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <sys/syscall.h>
#include <unistd.h>
#include <cuda_runtime.h>

#define SAY(name, call) do { cudaError_t e_ = (call); printf("%-72s %s\n", name, cudaGetErrorName(e_)); cudaGetLastError(); } while (0)
#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %d %s: %s\n", __LINE__, #call, cudaGetErrorName(e_)); return 1; } } while (0)

static long tid() { return syscall(SYS_gettid); }

// A destructor that counts its runs and notes its thread.
struct Obj {
  std::atomic<int> runs{0};
  std::atomic<long> thread{0};
  std::atomic<int> inCall{0}; // set while the main thread is inside an API call
  std::atomic<int> ranInCall{0};
};

static void destroy(void* p) {
  Obj* o = (Obj*)p;
  o->thread = tid();
  o->ranInCall = o->inCall.load();
  o->runs++;
}

// waitRun waits up to a second for the destructor and says what happened.
static void report(const char* what, Obj* o, int want) {
  for (int i = 0; i < 1000 && o->runs.load() < want; i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  long t = o->thread.load();
  printf("%-72s runs %d%s%s\n", what, o->runs.load(),
         t == 0 ? "" : t == tid() ? ", on the calling thread" : ", on another thread",
         o->ranInCall.load() ? " inside the API call" : "");
}

static cudaUserObject_t mk(Obj* o, unsigned refs) {
  cudaUserObject_t u = nullptr;
  cudaError_t e = cudaUserObjectCreate(&u, o, destroy, refs, cudaUserObjectNoDestructorSync);
  if (e != cudaSuccess) { printf("FATAL cudaUserObjectCreate: %s\n", cudaGetErrorName(e)); exit(1); }
  return u;
}

static void gate(void* p) { while (!((std::atomic<int>*)p)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1)); }

// Risky cases, each in its own process (argv[1]).
static int risky(const char* mode) {
  cudaFree(0);
  Obj o;
  if (!strcmp(mode, "over-release")) {
    cudaUserObject_t u = mk(&o, 2);
    SAY("release 4 references of an object with 2", cudaUserObjectRelease(u, 4));
    report("  destructor", &o, 1);
    SAY("  then retain 1", cudaUserObjectRetain(u, 1));
    SAY("  then release 1", cudaUserObjectRelease(u, 1));
    report("  destructor", &o, 1);
  } else if (!strcmp(mode, "use-after-release")) {
    cudaUserObject_t u = mk(&o, 1);
    SAY("release the only reference", cudaUserObjectRelease(u, 1));
    report("  destructor", &o, 1);
    SAY("  then retain 1 (handle dead)", cudaUserObjectRetain(u, 1));
    cudaGraph_t g; cudaGraphCreate(&g, 0);
    SAY("  then graph retain 1 (handle dead)", cudaGraphRetainUserObject(g, u, 1, 0));
  } else if (!strcmp(mode, "api-in-destructor")) {
    static std::atomic<int> step{0};
    static cudaError_t got1, got2;
    cudaUserObject_t u = nullptr;
    cudaError_t e = cudaUserObjectCreate(&u, nullptr, [](void*) {
      step = 1;
      cudaStream_t s;
      got1 = cudaStreamCreate(&s);
      got2 = cudaDeviceSynchronize();
      step = 2;
    }, 1, cudaUserObjectNoDestructorSync);
    if (e != cudaSuccess) { printf("FATAL create: %s\n", cudaGetErrorName(e)); return 1; }
    SAY("release the last reference of an object whose destructor calls the API", cudaUserObjectRelease(u, 1));
    for (int i = 0; i < 2000 && step.load() < 2; i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (step.load() < 2) printf("  destructor still inside the API calls after 2 s (step %d): blocked\n", step.load());
    else printf("  cudaStreamCreate in the destructor: %s, cudaDeviceSynchronize: %s\n", cudaGetErrorName(got1), cudaGetErrorName(got2));
  } else {
    printf("unknown mode %s\n", mode);
    return 2;
  }
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1) return risky(argv[1]);
  int drv; cudaDriverGetVersion(&drv);
  printf("driver %d\n", drv);
  MUST(cudaFree(0));
  cudaStream_t s; MUST(cudaStreamCreate(&s));

  printf("\n== arguments ==\n");
  {
    Obj o;
    cudaUserObject_t u = nullptr;
    SAY("create with flags 0 (no cudaUserObjectNoDestructorSync)", cudaUserObjectCreate(&u, &o, destroy, 1, 0));
    SAY("create with flags 2", cudaUserObjectCreate(&u, &o, destroy, 1, 2));
    SAY("create with flags NoDestructorSync|2", cudaUserObjectCreate(&u, &o, destroy, 1, cudaUserObjectNoDestructorSync | 2));
    SAY("create with initialRefcount 0", cudaUserObjectCreate(&u, &o, destroy, 0, cudaUserObjectNoDestructorSync));
    SAY("create with initialRefcount INT_MAX+1", cudaUserObjectCreate(&u, &o, destroy, (unsigned)INT_MAX + 1, cudaUserObjectNoDestructorSync));
    SAY("create with a NULL destroy callback", cudaUserObjectCreate(&u, &o, nullptr, 1, cudaUserObjectNoDestructorSync));
    SAY("create with initialRefcount INT_MAX", cudaUserObjectCreate(&u, &o, destroy, INT_MAX, cudaUserObjectNoDestructorSync));
    SAY("  release INT_MAX", cudaUserObjectRelease(u, INT_MAX));
    report("  destructor", &o, 1);
  }
  {
    Obj o;
    cudaUserObject_t u = mk(&o, 2);
    SAY("retain 0", cudaUserObjectRetain(u, 0));
    SAY("release 0", cudaUserObjectRelease(u, 0));
    SAY("retain INT_MAX+1", cudaUserObjectRetain(u, (unsigned)INT_MAX + 1));
    cudaGraph_t g, other; MUST(cudaGraphCreate(&g, 0)); MUST(cudaGraphCreate(&other, 0));
    SAY("graph retain with flags 2", cudaGraphRetainUserObject(g, u, 1, 2));
    SAY("graph retain 0", cudaGraphRetainUserObject(g, u, 0, 0));
    SAY("graph retain 1 (move)", cudaGraphRetainUserObject(g, u, 1, cudaGraphUserObjectMove));
    SAY("graph release 0", cudaGraphReleaseUserObject(g, u, 0));
    SAY("graph release 2 of the 1 it owns", cudaGraphReleaseUserObject(g, u, 2));
    report("  destructor (1 reference left with the caller if refused)", &o, 1);
    SAY("another graph releases 1 it does not own", cudaGraphReleaseUserObject(other, u, 1));
    report("  destructor", &o, 1);
    SAY("graph retain 1 more (new)", cudaGraphRetainUserObject(g, u, 1, 0));
    SAY("graph release INT_MAX (owns 2)", cudaGraphReleaseUserObject(g, u, INT_MAX));
    report("  destructor", &o, 1);
    SAY("caller releases its 1", cudaUserObjectRelease(u, 1));
    report("  destructor", &o, 1);
    cudaGraphDestroy(g); cudaGraphDestroy(other);
    report("  destructor after destroying the graphs", &o, 1);
  }

  printf("\n== where and when destructors run ==\n");
  {
    Obj o; o.inCall = 1;
    cudaUserObject_t u = mk(&o, 1);
    cudaUserObjectRelease(u, 1);
    o.inCall = 0;
    report("cudaUserObjectRelease of the last reference", &o, 1);
  }
  {
    Obj o;
    cudaUserObject_t u = mk(&o, 1);
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    MUST(cudaGraphRetainUserObject(g, u, 1, cudaGraphUserObjectMove));
    o.inCall = 1;
    SAY("cudaGraphDestroy of the only owner", cudaGraphDestroy(g));
    o.inCall = 0;
    report("  destructor", &o, 1);
  }
  {
    Obj o;
    cudaUserObject_t u = mk(&o, 1);
    static std::atomic<int> opened{0};
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    cudaHostNodeParams hp = {gate, &opened};
    cudaGraphNode_t hn; MUST(cudaGraphAddHostNode(&hn, g, nullptr, 0, &hp));
    MUST(cudaGraphRetainUserObject(g, u, 1, cudaGraphUserObjectMove));
    cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, g, 0));
    MUST(cudaGraphDestroy(g));
    report("graph destroyed, exec owns a reference", &o, 1);
    MUST(cudaGraphLaunch(e, s));
    SAY("cudaGraphExecDestroy with its launch blocked", cudaGraphExecDestroy(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    printf("%-72s runs %d\n", "  destructor 200 ms later, launch still blocked", o.runs.load());
    opened = 1;
    MUST(cudaStreamSynchronize(s));
    report("  after the launch finished", &o, 1);
  }

  printf("\n== clone, child graphs, instantiate ==\n");
  {
    Obj o;
    cudaUserObject_t u = mk(&o, 1);
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    cudaGraphNode_t en; MUST(cudaGraphAddEmptyNode(&en, g, nullptr, 0));
    MUST(cudaGraphRetainUserObject(g, u, 2, 0)); // total 3
    cudaGraph_t c; MUST(cudaGraphClone(&c, g));
    MUST(cudaGraphDestroy(g));
    MUST(cudaUserObjectRelease(u, 1));
    report("clone of a graph owning 2, original destroyed, caller released", &o, 1);
    SAY("clone releases 3 (owns 2 if copies keep multiplicity)", cudaGraphReleaseUserObject(c, u, 3));
    SAY("clone releases 1", cudaGraphReleaseUserObject(c, u, 1));
    report("  destructor", &o, 1);
    SAY("clone releases 1 more", cudaGraphReleaseUserObject(c, u, 1));
    report("  destructor", &o, 1);
    cudaGraphDestroy(c);
  }
  {
    Obj o;
    cudaUserObject_t u = mk(&o, 1);
    cudaGraph_t child, parent; MUST(cudaGraphCreate(&child, 0)); MUST(cudaGraphCreate(&parent, 0));
    cudaGraphNode_t en; MUST(cudaGraphAddEmptyNode(&en, child, nullptr, 0));
    MUST(cudaGraphRetainUserObject(child, u, 1, cudaGraphUserObjectMove));
    cudaGraphNode_t cn; MUST(cudaGraphAddChildGraphNode(&cn, parent, nullptr, 0, child));
    MUST(cudaGraphDestroy(child));
    report("child graph node added, child destroyed", &o, 1);
    SAY("parent releases the child's reference", cudaGraphReleaseUserObject(parent, u, 1));
    report("  destructor", &o, 1);
    cudaGraph_t emb; MUST(cudaGraphChildGraphNodeGetGraph(cn, &emb));
    SAY("embedded graph retains 1 more (new)", cudaGraphRetainUserObject(emb, u, 1, 0));
    SAY("embedded graph releases 1", cudaGraphReleaseUserObject(emb, u, 1));
    cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, parent, 0));
    SAY("cudaGraphDestroyNode of the child graph node", cudaGraphDestroyNode(cn));
    report("  destructor (the exec still owns one)", &o, 1);
    MUST(cudaGraphExecDestroy(e));
    report("  after cudaGraphExecDestroy", &o, 1);
    cudaGraphDestroy(parent);
  }
  {
    Obj o, o2;
    cudaUserObject_t u = mk(&o, 1), u2 = mk(&o2, 1);
    cudaGraph_t a, b, child; MUST(cudaGraphCreate(&a, 0)); MUST(cudaGraphCreate(&b, 0)); MUST(cudaGraphCreate(&child, 0));
    cudaGraphNode_t n1, n2; MUST(cudaGraphAddEmptyNode(&n1, child, nullptr, 0));
    MUST(cudaGraphRetainUserObject(child, u, 1, cudaGraphUserObjectMove));
    MUST(cudaGraphAddChildGraphNode(&n1, a, nullptr, 0, child));
    cudaGraph_t child2; MUST(cudaGraphCreate(&child2, 0)); MUST(cudaGraphAddEmptyNode(&n2, child2, nullptr, 0));
    MUST(cudaGraphRetainUserObject(child2, u2, 1, cudaGraphUserObjectMove));
    MUST(cudaGraphAddChildGraphNode(&n2, b, nullptr, 0, child2));
    cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, a, 0));
    MUST(cudaGraphDestroy(child)); MUST(cudaGraphDestroy(a));
    SAY("cudaGraphExecChildGraphNodeSetParams(e, n1, child2)", cudaGraphExecChildGraphNodeSetParams(e, n1, child2));
    report("  first object: its references were the exec's and a's (destroyed)", &o, 1);
    MUST(cudaGraphDestroy(child2)); MUST(cudaGraphDestroy(b));
    report("  second object after destroying its graphs (the exec copied one?)", &o2, 1);
    MUST(cudaGraphExecDestroy(e));
    report("  second object after cudaGraphExecDestroy", &o2, 1);
  }

  printf("\n== stream capture ==\n");
  {
    Obj o;
    cudaUserObject_t u = mk(&o, 1);
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus st; cudaGraph_t cg = nullptr; const cudaGraphNode_t* deps; size_t nd;
    MUST(cudaStreamGetCaptureInfo(s, &st, nullptr, &cg, &deps, nullptr, &nd));
    SAY("retain on the capturing graph (move)", cudaGraphRetainUserObject(cg, u, 1, cudaGraphUserObjectMove));
    cudaGraph_t g; MUST(cudaStreamEndCapture(s, &g));
    report("capture ended", &o, 1);
    MUST(cudaGraphDestroy(g));
    report("  captured graph destroyed", &o, 1);
  }
  {
    Obj o;
    cudaUserObject_t u = mk(&o, 1);
    cudaGraph_t g; MUST(cudaGraphCreate(&g, 0));
    cudaGraphNode_t en; MUST(cudaGraphAddEmptyNode(&en, g, nullptr, 0));
    MUST(cudaGraphRetainUserObject(g, u, 1, cudaGraphUserObjectMove));
    cudaGraphExec_t e; MUST(cudaGraphInstantiate(&e, g, 0));
    MUST(cudaGraphDestroy(g));
    MUST(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SAY("launch an exec owning a reference into a capture", cudaGraphLaunch(e, s));
    cudaGraph_t cg = nullptr;
    SAY("  end capture", cudaStreamEndCapture(s, &cg));
    MUST(cudaGraphExecDestroy(e));
    report("  exec destroyed: does the captured graph own a copy?", &o, 1);
    if (cg) cudaGraphDestroy(cg);
    report("  captured graph destroyed", &o, 1);
  }

  printf("\n== risky calls, each in a child process ==\n");
  fflush(stdout);
  for (const char* m : {"over-release", "use-after-release", "api-in-destructor"}) {
    printf("-- %s\n", m);
    fflush(stdout);
    std::string cmd = std::string("timeout 20 ") + argv[0] + " " + m;
    int rc = system(cmd.c_str());
    printf("   exit status %d\n", rc);
  }
  return 0;
}
