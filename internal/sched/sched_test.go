package sched

import (
	"math/rand"
	"sync/atomic"
	"testing"
)

func build(preds [][]int32) *DAG { return NewDAG(preds) }

func TestRunnerOrderAndCompleteness(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	pool := NewPool(3)
	for trial := 0; trial < 50; trial++ {
		n := 1 + rng.Intn(500)
		preds := make([][]int32, n)
		for i := 1; i < n; i++ {
			for j := 0; j < i; j++ {
				if rng.Intn(i) < 2 {
					preds[i] = append(preds[i], int32(j))
				}
			}
		}
		var clock atomic.Int64
		stamp := make([]int64, n)
		runs := make([]atomic.Int32, n)
		r := NewRunner(build(preds), pool, func(i int32) {
			runs[i].Add(1)
			stamp[i] = clock.Add(1)
		})
		for rep := int32(1); rep <= 3; rep++ {
			r.Run()
			for i := range preds {
				if runs[i].Load() != rep {
					t.Fatalf("trial %d: node %d ran %d times in %d runs", trial, i, runs[i].Load(), rep)
				}
				for _, p := range preds[i] {
					if stamp[p] >= stamp[i] {
						t.Fatalf("trial %d: node %d before dependency %d", trial, i, p)
					}
				}
			}
		}
	}
}

func TestRunnerNoAllocs(t *testing.T) {
	preds := make([][]int32, 200)
	for i := 1; i < len(preds); i++ {
		preds[i] = []int32{int32((i - 1) / 2)}
	}
	r := NewRunner(build(preds), NewPool(1), func(int32) {})
	if a := testing.AllocsPerRun(100, r.Run); a != 0 {
		t.Fatalf("%v allocations per run", a)
	}
}

func TestPoolForCoversRangeAndRecoversPanic(t *testing.T) {
	p := NewPool(2)
	for _, n := range []int{0, 1, 2, 7, 1000} {
		seen := make([]atomic.Int32, n)
		if err := p.For(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n=%d: index %d ran %d times", n, i, seen[i].Load())
			}
		}
	}
	if err := p.For(100, func(lo, hi int) {
		if lo <= 50 && 50 < hi {
			panic("x")
		}
	}); err != "x" {
		t.Fatalf("For returned %v, want the panic value", err)
	}
}
