package train

import (
	"errors"
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

// oneKernelFused is a FusedGEMM whose every call is one GEMM kernel (it
// neither adds the bias nor applies the ReLU): the kernel count of a
// library that fuses, to check the step's structure.
type oneKernelFused struct{}

func (oneKernelFused) Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error {
	if bias == 0 || relu != (aux != 0) {
		return errors.New("Forward: want a bias, and a mask exactly with relu")
	}
	return KernelGEMM(s, g)
}

func (oneKernelFused) BackwardReLU(s *gg.Stream, g GEMMArgs, aux, dbias gg.DevicePtr) error {
	if aux == 0 || dbias == 0 {
		return errors.New("BackwardReLU: nil mask or bias gradient")
	}
	return KernelGEMM(s, g)
}

func (oneKernelFused) WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error {
	if dbias == 0 || !g.TransA {
		return errors.New("WeightGradBias: nil bias gradient or not TransA")
	}
	return KernelGEMM(s, g)
}

func (oneKernelFused) AuxBytes(rows, cols int) int { return rows * ltAuxRowBytes(cols) }

// ltAuxRowBytes is a row of cuBLASLt's mask in bytes, for the test's sizes.
func ltAuxRowBytes(cols int) int { return (cols + 127) / 128 * 16 }

// TestFusedStepOps captures the fused step with a library of one kernel a
// call: the graph is the step FusedStepOps describes, node for node (the
// reference model: 16 kernels where the unfused step has 30), and its
// allocations peak at FusedStepBytes.
func TestFusedStepOps(t *testing.T) {
	if k, _ := Reference().FusedStepOps(); k != 16 {
		t.Fatalf("the reference model's fused step: %d kernels, want 16", k)
	}
	if k, _ := Reference().StepOps(); k != 30 {
		t.Fatalf("the reference model's step: %d kernels, want 30", k)
	}
	for _, cfg := range []Config{Small(), tiny(SGD), {In: 9, Hidden: 5, Layers: 0, Classes: 4, Batch: 3, LR: 0.1}} {
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
			if _, emu := f.(emulated); emu {
				kernels, _ = cfg.StepOps()
			}
			if c[gg.NodeKernel] != kernels || c[gg.NodeMemAlloc] != allocs || c[gg.NodeMemFree] != allocs {
				t.Errorf("%v %T: graph nodes %v, want %d kernels, %d allocs and frees", cfg, f, c, kernels, allocs)
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
// with.
func TestFusedStepMarks(t *testing.T) {
	cfg := Small()
	_, s := openHost(t)
	ds, st, m := newFusedStep(t, s, cfg)
	var marks []string
	m.Mark = func(_ *gg.Stream, what string) error { marks = append(marks, what); return nil }
	ok(t, st.Load(s, ds, 0))
	ok(t, m.Step(s, st.X, st.Y, st.Loss))
	ok(t, s.Synchronize())
	want := []string{"start", "fwd GEMM+bias+ReLU L0", "fwd GEMM+bias+ReLU L1", "fwd GEMM+bias L2", "loss",
		"bwd dW GEMM+db L2", "bwd dA GEMM+ReLU'+db L2", "bwd dW GEMM L1", "bwd dA GEMM+ReLU'+db L1", "bwd dW GEMM L0", "update"}
	if len(marks) != len(want) {
		t.Fatalf("marks %q, want %q", marks, want)
	}
	for i := range want {
		if marks[i] != want[i] {
			t.Fatalf("marks %q, want %q", marks, want)
		}
	}
}

// TestFusedStepRefuses checks that Step with Fused refuses GradSync and
// BF16 with ErrNotSupported before it enqueues anything: the parameters,
// the pool and the stream are as they were, and a step without the cause
// then runs.
func TestFusedStepRefuses(t *testing.T) {
	for _, why := range []string{"GradSync", "bf16"} {
		t.Run(why, func(t *testing.T) {
			cfg := Small()
			if why == "bf16" {
				cfg.Precision = BF16
			}
			d, s := openHost(t)
			ds, st, m := newFusedStep(t, s, cfg)
			synced := false
			if why == "GradSync" {
				m.GradSync = func(*gg.Stream, gg.DevicePtr, int) error { synced = true; return nil }
				m.SyncMode = SyncAfter
			}
			ok(t, st.Load(s, ds, 0))
			before, err := m.ReadParams(s)
			ok(t, err)
			used := d.DefaultMemPool().Stats().UsedCurrent
			err = m.Step(s, st.X, st.Y, st.Loss)
			var ge *gg.Error
			if !errors.Is(err, gg.ErrNotSupported) || !errors.As(err, &ge) {
				t.Fatalf("Step: %v, want a *gpugraph.Error wrapping ErrNotSupported", err)
			}
			t.Log(err)
			after, err := m.ReadParams(s)
			ok(t, err)
			for i := range before {
				if !same(before[i], after[i]) {
					t.Fatalf("parameter %d changed by a refused step: %v -> %v", i, before[i], after[i])
				}
			}
			if u := d.DefaultMemPool().Stats().UsedCurrent; u != used || synced {
				t.Fatalf("a refused step left %d bytes in use (%d before), synced %v", u, used, synced)
			}
			m.Fused = nil
			ok(t, m.Step(s, st.X, st.Y, st.Loss))
			_, err = st.ReadLoss(s)
			ok(t, err)
		})
	}
}

// TestEmulatedFusedRejects checks the emulation's own refusals.
func TestEmulatedFusedRejects(t *testing.T) {
	d, s := openHost(t)
	buf, err := d.Malloc(4 * 64)
	ok(t, err)
	defer d.Free(buf)
	f := EmulatedFused(nil)
	g := GEMMArgs{M: 4, N: 4, K: 4, Alpha: 1, A: buf, LDA: 4, B: buf, LDB: 4, C: buf, LDC: 4}
	for _, c := range []struct {
		name string
		err  error
		code error
	}{
		{"Forward without a mask", f.Forward(s, g, buf, 0, true), gg.ErrInvalidValue},
		{"Forward, padded C", f.Forward(s, GEMMArgs{M: 4, N: 4, K: 4, A: buf, LDA: 4, B: buf, LDB: 4, C: buf, LDC: 5}, buf, buf, true), gg.ErrNotSupported},
		{"BackwardReLU without a bias gradient", f.BackwardReLU(s, g, buf, 0), gg.ErrInvalidValue},
		{"WeightGradBias without TransA", f.WeightGradBias(s, g, buf), gg.ErrNotSupported},
		{"WeightGradBias, bad lda", f.WeightGradBias(s, GEMMArgs{TransA: true, M: 4, N: 4, K: 4, A: buf, LDA: 3, B: buf, LDB: 4, C: buf, LDC: 4}, buf), gg.ErrInvalidValue},
	} {
		if !errors.Is(c.err, c.code) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.code)
		}
	}
	ok(t, s.Synchronize())
}

// TestCuBLASLtStepRefuses checks CuBLASLtStep's refusals that need no GPU:
// BF16, and a device of another backend.
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
