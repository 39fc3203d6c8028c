//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestInstantiateParamsLayout pins CUDA_GRAPH_INSTANTIATE_PARAMS to cuda.h
// (x86-64): flags, hUploadStream, hErrNode_out, result_out.
func TestInstantiateParamsLayout(t *testing.T) {
	var p GraphInstantiateParams
	if s := unsafe.Sizeof(p); s != 32 {
		t.Errorf("CUDA_GRAPH_INSTANTIATE_PARAMS: %d bytes, want 32", s)
	}
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"hUploadStream", unsafe.Offsetof(p.UploadStream), 8},
		{"hErrNode_out", unsafe.Offsetof(p.ErrNode), 16},
		{"result_out", unsafe.Offsetof(p.Result), 24},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d, want %d", c.name, c.got, c.want)
		}
	}
}
