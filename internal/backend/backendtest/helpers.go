package backendtest

import (
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Helpers and kernels of every topic. The gpugraph package's tests use
// the exported ones too.

// NewStream returns a new stream of d, or fails the test.
func NewStream(t testing.TB, d *gg.Device) *gg.Stream {
	t.Helper()
	return Must[*gg.Stream](t)(d.NewStream())
}

// NewGraph returns a new graph of d, or fails the test.
func NewGraph(t testing.TB, d *gg.Device) *gg.Graph {
	t.Helper()
	return Must[*gg.Graph](t)(d.NewGraph())
}

// Must returns a function that returns v, or fails the test if err is not
// nil: Must[T](t)(f()).
func Must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// EnablePeers enables peer access between a and b both ways, and disables
// it when the test ends: on cuda the access belongs to the devices'
// primary contexts, which outlive the Devices and the test. Access already
// enabled is taken as it is. It skips the test when either device cannot
// access the other.
func EnablePeers(t testing.TB, a, b *gg.Device) {
	t.Helper()
	for _, p := range [][2]*gg.Device{{a, b}, {b, a}} {
		if !Must[bool](t)(p[0].CanAccessPeer(p[1])) {
			t.Skipf("device %d cannot access device %d", p[0].Properties().Ordinal, p[1].Properties().Ordinal)
		}
	}
	for _, p := range [][2]*gg.Device{{a, b}, {b, a}} {
		if err := p[0].EnablePeerAccess(p[1]); err != nil && !errors.Is(err, gg.ErrPeerAccessAlreadyEnabled) {
			t.Fatal(err)
		}
		t.Cleanup(func() { p[0].DisablePeerAccess(p[1]) })
	}
}

// OK fails the test if err is not nil.
func OK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// IsCode fails the test unless err wraps want and is an *Error naming its
// operation.
func IsCode(t testing.TB, err error, want *gg.Code) {
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

// kp is an empty kernel launch: captures below compare structure.
func kp(k *gg.Kernel, args ...any) gg.KernelParams {
	return gg.KernelParams{Kernel: k, Grid: one, Block: one, Args: args}
}

// KA, KB, KC and KD do nothing: scenarios of structure and order use them.
var (
	KA = &gg.Kernel{Name: "A", Go: func(gg.Block, gg.Args) {}, CUDA: `extern "C" __global__ void A() {}`}
	KB = &gg.Kernel{Name: "B", Go: func(gg.Block, gg.Args) {}, CUDA: `extern "C" __global__ void B() {}`}
	KC = &gg.Kernel{Name: "C", Go: func(gg.Block, gg.Args) {}, CUDA: `extern "C" __global__ void C() {}`}
	KD = &gg.Kernel{Name: "D", Go: func(gg.Block, gg.Args) {}, CUDA: `extern "C" __global__ void D() {}`}
)
