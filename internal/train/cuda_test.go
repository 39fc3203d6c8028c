package train

import (
	"math"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// These tests run the kernels' CUDA bodies; they skip without a GPU.

func TestCUDAGEMM(t *testing.T) {
	_, s := openCUDA(t)
	for _, c := range gemmCases() {
		t.Run(c.String(), func(t *testing.T) { runGEMMCase(t, s, KernelGEMM, c, 1.2e-7) })
	}
	// Sizes of the reference model's products, against the host backend.
	_, hs := openHost(t)
	for _, c := range []gemmCase{
		{transA: false, transB: true, m: 512, n: 1024, k: 1024, alpha: 1},
		{transA: false, transB: false, m: 512, n: 1024, k: 1024, alpha: 1},
		{transA: true, transB: false, m: 1024, n: 1024, k: 512, alpha: 1},
		{transA: false, transB: true, m: 512, n: 10, k: 1024, alpha: 1},
		{transA: false, transB: true, m: 512, n: 1024, k: 1024, alpha: 1, math: MathTF32},
		{transA: true, transB: false, m: 1024, n: 1024, k: 512, alpha: 1, aType: BFloat16, bType: BFloat16},
		{transA: false, transB: false, m: 512, n: 1024, k: 1024, alpha: 1, aType: BFloat16, bType: BFloat16},
	} {
		t.Run("host/"+c.String(), func(t *testing.T) { compareGEMM(t, s, hs, c) })
	}
}

// compareGEMM runs one case on two streams and compares the results.
func compareGEMM(t *testing.T, s1, s2 *gg.Stream, c gemmCase) {
	lda, ldb := c.k, c.n
	if c.transA {
		lda = c.m
	}
	if c.transB {
		ldb = c.k
	}
	r := newRand(uint64(c.m), uint64(c.k))
	_, ha := stored(randVec(r, c.m*c.k), c.aType, c.math)
	_, hb := stored(randVec(r, c.k*c.n), c.bType, c.math)
	var out [2][]float32
	for i, s := range []*gg.Stream{s1, s2} {
		a, b, cp := uploadAny(t, s, ha), uploadAny(t, s, hb), upload(t, s, make([]float32, c.m*c.n))
		ok(t, KernelGEMM(s, c.args(a, b, cp, lda, ldb, c.n)))
		out[i] = download(t, s, cp, c.m*c.n)
		for _, p := range []gg.DevicePtr{a, b, cp} {
			ok(t, s.FreeAsync(p))
		}
	}
	worst := 0.0
	for i := range out[0] {
		worst = max(worst, math.Abs(float64(out[0][i])-float64(out[1][i])))
	}
	// Entries are sums of k products of [-1, 1] values: about sqrt(k/9)
	// in size; float32 rounding differs (FMA on the GPU).
	if tol := 1e-6 * float64(c.k); worst > tol {
		t.Fatalf("%v: largest difference %g, tolerance %g", c, worst, tol)
	}
	t.Logf("%v: largest difference %g", c, worst)
}

// TestCUDAPrecision checks the CUDA twins of roundTF32 and toBF16 on the
// GPU, bit for bit: a k = 1 GEMM of every element type and math (its
// products are its converted inputs), and the bfloat16 cast of special and
// random values.
func TestCUDAPrecision(t *testing.T) {
	_, s := openCUDA(t)
	checkRounding(t, s, KernelGEMM)
	x := roundingValues(4096)
	in := upload(t, s, x)
	out, err := s.MallocAsync(2 * len(x))
	ok(t, err)
	ok(t, launchCastBF16(s, in, out, len(x)))
	h := make([]uint16, len(x))
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(h), out)))
	ok(t, s.Synchronize())
	for i, v := range x {
		if h[i] != toBF16(v) {
			t.Fatalf("bf16(%#08x) on the GPU %#04x, toBF16 %#04x", math.Float32bits(v), h[i], toBF16(v))
		}
	}
}

// TestCUDAStep trains a few steps from the same initialization on the host
// backend and on the GPU, op by op and replayed from a captured graph on
// the GPU, and compares losses and parameters, in every precision. TF32
// and BF16 round the GEMMs' inputs the same way on both (TestCUDAPrecision),
// but a float32 sum that differs in its last bit between the two (FMAs,
// order) can round to a neighbouring TF32 or bfloat16 value, so their
// tolerances are looser than FP32's.
func TestCUDAStep(t *testing.T) {
	_, cs := openCUDA(t)
	_, hs := openHost(t)
	for _, pc := range [][2]string{{SGD, FP32}, {Adam, FP32}, {SGD, TF32}, {Adam, TF32}, {SGD, BF16}, {Adam, BF16}} {
		opt, prec := pc[0], pc[1]
		lossTol := map[string]float64{FP32: 1e-4, TF32: 5e-4, BF16: 3e-3}[prec]
		t.Run(opt+"/"+prec, func(t *testing.T) {
			cfg := Small()
			cfg.Optimizer, cfg.Precision = opt, prec
			if opt == Adam {
				cfg.LR = 1e-3
			}
			const steps = 5
			ds, err := NewDataset(cfg, 4)
			ok(t, err)
			hl, hp := trainStream(t, hs, cfg, ds, steps)
			cl, cp := trainStream(t, cs, cfg, ds, steps)
			gl, gp, _ := trainGraph(t, cs, cfg, ds, steps)
			for i := range steps {
				if relErr(float64(cl[i]), float64(hl[i]), 1e-3) > lossTol || relErr(float64(gl[i]), float64(cl[i]), 1e-3) > 1e-5 {
					t.Errorf("step %d: loss %v on host, %v on the GPU op by op, %v replayed", i, hl[i], cl[i], gl[i])
				}
			}
			// Adam normalizes each update, so a gradient near zero that
			// rounds differently can move its parameter by up to LR: allow a
			// few of those.
			far, worst := 0, 0.0
			for i := range hp {
				d := math.Abs(float64(cp[i]) - float64(hp[i]))
				worst = max(worst, d)
				if d > 1e-5+1e-4*math.Abs(float64(hp[i])) {
					far++
				}
				if d > 2*float64(cfg.LR)*steps {
					t.Fatalf("parameter %d: %v on host, %v on the GPU", i, hp[i], cp[i])
				}
				if relErr(float64(gp[i]), float64(cp[i]), 1e-2) > 1e-5 {
					t.Fatalf("parameter %d: %v on the GPU op by op, %v replayed", i, cp[i], gp[i])
				}
			}
			t.Logf("%s %s: losses host %v, GPU %v; largest parameter difference %g, %d of %d beyond tolerance", opt, prec, hl, cl, worst, far, len(hp))
			allowed := len(hp) / 1000
			if prec != FP32 {
				allowed = len(hp) / 100
			}
			if opt == SGD && prec == FP32 && far > 0 || far > allowed {
				t.Fatalf("%d parameters differ between host and GPU", far)
			}
		})
	}
}

// TestCUDAReference trains the reference model on the GPU, by replaying a
// captured step, and checks that the loss falls.
func TestCUDAReference(t *testing.T) {
	_, s := openCUDA(t)
	if testing.Short() {
		t.Skip("short")
	}
	cfg := Reference()
	ds, err := NewDataset(cfg, 32)
	ok(t, err)
	const steps = 300
	start := time.Now()
	losses, _, _ := trainGraph(t, s, cfg, ds, steps)
	first, last := losses[0], mean(losses[steps-10:])
	t.Logf("%v: loss %.4f -> %.4f over %d steps (%v a step with a loss read-back each)", cfg, first, last, steps, time.Since(start)/steps)
	if !(last < 0.5*first) {
		t.Fatalf("loss %v -> %v: did not halve", first, last)
	}
}

// BenchmarkCUDAStep times a step of the reference and the large model on
// the GPU, in every precision, op by op and replayed, with the package's
// own GEMM kernel (gpugraph train --gemm cublas times cuBLAS).
func BenchmarkCUDAStep(b *testing.B) {
	for _, mc := range []struct {
		name string
		cfg  Config
	}{{"reference", Reference()}, {"large", Large()}} {
		for _, p := range Precisions {
			cfg := mc.cfg
			cfg.Precision = p
			for _, mode := range []string{"stream", "graph"} {
				b.Run(mc.name+"/"+p+"/"+mode, func(b *testing.B) { benchStep(b, openCUDA, cfg, mode) })
			}
		}
	}
}

// TestCUDAForwardGEMMs runs Forward of the reference model with the
// package's kernel, cuBLAS and cuBLASLt (bias and ReLU in the GEMM's
// epilogue), op by op and replayed from a graph set, and compares the
// logits: the three sum in other orders, so they agree to rounding.
func TestCUDAForwardGEMMs(t *testing.T) {
	d, s := openCUDA(t)
	cfg := Reference()
	m, err := NewModel(s, cfg)
	ok(t, err)
	defer m.Destroy()
	const rows = 37
	x, err := d.Malloc(4 * rows * cfg.In)
	ok(t, err)
	defer d.Free(x)
	r := newRand(5, 6)
	in := make([]float32, rows*cfg.In)
	for i := range in {
		in[i] = float32(r.NormFloat64())
	}
	ok(t, s.Memcpy(gg.HtoD(x, gg.Bytes(in))))
	forward := func(name string) []float32 {
		t.Helper()
		z, err := m.Forward(s, x, rows)
		ok(t, err)
		out := make([]float32, rows*cfg.Classes)
		ok(t, s.Memcpy(gg.DtoH(gg.Bytes(out), z)))
		ok(t, s.FreeAsync(z))
		ok(t, s.Synchronize())
		// And captured: a graph set of one key, replayed.
		set, err := gg.NewGraphSet(s, func(s *gg.Stream, n int) ([]gg.DevicePtr, error) {
			p, err := m.Forward(s, x, n)
			return []gg.DevicePtr{p}, err
		}, gg.GraphSetConfig[int]{Keys: []int{rows}})
		ok(t, err)
		defer set.Close()
		outs, err := set.Replay(rows)
		ok(t, err)
		rep := make([]float32, len(out))
		ok(t, outs[0].Read(gg.Bytes(rep)))
		for i := range out {
			if rep[i] != out[i] {
				t.Fatalf("%s: logit %d replayed %v, op by op %v", name, i, rep[i], out[i])
			}
		}
		return out
	}
	ref := forward("kernel")
	g, _, closeBLAS, err := CuBLAS(d, FP32)
	ok(t, err)
	defer closeBLAS()
	m.GEMM = g
	blas := forward("cuBLAS")
	lt, desc, closeLt, err := CuBLASLt(d)
	ok(t, err)
	defer closeLt()
	t.Log(desc)
	m.ForwardGEMM = lt
	fused := forward("cuBLASLt")
	for name, got := range map[string][]float32{"cuBLAS": blas, "cuBLASLt": fused} {
		for i, v := range got {
			if d := math.Abs(float64(v - ref[i])); d > 1e-4*(1+math.Abs(float64(ref[i]))) {
				t.Fatalf("%s: logit %d is %v, the kernel's %v", name, i, v, ref[i])
			}
		}
	}
}

// TestCUDAStepFused trains the reference model with cuBLASLt's fused step
// (CuBLASLtStep, cuBLAS for the other dW GEMMs) and with cuBLAS's unfused
// step, 20 steps each, FP32 and TF32: the losses agree to 1e-5 relative
// for the first 5 steps (TF32: 1e-4) and to 1e-3 after, and the captured
// fused step, replayed, gives the fused step's losses op by op.
func TestCUDAStepFused(t *testing.T) {
	d, s := openCUDA(t)
	for _, prec := range []string{FP32, TF32} {
		t.Run(prec, func(t *testing.T) {
			cfg := Reference()
			cfg.Precision = prec
			const steps = 20
			ds, err := NewDataset(cfg, 4)
			ok(t, err)
			blas, blasDesc, closeBLAS, err := CuBLAS(d, prec)
			ok(t, err)
			defer closeBLAS()
			lt, ltDesc, closeLt, err := CuBLASLtStep(d, prec)
			ok(t, err)
			defer closeLt()
			t.Logf("unfused: %s; fused: %s", blasDesc, ltDesc)
			unfused := func(m *Model) { m.GEMM = blas }
			fused := func(m *Model) { m.GEMM, m.Fused = blas, lt }
			ul, up, _ := trainWith(t, s, cfg, ds, steps, false, unfused)
			fl, fp, _ := trainWith(t, s, cfg, ds, steps, false, fused)
			gl, gp, g := trainWith(t, s, cfg, ds, steps, true, fused)
			// Where the fused GEMMs sum in other orders than cuBLAS's, the
			// two runs part by rounding and the gap grows as they train
			// (seen on an H100 in FP32: 1e-6 at step 4, 2e-4 at step 19):
			// the first steps, where a wrong epilogue shows at once, are
			// held tight, the later ones to the precision's scale.
			tol := func(step int) float64 {
				if step < 5 {
					return map[string]float64{FP32: 1e-5, TF32: 1e-4}[prec]
				}
				return 1e-3
			}
			for i := range steps {
				if relErr(float64(fl[i]), float64(ul[i]), 1e-3) > tol(i) {
					t.Errorf("step %d: loss %v fused, %v unfused", i, fl[i], ul[i])
				}
				if relErr(float64(gl[i]), float64(fl[i]), 1e-3) > 1e-5 {
					t.Errorf("step %d: loss %v fused replayed, %v op by op", i, gl[i], fl[i])
				}
			}
			worst, worstG := 0.0, 0.0
			for i := range up {
				worst = max(worst, math.Abs(float64(fp[i])-float64(up[i])))
				worstG = max(worstG, math.Abs(float64(gp[i])-float64(fp[i])))
			}
			if !(fl[steps-1] < fl[0]) {
				t.Errorf("fused: the loss did not fall: %v", fl)
			}
			c := countNodes(t, g)
			kernels, _ := cfg.FusedStepOps()
			uk, _ := cfg.StepOps()
			t.Logf("%s: losses unfused %v, fused %v; largest parameter difference fused vs unfused %g, replayed vs op by op %g; captured fused step: %v (FusedStepOps %d kernels, unfused %d)",
				prec, ul, fl, worst, worstG, c, kernels, uk)
		})
	}
}

// TestCUDAStepFusedBF16 trains the reference model in BF16 with cuBLASLt's
// fused step (CuBLASLtStep: bfloat16 activations from RELU_AUX_BIAS,
// bfloat16 gradients from DRELU, every dW GEMM with its bias gradient from
// BGRADB) and with cuBLAS's unfused BF16 step, 20 steps each from the same
// start, SGD and Adam; the fused step also captured once and replayed.
//
// The tolerance: the two steps do not round at the same points (the fused
// one adds the hidden layers' bias in bfloat16:
// TestFusedStepBF16MatchesUnfused) and they sum in other orders (cuBLASLt's
// kernels against cuBLAS's: a float32 sum that differs in its last bit can
// round to the neighbouring bfloat16), and training amplifies any
// difference. So the fused step's distance from the unfused BF16 step (the
// largest relative loss difference over the steps, the largest parameter
// difference after them: drift) must be at most twice the unfused BF16
// step's distance from the unfused FP32 step, trained alongside: BF16
// rounds every activation and gradient, a far larger perturbation. On the
// host, where only the bias rounding differs, the reference model's
// ratios were 0.23 (loss) and 0.50 (parameters) with SGD, 0.17 and 0.47
// with Adam, over 20 steps; a mistake (a wrong bias, mask or element type)
// moves the loss by far more than rounding does. The replayed step gives
// the op-by-op step's losses to 1e-5 relative (the same calls and plans).
func TestCUDAStepFusedBF16(t *testing.T) {
	d, s := openCUDA(t)
	for _, opt := range []string{SGD, Adam} {
		t.Run(opt, func(t *testing.T) {
			cfg := Reference()
			cfg.Optimizer, cfg.Precision = opt, BF16
			if opt == Adam {
				cfg.LR = 1e-3
			}
			const steps = 20
			ds, err := NewDataset(cfg, 4)
			ok(t, err)
			blas, blasDesc, closeBLAS, err := CuBLAS(d, BF16)
			ok(t, err)
			defer closeBLAS()
			blas32, _, close32, err := CuBLAS(d, FP32)
			ok(t, err)
			defer close32()
			lt, ltDesc, closeLt, err := CuBLASLtStep(d, BF16)
			ok(t, err)
			defer closeLt()
			t.Logf("unfused: %s; fused: %s", blasDesc, ltDesc)
			unfused := func(m *Model) { m.GEMM = blas }
			fused := func(m *Model) { m.GEMM, m.Fused = blas, lt }
			ul, up, _ := trainWith(t, s, cfg, ds, steps, false, unfused)
			fl, fp, _ := trainWith(t, s, cfg, ds, steps, false, fused)
			gl, gp, g := trainWith(t, s, cfg, ds, steps, true, fused)
			fp32 := cfg
			fp32.Precision = FP32
			xl, xp, _ := trainWith(t, s, fp32, ds, steps, false, func(m *Model) { m.GEMM = blas32 })
			loss, param := drift(fl, ul, fp, up)
			lossBF, paramBF := drift(ul, xl, up, xp)
			_, paramG := drift(gl, fl, gp, fp)
			for i := range steps {
				if relErr(float64(gl[i]), float64(fl[i]), 1e-3) > 1e-5 {
					t.Errorf("step %d: loss %v fused replayed, %v op by op", i, gl[i], fl[i])
				}
			}
			c := countNodes(t, g)
			kernels, _ := cfg.FusedStepOps()
			uk, _ := cfg.StepOps()
			t.Logf("%s: losses unfused %v, fused %v; fused vs unfused bf16: loss %.3g, parameters %.3g; unfused bf16 vs fp32: loss %.3g, parameters %.3g; replayed vs op by op: parameters %.3g; captured fused step: %v (FusedStepOps %d kernels, unfused %d)",
				opt, ul, fl, loss, param, lossBF, paramBF, paramG, c, kernels, uk)
			if loss > 2*lossBF || param > 2*paramBF {
				t.Errorf("the fused BF16 step is further from the unfused one (loss %g, parameters %g) than twice BF16's distance from FP32 (%g, %g)", loss, param, lossBF, paramBF)
			}
			if !(fl[steps-1] < fl[0]) {
				t.Errorf("fused: the loss did not fall: %v", fl)
			}
		})
	}
}
