//go:build linux

package cublas

import (
	"errors"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

func TestGemmExDeadHandle(t *testing.T) {
	var nilHandle *Handle
	for _, h := range []*Handle{nilHandle, {}} {
		err := h.GemmEx(false, false, 1, 1, 1, 1, 0, R16BF, 1, 0, R16BF, 1, 0, 0, R32F, 1, Compute32F)
		if !errors.Is(err, StatusNotInitialized) {
			t.Fatalf("got %v, want CUBLAS_STATUS_NOT_INITIALIZED", err)
		}
		err = h.GemmExRowMajor(false, false, 1, 1, 1, 1, 0, R32F, 1, 0, R32F, 1, 0, 0, R32F, 1, Compute32FFastTF32)
		if !errors.Is(err, StatusNotInitialized) {
			t.Fatalf("row-major: got %v, want CUBLAS_STATUS_NOT_INITIALIZED", err)
		}
	}
}

// A library without cublasGemmEx (libc stands in for an old libcublas)
// loads, and fails the first GemmEx naming the entry point, without
// calling anything.
func TestGemmExMissingSymbol(t *testing.T) {
	lib, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Skipf("no libc.so.6 to stand in: %v", err)
	}
	var scal [2]float32
	h := &Handle{lib: &Lib{Path: "libc.so.6", lib: lib}, h: 1, scal: &scal}
	for range 2 { // the second call reads the remembered answer
		err := h.GemmEx(false, false, 1, 1, 1, 1, 0, R16BF, 1, 0, R16BF, 1, 0, 0, R32F, 1, Compute32F)
		if !errors.Is(err, StatusNotSupported) || !strings.Contains(err.Error(), "cublasGemmEx") || !strings.Contains(err.Error(), "libc.so.6") {
			t.Fatalf("got %v, want CUBLAS_STATUS_NOT_SUPPORTED naming cublasGemmEx and the library", err)
		}
	}
	// Sizes a C int cannot hold are refused before the library is asked.
	err = h.GemmEx(false, false, 1<<31, 1, 1, 1, 0, R32F, 1, 0, R32F, 1, 0, 0, R32F, 1, Compute32F)
	if !errors.Is(err, StatusInvalidValue) {
		t.Fatalf("m = 2^31: got %v, want CUBLAS_STATUS_INVALID_VALUE", err)
	}
}

func TestGemmExNames(t *testing.T) {
	for _, c := range []struct {
		s    interface{ String() string }
		want string
	}{
		{R32F, "CUDA_R_32F"}, {R16BF, "CUDA_R_16BF"}, {R16F, "CUDA_R_16F"}, {DataType(99), "cudaDataType(99)"},
		{Compute32F, "CUBLAS_COMPUTE_32F"}, {Compute32FFastTF32, "CUBLAS_COMPUTE_32F_FAST_TF32"},
		{Compute32FPedantic, "CUBLAS_COMPUTE_32F_PEDANTIC"}, {Compute32FFast16BF, "CUBLAS_COMPUTE_32F_FAST_16BF"},
		{ComputeType(1), "cublasComputeType_t(1)"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
