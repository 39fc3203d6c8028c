package train

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

func countNodes(t testing.TB, g *gg.Graph) map[gg.NodeType]int {
	t.Helper()
	nodes, err := g.Nodes()
	ok(t, err)
	count := map[gg.NodeType]int{}
	for _, n := range nodes {
		count[n.Type()]++
	}
	return count
}

// TestFusedStepMatchesUnfused trains with EmulatedFused(KernelGEMM) and
// without, op by op and captured: the emulation runs the unfused step's
// kernels in the unfused step's order of summation, so losses and
// parameters are bit-identical.
func TestFusedStepMatchesUnfused(t *testing.T) {
	for _, pc := range [][2]string{{SGD, FP32}, {Adam, FP32}, {SGD, TF32}, {Adam, TF32}} {
		opt, prec := pc[0], pc[1]
		t.Run(opt+"/"+prec, func(t *testing.T) {
			cfg := Small()
			cfg.Optimizer, cfg.Precision = opt, prec
			if opt == Adam {
				cfg.LR = 1e-3
			}
			const steps = 6
			_, s := openHost(t)
			ds, err := NewDataset(cfg, 4)
			ok(t, err)
			fused := func(m *Model) { m.Fused = EmulatedFused(nil) }
			ul, up, _ := trainWith(t, s, cfg, ds, steps, false, func(*Model) {})
			for _, graph := range []bool{false, true} {
				fl, fp, g := trainWith(t, s, cfg, ds, steps, graph, fused)
				for i := range steps {
					if !same(fl[i], ul[i]) {
						t.Fatalf("graph %v: step %d: loss %v fused, %v unfused", graph, i, fl[i], ul[i])
					}
				}
				for i := range up {
					if !same(fp[i], up[i]) {
						t.Fatalf("graph %v: parameter %d: %v fused, %v unfused", graph, i, fp[i], up[i])
					}
				}
				if graph {
					// The emulation issues the unfused step's kernels, and a
					// memcpy per mask.
					c := countNodes(t, g)
					kernels, _ := cfg.StepOps()
					_, allocs := cfg.FusedStepOps()
					if c[gg.NodeKernel] != kernels || c[gg.NodeMemcpy] != cfg.Layers || c[gg.NodeMemAlloc] != allocs || c[gg.NodeMemFree] != allocs {
						t.Errorf("emulated graph nodes %v, want %d kernels, %d memcpys, %d allocs and frees", c, kernels, cfg.Layers, allocs)
					}
				}
			}
			if !(ul[steps-1] < ul[0]) {
				t.Errorf("loss did not fall: %v", ul)
			}
			t.Logf("%s %s: losses %v, bit-identical fused and unfused, op by op and replayed", opt, prec, ul)
		})
	}
}

// hiddenBiases lists the indices, in ReadParams' layout, of the hidden
// layers' biases: what the BF16 fused step's forward pass adds in
// bfloat16.
func hiddenBiases(cfg Config) []int {
	in, out := cfg.dims()
	var idx []int
	off := 0
	for l := range in {
		off += out[l] * in[l]
		if l < len(in)-1 {
			for i := range out[l] {
				idx = append(idx, off+i)
			}
		}
		off += out[l]
	}
	return idx
}

// ulp32 is the spacing of float32s at |x|.
func ulp32(x float32) float64 {
	a := float32(math.Abs(float64(x)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// TestFusedStepBF16MatchesUnfused runs the BF16 fused step of EmulatedFused
// (the GPU path's rounding points: the GEMMs' float32 products rounded to
// bfloat16 once, after the bias and ReLU or its gradient) in lockstep with
// the unfused BF16 step, SGD and Adam, op by op and replayed from a
// captured step. The two round at the same points but one: the fused
// step's hidden layers add their bias rounded to bfloat16 (cuBLASLt takes
// a bias of its bfloat16 output's type), the unfused step the float32
// master bias. So before each step the unfused model is given the fused
// model's parameters with those biases rounded to bfloat16, and then:
//
//   - the losses are bit-identical, and so is every weight and output-layer
//     bias after the step: the gradients the two steps apply are the same
//     bits (the same forward pass, and the bias gradients are the
//     column-sum kernel's over the same bfloat16 dZ in both);
//   - each hidden bias moves by the same update in both, to within one
//     rounding of the update's subtraction from each model's bias (half a
//     float32 ulp of each result): it is only the starting point, the
//     rounding of that bias, that differs;
//   - at the first step, whose biases are zero (bfloat16 values), every
//     parameter is bit-identical.
//
// Adam's moments come from those same gradients, so they agree too.
func TestFusedStepBF16MatchesUnfused(t *testing.T) {
	for _, opt := range []string{SGD, Adam} {
		for _, graph := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/graph=%v", opt, graph), func(t *testing.T) {
				cfg := Small()
				cfg.Optimizer, cfg.Precision = opt, BF16
				if opt == Adam {
					cfg.LR = 1e-3
				}
				const steps = 5
				_, s := openHost(t)
				ds, err := NewDataset(cfg, steps)
				ok(t, err)
				st, err := NewStatic(s, cfg)
				ok(t, err)
				defer st.Free(s)
				um, err := NewModel(s, cfg)
				ok(t, err)
				defer um.Destroy()
				fm, err := NewModel(s, cfg)
				ok(t, err)
				defer fm.Destroy()
				fm.Fused = EmulatedFused(nil)
				var e *gg.Exec
				if graph {
					var g *gg.Graph
					g, e = captureStep(t, s, fm, st)
					defer g.Destroy()
					defer e.Destroy()
				}
				hidden := map[int]bool{}
				for _, i := range hiddenBiases(cfg) {
					hidden[i] = true
				}
				moved := 0 // hidden biases whose rounding differed
				losses := make([]float32, steps)
				for i := range steps {
					p, err := fm.ReadParams(s)
					ok(t, err)
					q := slices.Clone(p)
					for j := range hidden {
						q[j] = fromBF16(toBF16(q[j]))
					}
					ok(t, um.WriteParams(s, q))
					ok(t, st.Load(s, ds, i))
					ok(t, um.Step(s, st.X, st.Y, st.Loss))
					lu, err := st.ReadLoss(s)
					ok(t, err)
					if graph {
						ok(t, e.Launch(s))
					} else {
						ok(t, fm.Step(s, st.X, st.Y, st.Loss))
					}
					lf, err := st.ReadLoss(s)
					ok(t, err)
					if !same(lu, lf) {
						t.Fatalf("step %d: loss %v fused, %v unfused", i, lf, lu)
					}
					losses[i] = lf
					up, err := um.ReadParams(s)
					ok(t, err)
					fp, err := fm.ReadParams(s)
					ok(t, err)
					for j := range up {
						if !hidden[j] || i == 0 {
							if !same(fp[j], up[j]) {
								t.Fatalf("step %d: parameter %d (hidden bias %v): %v fused, %v unfused", i, j, hidden[j], fp[j], up[j])
							}
							continue
						}
						if q[j] != p[j] {
							moved++
						}
						du, df := float64(up[j])-float64(q[j]), float64(fp[j])-float64(p[j])
						if tol := (ulp32(up[j]) + ulp32(fp[j])) / 2; math.Abs(du-df) > tol {
							t.Fatalf("step %d: hidden bias %d moved %g fused (%v -> %v), %g unfused (%v -> %v): apart by more than %g",
								i, j, df, p[j], fp[j], du, q[j], up[j], tol)
						}
					}
				}
				if moved == 0 {
					t.Fatal("no hidden bias was off bfloat16's grid: the test did not test the rounding")
				}
				t.Logf("%s: losses %v bit-identical; weights bit-identical; %d hidden-bias updates from off-grid biases agree to one rounding", opt, losses, moved)
			})
		}
	}
}

// drift is how far two runs are apart: the largest relative difference of
// their losses at any step (relErr, floor 1e-3), and the largest absolute
// difference of their final parameters.
func drift(l1, l2, p1, p2 []float32) (loss, param float64) {
	for i := range l1 {
		loss = max(loss, relErr(float64(l1[i]), float64(l2[i]), 1e-3))
	}
	for i := range p1 {
		param = max(param, math.Abs(float64(p1[i])-float64(p2[i])))
	}
	return loss, param
}

// TestFusedStepBF16Trains trains the small model 30 steps, free-running,
// with the BF16 fused step (EmulatedFused), the unfused BF16 step and the
// FP32 step from the same start. The fused and unfused BF16 steps part only
// by the rounding of the hidden biases (TestFusedStepBF16MatchesUnfused),
// but training amplifies any difference, so the test bounds the fused
// step's distance from the unfused BF16 step by BF16's own distance from
// FP32, which rounds every activation and gradient rather than one bias:
// the largest relative loss difference over the steps and the largest
// parameter difference at the end must not exceed BF16's (they were 0.66
// and 0.66 of it with SGD, 0.76 and 0.77 with Adam, when this was
// written). The loss must fall.
func TestFusedStepBF16Trains(t *testing.T) {
	for _, opt := range []string{SGD, Adam} {
		t.Run(opt, func(t *testing.T) {
			cfg := Small()
			cfg.Optimizer, cfg.Precision = opt, BF16
			if opt == Adam {
				cfg.LR = 1e-3
			}
			const steps = 30
			_, s := openHost(t)
			ds, err := NewDataset(cfg, 8)
			ok(t, err)
			ul, up, _ := trainWith(t, s, cfg, ds, steps, false, func(*Model) {})
			fl, fp, _ := trainWith(t, s, cfg, ds, steps, false, func(m *Model) { m.Fused = EmulatedFused(nil) })
			fp32 := cfg
			fp32.Precision = FP32
			xl, xp, _ := trainWith(t, s, fp32, ds, steps, false, func(*Model) {})
			loss, param := drift(fl, ul, fp, up)
			lossBF, paramBF := drift(ul, xl, up, xp)
			t.Logf("%s: fused vs unfused bf16: loss %.3g, parameters %.3g; unfused bf16 vs fp32: %.3g, %.3g; losses fused %v", opt, loss, param, lossBF, paramBF, fl)
			if loss > lossBF || param > paramBF {
				t.Fatalf("the fused BF16 step is further from the unfused one (loss %g, parameters %g) than BF16 is from FP32 (%g, %g)", loss, param, lossBF, paramBF)
			}
			if !(fl[steps-1] < 0.8*fl[0]) {
				t.Fatalf("fused: the loss did not fall: %v", fl)
			}
		})
	}
}

// oneKernelFused is a FusedGEMM whose every call is one kernel (it neither
// adds the bias nor applies the ReLU): the kernel count of a library that
// fuses, to check the step's structure.
type oneKernelFused struct{}

// oneKernel is one GEMM kernel for a float32 C; for a bfloat16 C, which
// KernelGEMM does not write, a kernel that writes nothing (a cast of no
// elements): the count and the step's buffers are what matter here.
func oneKernel(s *gg.Stream, g GEMMArgs) error {
	if g.CType == BFloat16 {
		return launchCastBF16(s, g.C, g.C, 0)
	}
	return KernelGEMM(s, g)
}

func (oneKernelFused) Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error {
	if bias == 0 || relu != (aux != 0) {
		return errors.New("Forward: want a bias, and a mask exactly with relu")
	}
	return oneKernel(s, g)
}

func (oneKernelFused) BackwardReLU(s *gg.Stream, g GEMMArgs, aux, dbias gg.DevicePtr) error {
	if aux == 0 || (dbias != 0) != (g.CType == Float32) {
		return errors.New("BackwardReLU: nil mask, or a bias gradient with a bfloat16 C (or none with float32)")
	}
	return oneKernel(s, g)
}

func (oneKernelFused) WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error {
	if dbias == 0 || !g.TransA || g.CType != Float32 {
		return errors.New("WeightGradBias: nil bias gradient, not TransA, or not a float32 C")
	}
	return KernelGEMM(s, g)
}

func (oneKernelFused) AuxBytes(rows, cols int) int { return rows * ltAuxRowBytes(cols) }

// ltAuxRowBytes is a row of cuBLASLt's mask in bytes, for the test's sizes.
func ltAuxRowBytes(cols int) int { return (cols + 127) / 128 * 16 }

// TestFusedStepOps captures the fused step with a library of one kernel a
// call: the graph is the step FusedStepOps describes, node for node (the
// reference model: 16 kernels where the unfused step has 30; BF16: 18
// where it has 31, its 10 classes' bias gradient summed apart), and its allocations peak at FusedStepBytes; the
// emulation's graph is the unfused step's kernels with FusedStepOps'
// allocations.
func TestFusedStepOps(t *testing.T) {
	bf := Reference()
	bf.Precision = BF16
	for _, c := range []struct {
		cfg              Config
		fused, unfused   int
		fusedA, unfusedA int
	}{{Reference(), 16, 30, 14, 10}, {bf, 18, 31, 16, 20}} {
		k, a := c.cfg.FusedStepOps()
		uk, ua := c.cfg.StepOps()
		if k != c.fused || uk != c.unfused || a != c.fusedA || ua != c.unfusedA {
			t.Fatalf("the reference model, %s: fused step %d kernels and %d allocations, unfused %d and %d; want %d, %d, %d, %d",
				c.cfg.precision(), k, a, uk, ua, c.fused, c.fusedA, c.unfused, c.unfusedA)
		}
	}
	var cfgs []Config
	for _, cfg := range []Config{Small(), tiny(SGD), {In: 9, Hidden: 5, Layers: 0, Classes: 4, Batch: 3, LR: 0.1}} {
		cfgs = append(cfgs, cfg)
		cfg.Precision = BF16
		cfgs = append(cfgs, cfg)
	}
	for _, cfg := range cfgs {
		for _, f := range []FusedGEMM{oneKernelFused{}, EmulatedFused(nil)} {
			d, s := openHost(t)
			ds, err := NewDataset(cfg, 2)
			ok(t, err)
			st, err := NewStatic(s, cfg)
			ok(t, err)
			m, err := NewModel(s, cfg)
			ok(t, err)
			m.Fused = f
			ok(t, s.Synchronize())
			pool := d.DefaultMemPool()
			base := pool.Stats()
			pool.ResetHigh()
			ok(t, st.Load(s, ds, 0))
			ok(t, m.Step(s, st.X, st.Y, st.Loss))
			ok(t, s.Synchronize())
			got := pool.Stats()
			peak, total := cfg.FusedStepBytes(f.AuxBytes)
			if got.UsedCurrent != base.UsedCurrent {
				t.Fatalf("%v %T: used %d after a step, %d before", cfg, f, got.UsedCurrent, base.UsedCurrent)
			}
			if got.UsedHigh-base.UsedCurrent != uint64(peak) {
				t.Fatalf("%v %T: step peaked at %d bytes, FusedStepBytes says %d (total %d)", cfg, f, got.UsedHigh-base.UsedCurrent, peak, total)
			}
			g, e := captureStep(t, s, m, st)
			ok(t, e.Launch(s))
			ok(t, s.Synchronize())
			c := countNodes(t, g)
			kernels, allocs := cfg.FusedStepOps()
			memcpys := 0
			if _, emu := f.(emulated); emu {
				kernels, _ = cfg.StepOps()
				memcpys = cfg.Layers // a mask copied out
				if cfg.bf16() {
					memcpys *= 2 // and back
				}
			}
			if c[gg.NodeKernel] != kernels || c[gg.NodeMemAlloc] != allocs || c[gg.NodeMemFree] != allocs || c[gg.NodeMemcpy] != memcpys {
				t.Errorf("%v %T: graph nodes %v, want %d kernels, %d memcpys, %d allocs and frees", cfg, f, c, kernels, memcpys, allocs)
			}
			ok(t, e.Destroy())
			ok(t, g.Destroy())
			ok(t, m.Destroy())
		}
	}
}

// newFusedStep makes a one-batch dataset, the static buffers and a model
// whose step is the emulated fused one, freed when t ends.
func newFusedStep(t *testing.T, s *gg.Stream, cfg Config) (*Dataset, *Static, *Model) {
	t.Helper()
	ds, err := NewDataset(cfg, 1)
	ok(t, err)
	st, err := NewStatic(s, cfg)
	ok(t, err)
	t.Cleanup(func() { st.Free(s) })
	m, err := NewModel(s, cfg)
	ok(t, err)
	t.Cleanup(func() { m.Destroy() })
	m.Fused = EmulatedFused(nil)
	return ds, st, m
}

// TestFusedStepMarks checks the names the fused step marks its pieces
// with, one a kernel.
func TestFusedStepMarks(t *testing.T) {
	for _, prec := range []string{FP32, BF16} {
		cfg := Small()
		cfg.Precision = prec
		_, s := openHost(t)
		ds, st, m := newFusedStep(t, s, cfg)
		var marks []string
		m.Mark = func(_ *gg.Stream, what string) error { marks = append(marks, what); return nil }
		ok(t, st.Load(s, ds, 0))
		ok(t, m.Step(s, st.X, st.Y, st.Loss))
		ok(t, s.Synchronize())
		want := []string{"start", "fwd GEMM+bias+ReLU L0", "fwd GEMM+bias+ReLU L1", "fwd GEMM+bias L2", "loss",
			"bwd dW GEMM+db L2", "bwd dA GEMM+ReLU'+db L2", "bwd dW GEMM L1", "bwd dA GEMM+ReLU'+db L1", "bwd dW GEMM L0", "update"}
		if prec == BF16 { // the small model's 10 classes: the top layer's bias gradient apart (topBiasApart)
			want = []string{"start", "cast x to bf16", "fwd GEMM+bias+ReLU L0", "fwd GEMM+bias+ReLU L1", "fwd GEMM+bias L2", "loss",
				"bwd db L2", "bwd dW GEMM L2", "bwd dA GEMM+ReLU' L2", "bwd dW GEMM+db L1", "bwd dA GEMM+ReLU' L1", "bwd dW GEMM+db L0", "update"}
		}
		if k, _ := cfg.FusedStepOps(); len(marks) != len(want) || len(marks)-1 != k {
			t.Fatalf("%s: marks %q, want %q (FusedStepOps: %d kernels)", prec, marks, want, k)
		}
		for i := range want {
			if marks[i] != want[i] {
				t.Fatalf("%s: marks %q, want %q", prec, marks, want)
			}
		}
	}
}

// TestFusedStepRefuses checks that Step with Fused refuses GradSync with
// ErrNotSupported before it enqueues anything, and that a step whose
// library fails part way (a typed error from the k-th call) returns that
// error and leaves the model as it was: the parameters unchanged, every
// buffer the step allocated freed, nothing synced; a whole step then runs.
// Both in FP32 and BF16.
func TestFusedStepRefuses(t *testing.T) {
	for _, prec := range []string{FP32, BF16} {
		for _, why := range []string{"GradSync", "Forward", "BackwardReLU", "WeightGradBias"} {
			t.Run(prec+"/"+why, func(t *testing.T) {
				cfg := Small()
				cfg.Precision = prec
				d, s := openHost(t)
				ds, st, m := newFusedStep(t, s, cfg)
				synced := false
				code := gg.ErrNotSupported
				if why == "GradSync" {
					m.GradSync = func(*gg.Stream, gg.DevicePtr, int) error { synced = true; return nil }
					m.SyncMode = SyncAfter
				} else {
					// The library fails part way, with one of its own
					// typed errors: at its second Forward or BackwardReLU,
					// or its first WeightGradBias (after the loss; the
					// FP32 step makes only one).
					code = gg.ErrInvalidValue
					at := 2
					if why == "WeightGradBias" {
						at = 1
					}
					m.Fused = &failingFused{FusedGEMM: m.Fused, fail: why, at: at}
				}
				ok(t, st.Load(s, ds, 0))
				before, err := m.ReadParams(s)
				ok(t, err)
				used := d.DefaultMemPool().Stats().UsedCurrent
				err = m.Step(s, st.X, st.Y, st.Loss)
				var ge *gg.Error
				if !errors.Is(err, code) || !errors.As(err, &ge) {
					t.Fatalf("Step: %v, want a *gpugraph.Error wrapping %v", err, code)
				}
				t.Log(err)
				after, err := m.ReadParams(s)
				ok(t, err)
				for i := range before {
					if !same(before[i], after[i]) {
						t.Fatalf("parameter %d changed by a failed step: %v -> %v", i, before[i], after[i])
					}
				}
				if u := d.DefaultMemPool().Stats().UsedCurrent; u != used || synced {
					t.Fatalf("a failed step left %d bytes in use (%d before), synced %v", u, used, synced)
				}
				m.GradSync = nil
				if f, ok := m.Fused.(*failingFused); ok {
					m.Fused = f.FusedGEMM
				}
				ok(t, m.Step(s, st.X, st.Y, st.Loss))
				_, err = st.ReadLoss(s)
				ok(t, err)
			})
		}
	}
}

// failingFused is a FusedGEMM whose call of one kind fails, at its at-th
// time, with ErrInvalidValue (as a nil pointer would), enqueueing nothing.
type failingFused struct {
	FusedGEMM
	fail  string
	at, n int
}

func (f *failingFused) failNow(kind string) error {
	if kind != f.fail {
		return nil
	}
	if f.n++; f.n < f.at {
		return nil
	}
	return &gg.Error{Op: "failingFused." + kind, Code: gg.ErrInvalidValue, Detail: "failing on purpose"}
}

func (f *failingFused) Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error {
	if err := f.failNow("Forward"); err != nil {
		return err
	}
	return f.FusedGEMM.Forward(s, g, bias, aux, relu)
}

func (f *failingFused) BackwardReLU(s *gg.Stream, g GEMMArgs, aux, dbias gg.DevicePtr) error {
	if err := f.failNow("BackwardReLU"); err != nil {
		return err
	}
	return f.FusedGEMM.BackwardReLU(s, g, aux, dbias)
}

func (f *failingFused) WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error {
	if err := f.failNow("WeightGradBias"); err != nil {
		return err
	}
	return f.FusedGEMM.WeightGradBias(s, g, dbias)
}

// TestEmulatedFusedRejects checks the emulation's refusals, and those it
// shares with CuBLASLtStep (checkFused), each a *gpugraph.Error with its
// code, before it enqueues anything.
func TestEmulatedFusedRejects(t *testing.T) {
	d, s := openHost(t)
	buf, err := d.Malloc(4 * 64)
	ok(t, err)
	defer d.Free(buf)
	f := EmulatedFused(nil)
	g := GEMMArgs{M: 4, N: 4, K: 4, Alpha: 1, A: buf, LDA: 4, B: buf, LDB: 4, C: buf, LDC: 4}
	with := func(change func(*GEMMArgs)) GEMMArgs {
		h := g
		change(&h)
		return h
	}
	bf := with(func(h *GEMMArgs) { h.AType, h.BType, h.CType = BFloat16, BFloat16, BFloat16 })
	wg := with(func(h *GEMMArgs) { h.TransA = true })
	for _, c := range []struct {
		name string
		err  error
		code error
	}{
		{"Forward without a mask", f.Forward(s, g, buf, 0, true), gg.ErrInvalidValue},
		{"Forward without a bias", f.Forward(s, g, 0, buf, true), gg.ErrInvalidValue},
		{"Forward, padded C", f.Forward(s, with(func(h *GEMMArgs) { h.LDC = 5 }), buf, buf, true), gg.ErrNotSupported},
		{"Forward, bad C type", f.Forward(s, with(func(h *GEMMArgs) { h.CType = 2 }), buf, buf, true), gg.ErrInvalidValue},
		{"Forward, misaligned bfloat16 C", f.Forward(s, with(func(h *GEMMArgs) { *h = bf; h.C = buf + 1 }), buf, buf, true), gg.ErrInvalidValue},
		{"Forward, operands of two types", f.Forward(s, with(func(h *GEMMArgs) { h.AType = BFloat16 }), buf, buf, true), gg.ErrNotSupported},
		{"Forward, float32 operands into a bfloat16 C", f.Forward(s, with(func(h *GEMMArgs) { h.CType = BFloat16 }), buf, buf, true), gg.ErrNotSupported},
		{"Forward, bfloat16 C without relu", f.Forward(s, bf, buf, 0, false), gg.ErrNotSupported},
		{"Forward, bfloat16 C with beta", f.Forward(s, with(func(h *GEMMArgs) { *h = bf; h.Beta = 1 }), buf, buf, true), gg.ErrNotSupported},
		{"BackwardReLU without a mask", f.BackwardReLU(s, g, 0, buf), gg.ErrInvalidValue},
		{"BackwardReLU, bfloat16 C with a bias gradient", f.BackwardReLU(s, bf, buf, buf), gg.ErrNotSupported},
		{"BackwardReLU, padded C", f.BackwardReLU(s, with(func(h *GEMMArgs) { h.LDC = 6 }), buf, buf), gg.ErrNotSupported},
		{"WeightGradBias without TransA", f.WeightGradBias(s, g, buf), gg.ErrNotSupported},
		{"WeightGradBias without a bias gradient", f.WeightGradBias(s, wg, 0), gg.ErrInvalidValue},
		{"WeightGradBias, bad lda", f.WeightGradBias(s, with(func(h *GEMMArgs) { h.TransA, h.LDA = true, 3 }), buf), gg.ErrInvalidValue},
		{"WeightGradBias, bfloat16 C", f.WeightGradBias(s, with(func(h *GEMMArgs) { *h = bf; h.TransA = true }), buf), gg.ErrNotSupported},
	} {
		var ge *gg.Error
		if !errors.Is(c.err, c.code) || !errors.As(c.err, &ge) {
			t.Errorf("%s: %v, want a *gpugraph.Error wrapping %v", c.name, c.err, c.code)
		}
	}
	ok(t, s.Synchronize())
}

// TestCuBLASLtStepRefuses checks CuBLASLtStep's refusals that need no GPU:
// a device of another backend in every precision, and an unknown
// precision.
func TestCuBLASLtStepRefuses(t *testing.T) {
	d, _ := openHost(t)
	for _, prec := range []string{BF16, FP32, TF32} {
		_, _, _, err := CuBLASLtStep(d, prec)
		if !errors.Is(err, gg.ErrNotSupported) {
			t.Errorf("%s on the host backend: %v, want ErrNotSupported", prec, err)
		}
	}
	if _, _, _, err := CuBLASLtStep(d, "fp16"); !errors.Is(err, gg.ErrInvalidValue) {
		t.Errorf("fp16: %v, want ErrInvalidValue", err)
	}
	if a, b := (ltStep{}).AuxBytes(512, 1024), 512*1024/8; a != b {
		t.Errorf("cuBLASLt's mask of 512×1024: %d bytes, want %d", a, b)
	}
	if a := (ltStep{}).AuxBytes(3, 10); a != 3*16 {
		t.Errorf("cuBLASLt's mask of 3×10: %d bytes, want %d (rows of 128 bits)", a, 3*16)
	}
}
