package sched

import (
	"cmp"
	"fmt"
	"os"
	"slices"
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
	for _, sh := range workShapes() {
		b.Run(sh.name, func(b *testing.B) {
			n := len(sh.preds)
			out := make([]uint64, n)
			r := NewRunner(build(sh.preds), Default(), func(i int32) { out[i] = spinWork(workIters) })
			serial := serialNsPerNode(out)
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

// workShapes are the shapes of the Taskflow comparison the work benchmarks run.
func workShapes() []struct {
	name  string
	preds [][]int32
} {
	return []struct {
		name  string
		preds [][]int32
	}{
		{"fanout1000", fanout(1000)},
		{"tree10", tree(10)},
		{"wavefront32", wavefront(32)},
	}
}

// serialNsPerNode is the time of one work body run alone: the fastest of
// five passes over out (a pass the machine interrupted says nothing of the
// bodies).
func serialNsPerNode(out []uint64) float64 {
	serial := 0.0
	for range 5 {
		t := time.Now()
		for i := range out {
			out[i] = spinWork(workIters)
		}
		if ns := float64(time.Since(t).Nanoseconds()) / float64(len(out)); serial == 0 || ns < serial {
			serial = ns
		}
	}
	return serial
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

// BenchmarkRunnerWorkDiag runs the shapes of BenchmarkRunnerWork with each
// node's start and end timed, back to back, and reports afterwards where the
// runs' time went:
//   - exec-ns/node: the bodies' time inside the runs, against serial-ns/node
//     run alone (cores slowed by their neighbours show here);
//   - ideal/actual: the same bodies' times scheduled greedily on as many
//     workers with no overhead (listSchedule), over the run's time;
//   - lost-ns/node: the time a ready node waited while a worker was idle
//     (the integral over the run of min(ready nodes not started, idle
//     workers)), per node: what the scheduler itself lost.
func BenchmarkRunnerWorkDiag(b *testing.B) {
	for _, sh := range workShapes() {
		b.Run(sh.name, func(b *testing.B) {
			n := len(sh.preds)
			out := make([]uint64, n)
			var start, end []int64
			r := NewRunner(build(sh.preds), Default(), func(i int32) {
				start[i] = nanotime()
				out[i] = spinWork(workIters)
				end[i] = nanotime()
			})
			serial := serialNsPerNode(out)
			starts, ends := make([]int64, b.N*n), make([]int64, b.N*n)
			t0s, t1s := make([]int64, b.N), make([]int64, b.N)
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				start, end = starts[k*n:(k+1)*n], ends[k*n:(k+1)*n]
				t0s[k] = nanotime()
				r.Run()
				t1s[k] = nanotime()
			}
			b.StopTimer()
			if dir := os.Getenv("DIAG_TRACE"); dir != "" { // the last run's node times, for a timeline
				var buf []byte
				k := b.N - 1
				for i := range n {
					buf = fmt.Appendf(buf, "%d %d %d\n", i, starts[k*n+i]-t0s[k], ends[k*n+i]-t0s[k])
				}
				_ = os.WriteFile(fmt.Sprintf("%s/%s-%d.txt", dir, sh.name, workIters), buf, 0o644)
			}
			workers := Default().Size() + 1
			var execSum, lostSum, simSum, runSum float64
			dur, ready := make([]int64, n), make([]int64, n)
			gaps := make([]int64, 0, b.N*n)
			for k := 0; k < b.N; k++ {
				start, end = starts[k*n:(k+1)*n], ends[k*n:(k+1)*n]
				runSum += float64(t1s[k] - t0s[k])
				for i, ps := range sh.preds {
					dur[i] = end[i] - start[i]
					execSum += float64(dur[i])
					ready[i] = t0s[k] // a root is ready at the run's start
					for _, p := range ps {
						ready[i] = max(ready[i], end[p])
					}
					gaps = append(gaps, start[i]-ready[i])
				}
				simSum += float64(listSchedule(sh.preds, dur, workers))
				lostSum += float64(idleWhileReady(ready, start, end, workers))
			}
			runs := float64(b.N)
			perNode := runSum / runs / float64(n)
			b.ReportMetric(perNode, "ns/node")
			b.ReportMetric(serial, "serial-ns/node")
			b.ReportMetric(execSum/runs/float64(n), "exec-ns/node")
			b.ReportMetric(serial/perNode, "speedup")
			b.ReportMetric(simSum/runSum, "ideal/actual")
			b.ReportMetric(lostSum/runs/float64(n), "lost-ns/node")
			// How long nodes waited from ready to started, queueing behind
			// busy workers included.
			slices.Sort(gaps)
			for _, q := range []int{50, 90, 99} {
				b.ReportMetric(float64(gaps[len(gaps)*q/100]), fmt.Sprintf("wait-p%d-ns", q))
			}
		})
	}
}

// idleWhileReady integrates, over one run, min(nodes ready but not
// started, workers not running a node): the time the scheduler left work
// waiting beside an idle worker. Node i became ready at ready[i].
func idleWhileReady(ready, start, end []int64, p int) int64 {
	type ev struct {
		t           int64
		ready, busy int
	}
	evs := make([]ev, 0, 3*len(ready))
	for i, r := range ready {
		evs = append(evs, ev{r, 1, 0}, ev{start[i], -1, 1}, ev{end[i], 0, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Compare(a.t, b.t) })
	var lost int64
	waiting, busy := 0, 0
	for i, e := range evs {
		if i > 0 {
			lost += int64(max(0, min(waiting, p-busy))) * (e.t - evs[i-1].t)
		}
		waiting += e.ready
		busy += e.busy
	}
	return lost
}

// listSchedule returns how long the DAG takes on p workers when each node
// takes dur[node] and a ready node starts the moment a worker is free (ready
// nodes in the order they became ready).
func listSchedule(preds [][]int32, dur []int64, p int) int64 {
	n := len(preds)
	succ := make([][]int32, n)
	left := make([]int, n)
	var ready []int32
	for i, ps := range preds {
		left[i] = len(ps)
		if len(ps) == 0 {
			ready = append(ready, int32(i))
		}
		for _, q := range ps {
			succ[q] = append(succ[q], int32(i))
		}
	}
	type job struct {
		end  int64
		node int32
	}
	var running []job // few: a linear scan finds the earliest
	var t int64
	for len(ready) > 0 || len(running) > 0 {
		for len(running) < p && len(ready) > 0 {
			x := ready[0]
			ready = ready[1:]
			running = append(running, job{t + dur[x], x})
		}
		k := 0
		for i := range running {
			if running[i].end < running[k].end {
				k = i
			}
		}
		j := running[k]
		running[k] = running[len(running)-1]
		running = running[:len(running)-1]
		t = j.end
		for _, s := range succ[j.node] {
			if left[s]--; left[s] == 0 {
				ready = append(ready, s)
			}
		}
	}
	return t
}
