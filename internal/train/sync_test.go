package train

import (
	"fmt"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// halve is a GradSync stand-in: it halves the gradient, which an SGD step
// then applies as a step of half the learning rate, bit for bit.
var halve = &gg.Kernel{
	Name:   "train_test_halve",
	Params: []gg.ParamType{gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		g := gg.Slice[float32](a.Ptr(0), a.Int(1))
		stride(b, len(g), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				g[i] *= 0.5
			}
		})
	},
}

// TestSyncModes: in every mode, op by op and captured, the hook sees each
// layer's whole gradient and the update applies what it left: with SGD,
// training with a halving hook equals training at half the learning rate;
// with Adam (whose update is the same for half the gradient, nearly), a
// hook that leaves the gradient alone trains exactly as no hook, the step
// count advancing once a step however many updates the step makes. BF16
// checks that the per-layer updates write their layer's shadow (TF32
// takes FP32's path here; Adam writes the shadow as SGD does).
func TestSyncModes(t *testing.T) {
	for _, pc := range [][2]string{{SGD, FP32}, {SGD, BF16}, {Adam, FP32}} {
		t.Run(pc[0]+"/"+pc[1], func(t *testing.T) { testSyncModes(t, pc[0], pc[1]) })
	}
}

func testSyncModes(t *testing.T, opt, prec string) {
	cfg := Small()
	cfg.Optimizer, cfg.Precision = opt, prec
	ref := cfg
	if opt == SGD {
		ref.LR /= 2
	} else {
		cfg.LR, ref.LR = 1e-3, 1e-3
	}
	d, s := openHost(t)
	ds, err := NewDataset(cfg, 4)
	ok(t, err)
	const steps = 6
	_, want := trainStream(t, s, ref, ds, steps)
	for _, mode := range []SyncMode{SyncInline, SyncOverlap, SyncAfter} {
		for _, captured := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/captured=%v", mode, captured), func(t *testing.T) {
				side, err := d.NewStream()
				ok(t, err)
				defer side.Destroy()
				st, err := NewStatic(s, cfg)
				ok(t, err)
				defer st.Free(s)
				m, err := NewModel(s, cfg)
				ok(t, err)
				defer m.Destroy()
				calls := 0
				m.SyncMode, m.SyncStream = mode, side
				m.GradSync = func(gs *gg.Stream, g gg.DevicePtr, floats int) error {
					calls++
					if want := s; mode == SyncOverlap && gs != side || mode != SyncOverlap && gs != want {
						return fmt.Errorf("GradSync on the wrong stream")
					}
					if opt == Adam {
						return nil
					}
					return gs.Launch(halve, gg.Dim1(4), gg.Dim1(64), g, floats)
				}
				var e *gg.Exec
				if captured {
					_, e = captureStep(t, s, m, st)
					defer e.Destroy()
				}
				for i := range steps {
					ok(t, st.Load(s, ds, i))
					if captured {
						ok(t, e.Launch(s))
					} else {
						ok(t, m.Step(s, st.X, st.Y, st.Loss))
					}
				}
				got, err := m.ReadParams(s)
				ok(t, err)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("parameter %d: %v, want %v (as trained without the hook)", i, got[i], want[i])
					}
				}
				perStep := cfg.Layers + 1
				if mode == SyncAfter {
					perStep = 1
				}
				if captured && calls != perStep || !captured && calls != steps*perStep {
					t.Errorf("GradSync called %d times", calls)
				}
			})
		}
	}
	if opt != SGD || prec != FP32 {
		return
	}
	// SyncOverlap without a second stream is refused.
	m, err := NewModel(s, cfg)
	ok(t, err)
	defer m.Destroy()
	m.SyncMode, m.GradSync = SyncOverlap, func(*gg.Stream, gg.DevicePtr, int) error { return nil }
	st, err := NewStatic(s, cfg)
	ok(t, err)
	defer st.Free(s)
	if err := m.Step(s, st.X, st.Y, st.Loss); err == nil {
		t.Fatal("SyncOverlap with no SyncStream: no error")
	}
}
