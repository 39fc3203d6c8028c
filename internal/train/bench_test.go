package train

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// BenchmarkStep times one training step of Small (and of a tiny model,
// where overheads dominate) on the host backend, op
// by op (Model.Step issues every kernel, allocation and free) and as one
// replay of a captured step; each includes copying the batch into the
// static buffers.
func BenchmarkStep(b *testing.B) {
	for _, sz := range []struct {
		name string
		cfg  Config
	}{{"small", Small()}, {"tiny", tiny(SGD)}, {"reference", Reference()}} {
		for _, mode := range []string{"stream", "graph"} {
			b.Run(sz.name+"/"+mode, func(b *testing.B) { benchStep(b, openHost, sz.cfg, mode) })
		}
	}
}

func benchStep(b *testing.B, open func(testing.TB) (*gg.Device, *gg.Stream), cfg Config, mode string) {
	_, s := open(b)
	ds, err := NewDataset(cfg, 8)
	ok(b, err)
	st, err := NewStatic(s, cfg)
	ok(b, err)
	m, err := NewModel(s, cfg)
	ok(b, err)
	var e *gg.Exec
	if mode == "graph" {
		_, e = captureStep(b, s, m, st)
		defer e.Destroy()
	}
	ok(b, s.Synchronize())
	b.ResetTimer()
	for i := range b.N {
		ok(b, st.Load(s, ds, i))
		if e != nil {
			ok(b, e.Launch(s))
		} else {
			ok(b, m.Step(s, st.X, st.Y, st.Loss))
		}
	}
	ok(b, s.Synchronize())
}
