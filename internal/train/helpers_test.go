package train

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// openHost returns a host device and a stream, closed at the end of the test.
func openHost(t testing.TB) (*gg.Device, *gg.Stream) {
	t.Helper()
	d, err := gg.Open(gg.BackendHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

// openCUDA returns a cuda device and a stream, or skips without a GPU.
func openCUDA(t testing.TB) (*gg.Device, *gg.Stream) {
	t.Helper()
	d, err := gg.Open(gg.BackendCUDA)
	if errors.Is(err, gg.ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

func ok(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// upload copies v into a fresh pool allocation, in stream order.
func upload(t testing.TB, s *gg.Stream, v []float32) gg.DevicePtr {
	t.Helper()
	p, err := s.MallocAsync(4 * max(1, len(v)))
	ok(t, err)
	if len(v) > 0 {
		ok(t, s.Memcpy(gg.HtoD(p, gg.Bytes(v))))
	}
	return p
}

// download synchronizes s and returns n floats at p.
func download(t testing.TB, s *gg.Stream, p gg.DevicePtr, n int) []float32 {
	t.Helper()
	v := make([]float32, n)
	ok(t, s.Memcpy(gg.DtoH(gg.Bytes(v), p)))
	ok(t, s.Synchronize())
	return v
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.Float64()*2 - 1)
	}
	return v
}

// relErr is |got-want| / max(|want|, floor).
func relErr(got, want, floor float64) float64 {
	return math.Abs(got-want) / max(math.Abs(want), floor)
}

func newRand(a, b uint64) *rand.Rand { return rand.New(rand.NewPCG(a, b)) }
