package train

import (
	"math"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestOptimizerKernels checks SGD and three Adam steps (the step count
// read from device memory, incremented by adamTick) against float64
// references.
func TestOptimizerKernels(t *testing.T) {
	_, s := openHost(t)
	r := newRand(5, 6)
	const n = 1000
	w0 := randVec(r, n)
	grads := [][]float32{randVec(r, n), randVec(r, n), randVec(r, n)}
	for i := range 10 { // gradients near zero: Adam's normalization at its most sensitive
		grads[0][i], grads[1][i], grads[2][i] = 1e-7, -1e-7, 0
	}

	// SGD.
	w, g := upload(t, s, w0), upload(t, s, grads[0])
	ok(t, s.Launch(sgdUpdate, elemGrid(n), gg.Dim1(threads), w, g, n, float32(0.3)))
	got := download(t, s, w, n)
	for i := range got {
		want := float64(w0[i]) - 0.3*float64(grads[0][i])
		if math.Abs(float64(got[i])-want) > 1e-6 {
			t.Fatalf("sgd: w[%d] = %v, want %v", i, got[i], want)
		}
	}

	// Adam.
	const lr, b1, b2, eps = 0.01, AdamBeta1, AdamBeta2, AdamEpsilon
	ok(t, s.Memcpy(gg.HtoD(w, gg.Bytes(w0))))
	mom := upload(t, s, make([]float32, 2*n))
	count := upload(t, s, make([]float32, 1)) // int32 zero
	rw, rm, rv := make([]float64, n), make([]float64, n), make([]float64, n)
	for i, v := range w0 {
		rw[i] = float64(v)
	}
	for step, gs := range grads {
		ok(t, s.Memcpy(gg.HtoD(g, gg.Bytes(gs))))
		ok(t, s.Launch(adamTick, gg.Dim1(1), gg.Dim1(1), count))
		ok(t, s.Launch(adamUpdate, elemGrid(n), gg.Dim1(threads), w, g, mom, mom+4*n, count,
			n, float32(lr), float32(b1), float32(b2), float32(eps)))
		tt := float64(step + 1)
		for i := range rw {
			gi := float64(gs[i])
			rm[i] = b1*rm[i] + (1-b1)*gi
			rv[i] = b2*rv[i] + (1-b2)*gi*gi
			rw[i] -= lr / (1 - math.Pow(b1, tt)) * rm[i] / (math.Sqrt(rv[i])/math.Sqrt(1-math.Pow(b2, tt)) + eps)
		}
		got := download(t, s, w, n)
		for i := range got {
			if math.Abs(float64(got[i])-rw[i]) > 1e-6 {
				t.Fatalf("adam step %d: w[%d] = %v, want %v", step+1, i, got[i], rw[i])
			}
		}
	}
	var c [1]int32
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(c[:]), count)))
	ok(t, s.Synchronize())
	if c[0] != int32(len(grads)) {
		t.Errorf("step count %d, want %d", c[0], len(grads))
	}
}
