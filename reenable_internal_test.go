package gpugraph

import (
	"testing"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// keeperExec records what keepUpdatedParams tells a backend.
type keeperExec struct {
	backend.Exec
	kept map[backend.Node]int // node -> the n argument of its kept launch
}

func (k *keeperExec) KeepParams(n backend.Node, op *backend.Op) {
	k.kept[n] = int(op.Launch.Args[0])
}

func (k *keeperExec) KeepNative(n, from backend.Node) error { return nil }

// TestKeepUpdatedParams: after a whole-graph update each node is given
// the parameters of the node of the new graph the update paired it with
// (sinks in the order they became sinks, not in creation order), and
// nothing once the instantiated graph's topology has changed.
func TestKeepUpdatedParams(t *testing.T) {
	d, err := Open(BackendHost)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	k := &Kernel{Name: "keep_n", Params: []ParamType{Int32}, Go: func(Block, Args) {}}
	kp := func(n int) KernelParams {
		return KernelParams{Kernel: k, Grid: Dim1(1), Block: Dim1(1), Args: []any{n}}
	}
	// k0 -> k1, k0 -> k2; in the new graph k2 is made first, so it is the
	// first sink there, and pairs with k1.
	a, _ := d.NewGraph()
	a0, _ := a.AddKernelNode(kp(10))
	a1, _ := a.AddKernelNode(kp(11), a0)
	a2, _ := a.AddKernelNode(kp(12), a0)
	b, _ := d.NewGraph()
	b0, _ := b.AddKernelNode(kp(20))
	if _, err := b.AddKernelNode(kp(22), b0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddKernelNode(kp(21), b0); err != nil {
		t.Fatal(err)
	}
	keeper := &keeperExec{kept: map[backend.Node]int{}}
	e := &Exec{src: a, srcTopo: a.topoVer.Load(), be: keeper}
	e.keepUpdatedParams(b)
	for n, want := range map[*Node]int{a0: 20, a1: 22, a2: 21} {
		if got := keeper.kept[n.be]; got != want {
			t.Errorf("node with n=%v kept n=%d, want %d", n.params.(KernelParams).Args[0], got, want)
		}
	}
	// A graph whose paired kernel nodes run other functions is not what
	// the driver paired: nothing is given.
	other := &Kernel{Name: "keep_other", Params: []ParamType{Int32}, Go: func(Block, Args) {}}
	c, _ := d.NewGraph()
	c0, _ := c.AddKernelNode(kp(30))
	if _, err := c.AddKernelNode(kp(31), c0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddKernelNode(KernelParams{Kernel: other, Grid: Dim1(1), Block: Dim1(1), Args: []any{32}}, c0); err != nil {
		t.Fatal(err)
	}
	keeper.kept = map[backend.Node]int{}
	e.keepUpdatedParams(c)
	if len(keeper.kept) != 0 {
		t.Errorf("paired with nodes of other functions, %d nodes kept parameters, want none", len(keeper.kept))
	}
	if _, err := a.AddEmptyNode(); err != nil {
		t.Fatal(err)
	}
	keeper.kept = map[backend.Node]int{}
	e.keepUpdatedParams(b)
	if len(keeper.kept) != 0 {
		t.Errorf("after an edit of the instantiated graph, %d nodes kept parameters, want none", len(keeper.kept))
	}
}
