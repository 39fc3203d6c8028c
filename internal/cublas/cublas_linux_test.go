//go:build linux

package cublas

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCandidates(t *testing.T) {
	got := candidates("/opt/cuda")
	want := []string{
		"libcublas.so.13", "libcublas.so.12", "libcublas.so",
		"/opt/cuda/lib64/libcublas.so.13", "/opt/cuda/lib64/libcublas.so.12", "/opt/cuda/lib64/libcublas.so",
		"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("candidates = %q\nwant %q", got, want)
	}
	// CUDA_HOME=/usr/local/cuda is not tried twice; unset adds nothing.
	for _, home := range []string{"/usr/local/cuda", "/usr/local/cuda/", ""} {
		if got := candidates(home); len(got) != 6 {
			t.Fatalf("CUDA_HOME=%q: %q", home, got)
		}
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := load([]string{"libgpugraph-no-such-cublas.so.99", "/nonexistent/lib64/libcublas.so.99"})
	if !errors.Is(err, ErrNoCUBLAS) {
		t.Fatalf("got %v, want ErrNoCUBLAS", err)
	}
	if !strings.Contains(err.Error(), "libgpugraph-no-such-cublas.so.99") {
		t.Fatalf("the error does not name what was tried: %v", err)
	}
}

func TestDestroyedHandle(t *testing.T) {
	var h *Handle
	for _, err := range []error{
		h.Destroy(), (&Handle{}).SetStream(0), (&Handle{}).SetWorkspace(0, 0), (&Handle{}).SetMathMode(MathTF32),
		(&Handle{}).Sgemm(false, false, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 1),
	} {
		if !errors.Is(err, StatusNotInitialized) {
			t.Fatalf("got %v, want CUBLAS_STATUS_NOT_INITIALIZED", err)
		}
	}
}

func TestNilHandle(t *testing.T) {
	var h *Handle
	for _, err := range []error{h.Destroy(), h.SetStream(0), h.SetMathMode(MathDefault), h.Sgemm(false, false, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 1)} {
		if !errors.Is(err, StatusNotInitialized) {
			t.Fatalf("got %v", err)
		}
	}
	if _, err := h.Version(); !errors.Is(err, StatusNotInitialized) {
		t.Fatalf("got %v", err)
	}
}
