//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestEdgeDataLayout pins CUgraphEdgeData (8 bytes in cuda.h).
func TestEdgeDataLayout(t *testing.T) {
	var d GraphEdgeData
	if s := unsafe.Sizeof(d); s != 8 {
		t.Errorf("CUgraphEdgeData: %d bytes, want 8", s)
	}
	if o := unsafe.Offsetof(d.Type); o != 2 {
		t.Errorf("type at %d, want 2", o)
	}
}
