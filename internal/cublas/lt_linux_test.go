//go:build linux

package cublas

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadLtMissing(t *testing.T) {
	_, err := loadLt([]string{"libgpugraph-no-such-cublasLt.so.99", "/nonexistent/lib64/libcublasLt.so.99"})
	if !errors.Is(err, ErrNoCUBLAS) {
		t.Fatalf("got %v, want ErrNoCUBLAS", err)
	}
	if !strings.Contains(err.Error(), "libgpugraph-no-such-cublasLt.so.99") || !strings.Contains(err.Error(), "libcublasLt") {
		t.Fatalf("the error does not name what was tried: %v", err)
	}
	if (*LtLib)(nil).Version() != 0 {
		t.Fatal("Version of a nil LtLib")
	}
	if _, err := (*LtLib)(nil).Create(); !errors.Is(err, ErrNoCUBLAS) {
		t.Fatalf("Create on a nil LtLib: %v", err)
	}
}
