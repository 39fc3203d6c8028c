package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// tiny is a configuration small enough for a float64 reference and finite
// differences over every parameter.
func tiny(opt string) Config {
	return Config{In: 5, Hidden: 7, Layers: 2, Classes: 3, Batch: 6, LR: 1, Optimizer: opt, Seed: 3}
}

// refLoss is the mean cross-entropy of the MLP with parameters p (ReadParams
// layout) on the batch, in float64.
func refLoss(cfg Config, p []float64, x []float32, y []int32) float64 {
	in, out := cfg.dims()
	total := 0.0
	for r := range cfg.Batch {
		a := make([]float64, cfg.In)
		for j := range a {
			a[j] = float64(x[r*cfg.In+j])
		}
		off := 0
		for l := range in {
			w, b := p[off:off+out[l]*in[l]], p[off+out[l]*in[l]:off+out[l]*in[l]+out[l]]
			off += out[l]*in[l] + out[l]
			z := make([]float64, out[l])
			for o := range z {
				s := b[o]
				for i, v := range a {
					s += w[o*in[l]+i] * v
				}
				if l < len(in)-1 {
					s = max(s, 0)
				}
				z[o] = s
			}
			a = z
		}
		mx := math.Inf(-1)
		for _, v := range a {
			mx = max(mx, v)
		}
		sum := 0.0
		for _, v := range a {
			sum += math.Exp(v - mx)
		}
		total += math.Log(sum) + mx - a[y[r]]
	}
	return total / float64(cfg.Batch)
}

// TestGradientCheck compares the gradient a step applies (SGD with
// learning rate 1: the gradient is the parameters' change) with central
// finite differences of a float64 reference of the model's loss, after
// checking that the loss the step reports is that reference's.
func TestGradientCheck(t *testing.T) {
	cfg := tiny(SGD)
	_, s := openHost(t)
	ds, err := NewDataset(cfg, 1)
	ok(t, err)
	st, err := NewStatic(s, cfg)
	ok(t, err)
	m, err := NewModel(s, cfg)
	ok(t, err)
	// Biases start at zero; give them values so that their gradients and
	// the ReLU masks are exercised off the origin.
	p0, err := m.ReadParams(s)
	ok(t, err)
	r := rand.New(rand.NewPCG(7, 7))
	off := 0
	for _, ly := range m.Layers() {
		off += ly.Out * ly.In
		for i := range ly.Out {
			p0[off+i] = float32(r.Float64()*0.2 - 0.1)
		}
		off += ly.Out
	}
	ok(t, m.WriteParams(s, p0))
	ok(t, st.Load(s, ds, 0))
	ok(t, m.Step(s, st.X, st.Y, st.Loss))
	loss, err := st.ReadLoss(s)
	ok(t, err)
	p1, err := m.ReadParams(s)
	ok(t, err)

	x, y := ds.At(0)
	p := make([]float64, len(p0))
	for i, v := range p0 {
		p[i] = float64(v)
	}
	want := refLoss(cfg, p, x, y)
	if relErr(float64(loss), want, 1e-3) > 1e-5 {
		t.Fatalf("loss %v, float64 reference %v", loss, want)
	}
	const h = 1e-5
	bad := 0
	for i := range p {
		save := p[i]
		p[i] = save + h
		fp := refLoss(cfg, p, x, y)
		p[i] = save - h
		fm := refLoss(cfg, p, x, y)
		p[i] = save
		fd := (fp - fm) / (2 * h)
		g := float64(p0[i]) - float64(p1[i]) // LR 1
		if math.Abs(g-fd) > 2e-6+1e-4*math.Abs(fd) {
			if bad++; bad <= 5 {
				t.Errorf("parameter %d: gradient %g, finite difference %g", i, g, fd)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d gradients wrong", bad, len(p))
	}
}

// trainStream runs steps op by op from a fresh model and returns the loss
// of every step and the final parameters.
func trainStream(t testing.TB, s *gg.Stream, cfg Config, ds *Dataset, steps int) ([]float32, []float32) {
	t.Helper()
	losses, p, _ := trainWith(t, s, cfg, ds, steps, false, func(*Model) {})
	return losses, p
}

// captureStep captures one step of m on s into an executable graph.
func captureStep(t testing.TB, s *gg.Stream, m *Model, st *Static) (*gg.Graph, *gg.Exec) {
	t.Helper()
	ok(t, s.BeginCapture(gg.CaptureModeGlobal))
	if err := m.Step(s, st.X, st.Y, st.Loss); err != nil {
		s.EndCapture()
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	ok(t, err)
	e, err := g.Instantiate(0)
	ok(t, err)
	return g, e
}

// trainGraph is trainStream with one captured step replayed.
func trainGraph(t testing.TB, s *gg.Stream, cfg Config, ds *Dataset, steps int) ([]float32, []float32, *gg.Graph) {
	t.Helper()
	return trainWith(t, s, cfg, ds, steps, true, func(*Model) {})
}

// trainWith trains steps from a fresh model, op by op or (graph) with one
// captured step replayed, with setup applied to the model first, and
// returns the loss of every step, the final parameters and the captured
// graph (nil op by op).
func trainWith(t testing.TB, s *gg.Stream, cfg Config, ds *Dataset, steps int, graph bool, setup func(*Model)) ([]float32, []float32, *gg.Graph) {
	t.Helper()
	st, err := NewStatic(s, cfg)
	ok(t, err)
	m, err := NewModel(s, cfg)
	ok(t, err)
	defer m.Destroy()
	defer st.Free(s)
	setup(m)
	var g *gg.Graph
	var e *gg.Exec
	if graph {
		g, e = captureStep(t, s, m, st)
		defer e.Destroy()
	}
	losses := make([]float32, steps)
	for i := range steps {
		ok(t, st.Load(s, ds, i))
		if graph {
			ok(t, e.Launch(s))
		} else {
			ok(t, m.Step(s, st.X, st.Y, st.Loss))
		}
		losses[i], err = st.ReadLoss(s)
		ok(t, err)
	}
	p, err := m.ReadParams(s)
	ok(t, err)
	return losses, p, g
}

func TestLossFalls(t *testing.T) {
	steps := 200
	if testing.Short() {
		steps = 120
	}
	cfg := Small()
	_, s := openHost(t)
	ds, err := NewDataset(cfg, 16)
	ok(t, err)
	losses, _ := trainStream(t, s, cfg, ds, steps)
	first, last := losses[0], mean(losses[steps-10:])
	t.Logf("loss %.4f -> %.4f over %d steps", first, last, steps)
	if !(last < 0.5*first) {
		t.Fatalf("loss %v -> %v (mean of the last 10 steps): did not halve", first, last)
	}
}

func mean(v []float32) float32 {
	s := float32(0)
	for _, x := range v {
		s += x
	}
	return s / float32(len(v))
}

// TestGraphMatchesStream trains twice from the same initialization, op by
// op and by replaying one captured step, and compares every step's loss
// and the final parameters.
//
// It also checks that the captured graph is the step StepOps describes,
// node for node, in every precision with either optimizer.
func TestGraphMatchesStream(t *testing.T) {
	for _, pc := range [][2]string{{SGD, FP32}, {Adam, FP32}, {SGD, TF32}, {Adam, TF32}, {SGD, BF16}, {Adam, BF16}} {
		opt, prec := pc[0], pc[1]
		t.Run(opt+"/"+prec, func(t *testing.T) {
			cfg := Small()
			cfg.Optimizer, cfg.Precision = opt, prec
			if opt == Adam {
				cfg.LR = 1e-3
			}
			steps := 30
			if prec != FP32 {
				steps = 10
			}
			_, s := openHost(t)
			ds, err := NewDataset(cfg, 4)
			ok(t, err)
			ls, ps := trainStream(t, s, cfg, ds, steps)
			lg, pg, g := trainGraph(t, s, cfg, ds, steps)
			for i := range steps {
				if relErr(float64(lg[i]), float64(ls[i]), 1e-3) > 1e-5 {
					t.Fatalf("step %d: loss %v op by op, %v replayed", i, ls[i], lg[i])
				}
			}
			if !(mean(ls[steps-5:]) < ls[0]) {
				t.Errorf("loss did not fall: %v", ls)
			}
			exact := true
			for i := range ps {
				if relErr(float64(pg[i]), float64(ps[i]), 1e-2) > 1e-5 {
					t.Fatalf("parameter %d: %v op by op, %v replayed", i, ps[i], pg[i])
				}
				exact = exact && ps[i] == pg[i]
			}
			t.Logf("%s %s: loss %.4f -> %.4f, parameters bit-identical: %v", opt, prec, ls[0], ls[steps-1], exact)

			// The graph is the step, node for node.
			nodes, err := g.Nodes()
			ok(t, err)
			count := map[gg.NodeType]int{}
			for _, n := range nodes {
				count[n.Type()]++
			}
			kernels, allocs := cfg.StepOps()
			if count[gg.NodeKernel] != kernels || count[gg.NodeMemAlloc] != allocs || count[gg.NodeMemFree] != allocs || len(nodes) != kernels+2*allocs {
				t.Errorf("graph nodes %v, want %d kernels, %d allocs and frees", count, kernels, allocs)
			}
		})
	}
}

// TestStepMemory checks that a step's allocations peak at what StepBytes
// says (the pool counts requested bytes), that the step frees everything it
// allocates, and that op by op the pool serves later steps from cache.
func TestStepMemory(t *testing.T) {
	cfgs := []Config{tiny(SGD), Small(), {In: 33, Hidden: 65, Layers: 3, Classes: 7, Batch: 19, LR: 0.1, Optimizer: Adam},
		{In: 9, Hidden: 1, Layers: 0, Classes: 4, Batch: 3, LR: 0.1}}
	for _, p := range []string{TF32, BF16} {
		for _, c := range cfgs[1:4] {
			c.Precision = p
			cfgs = append(cfgs, c)
		}
	}
	for _, cfg := range cfgs {
		d, s := openHost(t)
		pool := d.DefaultMemPool()
		ds, err := NewDataset(cfg, 2)
		ok(t, err)
		st, err := NewStatic(s, cfg)
		ok(t, err)
		m, err := NewModel(s, cfg)
		ok(t, err)
		ok(t, s.Synchronize())
		base := pool.Stats()
		peak, total := cfg.StepBytes()
		var reserved uint64
		for i := range 3 {
			pool.ResetHigh()
			ok(t, st.Load(s, ds, i))
			ok(t, m.Step(s, st.X, st.Y, st.Loss))
			ok(t, s.Synchronize())
			got := pool.Stats()
			if got.UsedCurrent != base.UsedCurrent {
				t.Fatalf("%v: used %d after a step, %d before", cfg, got.UsedCurrent, base.UsedCurrent)
			}
			if got.UsedHigh-base.UsedCurrent != uint64(peak) {
				t.Fatalf("%v: step peaked at %d bytes, StepBytes says %d", cfg, got.UsedHigh-base.UsedCurrent, peak)
			}
			if i == 0 {
				reserved = got.ReservedCurrent
			} else if got.ReservedCurrent != reserved {
				t.Errorf("%v: step %d grew the pool from %d to %d bytes", cfg, i, reserved, got.ReservedCurrent)
			}
		}
		if cfg.Layers > 0 && peak >= total { // one layer: the logits and its gradient live together
			t.Errorf("%v: peak %d, total %d: nothing is freed early", cfg, peak, total)
		}

		// Captured, the graph reuses freed memory: its allocations span less
		// address space than they add up to.
		g, e := captureStep(t, s, m, st)
		ok(t, e.Launch(s))
		ok(t, s.Synchronize())
		span, sum := allocSpan(t, g)
		gs, err := d.GraphMemStats()
		ok(t, err)
		t.Logf("%v: step peak %d B, total %d B; graph allocations span %d B of %d B, graph memory reserved %d B",
			cfg, peak, total, span, sum, gs.ReservedHigh)
		if span < peak || cfg.Layers > 0 && span >= sum {
			t.Errorf("%v: graph allocations span %d B, want in [peak %d, sum %d)", cfg, span, peak, sum)
		}
		ok(t, e.Destroy())
		ok(t, g.Destroy())
		ok(t, m.Destroy())
	}
}

func TestConfigValidate(t *testing.T) {
	good := []Config{Small(), Reference(), Large(), tiny(SGD), tiny(Adam), {In: 1, Hidden: 1, Layers: 0, Classes: 2, Batch: 1, LR: 1}}
	for _, p := range Precisions {
		c := Small()
		c.Precision = p
		good = append(good, c)
	}
	for _, c := range good {
		if err := c.Validate(); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
	bad := []func(*Config){
		func(c *Config) { c.In = 0 },
		func(c *Config) { c.Hidden = -1 },
		func(c *Config) { c.Layers = -1 },
		func(c *Config) { c.Classes = 1 },
		func(c *Config) { c.Batch = 0 },
		func(c *Config) { c.LR = 0 },
		func(c *Config) { c.LR = float32(math.NaN()) },
		func(c *Config) { c.Optimizer = "lbfgs" },
		func(c *Config) { c.Precision = "fp16" },
		func(c *Config) { c.Precision = "BF16" },
		func(c *Config) { c.Hidden = 1 << 16 },
	}
	for i, f := range bad {
		c := Small()
		f(&c)
		if err := c.Validate(); !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("case %d (%v): got %v, want ErrInvalidValue", i, c, err)
		}
		if _, err := NewDataset(c, 1); !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("case %d: NewDataset: got %v", i, err)
		}
	}
}

func TestStepRejects(t *testing.T) {
	d, s := openHost(t)
	cfg := tiny(SGD)
	st, err := NewStatic(s, cfg)
	ok(t, err)
	m, err := NewModel(s, cfg)
	ok(t, err)
	ok(t, s.Synchronize())
	used := d.DefaultMemPool().Stats().UsedCurrent
	for _, c := range [][3]gg.DevicePtr{{0, st.Y, st.Loss}, {st.X, 0, st.Loss}, {st.X, st.Y, 0}} {
		if err := m.Step(s, c[0], c[1], c[2]); !errors.Is(err, gg.ErrInvalidValue) {
			t.Errorf("Step(%v): got %v, want ErrInvalidValue", c, err)
		}
	}
	// A failing GEMM part way through: the step frees what it allocated.
	calls := 0
	m.GEMM = func(s *gg.Stream, g GEMMArgs) error {
		if calls++; calls == 4 {
			return &gg.Error{Op: "test", Code: gg.ErrInvalidValue}
		}
		return KernelGEMM(s, g)
	}
	if err := m.Step(s, st.X, st.Y, st.Loss); !errors.Is(err, gg.ErrInvalidValue) {
		t.Fatalf("Step with a failing GEMM: %v", err)
	}
	ok(t, s.Synchronize())
	if got := d.DefaultMemPool().Stats().UsedCurrent; got != used {
		t.Errorf("after a failed step the pool uses %d bytes, %d before", got, used)
	}
	if err := m.WriteParams(s, make([]float32, 3)); !errors.Is(err, gg.ErrInvalidValue) {
		t.Errorf("WriteParams of the wrong length: %v", err)
	}
	ok(t, m.Destroy())
	if err := m.Step(s, st.X, st.Y, st.Loss); !errors.Is(err, gg.ErrInvalidValue) {
		t.Errorf("Step after Destroy: %v", err)
	}
}

func TestDataset(t *testing.T) {
	cfg := tiny(SGD)
	a, err := NewDataset(cfg, 3)
	ok(t, err)
	b, err := NewDataset(cfg, 3)
	ok(t, err)
	if a.Batches() != 3 || len(a.X) != 3*cfg.Batch*cfg.In {
		t.Fatalf("%d batches, %d inputs", a.Batches(), len(a.X))
	}
	for i := range a.X {
		if a.X[i] != b.X[i] {
			t.Fatal("same seed, different data")
		}
	}
	seen := map[int32]bool{}
	for _, y := range a.Y {
		if y < 0 || int(y) >= cfg.Classes {
			t.Fatalf("label %d", y)
		}
		seen[y] = true
	}
	if len(seen) != cfg.Classes {
		t.Errorf("labels %v: not every class", seen)
	}
	x1, y1 := a.At(1)
	x4, y4 := a.At(4)
	xm, _ := a.At(-2)
	if &x1[0] != &x4[0] || &y1[0] != &y4[0] || &xm[0] != &x1[0] {
		t.Error("At does not wrap around")
	}
	cfg.Seed++
	c, err := NewDataset(cfg, 3)
	ok(t, err)
	if c.X[0] == a.X[0] {
		t.Error("another seed, same data")
	}
}

// allocSpan returns the address range a graph's alloc nodes cover, and the
// sum of their sizes rounded up as the driver spaces them (512 bytes).
func allocSpan(t testing.TB, g *gg.Graph) (span, sum int) {
	t.Helper()
	nodes, err := g.Nodes()
	ok(t, err)
	lo, hi := gg.DevicePtr(math.MaxUint64), gg.DevicePtr(0)
	for _, n := range nodes {
		if n.Type() != gg.NodeMemAlloc {
			continue
		}
		np, err := n.Params()
		ok(t, err)
		p := np.(gg.MemAllocParams)
		lo, hi = min(lo, p.Ptr), max(hi, p.Ptr+gg.DevicePtr(p.Size))
		sum += (p.Size + 511) &^ 511
	}
	return int(hi - lo), sum
}

// TestSGDInGEMM: with plain SGD and no GradSync, Step updates the weights
// in the dW GEMMs (alpha −lr, beta 1 on W) and the biases (and BF16's
// shadow) with one kernel; a step whose update is the separate kernel
// (forced by a GradSync that leaves the gradients alone) trains to the
// same parameters bit for bit, op by op and replayed, in every precision.
// The in-GEMM step also holds only the bias gradients, not all of them.
func TestSGDInGEMM(t *testing.T) {
	for _, prec := range []string{FP32, TF32, BF16} {
		for _, captured := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/captured=%v", prec, captured), func(t *testing.T) {
				cfg := Small()
				cfg.Precision = prec
				_, s := openHost(t)
				ds, err := NewDataset(cfg, 4)
				ok(t, err)
				var inGEMM, separate []float32
				for _, sep := range []bool{false, true} {
					losses, p, _ := trainWith(t, s, cfg, ds, 5, captured, func(m *Model) {
						if sep {
							m.SyncMode = SyncAfter
							m.GradSync = func(*gg.Stream, gg.DevicePtr, int) error { return nil }
						}
						if m.sgdInGEMM() == sep {
							t.Fatalf("separate %v: sgdInGEMM %v", sep, m.sgdInGEMM())
						}
					})
					if math.IsNaN(float64(losses[len(losses)-1])) {
						t.Fatal("NaN loss")
					}
					if sep {
						separate = p
					} else {
						inGEMM = p
					}
				}
				for i := range inGEMM {
					if inGEMM[i] != separate[i] {
						t.Fatalf("parameter %d: %v in the GEMMs, %v with the update kernel", i, inGEMM[i], separate[i])
					}
				}
			})
		}
	}
	c := Small()
	peakSGD, _ := c.StepBytes()
	c.Optimizer = Adam
	peakAdam, _ := c.StepBytes()
	if want := 4 * (c.NumParams() - (c.Hidden*2 + c.Classes)); peakAdam-peakSGD != want {
		t.Errorf("StepBytes: SGD's peak %d, Adam's %d: want the weight gradients' %d bytes less", peakSGD, peakAdam, want)
	}
}
