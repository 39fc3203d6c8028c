package host

import (
	"math"
	"testing"
)

// TestHalf: every finite half widens and rounds back to itself; values
// between two halves round to the nearer, ties to even; overflow is
// infinity.
func TestHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := HalfToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if g := Float32ToHalf(f); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("NaN %#04x rounds to %#04x", h, g)
			}
			continue
		}
		if g := Float32ToHalf(f); g != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f, g)
		}
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00}, // a tie: to even (1.0)
		{1 + 3.0/2048, 0x3c02}, // a tie: to even (1 + 2/1024)
		{1 + 1.5/2048, 0x3c01}, // above the tie
		{65520, 0x7c00},        // rounds past the largest half: infinity
		{-1e-8, 0x8000},        // underflow keeps the sign
		{6.0e-8, 0x0001},       // the smallest subnormal
	} {
		if got := Float32ToHalf(c.f); got != c.want {
			t.Errorf("Float32ToHalf(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if got := Float32ToBFloat16(1 + 1.0/256); got != 0x3f80 { // a tie: to even
		t.Errorf("bfloat16 tie: %#04x", got)
	}
	if got := Float32ToBFloat16(1 + 3.0/256); got != 0x3f82 {
		t.Errorf("bfloat16 tie to even above: %#04x", got)
	}
}
