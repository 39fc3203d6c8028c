package host

import (
	"strings"
	"testing"

	"github.com/gpugraph/gpugraph/internal/vmem"
)

func TestMemory(t *testing.T) {
	m, err := NewMemory(64<<20, vmem.Granularity)
	if err != nil {
		t.Skipf("no reservation here: %v", err)
	}
	a, err := m.Malloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Malloc(vmem.Granularity) // spans a granule boundary
	if err != nil {
		t.Fatal(err)
	}
	if a%Align != 0 || b%Align != 0 || b < a+1000 {
		t.Fatalf("allocations at %#x and %#x", a, b)
	}
	x, err := m.Bytes(a, 1000)
	if err != nil {
		t.Fatal(err)
	}
	x[999] = 7 // committed: no fault
	if p := Pointer(a+999, 1); p == nil || *(*byte)(p) != 7 {
		t.Fatal("Pointer does not reach the allocation")
	}
	for _, c := range []struct {
		p    uint64
		n    int
		want string // "" for a good range
	}{
		{a, 1000, ""},
		{a + 999, 1, ""},
		{a, 1001, "runs past the end"}, // the size asked for bounds the range, not the rounded one
		{b + vmem.Granularity, 1, "not in a live allocation"},
	} {
		_, err := m.Bytes(c.p, c.n)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Bytes(%#x, %d) = %v, want %q", c.p, c.n, err, c.want)
		}
	}
	if !m.Free(a) || m.Free(a) {
		t.Fatal("Free of a live allocation must succeed once")
	}
	if !m.Free(b) {
		t.Fatal("Free(b) failed")
	}
	if _, err := m.Malloc(int(m.Size()) + 1); err == nil {
		t.Fatal("Malloc over the range succeeded")
	}
	base := a
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	if Pointer(base, 1) != nil {
		t.Fatal("a released range is still found")
	}
}
