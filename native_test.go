package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// The driver handles on the host backend, which has no driver: zero
// handles, and a typed error for a function.
func TestNativeHandlesOnHost(t *testing.T) {
	d := open(t)
	g := must[*gg.Graph](t)(d.NewGraph())
	must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	x := must[*gg.Exec](t)(g.Instantiate(0))
	if h := x.NativeExec(); h != 0 {
		t.Errorf("NativeExec on host = %#x, want 0", h)
	}
	for _, tc := range []struct {
		name string
		k    *gg.Kernel
		want *gg.Code
	}{{"kernel", kA, gg.ErrNotSupported}, {"nil kernel", nil, gg.ErrInvalidValue}} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := d.NativeFunction(tc.k)
			isCode(t, err, tc.want)
			if h != 0 {
				t.Errorf("handle %#x with the error", h)
			}
		})
	}
}
