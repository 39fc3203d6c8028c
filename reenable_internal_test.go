package gpugraph

import (
	"slices"
	"testing"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// keeperExec records, per node, argument arg of the kernel parameters
// keepUpdatedParams gives it (kernels with fewer arguments are not
// recorded), and passes everything else to the executable graph it wraps
// (none: nothing else is called).
type keeperExec struct {
	backend.Exec
	arg  int
	kept map[backend.Node]uint64
}

func (k *keeperExec) KeepParams(n backend.Node, op *backend.Op) {
	if k.arg < len(op.Launch.Args) {
		k.kept[n] = op.Launch.Args[k.arg]
	}
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
	keeper := &keeperExec{kept: map[backend.Node]uint64{}}
	e := &Exec{src: a, srcTopo: a.topoVer.Load(), be: keeper}
	e.keepUpdatedParams(b)
	for n, want := range map[*Node]uint64{a0: 20, a1: 22, a2: 21} {
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
	keeper.kept = map[backend.Node]uint64{}
	e.keepUpdatedParams(c)
	if len(keeper.kept) != 0 {
		t.Errorf("paired with nodes of other functions, %d nodes kept parameters, want none", len(keeper.kept))
	}
	if _, err := a.AddEmptyNode(); err != nil {
		t.Fatal(err)
	}
	keeper.kept = map[backend.Node]uint64{}
	e.keepUpdatedParams(b)
	if len(keeper.kept) != 0 {
		t.Errorf("after an edit of the instantiated graph, %d nodes kept parameters, want none", len(keeper.kept))
	}
}

// TestKeepUpdatedParamsWithLoops: with WHILE loops, which both backends
// order alone with added edges during the update, each node is given the
// parameters the host's own update pairing (internal/host/update.go, the
// driver's model) gave it, found by disabling the node and seeing which
// write goes missing. The graphs are two kernels beside a loop; in the
// instantiated one, an edge added and removed again made the first kernel
// a sink after the loop: counted without the loop's edges, the kernels and
// the loop would pair with nodes of other types, and nothing would be kept.
func TestKeepUpdatedParamsWithLoops(t *testing.T) {
	d, err := Open(BackendHost)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.Malloc(4 * 2)
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := d.Malloc(4)
	if err != nil {
		t.Fatal(err)
	}
	write := &Kernel{Name: "keep_write", Params: []ParamType{Pointer, Int32, Int32},
		Go: func(_ Block, a Args) { Slice[int32](a.Ptr(0), 2)[a.Int(1)] = a.Int32(2) }}
	kp := func(slot, v int) KernelParams {
		return KernelParams{Kernel: write, Grid: Dim1(1), Block: Dim1(1), Args: []any{out, slot, v}}
	}
	build := func(base int, restamp bool) (*Graph, []*Node) {
		g, _ := d.NewGraph()
		k0, _ := g.AddKernelNode(kp(0, base))
		k1, _ := g.AddKernelNode(kp(1, base+1))
		h, _ := g.ConditionalHandleCreate(1, ConditionalAssignDefault)
		w, err := g.AddNode(ConditionalParams{Handle: h, Type: ConditionalWhile, Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		bodies, _ := w.ConditionalBodies()
		if _, err := bodies[0].AddKernelNode(KernelParams{Kernel: countDown, Grid: Dim1(1), Block: Dim1(1), Args: []any{uint64(h), ctr}}); err != nil {
			t.Fatal(err)
		}
		if restamp {
			if err := g.AddDependency(k0, k1); err != nil {
				t.Fatal(err)
			}
			if err := g.RemoveDependencies(Edge{From: k0, To: k1}); err != nil {
				t.Fatal(err)
			}
		}
		return g, []*Node{k0, k1}
	}
	a, ka := build(10, true)
	b, _ := build(20, false)
	e, err := a.Instantiate(0)
	if err != nil {
		t.Fatal(err)
	}
	keeper := &keeperExec{Exec: e.be, arg: 2, kept: map[backend.Node]uint64{}} // the value written; not the loop's countdown (2 arguments)
	e.be = keeper
	if _, err := e.Update(b); err != nil {
		t.Fatal(err)
	}
	s, _ := d.NewStream()
	for _, x := range ka {
		if err := e.SetEnabled(x, false); err != nil {
			t.Fatal(err)
		}
		if err := d.Memcpy(HtoD(out, Bytes(make([]int32, 2)))); err != nil {
			t.Fatal(err)
		}
		if err := e.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if err := e.SetEnabled(x, true); err != nil {
			t.Fatal(err)
		}
		got := make([]int32, 2)
		if err := d.Memcpy(DtoH(Bytes(got), out)); err != nil {
			t.Fatal(err)
		}
		missing := slices.Index(got, 0)
		if missing < 0 {
			t.Fatalf("node %v disabled, every slot written: %v", x, got)
		}
		if want, kept := uint64(20+missing), keeper.kept[x.be]; kept != want {
			t.Errorf("node made with value %v: the host runs it with value %d, kept %d", x.params.(KernelParams).Args[2], want, kept)
		}
	}
}
