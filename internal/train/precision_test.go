package train

import (
	"math"
	"testing"
)

func TestRoundTF32(t *testing.T) {
	f := math.Float32frombits
	nan := f(0x7fc00000)
	for _, c := range []struct {
		name    string
		in, out uint32
	}{
		{"zero", 0x00000000, 0x00000000},
		{"minus zero", 0x80000000, 0x80000000},
		{"one", 0x3f800000, 0x3f800000},
		{"exact tf32", 0x3f802000, 0x3f802000},
		{"below half: down", 0x3f800fff, 0x3f800000},
		{"tie to even: down", 0x3f801000, 0x3f800000},
		{"tie on odd: up to even", 0x3f803000, 0x3f804000},
		{"negative tie to even", 0xbf801000, 0xbf800000},
		{"above half: up", 0x3f801001, 0x3f802000},
		{"carry into the exponent", 0x3fffffff, 0x40000000},
		{"largest float: infinity", 0x7f7fffff, 0x7f800000},
		{"largest tf32 stays", 0x7f7fe000, 0x7f7fe000},
		{"just below the tie to infinity", 0x7f7fefff, 0x7f7fe000},
		{"infinity", 0x7f800000, 0x7f800000},
		{"minus infinity", 0xff800000, 0xff800000},
		{"smallest denormal: zero", 0x00000001, 0x00000000},
		{"denormal tie to even: down", 0x00001000, 0x00000000},
		{"largest denormal: smallest normal", 0x007fffff, 0x00800000},
	} {
		if got := math.Float32bits(roundTF32(f(c.in))); got != c.out {
			t.Errorf("%s: roundTF32(%#08x) = %#08x, want %#08x", c.name, c.in, got, c.out)
		}
	}
	for _, u := range []uint32{0x7f800001, 0x7fc00000, 0xffc00001, 0x7f801fff} {
		if got := roundTF32(f(u)); got == got {
			t.Errorf("roundTF32(NaN %#08x) = %v, want NaN", u, got)
		}
	}
	if !math.IsNaN(float64(roundTF32(nan))) {
		t.Error("NaN")
	}
	// Every result is a TF32 value within half a TF32 ulp.
	r := newRand(1, 2)
	for range 10000 {
		x := f(r.Uint32()&^0x7f800000 | uint32(r.IntN(254)+1)<<23) // finite, normal
		y := roundTF32(x)
		if math.Float32bits(y)&0x1fff != 0 {
			t.Fatalf("roundTF32(%v) = %v: low bits set", x, y)
		}
		ulp := math.Ldexp(1, math.Ilogb(float64(x))-10)
		if d := math.Abs(float64(y) - float64(x)); d > ulp/2 && !math.IsInf(float64(y), 0) {
			t.Fatalf("roundTF32(%v) = %v: off by %g, half an ulp is %g", x, y, d, ulp/2)
		}
	}
}

func TestBF16(t *testing.T) {
	f := math.Float32frombits
	for _, c := range []struct {
		name string
		in   uint32
		out  uint16
	}{
		{"zero", 0x00000000, 0x0000},
		{"minus zero", 0x80000000, 0x8000},
		{"one", 0x3f800000, 0x3f80},
		{"below half: down", 0x3f807fff, 0x3f80},
		{"tie to even: down", 0x3f808000, 0x3f80},
		{"tie to even: up", 0x3f818000, 0x3f82},
		{"above half: up", 0x3f808001, 0x3f81},
		{"negative tie to even", 0xbf818000, 0xbf82},
		{"carry into the exponent", 0x3fffffff, 0x4000},
		{"largest bfloat16", 0x7f7f0000, 0x7f7f},
		{"largest float: infinity", 0x7f7fffff, 0x7f80},
		{"just below the tie to infinity", 0x7f7f7fff, 0x7f7f},
		{"infinity", 0x7f800000, 0x7f80},
		{"minus infinity", 0xff800000, 0xff80},
		{"smallest denormal: zero", 0x00000001, 0x0000},
		{"smallest bfloat16 denormal", 0x00010000, 0x0001},
		{"denormal tie to even: down", 0x00008000, 0x0000},
		{"denormal tie to even: up", 0x00018000, 0x0002},
		{"largest denormal: smallest normal", 0x007fffff, 0x0080},
		{"quiet NaN", 0x7fc00000, 0x7fff},
		{"signalling NaN, low payload", 0x7f800001, 0x7fff},
		{"negative NaN", 0xffc00000, 0x7fff},
	} {
		if got := toBF16(f(c.in)); got != c.out {
			t.Errorf("%s: toBF16(%#08x) = %#04x, want %#04x", c.name, c.in, got, c.out)
		}
	}
	// Widening is exact, and rounding a widened value gives it back.
	for h := range 1 << 16 {
		x := fromBF16(uint16(h))
		if math.Float32bits(x) != uint32(h)<<16 {
			t.Fatalf("fromBF16(%#04x) = %#08x", h, math.Float32bits(x))
		}
		if x == x && toBF16(x) != uint16(h) {
			t.Fatalf("toBF16(fromBF16(%#04x)) = %#04x", h, toBF16(x))
		}
		if x != x && toBF16(x) != 0x7fff {
			t.Fatalf("toBF16(NaN %#04x) = %#04x", h, toBF16(x))
		}
	}
	// Against rounding in float64: nearest, ties to even.
	r := newRand(3, 4)
	for range 10000 {
		u := r.Uint32()
		x := f(u)
		if x != x || math.IsInf(float64(x), 0) {
			continue
		}
		// The neighbours toward zero and away from it; away from the
		// largest finite value is infinity, which rounds like 2^128.
		lo, hi := fromBF16(uint16(u>>16)), f(u&0xffff0000+0x10000)
		hi64 := float64(hi)
		if math.IsInf(hi64, 0) {
			hi64 = math.Copysign(math.Ldexp(1, 128), hi64)
		}
		got := fromBF16(toBF16(x))
		dl, dh := math.Abs(float64(x)-float64(lo)), math.Abs(hi64-float64(x))
		want := lo
		if dh < dl || dh == dl && (u>>16)&1 == 1 {
			want = hi
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("toBF16(%#08x) = %#08x, want %#08x", u, math.Float32bits(got), math.Float32bits(want))
		}
	}
}
