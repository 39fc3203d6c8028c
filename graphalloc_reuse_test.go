package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// A node on a graph allocation that reuses the address of a smaller one
// freed before it is valid (fuzzing found it refused).
func TestGraphAllocReuseLargerNode(t *testing.T) {
	d := open(t)
	g := must[*gg.Graph](t)(d.NewGraph())
	a, pa, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 16})
	ok(t, err)
	fa := must[*gg.Node](t)(g.AddMemFreeNode(pa, a))
	b, pb, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 64}, fa)
	ok(t, err)
	if pb != pa {
		t.Skipf("the 64-byte allocation did not reuse the address (%#x, %#x)", pa, pb)
	}
	m := must[*gg.Node](t)(g.AddMemsetNode(gg.Memset32(pb, 7, 16), b))
	must[*gg.Node](t)(g.AddMemFreeNode(pb, m))
	e := must[*gg.Exec](t)(g.Instantiate(0))
	defer e.Destroy()
	s := must[*gg.Stream](t)(d.NewStream())
	ok(t, e.Launch(s))
	ok(t, s.Synchronize())
}
