package gpugraph_test

import (
	"fmt"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Instantiate and update cost, side by side, for chains of kernel nodes
// (DESIGN §5). "Update" changes every node's arguments; "UpdateSame"
// pairs and compares but changes nothing; "SetParams" updates one node.
//
//	go test -run '^$' -bench 'Instantiate|Update|ExecSetParams' -benchmem .
func BenchmarkGraphUpdate(b *testing.B) {
	d := open(b)
	p := must[gg.DevicePtr](b)(d.Malloc(1 << 16))
	for _, n := range []int{10, 100, 1000, 10000} {
		chain := func(v uint32) *gg.Graph {
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = v
			}
			g, _ := chainOfMod(b, d, p, vals)
			return g
		}
		g1, g2 := chain(1), chain(2)
		b.Run(fmt.Sprintf("Instantiate/%d", n), func(b *testing.B) {
			for b.Loop() {
				e := must[*gg.Exec](b)(g1.Instantiate(0))
				ok(b, e.Destroy())
			}
		})
		e := must[*gg.Exec](b)(g1.Instantiate(0))
		b.Run(fmt.Sprintf("Update/%d", n), func(b *testing.B) {
			gs := [2]*gg.Graph{g2, g1}
			i := 0
			for b.Loop() {
				if _, err := e.Update(gs[i&1]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("UpdateSame/%d", n), func(b *testing.B) {
			ok(b, updateErr(e.Update(g1)))
			for b.Loop() {
				ok(b, updateErr(e.Update(g1)))
			}
		})
		nodes := must[[]*gg.Node](b)(g1.Nodes())
		b.Run(fmt.Sprintf("ExecSetParams/%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				ok(b, e.SetParams(nodes[n/2], setAt(p, (n/2)%1024, uint32(i))))
				i++
			}
		})
		ok(b, e.Destroy())
	}
}

func updateErr(_ gg.UpdateResultInfo, err error) error { return err }

// chainOfMod is chainOf with indexes wrapped into a 4 KiB buffer.
func chainOfMod(t testing.TB, d *gg.Device, p gg.DevicePtr, vals []uint32) (*gg.Graph, []*gg.Node) {
	g := graph(t, d)
	var nodes, prev []*gg.Node
	for i, v := range vals {
		n := must[*gg.Node](t)(g.AddKernelNode(setAt(p, i%1024, v), prev...))
		nodes = append(nodes, n)
		prev = []*gg.Node{n}
	}
	return g, nodes
}
