package train

import "testing"

// TestGEMMScalar runs the GEMM cases through the Go body's scalar path,
// the one machines without AVX2 and FMA (and other architectures) take.
func TestGEMMScalar(t *testing.T) {
	if !haveFMA {
		t.Skip("this machine takes the scalar path already (TestGEMM)")
	}
	haveFMA = false
	defer func() { haveFMA = true }()
	_, s := openHost(t)
	for _, c := range gemmCases() {
		t.Run(c.String(), func(t *testing.T) { runGEMMCase(t, s, KernelGEMM, c, 1.2e-7) })
	}
	t.Run("rounding", func(t *testing.T) { checkRounding(t, s, KernelGEMM) })
}
