// updorder.cu asks the CUDA driver which node cudaGraphExecUpdate names
// when several nodes of the new graph refuse the update. Differential inputs
// contradicted both "the newest node" and "the oldest node": the rule may
// depend on the kind of refusal, on the topology or on child graphs. Each
// case builds graph A, instantiates it, builds B (A's structure with the
// changes marked below) and updates; one line per case: the result and the
// node named (its index in the case's spec).
//
// Node letters (deps by index; B differs from A only where noted):
//   A      alloc node (4 KiB)              F<i>   free node of alloc i
//   M<i>   memset 1D on alloc i (no change; refused when B frees i)
//   S      2D memset on cudaMalloc memory, width 4 -> 8 (refused: shape)
//   H      2D memset on cudaMalloc memory, height 2 -> 1
//   V      2D memset on cudaMalloc memory, value 1 -> 2 (allowed)
//   K      memcpy cudaMalloc -> cudaMalloc, source -> pinned host (kind)
//   G<i>   memcpy alloc i -> cudaMalloc, source -> pinned host
//   C      child graph node holding one S
//   X      empty node
//
//	nvcc -O2 -o updorder tools/probe/updorder.cu && ./updorder
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define MUST(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { printf("FATAL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); exit(1); } } while (0)

static char *buf, *pinned;

struct N { char k; int arg; std::vector<int> deps; };

// parse "S; A; M1:1; F1:2" : letter, optional alloc index, ':' deps (comma separated)
static std::vector<N> parse(const char* spec) {
  std::vector<N> v;
  std::string s(spec);
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ';')) i++;
    if (i >= s.size()) break;
    N n{s[i++], -1, {}};
    if (i < s.size() && isdigit(s[i])) n.arg = (int)strtol(s.c_str() + i, nullptr, 10);
    while (i < s.size() && isdigit(s[i])) i++;
    if (i < s.size() && s[i] == ':') {
      i++;
      while (i < s.size() && isdigit(s[i])) {
        n.deps.push_back((int)strtol(s.c_str() + i, nullptr, 10));
        while (i < s.size() && isdigit(s[i])) i++;
        if (i < s.size() && s[i] == ',') i++;
      }
    }
    v.push_back(n);
  }
  return v;
}

static cudaMemsetParams ms2d(char* dst, bool b, char k) {
  cudaMemsetParams p = {};
  p.dst = dst; p.value = (k == 'V' && b) ? 2 : 1; p.elementSize = 1;
  p.width = (k == 'S' && b) ? 8 : 4; p.height = (k == 'H' && b) ? 1 : 2; p.pitch = 64;
  return p;
}

// build makes the graph of spec, variant B or A; nodes[i] is spec i's node,
// child[i] the node inside C's child graph.
static cudaGraph_t build(const std::vector<N>& spec, bool b, std::vector<cudaGraphNode_t>& nodes, std::vector<cudaGraphNode_t>& inChild) {
  cudaGraph_t g;
  MUST(cudaGraphCreate(&g, 0));
  std::vector<void*> ptr(spec.size(), nullptr);
  nodes.assign(spec.size(), nullptr);
  inChild.assign(spec.size(), nullptr);
  for (size_t i = 0; i < spec.size(); i++) {
    const N& n = spec[i];
    std::vector<cudaGraphNode_t> d;
    for (int j : n.deps) d.push_back(nodes[j]);
    const cudaGraphNode_t* dp = d.empty() ? nullptr : d.data();
    char* slot = buf + 4096 * (i + 1);
    switch (n.k) {
    case 'A': {
      cudaMemAllocNodeParams ap = {};
      ap.poolProps.allocType = cudaMemAllocationTypePinned;
      ap.poolProps.location.type = cudaMemLocationTypeDevice;
      ap.poolProps.location.id = 0;
      ap.bytesize = 4096;
      MUST(cudaGraphAddMemAllocNode(&nodes[i], g, dp, d.size(), &ap));
      ptr[i] = ap.dptr;
      break;
    }
    case 'F': MUST(cudaGraphAddMemFreeNode(&nodes[i], g, dp, d.size(), ptr[n.arg])); break;
    case 'M': {
      cudaMemsetParams p = {};
      p.dst = ptr[n.arg]; p.value = 3; p.elementSize = 1; p.width = 64; p.height = 1;
      MUST(cudaGraphAddMemsetNode(&nodes[i], g, dp, d.size(), &p));
      break;
    }
    case 'S': case 'H': case 'V': {
      cudaMemsetParams p = ms2d(slot, b, n.k);
      MUST(cudaGraphAddMemsetNode(&nodes[i], g, dp, d.size(), &p));
      break;
    }
    case 'K':
      MUST(cudaGraphAddMemcpyNode1D(&nodes[i], g, dp, d.size(), slot, b ? pinned : slot + 2048, 64, b ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice));
      break;
    case 'G':
      MUST(cudaGraphAddMemcpyNode1D(&nodes[i], g, dp, d.size(), slot, b ? pinned : (char*)ptr[n.arg], 64, b ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice));
      break;
    case 'C': {
      cudaGraph_t c;
      MUST(cudaGraphCreate(&c, 0));
      cudaGraphNode_t s;
      cudaMemsetParams p = ms2d(slot, b, 'S');
      MUST(cudaGraphAddMemsetNode(&s, c, nullptr, 0, &p));
      MUST(cudaGraphAddChildGraphNode(&nodes[i], g, dp, d.size(), c));
      cudaGraph_t cc;
      MUST(cudaGraphChildGraphNodeGetGraph(nodes[i], &cc));
      size_t cnt = 1;
      MUST(cudaGraphGetNodes(cc, &inChild[i], &cnt));
      cudaGraphDestroy(c);
      break;
    }
    case 'X': MUST(cudaGraphAddEmptyNode(&nodes[i], g, dp, d.size())); break;
    default: printf("bad letter %c\n", n.k); exit(1);
    }
  }
  return g;
}

static const char* resultName(cudaGraphExecUpdateResult r) {
  switch (r) {
  case cudaGraphExecUpdateSuccess: return "Success";
  case cudaGraphExecUpdateError: return "Error";
  case cudaGraphExecUpdateErrorTopologyChanged: return "TopologyChanged";
  case cudaGraphExecUpdateErrorNodeTypeChanged: return "NodeTypeChanged";
  case cudaGraphExecUpdateErrorFunctionChanged: return "FunctionChanged";
  case cudaGraphExecUpdateErrorParametersChanged: return "ParametersChanged";
  case cudaGraphExecUpdateErrorNotSupported: return "NotSupported";
  case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return "UnsupportedFunctionChange";
  case cudaGraphExecUpdateErrorAttributesChanged: return "AttributesChanged";
  }
  return "?";
}

static void run(const char* spec) {
  std::vector<N> v = parse(spec);
  std::vector<cudaGraphNode_t> na, nb, ca, cb;
  cudaGraph_t ga = build(v, false, na, ca);
  cudaGraphExec_t e;
  MUST(cudaGraphInstantiate(&e, ga, 0));
  cudaGraph_t gb = build(v, true, nb, cb);
  cudaGraphExecUpdateResultInfo info = {};
  cudaError_t err = cudaGraphExecUpdate(e, gb, &info);
  cudaGetLastError();
  char named[64] = "none";
  for (size_t i = 0; i < v.size(); i++) {
    if (info.errorNode && info.errorNode == nb[i]) snprintf(named, sizeof named, "#%zu %c", i, v[i].k);
    if (info.errorNode && cb[i] && info.errorNode == cb[i]) snprintf(named, sizeof named, "#%zu.c#0 (S in C)", i);
  }
  if (info.errorNode && !strcmp(named, "none")) snprintf(named, sizeof named, "an unknown node");
  printf("%-40s %-28s %-18s names %s\n", spec, cudaGetErrorName(err), resultName(info.result), named);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(ga);
  cudaGraphDestroy(gb);
}

int main() {
  int drv = 0;
  cudaDriverGetVersion(&drv);
  printf("updorder.cu: driver %d\n", drv);
  MUST(cudaMalloc(&buf, 1 << 20));
  MUST(cudaMallocHost(&pinned, 4096));
  const char* specs[] = {
      // one refusal at a time
      "S", "H", "V", "K", "A; G0:0; F0:1", "A; M0:0; F0:1", "A; M0:0", "C",
      // a shape change and a memset on a freed allocation
      "S; A; M1:1; F1:2", "A; M0:0; F0:1; S", "A; M0:0; S:1; F0:2", "S; A:0; M1:1; F1:2",
      "X; A:0; M1:1; F1:2; S:0", "X; S:0; A:0; M2:2; F2:3",
      // a height change and a memset on a freed allocation
      "H; A; M1:1; F1:2", "A; M0:0; F0:1; H",
      // a kind change (cudaMalloc memory) and a memset on a freed allocation
      "K; A; M1:1; F1:2", "A; M0:0; F0:1; K", "A; M0:0; K:1; F0:1", "A; K:0; M0:0; F0:2",
      // a graph-memory source leaving graph memory and a memset on a freed allocation
      "A; M0:0; G0:1; F0:2", "A; G0:0; M0:1; F0:2", "A; M0:0; G0:0; F0:1,2", "A; G0:0; M0:0; F0:1,2",
      // two memsets on freed allocations, two shape changes, a shape and a kind change
      "A; M0:0; M0:0; F0:1,2", "A; A; M1:1; M0:0; F0:3; F1:2", "S; S", "S; S:0", "K; S", "S; K", "K; S:0", "S; K:0",
      // a child graph's shape change
      "C; A; M1:1; F1:2", "A; M0:0; F0:1; C", "S; C", "C; S", "A; M0:0; F0:1; C:2", "C; A:0; M1:1; F1:2",
  };
  for (const char* s : specs) run(s);
  return 0;
}
