package train

import (
	"cmp"
	"slices"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// BenchmarkGraphSetCapture captures the forward pass of the reference MLP
// (256→1024×4→10, fp32) for vLLM's 51 batch sizes up to 512, largest first,
// into one graph set: one iteration is the whole set (capture and
// instantiation, no warm-up). It reports the set's time, the mean and
// slowest graph's, and graph memory: the set's (the largest graph's) and
// the sum a private pool per graph would need.
func BenchmarkGraphSetCapture(b *testing.B) { benchSetCapture(b, openHost, useCuBLAS) }

// BenchmarkCUDAGraphSetCapture is the same on the cuda backend (skipped
// without a GPU).
func BenchmarkCUDAGraphSetCapture(b *testing.B) { benchSetCapture(b, openCUDA, useCuBLAS) }

// BenchmarkCUDAGraphSetCaptureLt is BenchmarkCUDAGraphSetCapture with each
// layer one cuBLASLt call, bias and ReLU in its epilogue (CuBLASLt).
func BenchmarkCUDAGraphSetCaptureLt(b *testing.B) { benchSetCapture(b, openCUDA, useCuBLASLt) }

func benchSetCapture(b *testing.B, open func(testing.TB) (*gg.Device, *gg.Stream), gemm func(*testing.B, *gg.Device, *Model)) {
	d, s := open(b)
	m, err := NewModel(s, Reference())
	ok(b, err)
	defer m.Destroy()
	gemm(b, d, m)
	keys := ServeKeys(512)
	x, err := d.Malloc(4 * 512 * m.Config().In)
	ok(b, err)
	defer d.Free(x)
	ok(b, s.Synchronize())
	fn := func(s *gg.Stream, rows int) ([]gg.DevicePtr, error) {
		z, err := m.Forward(s, x, rows)
		return []gg.DevicePtr{z}, err
	}
	var st gg.GraphSetStats[int]
	b.ResetTimer()
	for range b.N {
		set, err := gg.NewGraphSet(s, fn, gg.GraphSetConfig[int]{Keys: keys, Compare: cmp.Compare[int]})
		ok(b, err)
		b.StopTimer()
		st = set.Stats()
		ok(b, set.Close())
		b.StartTimer()
	}
	var slowest time.Duration
	for _, mb := range st.Members {
		slowest = max(slowest, mb.Capture)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/set")
	b.ReportMetric(float64(st.Capture.Microseconds())/float64(len(st.Members)), "µs/graph")
	b.ReportMetric(float64(slowest.Microseconds()), "µs/slowest-graph")
	b.ReportMetric(float64(st.GraphBytes)/(1<<20), "set-MiB")
	b.ReportMetric(float64(st.SumGraphBytes)/(1<<20), "sum-MiB")
}

// BenchmarkGraphSetReplay times one inference of Small at a few batch
// sizes: copy the input in, run, read the logits back; as a graph set's
// replay and op by op.
func BenchmarkGraphSetReplay(b *testing.B) {
	benchSetReplay(b, openHost, Small(), []int{1, 128}, func(*testing.B, *gg.Device, *Model) {})
}

// BenchmarkCUDAGraphSetReplay is the same for the reference MLP on the
// cuda backend, at batch sizes tools/serve/torch_graphset.py reports
// (its REPLAY lines time the same three steps in PyTorch).
func BenchmarkCUDAGraphSetReplay(b *testing.B) {
	benchSetReplay(b, openCUDA, Reference(), []int{1, 8, 64, 256, 512}, useCuBLAS)
}

// BenchmarkCUDAGraphSetReplayLt is BenchmarkCUDAGraphSetReplay with each
// layer one cuBLASLt call, bias and ReLU in its epilogue (CuBLASLt).
func BenchmarkCUDAGraphSetReplayLt(b *testing.B) {
	benchSetReplay(b, openCUDA, Reference(), []int{1, 8, 64, 256, 512}, useCuBLASLt)
}

func benchSetReplay(b *testing.B, open func(testing.TB) (*gg.Device, *gg.Stream), cfg Config, batches []int, gemm func(*testing.B, *gg.Device, *Model)) {
	for _, rows := range batches {
		for _, mode := range []string{"graphs", "ops"} {
			b.Run(mode+"/"+itoa(rows), func(b *testing.B) {
				d, s, m, x, set, release := newBenchSet(b, open, cfg, []int{rows}, gemm)
				defer release()
				// Input and logits in pinned host memory, as
				// tools/serve/torch_graphset.py's: a server copies from
				// and to buffers it keeps.
				inB, err := d.MallocHost(4 * rows * cfg.In)
				ok(b, err)
				defer d.FreeHost(inB)
				zB, err := d.MallocHost(4 * rows * cfg.Classes)
				ok(b, err)
				defer d.FreeHost(zB)
				times := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					t0 := time.Now()
					ok(b, s.Memcpy(gg.HtoD(x, inB)))
					if mode == "graphs" {
						outs, err := set.Replay(rows)
						ok(b, err)
						ok(b, outs[0].Read(zB))
					} else {
						p, err := m.Forward(s, x, rows)
						ok(b, err)
						ok(b, s.Memcpy(gg.DtoH(zB, p)))
						ok(b, s.FreeAsync(p))
						ok(b, s.Synchronize())
					}
					times = append(times, time.Since(t0))
				}
				b.StopTimer()
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2])/1e3, "median-µs") // as torch_graphset.py reports
			})
		}
	}
}

// useCuBLAS gives m cuBLAS's GEMM on the cuda backend, as examples/serve
// and PyTorch use (the package's tiled kernel runs a handful of blocks at
// small batches).
func useCuBLAS(b *testing.B, d *gg.Device, m *Model) {
	if d.Properties().Backend != gg.BackendCUDA {
		return
	}
	g, desc, closeFn, err := CuBLAS(d, FP32)
	ok(b, err)
	b.Cleanup(closeFn)
	m.GEMM = g
	b.Log(desc)
}

// useCuBLASLt gives m's Forward cuBLASLt's bias and ReLU epilogues.
func useCuBLASLt(b *testing.B, d *gg.Device, m *Model) {
	g, desc, closeFn, err := CuBLASLt(d)
	ok(b, err)
	b.Cleanup(closeFn)
	m.ForwardGEMM = g
	b.Log(desc)
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// BenchmarkCUDAGraphSetReplaySwitch replays a set of the reference MLP's
// graphs either always at one key or cycling through its keys, as a
// server's batches of varying size do, and reports each replay's p50, p99
// and slowest time: graphs that share graph memory may cost more to launch
// after another graph of the set ran.
func BenchmarkCUDAGraphSetReplaySwitch(b *testing.B) {
	benchSetSwitch(b, openCUDA, Reference(), []int{1, 8, 64, 256, 512}, useCuBLAS)
}

// BenchmarkGraphSetReplaySwitch is the same on the host backend.
func BenchmarkGraphSetReplaySwitch(b *testing.B) {
	benchSetSwitch(b, openHost, Small(), []int{1, 16, 128}, func(*testing.B, *gg.Device, *Model) {})
}

// newBenchSet opens a device, makes the model with gemm's GEMM, an input
// buffer for the largest key and a graph set of its forward pass at keys;
// release frees them (a benchmark function runs several times: each run
// releases its own).
func newBenchSet(b *testing.B, open func(testing.TB) (*gg.Device, *gg.Stream), cfg Config, keys []int, gemm func(*testing.B, *gg.Device, *Model)) (d *gg.Device, s *gg.Stream, m *Model, x gg.DevicePtr, set *gg.GraphSet[int], release func()) {
	d, s = open(b)
	m, err := NewModel(s, cfg)
	ok(b, err)
	gemm(b, d, m)
	x, err = d.Malloc(4 * slices.Max(keys) * cfg.In)
	ok(b, err)
	set, err = gg.NewGraphSet(s, func(s *gg.Stream, n int) ([]gg.DevicePtr, error) {
		p, err := m.Forward(s, x, n)
		return []gg.DevicePtr{p}, err
	}, gg.GraphSetConfig[int]{Keys: keys})
	ok(b, err)
	return d, s, m, x, set, func() { set.Close(); d.Free(x); m.Destroy() }
}

func benchSetSwitch(b *testing.B, open func(testing.TB) (*gg.Device, *gg.Stream), cfg Config, keys []int, gemm func(*testing.B, *gg.Device, *Model)) {
	for _, mode := range []string{"same", "cycle"} {
		b.Run(mode, func(b *testing.B) {
			_, _, _, _, set, release := newBenchSet(b, open, cfg, keys, gemm)
			defer release()
			z := make([]float32, slices.Max(keys)*cfg.Classes)
			for _, k := range keys { // each graph once before timing
				outs, err := set.Replay(k)
				ok(b, err)
				ok(b, outs[0].Read(gg.Bytes(z[:k*cfg.Classes])))
			}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				k := keys[len(keys)-1]
				if mode == "cycle" {
					k = keys[i%len(keys)]
				}
				t0 := time.Now()
				outs, err := set.Replay(k)
				ok(b, err)
				ok(b, outs[0].Read(gg.Bytes(z[:k*cfg.Classes])))
				times = append(times, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(times)
			us := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))].Microseconds()) }
			b.ReportMetric(us(0.5), "p50-µs")
			b.ReportMetric(us(0.99), "p99-µs")
			b.ReportMetric(us(1), "max-µs")
		})
	}
}
