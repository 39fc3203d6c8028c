package coll_test

import (
	"fmt"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/coll"
	"github.com/gpugraph/gpugraph/internal/train"
)

// BenchmarkAllReduce measures an in-place float32 sum all-reduce over
// every rank, as nccl-tests' all_reduce_perf does, on the message sizes of
// the reference model's gradients (one per layer, as train's overlap and
// inline syncs send them, and all layers in one buffer, as its after sync
// does) and on powers of two from 4 KiB to 256 MiB. Each iteration issues
// the call on every rank (one group from this goroutine); the time is the
// wall time of b.N iterations to the last rank's synchronize. It reports
// the algorithm bandwidth (bytes / time) and the bus bandwidth (algbw ·
// 2(n-1)/n, the per-link figure nccl-tests calls busbw), in GB/s (1e9).
//
// host: 2 host devices. cuda: every GPU (skipped where there is none).
//
//	go test -run '^$' -bench AllReduce/host -benchtime 3x ./coll
//	.gpu/coll.test -test.run '^$' -test.bench AllReduce/cuda -test.benchtime 200x
func BenchmarkAllReduce(b *testing.B) {
	b.Run("host", func(b *testing.B) {
		if err := gg.SetHostDeviceCount(2); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { gg.SetHostDeviceCount(1) })
		benchAllReduce(b, "host", 2)
	})
	b.Run("cuda", func(b *testing.B) {
		n, err := gg.DeviceCount("cuda")
		if err != nil || n < 1 {
			b.Skipf("no GPU: %v", err)
		}
		benchAllReduce(b, "cuda", n)
	})
}

// benchSize is one message of BenchmarkAllReduce.
type benchSize struct {
	name  string
	bytes int
}

// allReduceSizes are the reference model's gradient messages, then powers
// of two from 4 KiB to 256 MiB.
func allReduceSizes() []benchSize {
	cfg := train.Reference()
	in, out := []int{cfg.In}, []int{}
	for range cfg.Layers {
		in = append(in, cfg.Hidden)
		out = append(out, cfg.Hidden)
	}
	out = append(out, cfg.Classes)
	var sizes []benchSize
	total := 0
	for l := range in {
		floats := out[l]*in[l] + out[l] // W and b, as train.Model's layer gradient
		total += floats
		sizes = append(sizes, benchSize{fmt.Sprintf("bytes=%d/grad-layer%d", 4*floats, l), 4 * floats})
	}
	sizes = append(sizes, benchSize{fmt.Sprintf("bytes=%d/grad-all", 4*total), 4 * total})
	for s := 4 << 10; s <= 256<<20; s *= 2 {
		sizes = append(sizes, benchSize{fmt.Sprintf("bytes=%d/%s", s, sizeName(s)), s})
	}
	return sizes
}

func sizeName(s int) string {
	switch {
	case s >= 1<<20:
		return fmt.Sprintf("%dMiB", s>>20)
	case s >= 1<<10:
		return fmt.Sprintf("%dKiB", s>>10)
	}
	return fmt.Sprintf("%dB", s)
}

// benchComms opens devices 0 to n-1 of a backend with a stream each and a
// communicator over them (ranksOn, for benchmarks).
func benchComms(b *testing.B, backend string, n int) ([]*coll.Comm, []*gg.Stream) {
	b.Helper()
	devs := make([]*gg.Device, n)
	streams := make([]*gg.Stream, n)
	for i := range n {
		d, err := gg.Open(backend, gg.WithOrdinal(i))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		devs[i] = d
		if streams[i], err = d.NewStream(); err != nil {
			b.Fatal(err)
		}
	}
	comms, err := coll.InitAll(devs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, c := range comms {
			c.Destroy()
		}
	})
	return comms, streams
}

func benchAllReduce(b *testing.B, backend string, n int) {
	comms, streams := benchComms(b, backend, n)
	// issue all-reduces count floats of every rank's buf, k times, and
	// waits for every rank.
	run := func(bufs []gg.DevicePtr, count, k int) error {
		for range k {
			coll.GroupStart()
			for r, c := range comms {
				if err := c.AllReduce(streams[r], bufs[r], bufs[r], count, coll.Float32, coll.Sum); err != nil {
					coll.GroupEnd()
					return fmt.Errorf("rank %d: %w", r, err)
				}
			}
			if err := coll.GroupEnd(); err != nil {
				return err
			}
		}
		for r, s := range streams {
			if err := s.Synchronize(); err != nil {
				return fmt.Errorf("rank %d: %w", r, err)
			}
		}
		return nil
	}
	// The first collectives of a communicator connect its ranks.
	warm := make([]gg.DevicePtr, n)
	for r, c := range comms {
		p, err := c.Device().Malloc(4096)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Device().Free(p)
		warm[r] = p
	}
	if err := run(warm, 1024, 3); err != nil {
		b.Fatal(err)
	}
	for _, sz := range allReduceSizes() {
		b.Run(fmt.Sprintf("ranks=%d/%s", n, sz.name), func(b *testing.B) {
			bufs := make([]gg.DevicePtr, n)
			for r, c := range comms {
				d := c.Device()
				p, err := d.Malloc(sz.bytes)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Free(p)
				if err := d.Memset(gg.Memset8(p, 0, sz.bytes)); err != nil {
					b.Fatal(err)
				}
				bufs[r] = p
			}
			count := sz.bytes / 4
			if err := run(bufs, count, 2); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := run(bufs, count, b.N); err != nil {
				b.Fatal(err)
			}
			per := time.Since(start).Seconds() / float64(b.N)
			b.StopTimer()
			alg := float64(sz.bytes) / per / 1e9
			b.ReportMetric(alg, "algGB/s")
			b.ReportMetric(alg*2*float64(n-1)/float64(n), "busGB/s")
		})
	}
}
