//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestEdgeDataLayout pins CUgraphEdgeData (8 bytes in cuda.h).
func TestEdgeDataLayout(t *testing.T) {
	var d GraphEdgeData
	checkLayouts(t, []layoutCase{
		{"sizeof CUgraphEdgeData", unsafe.Sizeof(d), 8},
		{"offsetof to_port", unsafe.Offsetof(d.ToPort), 1},
		{"offsetof type", unsafe.Offsetof(d.Type), 2},
	})
}
