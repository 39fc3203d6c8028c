package train

import (
	"fmt"
	"math"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestPrecisionLosses trains Small from the same initialization in every
// precision on the host backend and compares the losses with FP32's, step
// by step. TF32 and BF16 round the GEMMs' inputs (to 10 and 7 mantissa
// bits), so their losses drift from FP32's by the accumulated effect. The
// largest relative differences measured over the 50 steps (amd64, AVX2):
// SGD TF32 2.7e-4, BF16 9.9e-4; Adam TF32 1.7e-3, BF16 4.2e-3. The
// tolerances are about four times those.
// The losses must also fall in every precision.
func TestPrecisionLosses(t *testing.T) {
	const steps = 50
	for _, c := range []struct {
		opt        string
		tf32, bf16 float64 // tolerances, relative to FP32's loss
	}{{SGD, 1e-3, 4e-3}, {Adam, 7e-3, 1.5e-2}} {
		t.Run(c.opt, func(t *testing.T) {
			_, s := openHost(t)
			losses := map[string][]float32{}
			for _, p := range Precisions {
				cfg := Small()
				cfg.Optimizer, cfg.Precision = c.opt, p
				if c.opt == Adam {
					cfg.LR = 1e-3
				}
				ds, err := NewDataset(cfg, 8)
				ok(t, err)
				losses[p], _ = trainStream(t, s, cfg, ds, steps)
				if first, last := losses[p][0], mean(losses[p][steps-5:]); !(last < 0.7*first) {
					t.Errorf("%s: loss %v -> %v: did not fall", p, first, last)
				}
			}
			for _, p := range []string{TF32, BF16} {
				tol := map[string]float64{TF32: c.tf32, BF16: c.bf16}[p]
				worst := 0.0
				for i, l := range losses[p] {
					d := relErr(float64(l), float64(losses[FP32][i]), 1e-3)
					worst = max(worst, d)
					if d > tol || math.IsNaN(d) {
						t.Errorf("%s step %d: loss %v, fp32 %v: differs by %.2g (tolerance %.1g)", p, i, l, losses[FP32][i], d, tol)
						break
					}
				}
				t.Logf("%s %s: loss %.4f -> %.4f; largest relative difference from fp32 over %d steps %.2g (tolerance %.1g)",
					c.opt, p, losses[p][0], losses[p][steps-1], steps, worst, tol)
			}
			if fmt.Sprint(losses[TF32]) == fmt.Sprint(losses[FP32]) || fmt.Sprint(losses[BF16]) == fmt.Sprint(losses[FP32]) {
				t.Error("a reduced precision trains exactly as fp32: it does not round")
			}
		})
	}
}

// TestShadow checks that a BF16 model's shadow is its weights rounded to
// bfloat16 after NewModel, after steps (the update writes it), and after
// WriteParams; and that the other precisions have none.
func TestShadow(t *testing.T) {
	_, s := openHost(t)
	for _, p := range Precisions {
		for _, opt := range []string{SGD, Adam} {
			cfg := tiny(opt)
			cfg.Precision = p
			m, err := NewModel(s, cfg)
			ok(t, err)
			check := func(when string) {
				t.Helper()
				params, err := m.ReadParams(s)
				ok(t, err)
				off := 0
				for l, ly := range m.Layers() {
					if (ly.Shadow != 0) != (p == BF16) {
						t.Fatalf("%s %s: layer %d shadow at %#x", p, opt, l, ly.Shadow)
					}
					if p != BF16 {
						continue
					}
					h := make([]uint16, ly.Out*ly.In)
					ok(t, s.Memcpy(gg.DtoH(gg.Bytes(h), ly.Shadow)))
					ok(t, s.Synchronize())
					for i, v := range params[off : off+len(h)] {
						if h[i] != toBF16(v) {
							t.Fatalf("%s %s %s: layer %d shadow[%d] %#04x, weight %v (bf16 %#04x)", p, opt, when, l, i, h[i], v, toBF16(v))
						}
					}
					off += ly.Out*ly.In + ly.Out
				}
			}
			check("after NewModel")
			st, err := NewStatic(s, cfg)
			ok(t, err)
			ds, err := NewDataset(cfg, 2)
			ok(t, err)
			for i := range 3 {
				ok(t, st.Load(s, ds, i))
				ok(t, m.Step(s, st.X, st.Y, st.Loss))
			}
			check("after 3 steps")
			r := newRand(1, 1)
			ok(t, m.WriteParams(s, randVec(r, m.NumParams())))
			check("after WriteParams")
			ok(t, st.Free(s))
			ok(t, m.Destroy())
		}
	}
}
