package train

import "testing"

// BenchmarkGEMMMicroKernel times the packed path's inner kernel on one core,
// its operands in cache: the ceiling of the Go GEMM body.
func BenchmarkGEMMMicroKernel(b *testing.B) {
	if !haveFMA {
		b.Skip("no AVX2/FMA kernel on this machine")
	}
	var ap [fmaMR * fmaK]float32
	var bp [fmaNR * fmaK]float32
	var c [fmaMR * tileN]float32
	for i := range ap {
		ap[i] = 1
	}
	for i := range bp {
		bp[i] = 1
	}
	for range b.N {
		sgemm6x16(fmaK, &ap[0], 1, fmaMR, &bp[0], fmaNR, &c[0], tileN)
	}
	b.ReportMetric(2*fmaMR*fmaNR*fmaK*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
