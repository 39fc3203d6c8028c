package cuda

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// TestContextErrorAllocs: contextError runs after every launch, so its
// success path must not allocate (the root's TestLaunchAllocs checks the
// whole path on the GPU).
func TestContextErrorAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = contextError(nil) }); n != 0 {
		t.Fatalf("contextError(nil) allocates %.0f times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Err(nil) }); n != 0 {
		t.Fatalf("Err(nil) allocates %.0f times", n)
	}
}

func TestErrPassesThrough(t *testing.T) {
	be := backend.Errorf(backend.ErrInvalidValue, "x")
	other := errors.New("not the driver's")
	for _, c := range []struct {
		in, want error
	}{
		{nil, nil},
		{be, be},
		{other, other},
	} {
		if got := Err(c.in); got != c.want {
			t.Errorf("Err(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	d, _, err := Open(0, func(error) {})
	if err == nil {
		d.Close()
		t.Skip("a CUDA driver is present: the GPU tests cover Open")
	}
	if !errors.Is(err, backend.ErrNoDevice) {
		t.Fatalf("Open without a driver: %v, want ErrNoDevice", err)
	}
}

// TestStreamLayout: a Stream is one 64-byte size class, so that what a
// launch reads of it (Stream's comment) lies on one cache line.
func TestStreamLayout(t *testing.T) {
	if n := unsafe.Sizeof(Stream{}); n != 64 {
		t.Fatalf("a Stream is %d bytes, want 64", n)
	}
	if off := unsafe.Offsetof(Stream{}.d); off != 56 {
		t.Fatalf("the fields a launch reads end at %d, want 56", off)
	}
}
