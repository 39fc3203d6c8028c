package sched

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// workIters is calibrated to about WORK_NS (default 1000) nanoseconds of
// xorshift, the work body of the Taskflow side-by-side
// (../shared/bench/taskflow/side, -body work).
var workIters = func() int {
	ns := 1000.0
	if v, err := strconv.Atoi(os.Getenv("WORK_NS")); err == nil && v > 0 {
		ns = float64(v)
	}
	n := 1 << 22
	spinWork(n) // warm the core
	t := time.Now()
	sinkWork += spinWork(n)
	return int(float64(n) * ns / float64(time.Since(t).Nanoseconds()))
}()

var sinkWork uint64

func spinWork(n int) uint64 {
	x := uint64(88172645463325252)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// BenchmarkRunnerWork runs the shapes of the Taskflow comparison with about
// 1 µs of work in every node (WORK_NS sets another), on the owner and the
// default pool's helpers (GOMAXPROCS-1), and reports each shape's speedup
// over the same bodies run serially: the scheduler alone, without the host
// backend around it; and per run, the helpers recruited, those that left
// before the end for want of work, and the owner's sleeps (Runner.Churn):
// how much the workers came and went. Set GOMAXPROCS to the thread count to
// compare with the Taskflow tables.
func BenchmarkRunnerWork(b *testing.B) {
	shapes := []struct {
		name  string
		preds [][]int32
	}{
		{"fanout1000", fanout(1000)},
		{"tree10", tree(10)},
		{"wavefront32", wavefront(32)},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			n := len(sh.preds)
			out := make([]uint64, n)
			r := NewRunner(build(sh.preds), Default(), func(i int32) { out[i] = spinWork(workIters) })
			// The serial time: the fastest of five passes (a pass the
			// machine interrupted says nothing of the bodies).
			serial := 0.0
			for range 5 {
				t := time.Now()
				for i := range n {
					out[i] = spinWork(workIters)
				}
				if ns := float64(time.Since(t).Nanoseconds()) / float64(n); serial == 0 || ns < serial {
					serial = ns
				}
			}
			rec0, left0, sleeps0 := r.Churn()
			for b.Loop() {
				r.Run()
			}
			rec, left, sleeps := r.Churn()
			perNode := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(n)
			b.ReportMetric(perNode, "ns/node")
			b.ReportMetric(serial, "serial-ns/node")
			b.ReportMetric(serial/perNode, "speedup")
			b.ReportMetric(float64(rec-rec0)/float64(b.N), "recruits/run")
			b.ReportMetric(float64(left-left0)/float64(b.N), "left/run")
			b.ReportMetric(float64(sleeps-sleeps0)/float64(b.N), "owner-sleeps/run")
		})
	}
}

// fanout is one node, w nodes after it, and one node after them all.
func fanout(w int) [][]int32 {
	preds := make([][]int32, w+2)
	for i := 1; i <= w; i++ {
		preds[i] = []int32{0}
		preds[w+1] = append(preds[w+1], int32(i))
	}
	return preds
}

// tree is a binary tree of the given depth, the root first.
func tree(levels int) [][]int32 {
	n := 1<<levels - 1
	preds := make([][]int32, n)
	for i := 1; i < n; i++ {
		preds[i] = []int32{int32((i - 1) / 2)}
	}
	return preds
}
