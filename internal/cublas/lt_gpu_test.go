//go:build linux

package cublas_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
	"github.com/gpugraph/gpugraph/internal/host"
)

// ltGPU is gpu_test.go's device and stream (no cuBLAS handle) with a
// cuBLASLt handle and a workspace.
type ltGPU struct {
	*gpu
	lt      *cublas.LtHandle
	version int // cuBLASLt's, for CheckSupported
	ws      gg.DevicePtr
	wsBytes int
	// refused counts the LtMatmuls ltCheck saw Plan refuse up front;
	// confirmed those the heuristic, asked past the refusal, has no
	// algorithm for either.
	refused, confirmed int
}

// setupLt opens the cuda backend and cuBLASLt, as setupGPU does cuBLAS, or
// skips: these tests run on the GPU machine. The calls stay on this
// goroutine's locked thread, where the device's context is current (no
// subtests: they would run on other threads).
func setupLt(t *testing.T) *ltGPU {
	t.Helper()
	d := openCUDA(t)
	lib, err := cublas.LoadLt()
	lib = loaded(t, lib, err)
	const wsBytes = cublas.WorkspaceHopper
	ws := workspace(t, d, wsBytes)
	h, err := lib.Create()
	destroyed(t, h, err) // before ws is freed
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: cuBLASLt %d on %s", lib.Path, lib.Version(), d.Properties().Name)
	return &ltGPU{gpu: &gpu{d: d, s: s}, lt: h, version: lib.Version(), ws: ws, wsBytes: wsBytes}
}

// round rounds each value to the nearest of type typ (bfloat16: to
// nearest even), in place, and returns x.
func round(x []float64, typ cublas.DataType) []float64 {
	for i, v := range x {
		f := float32(v)
		if typ == cublas.R16BF {
			f = math.Float32frombits(uint32(host.Float32ToBFloat16(f)) << 16)
		}
		x[i] = float64(f)
	}
	return x
}

func encode(x []float64, typ cublas.DataType) []byte {
	if typ == cublas.R16BF {
		b := make([]uint16, len(x))
		for i, v := range x {
			b[i] = host.Float32ToBFloat16(float32(v))
		}
		return gg.Bytes(b)
	}
	b := make([]float32, len(x))
	for i, v := range x {
		b[i] = float32(v)
	}
	return gg.Bytes(b)
}

func decode(b []byte, typ cublas.DataType) []float64 {
	x := make([]float64, len(b)/cublas.LtSize(typ))
	for i := range x {
		if typ == cublas.R16BF {
			x[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
		} else {
			x[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return x
}

// put copies bytes to new device memory, freed at the end of the test.
func (g *ltGPU) put(t *testing.T, b []byte) gg.DevicePtr {
	t.Helper()
	p, err := g.d.Malloc(max(len(b), 1))
	ok(t, err)
	t.Cleanup(func() { g.d.Free(p) })
	if len(b) > 0 {
		ok(t, g.d.Memcpy(gg.HtoD(p, b)))
	}
	return p
}

// get waits for the stream and copies n bytes back.
func (g *ltGPU) get(t *testing.T, p gg.DevicePtr, n int) []byte {
	t.Helper()
	ok(t, g.s.Synchronize())
	b := make([]byte, n)
	ok(t, g.d.Memcpy(gg.DtoH(b, p)))
	return b
}

// The ReLU bitmask as the tests read it: bit j + i·AuxLD of the mask,
// least significant bit first in each byte, is D's element (i, j) (the
// column-major bit matrix of cublasLt.h, seen row-major).
func maskEncode(mask []bool) []byte {
	b := make([]byte, (len(mask)+7)/8)
	for i, v := range mask {
		if v {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

func maskDecode(b []byte) []bool {
	m := make([]bool, 8*len(b))
	for i := range m {
		m[i] = b[i/8]>>(i%8)&1 == 1
	}
	return m
}

func randVals(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = r.Float64()*2 - 1
	}
	return x
}

func absAll(x []float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = math.Abs(v)
	}
	return y
}

// ltTol is what a result may differ from the float64 reference by: inRel
// for inputs rounded inside cuBLASLt (TF32), accRel for FP32 accumulation
// over the sums, outRel for the rounding to the output type (bfloat16),
// each relative to the sum of the magnitudes of the terms (mag) or to the
// value (want).
type ltTol struct{ inRel, accRel, outRel, biasOutRel float64 }

func tolFor(m cublas.LtMatmul) ltTol {
	tol := ltTol{accRel: float64(m.K+m.M+8) * 0x1p-24}
	if m.Compute == cublas.Compute32FFastTF32 {
		tol.inRel = 0x1p-9 // two inputs, 10 explicit mantissa bits each, rounded or truncated
	}
	if m.CDType == cublas.R16BF {
		tol.outRel = 0x1p-8
	}
	if m.BiasType == cublas.R16BF {
		tol.biasOutRel = 0x1p-8
	}
	return tol
}

// ltShapes are the stored sizes of A and B of m, row-major.
func ltShapes(m cublas.LtMatmul) (aRows, bRows int) {
	aRows, bRows = m.M, m.K
	if m.TransA {
		aRows = m.K
	}
	if m.TransB {
		bRows = m.N
	}
	return aRows, bRows
}

// ltCheck runs m once on random data on the GPU and compares D, the bias
// gradient and the bitmask with the host reference. Every combination the
// tests make is in cublasLtMatmul's table of supported types, which lists
// epilogues as supported for all of them: no algorithm is a failure,
// except for what m.CheckSupported refuses, which Plan must refuse up front
// (checkRefusal).
func (g *ltGPU) ltCheck(t *testing.T, name string, m cublas.LtMatmul, alpha, beta float64, seed uint64) {
	t.Helper()
	if refusal := m.CheckSupported(g.version); refusal != nil {
		g.checkRefusal(t, name, m, refusal)
		return
	}
	plan, err := g.lt.Plan(m)
	if errors.Is(err, cublas.StatusNotSupported) {
		t.Errorf("%s: cuBLASLt has no algorithm for a combination its documentation lists: %v", name, err)
		return
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	r := rand.New(rand.NewPCG(seed, 31))
	e := m.Epilogue
	aRows, bRows := ltShapes(m)
	A := round(randVals(r, aRows*m.LDA), m.ABType)
	B := round(randVals(r, bRows*m.LDB), m.ABType)
	C := round(randVals(r, m.M*m.LDC), m.CDType) // C when beta ≠ 0, else D's old content
	var bias []float64
	biasIn := e == cublas.EpilogueBias || e == cublas.EpilogueReluBias || e == cublas.EpilogueReluAuxBias
	if biasIn {
		bias = round(randVals(r, m.BiasLen()), m.BiasType)
	}
	var mask []bool
	if e.UsesAux() {
		mask = make([]bool, m.M*m.AuxLD)
		for i := range mask {
			mask[i] = r.IntN(2) == 1
		}
	}
	wantD, wantB, wantMask := cublas.LtRowMajorRef(m, alpha, beta, A, B, C, bias, mask)
	// Magnitudes for the tolerances: the same sums over |terms|.
	mm := m
	if e == cublas.EpilogueDRelu || e == cublas.EpilogueDReluBGrad {
		mm.Epilogue = e // keeps the mask's zeros
	} else if e != cublas.EpilogueBGradA && e != cublas.EpilogueBGradB {
		mm.Epilogue = cublas.EpilogueDefault
	}
	magD, magB, _ := cublas.LtRowMajorRef(mm, math.Abs(alpha), math.Abs(beta), absAll(A), absAll(B), absAll(C), nil, mask)
	// The values before the ReLU, to tell which mask bits are too near 0.
	var pre []float64
	if e == cublas.EpilogueReluAux || e == cublas.EpilogueReluAuxBias {
		pm := m
		pm.Epilogue, pm.AuxLD = cublas.EpilogueBias, 0
		if e == cublas.EpilogueReluAux {
			pm.Epilogue = cublas.EpilogueDefault
		}
		pre, _, _ = cublas.LtRowMajorRef(pm, alpha, beta, A, B, C, bias, nil)
	}

	a, b := g.put(t, encode(A, m.ABType)), g.put(t, encode(B, m.ABType))
	d := g.put(t, encode(C, m.CDType))
	args := cublas.LtArgs{Alpha: float32(alpha), Beta: float32(beta), A: uintptr(a), B: uintptr(b), D: uintptr(d)}
	if beta != 0 {
		args.C = args.D // in place
	}
	var biasP gg.DevicePtr
	if e.UsesBias() {
		init := bias
		if !biasIn {
			init = make([]float64, m.BiasLen())
			for i := range init {
				init[i] = 1234 // overwritten by the gradient
			}
		}
		biasP = g.put(t, encode(init, m.BiasType))
		args.Bias = uintptr(biasP)
	}
	var auxP gg.DevicePtr
	if e.UsesAux() {
		in := mask
		if e == cublas.EpilogueReluAux || e == cublas.EpilogueReluAuxBias {
			in = make([]bool, len(mask))
		}
		auxP = g.put(t, maskEncode(in))
		args.Aux = uintptr(auxP)
	}
	if err := plan.Matmul(args, g.s.NativeStream(), uintptr(g.ws), g.wsBytes); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	tol := tolFor(m)
	gotD := decode(g.get(t, d, len(C)*cublas.LtSize(m.CDType)), m.CDType)
	tolD := make([]float64, len(gotD))
	bad := 0
	for i, w := range wantD {
		mag := magD[i]
		if biasIn && i%m.LDC < m.N {
			mag += math.Abs(bias[i%m.LDC])
		}
		tolD[i] = (tol.inRel+tol.accRel)*mag + tol.outRel*math.Abs(w) + 1e-7
		if diff := math.Abs(gotD[i] - w); !(diff <= tolD[i]) {
			if bad++; bad <= 3 {
				t.Errorf("%s: D[%d][%d] = %v, want %v (|diff| %.3g > %.3g)", name, i/m.LDC, i%m.LDC, gotD[i], w, diff, tolD[i])
			}
		}
	}
	if wantB != nil {
		gotB := decode(g.get(t, biasP, m.BiasLen()*cublas.LtSize(m.BiasType)), m.BiasType)
		for j, w := range wantB {
			tb := (tol.inRel+tol.accRel)*magB[j] + tol.biasOutRel*math.Abs(w) + 1e-6
			if e == cublas.EpilogueDReluBGrad { // a sum of D's column
				for i := range m.M {
					tb += tolD[i*m.LDC+j]
				}
			}
			if diff := math.Abs(gotB[j] - w); !(diff <= tb) {
				if bad++; bad <= 6 {
					t.Errorf("%s: bias gradient [%d] = %v, want %v (|diff| %.3g > %.3g)", name, j, gotB[j], w, diff, tb)
				}
			}
		}
	}
	if e == cublas.EpilogueReluAux || e == cublas.EpilogueReluAuxBias {
		gotMask := maskDecode(g.get(t, auxP, m.AuxBytes()))
		for i := range m.M {
			for j := range m.N {
				k := i*m.LDC + j
				if math.Abs(pre[k]) <= tolD[k] {
					continue // too near 0 to tell
				}
				if gotMask[j+i*m.AuxLD] != wantMask[j+i*m.AuxLD] {
					if bad++; bad <= 9 {
						t.Errorf("%s: mask bit (%d, %d) = %v, want %v (D = %v; the test reads bit j + i·AuxLD, least significant first in each byte)",
							name, i, j, gotMask[j+i*m.AuxLD], wantMask[j+i*m.AuxLD], wantD[k])
					}
				}
			}
		}
	}
	if bad > 0 {
		note := ""
		if e == cublas.EpilogueDRelu || e == cublas.EpilogueDReluBGrad {
			note = "; the mask was made on the host, bit j + i·AuxLD least significant first, which TestGPULtTrainingStep does not assume"
		}
		t.Errorf("%s: %d mismatches (%v)%s", name, bad, m, note)
	}
}

// checkRefusal checks that Plan refuses m, which CheckSupported refuses,
// with the *LtUnsupportedError, then asks cuBLASLt's heuristic past the
// refusal (PlanUnchecked) and logs it if the heuristic now has an
// algorithm: the rule may then be lifted for this version (run the case
// through the host reference before lifting it).
func (g *ltGPU) checkRefusal(t *testing.T, name string, m cublas.LtMatmul, refusal error) {
	t.Helper()
	g.refused++
	_, err := g.lt.Plan(m)
	var ue *cublas.LtUnsupportedError
	if !errors.As(err, &ue) || err.Error() != refusal.Error() || !errors.Is(err, cublas.StatusNotSupported) {
		t.Errorf("%s: Plan gave %v, want the refusal %v", name, err, refusal)
		return
	}
	p, release, err := g.lt.PlanUnchecked(m)
	switch {
	case errors.Is(err, cublas.StatusNotSupported):
		g.confirmed++
	case err != nil:
		t.Logf("%s: refused up front; the heuristic, asked past the refusal, answered %v", name, err)
	default:
		release()
		t.Logf("%s: refused up front (%s), but cuBLASLt %d's heuristic has an algorithm for it (workspace %d): the rule may be lifted for this version",
			name, ue.Reason, g.version, p.Workspace())
	}
}

var ltEpilogues = []cublas.Epilogue{
	cublas.EpilogueDefault, cublas.EpilogueRelu, cublas.EpilogueReluAux, cublas.EpilogueBias,
	cublas.EpilogueReluBias, cublas.EpilogueReluAuxBias, cublas.EpilogueDRelu, cublas.EpilogueDReluBGrad,
	cublas.EpilogueBGradA, cublas.EpilogueBGradB,
}

// ltTypes are the type combinations tested.
var ltTypes = []struct {
	name         string
	ab, cd, bias cublas.DataType
	compute      cublas.ComputeType
}{
	{"fp32", cublas.R32F, cublas.R32F, cublas.R32F, cublas.Compute32F},
	{"tf32", cublas.R32F, cublas.R32F, cublas.R32F, cublas.Compute32FFastTF32},
	{"bf16", cublas.R16BF, cublas.R16BF, cublas.R16BF, cublas.Compute32F},
	{"bf16 in fp32 out", cublas.R16BF, cublas.R32F, cublas.R32F, cublas.Compute32F},
}

// TestGPULtEpilogues runs every epilogue, type combination and transpose
// against the host reference, and checks that Plan refuses up front the
// transposes BGRADA and BGRADB do not take (CheckSupported; the heuristic
// is asked past the refusal, and the log says if it disagrees); the sizes
// are a layer's (batch M = 64, N = 96 outputs, K = 80 inputs), the
// leading dimensions padded.
func TestGPULtEpilogues(t *testing.T) {
	g := setupLt(t)
	seed := uint64(0)
	for _, ty := range ltTypes {
		for _, e := range ltEpilogues {
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				m := cublas.LtMatmul{TransA: tr[0], TransB: tr[1], M: 64, N: 96, K: 80,
					ABType: ty.ab, CDType: ty.cd, Compute: ty.compute, Epilogue: e, MaxWorkspace: g.wsBytes}
				m.LDA, m.LDB = m.K+8, m.N+8
				if m.TransA {
					m.LDA = m.M + 8
				}
				if m.TransB {
					m.LDB = m.K + 8
				}
				m.LDC = m.N + 8
				if e.UsesBias() {
					m.BiasType = ty.bias
				}
				if e.UsesAux() {
					m.AuxLD = cublas.LtAuxLD(m.N)
				}
				alpha, beta := 1.0, 0.0
				if e == cublas.EpilogueDefault || e == cublas.EpilogueBias || e == cublas.EpilogueDRelu {
					alpha, beta = 0.75, -0.5
				}
				name := fmt.Sprintf("%s %v %s", ty.name, e, map[[2]bool]string{{false, false}: "NN", {false, true}: "NT", {true, false}: "TN", {true, true}: "TT"}[tr])
				seed++
				g.ltCheck(t, name, m, alpha, beta, seed)
			}
		}
	}
	// 4 types × (BGRADA in NT and TT, BGRADB in NN and NT).
	if g.refused != 16 {
		t.Errorf("Plan refused %d combinations up front, want 16", g.refused)
	}
	t.Logf("%d combinations refused up front; the heuristic, asked past the refusal, has no algorithm for %d of them", g.refused, g.confirmed)
}

// TestGPULtOddSizes: sizes that are no multiple of anything, fp32, in the
// layout NT (a layer's forward), or for an epilogue that does not take NT
// (BGRADA, BGRADB), checked refused there and run in the first layout its
// refusal names.
func TestGPULtOddSizes(t *testing.T) {
	g := setupLt(t)
	odd := func(ta, tb bool, e cublas.Epilogue) cublas.LtMatmul {
		m := cublas.LtMatmul{TransA: ta, TransB: tb, M: 67, N: 45, K: 131, LDA: 131 + 3, LDB: 45 + 1, LDC: 45 + 2,
			ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F, Epilogue: e, MaxWorkspace: g.wsBytes}
		if ta {
			m.LDA = 67 + 3
		}
		if tb {
			m.LDB = 131 + 1
		}
		if e.UsesBias() {
			m.BiasType = cublas.R32F
		}
		if e.UsesAux() {
			m.AuxLD = cublas.LtAuxLD(m.N)
		}
		return m
	}
	for i, e := range ltEpilogues {
		m := odd(false, true, e)
		name := "odd " + e.String() + " NT"
		var ue *cublas.LtUnsupportedError
		if err := m.CheckSupported(g.version); errors.As(err, &ue) && len(ue.Layouts) > 0 {
			g.ltCheck(t, name, m, 1, 0, uint64(100+i)) // the refusal
			l := ue.Layouts[0]
			m = odd(l[0] == 'T', l[1] == 'T', e)
			name = "odd " + e.String() + " " + l
		}
		g.ltCheck(t, name, m, 1, 0, uint64(100+i))
	}
	if g.refused != 2 {
		t.Errorf("Plan refused %d LtMatmuls up front, want 2 (BGRADA and BGRADB in NT)", g.refused)
	}
}

// TestGPULtPlanCache: a plan is made once per description (0 and DEFAULT
// are one), and a call rejected by our checks leaves it working.
func TestGPULtPlanCache(t *testing.T) {
	g := setupLt(t)
	m := cublas.LtMatmul{TransB: true, M: 64, N: 96, K: 80, LDA: 80, LDB: 80, LDC: 96,
		ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F,
		Epilogue: cublas.EpilogueReluAuxBias, AuxLD: 128, MaxWorkspace: g.wsBytes}
	p1, err := g.lt.Plan(m)
	ok(t, err)
	p2, err := g.lt.Plan(m)
	ok(t, err)
	if p1 != p2 {
		t.Fatal("a second Plan of the same LtMatmul made a new plan")
	}
	if p1.Workspace() > m.MaxWorkspace {
		t.Fatalf("the plan needs %d bytes of workspace, more than MaxWorkspace %d", p1.Workspace(), m.MaxWorkspace)
	}
	t.Logf("plan needs %d bytes of workspace", p1.Workspace())
	d := m
	d.Epilogue, d.AuxLD = 0, 0
	q1, err := g.lt.Plan(d)
	ok(t, err)
	d.Epilogue = cublas.EpilogueDefault
	q2, err := g.lt.Plan(d)
	ok(t, err)
	if q1 != q2 || q1.Desc().Epilogue != cublas.EpilogueDefault {
		t.Fatal("Epilogue 0 and EpilogueDefault made two plans")
	}
	if _, err := g.lt.Plan(cublas.LtMatmul{M: 1, N: 1, K: 1}); !errors.Is(err, cublas.StatusInvalidValue) {
		t.Fatalf("an invalid LtMatmul: %v", err)
	}
	// Rejected calls: no aux, short workspace; then a good one.
	args := cublas.LtArgs{Alpha: 1, A: 1 << 12, B: 1 << 12, D: 1 << 12, Bias: 1 << 12}
	if err := p1.Matmul(args, g.s.NativeStream(), uintptr(g.ws), g.wsBytes); !errors.Is(err, cublas.StatusInvalidValue) {
		t.Fatalf("no aux: %v", err)
	}
	if p1.Workspace() > 0 {
		args.Aux = 1 << 12
		if err := p1.Matmul(args, g.s.NativeStream(), uintptr(g.ws), p1.Workspace()-1); !errors.Is(err, cublas.StatusInvalidValue) {
			t.Fatalf("short workspace: %v", err)
		}
	}
	g.ltCheck(t, "after rejected calls", m, 1, 0, 7)
}

// mlp is a two-layer perceptron's training step on the host, in float64:
// H = relu(X·W1ᵀ + b1), Y = H·W2ᵀ + b2, and from dY the gradients dW2,
// db2, dW1, db1 and dX.
type mlp struct {
	B, In, Hid, Out    int
	X, W1, b1, W2, b2  []float64
	dY                 []float64
	H, Y               []float64
	dW2, db2, dW1, db1 []float64
	dX                 []float64
}

func newMLP(r *rand.Rand, B, in, hid, out int) *mlp {
	n := &mlp{B: B, In: in, Hid: hid, Out: out,
		X: randVals(r, B*in), W1: randVals(r, hid*in), b1: randVals(r, hid),
		W2: randVals(r, out*hid), b2: randVals(r, out), dY: randVals(r, B*out)}
	mm := func(M, N, K int, a func(i, k int) float64, b func(k, j int) float64) []float64 {
		c := make([]float64, M*N)
		for i := range M {
			for j := range N {
				var s float64
				for k := range K {
					s += a(i, k) * b(k, j)
				}
				c[i*N+j] = s
			}
		}
		return c
	}
	Z := mm(B, hid, in, func(i, k int) float64 { return n.X[i*in+k] }, func(k, j int) float64 { return n.W1[j*in+k] })
	n.H = make([]float64, len(Z))
	for i, z := range Z {
		n.H[i] = max(z+n.b1[i%hid], 0)
	}
	n.Y = mm(B, out, hid, func(i, k int) float64 { return n.H[i*hid+k] }, func(k, j int) float64 { return n.W2[j*hid+k] })
	for i := range n.Y {
		n.Y[i] += n.b2[i%out]
	}
	n.dW2 = mm(out, hid, B, func(i, k int) float64 { return n.dY[k*out+i] }, func(k, j int) float64 { return n.H[k*hid+j] })
	n.db2 = make([]float64, out)
	for i, v := range n.dY {
		n.db2[i%out] += v
	}
	dH := mm(B, hid, out, func(i, k int) float64 { return n.dY[i*out+k] }, func(k, j int) float64 { return n.W2[k*hid+j] })
	dZ := make([]float64, len(dH))
	n.db1 = make([]float64, hid)
	for i, v := range dH {
		if Z[i]+n.b1[i%hid] > 0 {
			dZ[i] = v
		}
		n.db1[i%hid] += dZ[i]
	}
	n.dW1 = mm(hid, in, B, func(i, k int) float64 { return dZ[k*hid+i] }, func(k, j int) float64 { return n.X[k*in+j] })
	n.dX = mm(B, in, hid, func(i, k int) float64 { return dZ[i*hid+k] }, func(k, j int) float64 { return n.W1[k*in+j] })
	return n
}

// ltStep is the training step of lt_linux.go's comment on the GPU: six
// calls, four with fused epilogues, on float32 buffers.
type ltStep struct {
	plans                             []*cublas.LtPlan
	args                              []cublas.LtArgs
	X, W1, b1, W2, b2, dY, H, Y, mask gg.DevicePtr
	dW2, db2, dZ, db1, dW1, dX        gg.DevicePtr
}

func (g *ltGPU) newStep(t *testing.T, n *mlp) *ltStep {
	t.Helper()
	f32 := func(x []float64) gg.DevicePtr { return g.put(t, encode(x, cublas.R32F)) }
	zero := func(elems int) gg.DevicePtr { return g.put(t, make([]byte, 4*elems)) }
	B, in, hid, out := n.B, n.In, n.Hid, n.Out
	s := &ltStep{X: f32(n.X), W1: f32(n.W1), b1: f32(n.b1), W2: f32(n.W2), b2: f32(n.b2), dY: f32(n.dY),
		H: zero(B * hid), Y: zero(B * out), dW2: zero(out * hid), db2: zero(out), dZ: zero(B * hid),
		db1: zero(hid), dW1: zero(hid * in), dX: zero(B * in)}
	auxLD := cublas.LtAuxLD(hid)
	s.mask = g.put(t, make([]byte, B*auxLD/8))
	// fp32 returns a row-major float32 LtMatmul of the step.
	fp32 := func(ta, tb bool, M, N, K, lda, ldb, ldc int, e cublas.Epilogue) cublas.LtMatmul {
		m := cublas.LtMatmul{TransA: ta, TransB: tb, M: M, N: N, K: K, LDA: lda, LDB: ldb, LDC: ldc,
			ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F, Epilogue: e, MaxWorkspace: g.wsBytes}
		if e.UsesAux() {
			m.AuxLD = auxLD
		}
		return m
	}
	p := func(x gg.DevicePtr) uintptr { return uintptr(x) }
	calls := []struct {
		m    cublas.LtMatmul
		args cublas.LtArgs
	}{
		// forward: H = relu(X·W1ᵀ + b1), and the mask
		{fp32(false, true, B, hid, in, in, in, hid, cublas.EpilogueReluAuxBias),
			cublas.LtArgs{Alpha: 1, A: p(s.X), B: p(s.W1), D: p(s.H), Bias: p(s.b1), Aux: p(s.mask)}},
		// Y = H·W2ᵀ + b2
		{fp32(false, true, B, out, hid, hid, hid, out, cublas.EpilogueBias),
			cublas.LtArgs{Alpha: 1, A: p(s.H), B: p(s.W2), D: p(s.Y), Bias: p(s.b2)}},
		// dW2 = dYᵀ·H and db2 = Σ_rows dY: BGRADB, as dY (the row-major A) is cuBLASLt's B
		{fp32(true, false, out, hid, B, out, hid, hid, cublas.EpilogueBGradB),
			cublas.LtArgs{Alpha: 1, A: p(s.dY), B: p(s.H), D: p(s.dW2), Bias: p(s.db2)}},
		// dZ = (dY·W2) ⊙ mask and db1 = Σ_rows dZ
		{fp32(false, false, B, hid, out, out, hid, hid, cublas.EpilogueDReluBGrad),
			cublas.LtArgs{Alpha: 1, A: p(s.dY), B: p(s.W2), D: p(s.dZ), Bias: p(s.db1), Aux: p(s.mask)}},
		// dW1 = dZᵀ·X
		{fp32(true, false, hid, in, B, hid, in, in, cublas.EpilogueDefault),
			cublas.LtArgs{Alpha: 1, A: p(s.dZ), B: p(s.X), D: p(s.dW1)}},
		// dX = dZ·W1
		{fp32(false, false, B, in, hid, hid, in, in, cublas.EpilogueDefault),
			cublas.LtArgs{Alpha: 1, A: p(s.dZ), B: p(s.W1), D: p(s.dX)}},
	}
	for i, c := range calls {
		pl, err := g.lt.Plan(c.m)
		if err != nil {
			t.Fatalf("call %d (%v): %v", i, c.m, err)
		}
		s.plans = append(s.plans, pl)
		s.args = append(s.args, c.args)
	}
	return s
}

func (g *ltGPU) runStep(s *ltStep) error {
	for i, p := range s.plans {
		if err := p.Matmul(s.args[i], g.s.NativeStream(), uintptr(g.ws), g.wsBytes); err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
	}
	return nil
}

// checkStep compares the step's outputs with the host's: FP32 with sums
// of up to max(B, in, hid, out) terms of values in [-1, 1], and two such
// products chained (dX, dW1 through dZ).
func (g *ltGPU) checkStep(t *testing.T, what string, s *ltStep, n *mlp) {
	t.Helper()
	k := max(n.B, n.In, n.Hid, n.Out)
	tol := 1e-6 * float64(k*k)
	for _, c := range []struct {
		name string
		p    gg.DevicePtr
		want []float64
	}{
		{"H", s.H, n.H}, {"Y", s.Y, n.Y}, {"dW2", s.dW2, n.dW2}, {"db2", s.db2, n.db2},
		{"db1", s.db1, n.db1}, {"dW1", s.dW1, n.dW1}, {"dX", s.dX, n.dX},
	} {
		got := decode(g.get(t, c.p, 4*len(c.want)), cublas.R32F)
		for i, w := range c.want {
			if d := math.Abs(got[i] - w); !(d <= tol) {
				t.Fatalf("%s: %s[%d] = %v, want %v (|diff| %.3g > %.3g)", what, c.name, i, got[i], w, d, tol)
			}
		}
	}
}

// TestGPULtTrainingStep runs a two-layer perceptron's step with the fused
// epilogues: RELU_AUX_BIAS forward writes the mask that DRELU_BGRAD reads
// backward, BIAS and BGRADB do the last layer's bias and its gradient.
func TestGPULtTrainingStep(t *testing.T) {
	g := setupLt(t)
	n := newMLP(rand.New(rand.NewPCG(8, 9)), 48, 40, 72, 24)
	s := g.newStep(t, n)
	ok(t, g.runStep(s))
	g.checkStep(t, "step", s, n)
}

// TestGPULtCapture captures the training step into a graph: nothing runs
// at capture, no memory node is captured (the workspace is ours), and
// launches compute the step; scalars changed after capture do not change
// the graph's calls.
func TestGPULtCapture(t *testing.T) {
	g := setupLt(t)
	n := newMLP(rand.New(rand.NewPCG(10, 11)), 48, 40, 72, 24)
	s := g.newStep(t, n) // plans (the heuristic) before capture
	// Warm up outside capture (modules load lazily), then clear.
	ok(t, g.runStep(s))
	ok(t, g.s.Synchronize())
	for _, c := range []struct {
		p gg.DevicePtr
		n int
	}{{s.mask, n.B * cublas.LtAuxLD(n.Hid) / 32}, {s.H, n.B * n.Hid}, {s.Y, n.B * n.Out}, {s.dW2, n.Out * n.Hid}, {s.db2, n.Out}, {s.dZ, n.B * n.Hid},
		{s.db1, n.Hid}, {s.dW1, n.Hid * n.In}, {s.dX, n.B * n.In}} {
		ok(t, g.d.Memcpy(gg.HtoD(c.p, make([]byte, 4*c.n))))
	}

	ok(t, g.s.BeginCapture(gg.CaptureModeGlobal))
	if err := g.runStep(s); err != nil {
		g.s.EndCapture()
		t.Fatal(err)
	}
	graph, err := g.s.EndCapture()
	ok(t, err)
	nodes, err := graph.Nodes()
	ok(t, err)
	kernels := 0
	for _, nd := range nodes {
		switch nd.Type() {
		case gg.NodeKernel:
			kernels++
		case gg.NodeMemAlloc:
			t.Errorf("captured a memory alloc node: cuBLASLt allocated during capture")
		}
	}
	t.Logf("captured %d nodes, %d kernels for 6 calls", len(nodes), kernels)
	if kernels < len(s.plans) {
		t.Fatalf("%d kernel nodes for %d calls", kernels, len(s.plans))
	}
	if got := decode(g.get(t, s.dX, 4*n.B*n.In), cublas.R32F); !allZero64(got) {
		t.Fatal("the captured calls ran during capture")
	}
	e, err := graph.Instantiate(0)
	ok(t, err)
	defer e.Destroy()
	// Other scalars through the same plan after capture: host-mode alpha
	// and beta are read at capture.
	scratch := g.put(t, make([]byte, 4*n.B*n.In))
	last := s.args[len(s.args)-1]
	last.Alpha, last.Beta, last.C, last.D = 99, 99, uintptr(scratch), uintptr(scratch)
	ok(t, s.plans[len(s.plans)-1].Matmul(last, g.s.NativeStream(), uintptr(g.ws), g.wsBytes))
	for range 2 {
		ok(t, e.Launch(g.s))
	}
	g.checkStep(t, "graph", s, n)
}

func allZero64(x []float64) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestGPULtExample runs ExampleLtHandle_Plan, which go test only compiles,
// and checks what it prints.
func TestGPULtExample(t *testing.T) {
	d, err := gg.Open("cuda")
	if errors.Is(err, gg.ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := cublas.LoadLt(); errors.Is(err, cublas.ErrNoCUBLAS) {
		t.Skipf("no cuBLASLt: %v", err)
	}
	r, w, err := os.Pipe()
	ok(t, err)
	stdout := os.Stdout
	os.Stdout = w
	ExampleLtHandle_Plan()
	os.Stdout = stdout
	w.Close()
	out, err := io.ReadAll(r)
	ok(t, err)
	const want = "H  [0 3.5 0 2.5 2.5 0 1.5 5.5]… 1956 of 3456 units active\n" +
		"dZ [0 -8 0 16 -8 0 16 -8]… sum 48\n" +
		"db [0 -16 8 8 -16 8 16 0]… sum 48\n"
	if string(out) != want {
		t.Fatalf("the example printed\n%s\nwant\n%s", out, want)
	}
}

// TestGPULtTinyLayer reproduces the first ExampleLtHandle_Plan, which
// printed cublasLtMatmul: CUBLAS_STATUS_EXECUTION_FAILED (13) on the H200
// run of docs/gpu-runs/2026-11-26-cublaslt: batch 2, 3 inputs, 2 units,
// and a next layer of 1 output, so that the backward DRELU_BGRAD had
// K = 1, the two calls captured with no call before. Every pointer was
// cudaMalloc's (256-byte aligned), the workspace 32 MiB and the aux ld
// 128 bits, so the suspects are: K = 1 with DRELU (nvmath-python refuses
// it, and Plan now does: CheckSupported), the first call of a kernel
// inside a capture, and sizes below a tile (M = N = 2). The test runs the
// calls in stages that tell these apart, the K = 1 backward past Plan's
// refusal (PlanUnchecked), and logs each stage and a reading for the next
// GPU run to settle. Only Plan's refusal of K = 1 can fail it: what
// cuBLASLt does here is for the log to show, not for the suite to fail on.
// It runs last: a fault in a stage ends the context for what follows.
func TestGPULtTinyLayer(t *testing.T) {
	g := setupLt(t)
	f32 := func(x ...float64) gg.DevicePtr { return g.put(t, encode(x, cublas.R32F)) }
	fwd := cublas.LtMatmul{TransB: true, M: 2, N: 2, K: 3, LDA: 3, LDB: 3, LDC: 2,
		ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F, BiasType: cublas.R32F,
		Epilogue: cublas.EpilogueReluAuxBias, AuxLD: cublas.LtAuxLD(2), MaxWorkspace: g.wsBytes}
	bwd1 := cublas.LtMatmul{M: 2, N: 2, K: 1, LDA: 1, LDB: 2, LDC: 2,
		ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F, BiasType: cublas.R32F,
		Epilogue: cublas.EpilogueDReluBGrad, AuxLD: fwd.AuxLD, MaxWorkspace: g.wsBytes}
	bwd2 := bwd1
	bwd2.K, bwd2.LDA = 2, 2
	// H = relu(X·Wᵀ + b) = relu([-1.5 -2; -1.5 1]); the backward's
	// dY2·W2 is [1 1; 2 2] with K = 1 and with K = 2, so dZ = [0 0; 0 2]
	// and db = [0 2] either way.
	X, W, b := f32(1, 2, 3, 4, 5, 6), f32(1, 0, -1, 0, 1, 0), f32(0.5, -4)
	dY1, W21 := f32(1, 2), f32(1, 1)
	dY2, W22 := f32(1, 0, 0, 2), f32(1, 1, 1, 1)
	H, dZ, db := f32(0, 0, 0, 0), f32(0, 0, 0, 0), f32(0, 0)
	mask := g.put(t, make([]byte, fwd.AuxBytes()))

	var ue *cublas.LtUnsupportedError
	if _, err := g.lt.Plan(bwd1); !errors.As(err, &ue) {
		t.Fatalf("Plan of the K = 1 DRELU_BGRAD: %v, want the *LtUnsupportedError", err)
	}
	pf, err := g.lt.Plan(fwd)
	if err != nil {
		t.Logf("the tiny forward has no plan (the first example's had one): %v", err)
		return
	}
	pb2, err := g.lt.Plan(bwd2)
	if err != nil {
		t.Logf("the tiny K = 2 backward has no plan: %v", err)
		return
	}
	pb1, release, err := g.lt.PlanUnchecked(bwd1)
	if err != nil {
		t.Logf("the heuristic, asked past Plan's refusal, has no algorithm for the K = 1 backward (the first example's had one): %v", err)
	} else {
		t.Cleanup(release)
	}

	type call struct {
		name string
		p    *cublas.LtPlan
		args cublas.LtArgs
	}
	p := func(x gg.DevicePtr) uintptr { return uintptr(x) }
	cf := call{"forward RELU_AUX_BIAS K=3", pf, cublas.LtArgs{Alpha: 1, A: p(X), B: p(W), D: p(H), Bias: p(b), Aux: p(mask)}}
	cb2 := call{"backward DRELU_BGRAD K=2", pb2, cublas.LtArgs{Alpha: 1, A: p(dY2), B: p(W22), D: p(dZ), Bias: p(db), Aux: p(mask)}}
	cb1 := call{"backward DRELU_BGRAD K=1", pb1, cublas.LtArgs{Alpha: 1, A: p(dY1), B: p(W21), D: p(dZ), Bias: p(db), Aux: p(mask)}}
	// stage runs calls, captured into a graph that is then launched, or on
	// the stream, and compares what they write; "" is success.
	stage := func(captured bool, calls ...call) string {
		wantH, wantBwd := false, false
		for _, c := range calls {
			if c.p == nil {
				return "not run: no plan"
			}
			wantH = wantH || c.p == pf
			wantBwd = wantBwd || c.p != pf
		}
		// The outputs cleared, so that only this stage's calls can set them.
		for _, o := range []struct {
			ptr gg.DevicePtr
			n   int
			cl  bool
		}{{H, 4, wantH}, {dZ, 4, wantBwd}, {db, 2, wantBwd}} {
			if o.cl {
				if err := g.d.Memcpy(gg.HtoD(o.ptr, make([]byte, 4*o.n))); err != nil {
					return fmt.Sprintf("clearing the outputs: %v", err)
				}
			}
		}
		run := func() error {
			for _, c := range calls {
				if err := c.p.Matmul(c.args, g.s.NativeStream(), uintptr(g.ws), g.wsBytes); err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
			}
			return nil
		}
		if captured {
			if err := g.s.BeginCapture(gg.CaptureModeGlobal); err != nil {
				return fmt.Sprintf("BeginCapture: %v", err)
			}
			errRun := run()
			graph, errEnd := g.s.EndCapture()
			if errRun != nil {
				return fmt.Sprintf("at capture: %v (EndCapture: %v)", errRun, errEnd)
			}
			if errEnd != nil {
				return fmt.Sprintf("EndCapture: %v", errEnd)
			}
			e, err := graph.Instantiate(0)
			if err != nil {
				return fmt.Sprintf("Instantiate: %v", err)
			}
			defer e.Destroy()
			if err := e.Launch(g.s); err != nil {
				return fmt.Sprintf("Launch: %v", err)
			}
		} else if err := run(); err != nil {
			return err.Error()
		}
		if err := g.s.Synchronize(); err != nil {
			return fmt.Sprintf("Synchronize: %v", err)
		}
		var bad []string
		for _, o := range []struct {
			name string
			ptr  gg.DevicePtr
			want []float64
			on   bool
		}{{"H", H, []float64{0, 0, 0, 1}, wantH}, {"dZ", dZ, []float64{0, 0, 0, 2}, wantBwd}, {"db", db, []float64{0, 2}, wantBwd}} {
			if !o.on {
				continue
			}
			b := make([]byte, 4*len(o.want))
			if err := g.d.Memcpy(gg.DtoH(b, o.ptr)); err != nil {
				return fmt.Sprintf("reading %s: %v", o.name, err)
			}
			if got := decode(b, cublas.R32F); !slices.Equal(got, o.want) {
				bad = append(bad, fmt.Sprintf("%s = %v, want %v", o.name, got, o.want))
			}
		}
		return strings.Join(bad, "; ")
	}
	stages := []struct {
		name     string
		captured bool
		calls    []call
	}{
		{"1 captured, no call before: forward + backward K=2", true, []call{cf, cb2}},
		{"2 on the stream: forward", false, []call{cf}},
		{"3 on the stream: backward K=2", false, []call{cb2}},
		{"4 on the stream: backward K=1 (past Plan's refusal)", false, []call{cb1}},
		{"5 captured: forward + backward K=1 (the first example's calls, past Plan's refusal)", true, []call{cf, cb1}},
	}
	got := make([]string, len(stages))
	for i, st := range stages {
		got[i] = stage(st.captured, st.calls...)
		res := got[i]
		if res == "" {
			res = "ok"
		}
		t.Logf("stage %s: %s", st.name, res)
	}
	var reading []string
	switch {
	case got[1] != "" || got[2] != "":
		reading = append(reading, "the tiny sizes fail outside capture too (stages 2, 3): suspect a minimum M or N for RELU_AUX_BIAS / DRELU_BGRAD")
	case got[0] != "":
		reading = append(reading, "the first call of these kernels inside a capture fails (stage 1) where later calls run: call once before capturing, as the example now does")
	}
	switch {
	case got[3] != "" && got[2] == "":
		reading = append(reading, "K = 1 fails where K = 2 runs (stages 3, 4): Plan's refusal of K = 1 with DRELU stands")
	case got[3] == "" && got[4] == "":
		reading = append(reading, fmt.Sprintf("K = 1 runs on cuBLASLt %d, captured or not (stages 4, 5): Plan's refusal of K = 1 with DRELU may be lifted for this version", g.version))
	case got[3] == "":
		reading = append(reading, "K = 1 runs on the stream (stage 4) but not captured (stage 5)")
	}
	if len(reading) == 0 {
		reading = append(reading, "no stage tells the cause apart; see the stages")
	}
	t.Logf("reading: %s", strings.Join(reading, "; "))
}
