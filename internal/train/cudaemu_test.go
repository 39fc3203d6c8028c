package train

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestCUDABodiesOnCPU runs every kernel's CUDA body on the CPU and compares
// it with the Go body on the host backend, so the CUDA code is checked
// where there is no GPU. The CUDA sources are compiled with g++ (C++20)
// after a prelude that maps CUDA's names onto C++: blockDim threads
// (std::thread) run every block in turn, sharing function-static arrays as
// __shared__ memory; __syncthreads() is a std::barrier, which also
// separates one block from the next. A warp's 32 threads share a barrier
// of their own: __syncwarp() waits on it, and __shfl_xor_sync() exchanges
// values through a word per thread between two such waits; atomics are
// GCC's. Every buffer is its own heap allocation and the program is built
// with AddressSanitizer, so an access outside a buffer fails the test. It
// skips where g++ cannot build the prelude. The GPU's memory ordering
// (what __threadfence() guarantees between blocks: here blocks run one
// after another) and NVRTC's own diagnostics are out of its reach;
// TestCUDA* cover those on a GPU.
func TestCUDABodiesOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("short: builds a C++ program")
	}
	bin := buildEmulator(t)
	_, s := openHost(t)
	r := newRand(11, 12)
	seq := func(n int) []float32 { return randVec(r, n) }
	labels := func(n, classes int) []int32 {
		y := make([]int32, n)
		for i := range y {
			y[i] = int32(r.IntN(classes))
		}
		return y
	}
	type tc struct {
		name        string
		k           *gg.Kernel
		grid, block gg.Dim3
		args        []any // []float32 and []int32 are buffers
	}
	var cases []tc
	// operand is a GEMM operand of n elements: float32, or bfloat16.
	operand := func(n int, bf16 bool) any {
		v := seq(n)
		if !bf16 {
			return v
		}
		_, h := stored(v, BFloat16, MathFP32)
		return h
	}
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			for i, sz := range [][4]int{{17, 33, 65, 0}, {70, 130, 20, 2}, {1, 1, 1, 0}, {64, 64, 32, 1}} {
				m, n, k, pad := sz[0], sz[1], sz[2], sz[3]
				ar, lda := layout(tA, m, k, pad)
				br, ldb := layout(tB, k, n, pad)
				ldc := n + pad
				alpha, beta := float32(1), float32(0)
				if pad > 0 {
					alpha, beta = 0.5, -2
				}
				// Each size with another conversion: none, TF32, bf16×bf16,
				// bf16×f32 (the last with TF32 rounding of B).
				aBF, bBF, tf32 := i >= 2, i == 2, i == 1 || i == 3
				cases = append(cases, tc{fmt.Sprintf("gemm/tA=%v,tB=%v,%dx%dx%d,bf16=%v,%v,tf32=%v", tA, tB, m, n, k, aBF, bBF, tf32), gemmKernel,
					gg.Dim2((n+tileN-1)/tileN, (m+tileM-1)/tileM), gg.Dim1(gemmThreads),
					[]any{b2i(tA), b2i(tB), m, n, k, alpha, operand(ar*lda, aBF), lda, operand(br*ldb, bBF), ldb, beta, seq(m * ldc), ldc,
						b2i(aBF), b2i(bBF), b2i(tf32)}})
			}
		}
	}
	cases = append(cases,
		tc{"bias_act/relu", biasAct, gg.Dim1(5), gg.Dim1(threads), []any{seq(5 * 300), seq(5 * 300), seq(300), 5, 300, 1, 0, 0}},
		tc{"bias_act/linear,grid-stride", biasAct, gg.Dim1(3), gg.Dim1(threads), []any{seq(7 * 10), seq(7 * 10), seq(10), 7, 10, 0, 0, 0}},
		tc{"bias_act/relu,bf16", biasAct, gg.Dim1(4), gg.Dim1(threads), []any{seq(9 * 300), make([]uint16, 9*300), seq(300), 9, 300, 1, 1, 0}},
		tc{"bias_act/relu,bf16 bias and out", biasAct, gg.Dim1(4), gg.Dim1(threads), []any{seq(9 * 300), make([]uint16, 9*300), operand(300, true), 9, 300, 1, 1, 1}},
		tc{"cast_bf16", castBF16, gg.Dim1(2), gg.Dim1(threads), []any{roundingValues(1000), make([]uint16, 1000), 1000}},
		tc{"col_sum", colSum, gg.Dim1(3), gg.Dim1(colBlock * 8), []any{seq(37 * 70), 0, seq(70), 37, 70}},
		tc{"col_sum/bf16", colSum, gg.Dim1(3), gg.Dim1(colBlock * 8), []any{bf16s(seq(37 * 70)), 1, seq(70), 37, 70}},
		tc{"relu_bwd", reluBwd, gg.Dim1(3), gg.Dim1(64), []any{seq(41 * 70), seq(41 * 70), 0, seq(41 * 70), 0, 41 * 70}},
		tc{"relu_bwd/bf16", reluBwd, gg.Dim1(3), gg.Dim1(64), []any{seq(41 * 70), bf16s(seq(41 * 70)), 1, make([]uint16, 41*70), 1, 41 * 70}},
		tc{"relu_bwd/f32 act,bf16 dz", reluBwd, gg.Dim1(1), gg.Dim1(32), []any{seq(9 * 30), seq(9 * 30), 0, make([]uint16, 9*30), 1, 9 * 30}},
		tc{"sgd", sgdUpdate, elemGrid(777), gg.Dim1(threads), []any{seq(777), seq(777), gg.DevicePtr(0), 777, float32(0.1)}},
		tc{"sgd/shadow", sgdUpdate, gg.Dim1(2), gg.Dim1(threads), []any{seq(777), seq(777), make([]uint16, 777), 777, float32(0.1)}},
	)
	for _, sz := range [][3]int{{100, 7, 0}, {40, 3, 300}, {37, 100, 0}, {100, 7, 3}, {16, 40, 0}} {
		rows, cols, grid := sz[0], sz[1], sz[2]
		if grid == 0 {
			grid = lossGrid(rows)
		}
		for _, bf := range []int{0, 1} {
			dz := any(make([]float32, rows*cols))
			if bf == 1 {
				dz = make([]uint16, rows*cols)
			}
			cases = append(cases, tc{fmt.Sprintf("softmax_xent/%dx%d,grid %d,bf16=%d", rows, cols, grid, bf), softmaxXent, gg.Dim1(grid), gg.Dim1(threads),
				[]any{seq(rows * cols), labels(rows, cols), dz, bf, seq(1), seq(grid), []int32{0}, rows, cols}})
		}
	}
	cases = append(cases,
		tc{"softmax_xent/bad label", softmaxXent, gg.Dim1(1), gg.Dim1(threads),
			[]any{seq(5 * 3), []int32{0, 1, 2, 3, 1}, make([]float32, 5*3), 0, seq(1), seq(1), []int32{0}, 5, 3}},
	)
	for _, tick := range []int{0, 1} {
		for _, shadow := range []any{gg.DevicePtr(0), make([]uint16, 900)} {
			cases = append(cases, tc{fmt.Sprintf("adam/tick=%d,shadow=%v", tick, shadow != gg.DevicePtr(0)), adamUpdate, gg.Dim1(2), gg.Dim1(threads),
				[]any{seq(900), seq(900), seq(900), vabs(seq(900)), []int32{3, 0}, shadow,
					900, float32(0.01), float32(AdamBeta1), float32(AdamBeta2), float32(AdamEpsilon), tick}})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := runGoBody(t, s, c.k, c.grid, c.block, c.args)
			got := runEmulated(t, bin, c.k, c.grid, c.block, c.args)
			for i := range want {
				compareBuffer(t, i, c.args[i], want[i], got[i])
			}
		})
	}
}

// compareBuffer compares buffer argument i after the Go body (want) and
// the CUDA body (got): int32s exactly, float32s within 1e-5 relative,
// bfloat16s within one unit of the last place (float32 sums that differ in
// their last bits may round to neighbouring bfloat16s).
func compareBuffer(t *testing.T, i int, arg any, want, got []byte) {
	t.Helper()
	le := binary.LittleEndian
	switch arg.(type) {
	case []int32:
		for j := 0; j+4 <= len(want); j += 4 {
			if w, g := int32(le.Uint32(want[j:])), int32(le.Uint32(got[j:])); w != g {
				t.Fatalf("buffer %d word %d: Go %d, CUDA %d", i, j/4, w, g)
			}
		}
	case []float32:
		for j := 0; j+4 <= len(want); j += 4 {
			wv := math.Float32frombits(le.Uint32(want[j:]))
			gv := math.Float32frombits(le.Uint32(got[j:]))
			if math.IsNaN(float64(wv)) != math.IsNaN(float64(gv)) || math.Abs(float64(wv-gv)) > 1e-5*(1+math.Abs(float64(wv))) {
				t.Fatalf("buffer %d element %d: Go %v, CUDA %v", i, j/4, wv, gv)
			}
		}
	case []uint16:
		for j := 0; j+2 <= len(want); j += 2 {
			w, g := le.Uint16(want[j:]), le.Uint16(got[j:])
			wv, gv := fromBF16(w), fromBF16(g)
			if wv != wv || gv != gv {
				if w != g {
					t.Fatalf("buffer %d element %d: Go %#04x, CUDA %#04x", i, j/2, w, g)
				}
				continue
			}
			if d := int(w) - int(g); w>>15 != g>>15 && (wv != 0 || gv != 0) || d > 1 || d < -1 {
				t.Fatalf("buffer %d element %d: Go %v (%#04x), CUDA %v (%#04x)", i, j/2, wv, w, gv, g)
			}
		}
	}
}

// bf16s rounds v to bfloat16.
func bf16s(v []float32) []uint16 {
	_, h := stored(v, BFloat16, MathFP32)
	return h.([]uint16)
}

// roundingValues is n float32s: roundingInputs and special values, then
// random bit patterns of every kind.
func roundingValues(n int) []float32 {
	v := make([]float32, 0, n)
	for _, u := range roundingInputs {
		v = append(v, math.Float32frombits(u), -math.Float32frombits(u))
	}
	v = append(v, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)))
	r := newRand(9, 10)
	for len(v) < n {
		v = append(v, math.Float32frombits(r.Uint32()))
	}
	return v
}

func vabs(v []float32) []float32 {
	for i := range v {
		v[i] = float32(math.Abs(float64(v[i])))
	}
	return v
}

// argBytes returns the bytes of a buffer argument, or nil.
func argBytes(a any) []byte {
	switch v := a.(type) {
	case []float32:
		return gg.Bytes(v)
	case []int32:
		return gg.Bytes(v)
	case []uint16:
		return gg.Bytes(v)
	}
	return nil
}

// runGoBody launches k on the host backend with buffer arguments uploaded,
// and returns every argument's bytes afterwards (nil for scalars).
func runGoBody(t *testing.T, s *gg.Stream, k *gg.Kernel, grid, block gg.Dim3, args []any) [][]byte {
	launch := make([]any, len(args))
	ptrs := make([]gg.DevicePtr, len(args))
	for i, a := range args {
		if b := argBytes(a); b != nil {
			p, err := s.MallocAsync(len(b))
			ok(t, err)
			ok(t, s.Memcpy(gg.HtoD(p, b)))
			ptrs[i], launch[i] = p, p
		} else {
			launch[i] = a
		}
	}
	ok(t, s.Launch(k, grid, block, launch...))
	out := make([][]byte, len(args))
	for i, a := range args {
		if b := argBytes(a); b != nil {
			out[i] = make([]byte, len(b))
			ok(t, s.Memcpy(gg.DtoH(out[i], ptrs[i])))
			ok(t, s.FreeAsync(ptrs[i]))
		}
	}
	ok(t, s.Synchronize())
	return out
}

// runEmulated runs k's CUDA body in the emulator. Its input: the buffer
// count, each buffer (u64 size, bytes), the kernel's name (u32 length,
// bytes), grid and block (6 u32), and the arguments (u32 count, then a kind
// byte and a u64 each: 'p' buffer index, 'i' integer, 'f' float bits). It
// writes the buffers back in order.
func runEmulated(t *testing.T, bin string, k *gg.Kernel, grid, block gg.Dim3, args []any) [][]byte {
	var in bytes.Buffer
	le := binary.LittleEndian
	var bufs [][]byte
	for _, a := range args {
		if b := argBytes(a); b != nil {
			bufs = append(bufs, b)
		}
	}
	in.Write(le.AppendUint32(nil, uint32(len(bufs))))
	for _, b := range bufs {
		in.Write(le.AppendUint64(nil, uint64(len(b))))
		in.Write(b)
	}
	in.Write(le.AppendUint32(nil, uint32(len(k.Name))))
	in.WriteString(k.Name)
	for _, v := range []int{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z} {
		in.Write(le.AppendUint32(nil, uint32(v)))
	}
	in.Write(le.AppendUint32(nil, uint32(len(args))))
	nb := 0
	for _, a := range args {
		switch v := a.(type) {
		case []float32, []int32, []uint16:
			in.WriteByte('p')
			in.Write(le.AppendUint64(nil, uint64(nb)))
			nb++
		case int:
			in.WriteByte('i')
			in.Write(le.AppendUint64(nil, uint64(int64(v))))
		case gg.DevicePtr: // a nil pointer
			if v != 0 {
				t.Fatalf("pointer argument %#x: only nil pointers are passed as values", v)
			}
			in.WriteByte('i')
			in.Write(le.AppendUint64(nil, 0))
		case float32:
			in.WriteByte('f')
			in.Write(le.AppendUint64(nil, uint64(math.Float32bits(v))))
		default:
			t.Fatalf("argument of type %T", a)
		}
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("emulator: %v\n%s", err, stderr.String())
	}
	out := make([][]byte, len(args))
	for i, a := range args {
		if b := argBytes(a); b != nil {
			if len(raw) < len(b) {
				t.Fatalf("emulator returned %d bytes too few", len(b)-len(raw))
			}
			out[i], raw = raw[:len(b)], raw[len(b):]
		}
	}
	return out
}

// emuKernels are the kernels the emulator holds.
var emuKernels = []*gg.Kernel{gemmKernel, biasAct, castBF16, colSum, reluBwd, softmaxXent, sgdUpdate, adamUpdate}

const emuPrelude = `#include <algorithm>
#include <barrier>
#include <thread>
#include <vector>
#include <string>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <math.h>
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* bar;
static void __syncthreads() { bar->arrive_and_wait(); }
// Warps: a barrier per 32 threads, and a word per thread to exchange
// through (blocks of whole warps only).
static std::vector<std::barrier<>*> warpBar;
static float shfl[1024];
static unsigned flatTid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
static void __syncwarp(unsigned = 0xffffffffu) { warpBar.at(flatTid() / 32)->arrive_and_wait(); }
static float __shfl_xor_sync(unsigned, float v, int laneMask) {
    const unsigned t = flatTid();
    shfl[t] = v;
    __syncwarp();
    const float r = shfl[t ^ (unsigned)laneMask];
    __syncwarp();
    return r;
}
static void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <class T> static T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(n)
`

const emuMain = `
struct Arg {
    uint64_t v; void* p;
    operator int() const { return (int)(int64_t)v; }
    operator float() const { uint32_t b = (uint32_t)v; float f; std::memcpy(&f, &b, 4); return f; }
    template <class T> operator T*() const { return (T*)p; }
};
static void rd(void* p, size_t n) { if (fread(p, 1, n, stdin) != n) { fprintf(stderr, "short input\n"); exit(2); } }
template <class T> static T get() { T v; rd(&v, sizeof v); return v; }
static void dispatch(const std::string& name, const std::vector<Arg>& a);
int main() {
    uint32_t nb = get<uint32_t>();
    std::vector<char*> bufs; std::vector<uint64_t> sizes;
    for (uint32_t i = 0; i < nb; i++) {
        uint64_t n = get<uint64_t>();
        char* b = (char*)malloc(n ? n : 1); rd(b, n);
        bufs.push_back(b); sizes.push_back(n);
    }
    uint32_t len = get<uint32_t>(); std::string name(len, ' '); rd(&name[0], len);
    uint32_t d[6]; for (auto& x : d) x = get<uint32_t>();
    gridDim = {d[0], d[1], d[2]}; blockDim = {d[3], d[4], d[5]};
    uint32_t na = get<uint32_t>();
    std::vector<Arg> args;
    for (uint32_t i = 0; i < na; i++) {
        char kind = get<char>(); uint64_t v = get<uint64_t>();
        args.push_back(Arg{v, kind == 'p' ? bufs.at(v) : nullptr});
    }
    // One thread per thread of a block, each running every block in turn;
    // a barrier between blocks keeps them in step (shared arrays are reused).
    unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    std::barrier<> b(nt); bar = &b;
    for (unsigned w = 0; w * 32 < nt; w++) warpBar.push_back(new std::barrier<>(std::min(32u, nt - w * 32)));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < nt; t++)
        ts.emplace_back([&, t] {
            threadIdx = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
            for (unsigned z = 0; z < gridDim.z; z++)
            for (unsigned y = 0; y < gridDim.y; y++)
            for (unsigned x = 0; x < gridDim.x; x++) {
                blockIdx = {x, y, z};
                dispatch(name, args);
                bar->arrive_and_wait();
            }
        });
    for (auto& th : ts) th.join();
    for (auto* w : warpBar) delete w;
    for (uint32_t i = 0; i < nb; i++) { fwrite(bufs[i], 1, sizes[i], stdout); free(bufs[i]); }
    return 0;
}
`

// buildEmulator writes the prelude, every kernel's CUDA body and a
// dispatcher into a C++ file, builds it, and returns the binary's path.
func buildEmulator(t *testing.T) string {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe.cpp")
	ok(t, os.WriteFile(probe, []byte(emuPrelude+"int main() { return 0; }\n"), 0o644))
	if out, err := exec.Command(gxx, "-std=c++20", "-pthread", "-fsanitize=address", probe, "-o", filepath.Join(dir, "probe")).CombinedOutput(); err != nil {
		t.Skipf("g++ cannot build the prelude (C++20 <barrier>, AddressSanitizer): %v\n%s", err, out)
	}
	var src strings.Builder
	src.WriteString(emuPrelude)
	for _, k := range emuKernels {
		src.WriteString(k.CUDA)
		src.WriteString("\n")
	}
	src.WriteString(emuMain)
	src.WriteString("static void dispatch(const std::string& name, const std::vector<Arg>& a) {\n")
	for _, k := range emuKernels {
		fmt.Fprintf(&src, "    if (name == %q) { %s(", k.Name, k.Name)
		for i := range k.Params {
			if i > 0 {
				src.WriteString(", ")
			}
			fmt.Fprintf(&src, "a.at(%d)", i)
		}
		src.WriteString("); return; }\n")
	}
	src.WriteString("    fprintf(stderr, \"unknown kernel %s\\n\", name.c_str()); exit(2);\n}\n")
	file := filepath.Join(dir, "kernels.cpp")
	ok(t, os.WriteFile(file, []byte(src.String()), 0o644))
	bin := filepath.Join(dir, "kernels")
	// -ffp-contract=off: no fused multiply-adds, as in the Go bodies on amd64.
	if out, err := exec.Command(gxx, "-std=c++20", "-O1", "-pthread", "-fsanitize=address", "-fno-omit-frame-pointer",
		"-ffp-contract=off", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-function", file, "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("the CUDA bodies do not build as C++: %v\n%s", err, out)
	} else if len(out) > 0 {
		t.Logf("g++:\n%s", out)
	}
	return bin
}
