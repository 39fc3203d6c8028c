package train

import (
	"math"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestOptimizerKernels checks SGD and three Adam steps (the step count
// read from device memory and advanced by the launch that ticks) against
// float64 references, and the bfloat16 shadow both write.
func TestOptimizerKernels(t *testing.T) {
	_, s := openHost(t)
	r := newRand(5, 6)
	const n = 1000
	w0 := randVec(r, n)
	grads := [][]float32{randVec(r, n), randVec(r, n), randVec(r, n)}
	for i := range 10 { // gradients near zero: Adam's normalization at its most sensitive
		grads[0][i], grads[1][i], grads[2][i] = 1e-7, -1e-7, 0
	}

	// SGD, with a shadow.
	w, g := upload(t, s, w0), upload(t, s, grads[0])
	sh, err := s.MallocAsync(2 * n)
	ok(t, err)
	ok(t, s.Launch(sgdUpdate, elemGrid(n), gg.Dim1(threads), w, g, sh, n, float32(0.3)))
	got := download(t, s, w, n)
	for i := range got {
		want := float64(w0[i]) - 0.3*float64(grads[0][i])
		if math.Abs(float64(got[i])-want) > 1e-6 {
			t.Fatalf("sgd: w[%d] = %v, want %v", i, got[i], want)
		}
	}
	checkShadow(t, s, "sgd", got, sh)

	// Adam.
	const lr, b1, b2, eps = 0.01, AdamBeta1, AdamBeta2, AdamEpsilon
	ok(t, s.Memcpy(gg.HtoD(w, gg.Bytes(w0))))
	mom := upload(t, s, make([]float32, 2*n))
	state := upload(t, s, make([]float32, 2)) // int32 zeros: the count and the arrivals
	rw, rm, rv := make([]float64, n), make([]float64, n), make([]float64, n)
	for i, v := range w0 {
		rw[i] = float64(v)
	}
	for step, gs := range grads {
		ok(t, s.Memcpy(gg.HtoD(g, gg.Bytes(gs))))
		// Two launches over halves of the parameters, as data-parallel
		// training updates layer by layer: the first ticks, the second
		// reads the count it left. The first with a shadow.
		h := n / 2
		ok(t, s.Launch(adamUpdate, gg.Dim1(3), gg.Dim1(threads), w, g, mom, mom+4*n, state, sh,
			h, float32(lr), float32(b1), float32(b2), float32(eps), 1))
		ok(t, s.Launch(adamUpdate, gg.Dim1(2), gg.Dim1(threads), w+4*gg.DevicePtr(h), g+4*gg.DevicePtr(h),
			mom+4*gg.DevicePtr(h), mom+4*gg.DevicePtr(n+h), state, gg.DevicePtr(0),
			n-h, float32(lr), float32(b1), float32(b2), float32(eps), 0))
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
	checkShadow(t, s, "adam", download(t, s, w, n)[:n/2], sh)
	var c [2]int32
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(c[:]), state)))
	ok(t, s.Synchronize())
	if c != [2]int32{int32(len(grads)), 0} {
		t.Errorf("step count and arrivals %v, want [%d 0]", c, len(grads))
	}
}

// checkShadow checks the bfloat16 shadow at sh against the weights w.
func checkShadow(t *testing.T, s *gg.Stream, what string, w []float32, sh gg.DevicePtr) {
	t.Helper()
	h := make([]uint16, len(w))
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(h), sh)))
	ok(t, s.Synchronize())
	for i, v := range w {
		if h[i] != toBF16(v) {
			t.Fatalf("%s: shadow[%d] = %#04x, want bf16(%v) = %#04x", what, i, h[i], v, toBF16(v))
		}
	}
}
