package gpugraph_test

import (
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// open returns a fresh host device, closed at the end of the test.
func open(t testing.TB) *gg.Device {
	t.Helper()
	d, err := gg.Open("host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func stream(t testing.TB, d *gg.Device) *gg.Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func graph(t testing.TB, d *gg.Device) *gg.Graph {
	t.Helper()
	g, err := d.NewGraph()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ok(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// isCode fails unless err wraps want.
func isCode(t testing.TB, err error, want *gg.Code) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %s", err, want.Name())
	}
	var e *gg.Error
	if !errors.As(err, &e) || e.Op == "" {
		t.Fatalf("error %v is not an *Error naming its operation", err)
	}
}

var one = gg.Dim1(1)

// fill32 writes v to every element of a float32 buffer.
var fill32 = &gg.Kernel{
	Name:   "fill32",
	Params: []gg.ParamType{gg.Pointer, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		x := gg.Slice[float32](a.Ptr(0), a.Int(2))
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < len(x) {
				x[i] = a.Float32(1)
			}
		}
	},
}

// axpy computes y[i] += a*x[i].
var axpy = &gg.Kernel{
	Name:   "axpy",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(3)
		x, y := gg.Slice[float32](a.Ptr(0), n), gg.Slice[float32](a.Ptr(1), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				y[i] += a.Float32(2) * x[i]
			}
		}
	},
}

func readF32(t testing.TB, d *gg.Device, p gg.DevicePtr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	ok(t, d.Memcpy(gg.DtoH(gg.Bytes(out), p)))
	return out
}
