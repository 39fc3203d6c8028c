package alloc

import (
	"math/rand"
	"testing"
)

func TestAllocFreeCoalesce(t *testing.T) {
	a := New(1024, 256)
	var offs []uint64
	for i := 0; i < 4; i++ {
		off, err := a.Alloc(1)
		if err != nil {
			t.Fatal(err)
		}
		if off != uint64(i)*256 {
			t.Fatalf("alloc %d at %d, want %d", i, off, i*256)
		}
		offs = append(offs, off)
	}
	if _, err := a.Alloc(1); err != ErrNoSpace {
		t.Fatalf("full allocator: got %v, want ErrNoSpace", err)
	}
	for _, i := range []int{1, 3, 2, 0} {
		if n, ok := a.Free(offs[i]); !ok || n != 256 {
			t.Fatalf("free %d: %d %v", offs[i], n, ok)
		}
	}
	if len(a.free) != 1 || a.free[0] != (span{off: 0, size: 1024}) {
		t.Fatalf("free list not coalesced: %v", a.free)
	}
	if _, ok := a.Free(0); ok {
		t.Fatal("double free accepted")
	}
}

func TestFind(t *testing.T) {
	a := New(1<<20, 256)
	x, _ := a.Alloc(300) // occupies 512
	y, _ := a.Alloc(256)
	tests := []struct {
		off   uint64
		start uint64
		ok    bool
	}{{x, x, true}, {x + 299, x, true}, {x + 300, 0, false}, {y, y, true}, {y + 256, 0, false}}
	for _, tc := range tests {
		s, _, ok := a.Find(tc.off)
		if ok != tc.ok || (ok && s != tc.start) {
			t.Errorf("Find(%d) = %d,%v want %d,%v", tc.off, s, ok, tc.start, tc.ok)
		}
	}
}

// TestRandomNoOverlap allocates and frees at random and checks that live
// ranges never overlap and that everything freed is reusable.
func TestRandomNoOverlap(t *testing.T) {
	const space = 1 << 16
	a := New(space, 64)
	rng := rand.New(rand.NewSource(1))
	live := map[uint64]uint64{}
	for i := 0; i < 5000; i++ {
		if rng.Intn(2) == 0 || len(live) == 0 {
			n := uint64(rng.Intn(2000) + 1)
			off, err := a.Alloc(n)
			if err != nil {
				continue
			}
			for o, s := range live {
				if off < o+s && o < off+a.Rounded(n) {
					t.Fatalf("overlap [%d,+%d) with [%d,+%d)", off, n, o, s)
				}
			}
			live[off] = a.Rounded(n)
		} else {
			for o := range live {
				a.Free(o)
				delete(live, o)
				break
			}
		}
	}
	for o := range live {
		a.Free(o)
	}
	if off, err := a.Alloc(space); err != nil || off != 0 {
		t.Fatalf("after freeing all, whole space not available: %d %v", off, err)
	}
}
