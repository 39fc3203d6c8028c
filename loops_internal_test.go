package gpugraph

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/host"
)

// TestAloneEdges: in the graph with the edges added, every node marked
// alone is an ancestor or a descendant of every other node, every added
// edge goes forward in the original's topological order (no cycle, every
// schedule one of the original's), and no edge is added that the
// original's order already implies.
func TestAloneEdges(t *testing.T) {
	for _, c := range []struct {
		name  string
		deps  [][]int // deps[i]: the nodes i depends on
		alone []int
		want  int // edges added
	}{
		{"alone already", [][]int{nil, {0}, {1}}, []int{1}, 0},
		{"two loops side by side", [][]int{nil, nil}, []int{0, 1}, 1},
		{"loop beside a chain", [][]int{nil, nil, {1}, {2}}, []int{0}, 1},
		{"loop in a diamond's branch", [][]int{nil, {0}, {0}, {1, 2}}, []int{1}, 1},
		{"loop beside a fan", [][]int{nil, nil, nil, nil}, []int{3}, 3},
		{"no loop", [][]int{nil, nil, {0, 1}}, nil, 0},
		{"loops at both ends", [][]int{nil, nil, nil, {0}, {1}}, []int{0, 4}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			nodes := make([]*Node, len(c.deps))
			for i := range nodes {
				nodes[i] = &Node{id: i}
			}
			for i, ds := range c.deps {
				for _, d := range ds {
					nodes[i].deps = append(nodes[i].deps, nodes[d])
					nodes[d].outs = append(nodes[d].outs, nodes[i])
				}
			}
			alone := func(n *Node) bool { return slices.Contains(c.alone, n.id) }
			order, _ := topoOrder(nodes)
			pos := map[*Node]int{}
			for i, n := range order {
				pos[n] = i
			}
			es := aloneEdges(nodes, nil, alone)
			if len(es) != c.want {
				t.Errorf("%d edges added (%v), want %d", len(es), edgeList(es), c.want)
			}
			for _, e := range es {
				if pos[e.From] >= pos[e.To] {
					t.Errorf("edge %d->%d goes back in the order", e.From.id, e.To.id)
				}
				if slices.Contains(e.To.deps, e.From) {
					t.Errorf("edge %d->%d is already there", e.From.id, e.To.id)
				}
			}
			// Ancestors in the graph with the edges.
			deps := map[*Node][]*Node{}
			for _, n := range nodes {
				deps[n] = slices.Clone(n.deps)
			}
			for _, e := range es {
				deps[e.To] = append(deps[e.To], e.From)
			}
			var anc func(n, of *Node) bool
			anc = func(n, of *Node) bool {
				for _, d := range deps[of] {
					if d == n || anc(n, d) {
						return true
					}
				}
				return false
			}
			for _, w := range nodes {
				if !alone(w) {
					continue
				}
				for _, n := range nodes {
					if n != w && !anc(n, w) && !anc(w, n) {
						t.Errorf("node %d can run beside loop %d", n.id, w.id)
					}
				}
			}
		})
	}
}

func edgeList(es []Edge) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, " %d->%d", e.From.id, e.To.id)
	}
	return b.String()
}

// A host device that asks for loops alone, and whose graphs log the edges
// added and removed around an instantiation.
type loopsDev struct {
	*host.Device
	log      *[]string
	noRemove bool // RemoveEdges refuses, as the driver does for a graph with memory nodes
}

func (loopsDev) LoopsAlone() {}

func (d loopsDev) NewGraph() (backend.Graph, error) {
	g, err := d.Device.NewGraph()
	if err != nil {
		return nil, err
	}
	return loopsGraph{g.(*host.Graph), d.log, d.noRemove}, nil
}

type loopsGraph struct {
	*host.Graph
	log      *[]string
	noRemove bool
}

func (g loopsGraph) AddEdges(from, to []backend.Node, data []backend.EdgeData) error {
	*g.log = append(*g.log, fmt.Sprintf("add %d", len(from)))
	return g.Graph.AddEdges(from, to, data)
}

func (g loopsGraph) RemoveEdges(from, to []backend.Node, data []backend.EdgeData) error {
	if g.noRemove {
		*g.log = append(*g.log, fmt.Sprintf("remove %d refused", len(from)))
		return backend.Errorf(backend.ErrNotSupported, "edges cannot be removed")
	}
	*g.log = append(*g.log, fmt.Sprintf("remove %d", len(from)))
	return g.Graph.RemoveEdges(from, to, data)
}

func (g loopsGraph) Instantiate(flags uint, up backend.Stream, tag any) (backend.Exec, error) {
	*g.log = append(*g.log, "instantiate")
	return g.Graph.Instantiate(flags, up, tag)
}

var countDown = &Kernel{
	Name:   "loops_count_down",
	Params: []ParamType{Uint64, Pointer},
	Go: func(b Block, a Args) {
		if c := Slice[int32](a.Ptr(1), 1); c[0]-1 <= 0 {
			c[0] = 0
			b.SetConditional(ConditionalHandle(a.Uint64(0)), 0)
		} else {
			c[0]--
		}
	},
}

// twoLoops opens a host device whose backend asks for loops alone (and
// refuses to remove edges with noRemove) and builds a graph of two WHILE
// loops side by side, each counting down its int32 of ctr.
func twoLoops(t *testing.T, noRemove bool) (d *Device, g *Graph, loops []*Node, ctr DevicePtr, log *[]string) {
	t.Helper()
	d, err := Open(BackendHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	log = new([]string)
	d.be = loopsDev{d.be.(*host.Device), log, noRemove}
	if g, err = d.NewGraph(); err != nil {
		t.Fatal(err)
	}
	if ctr, err = d.Malloc(8); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		h, err := g.ConditionalHandleCreate(1, ConditionalAssignDefault)
		if err != nil {
			t.Fatal(err)
		}
		n, err := g.AddNode(ConditionalParams{Handle: h, Type: ConditionalWhile, Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		bodies, err := n.ConditionalBodies()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bodies[0].AddKernelNode(KernelParams{Kernel: countDown, Grid: Dim3{1, 1, 1}, Block: Dim3{1, 1, 1},
			Args: []any{uint64(h), ctr + DevicePtr(4*i)}}); err != nil {
			t.Fatal(err)
		}
		loops = append(loops, n)
	}
	return d, g, loops, ctr, log
}

// TestLoopsAloneInstantiate: on a backend that asks for it, two WHILE loops
// side by side get one edge between them for the instantiation only, the
// graph's own edges stay as they were, and the loops run to the end.
func TestLoopsAloneInstantiate(t *testing.T) {
	d, g, _, ctr, logp := twoLoops(t, false)
	e, err := g.Instantiate(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"add 1", "instantiate", "remove 1"}; !slices.Equal(*logp, want) {
		t.Errorf("backend calls %q, want %q", *logp, want)
	}
	if es, _ := g.Edges(); len(es) != 0 {
		t.Errorf("the graph has edges %v after instantiation, none before", es)
	}
	if err := d.Memcpy(HtoD(ctr, Bytes([]int32{3, 5}))); err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]int32, 2)
	if err := d.Memcpy(DtoH(Bytes(out), ctr)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, []int32{0, 0}) {
		t.Errorf("counters %v after the launch, want [0 0]", out)
	}
}

// TestLoopsAloneHeldEdges: where the backend cannot remove the edges (the
// driver, for a graph with memory nodes), they stay held: the executable
// graph's Destroy tries again, the next instantiation adds none again, and
// an edge the user adds that is one of them becomes the user's without a
// second backend edge.
func TestLoopsAloneHeldEdges(t *testing.T) {
	_, g, loops, _, logp := twoLoops(t, true)
	e, err := g.Instantiate(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"add 1", "instantiate", "remove 1 refused"}; !slices.Equal(*logp, want) {
		t.Errorf("first instantiation: backend calls %q, want %q", *logp, want)
	}
	if len(g.loopHeld) != 1 || len(e.loopHeld) != 1 {
		t.Fatalf("held: graph %d edges, exec %d graphs; want 1 and 1", len(g.loopHeld), len(e.loopHeld))
	}
	*logp = nil
	if err := e.Destroy(); err != nil { // one executable graph at a time
		t.Fatal(err)
	}
	if _, err := g.Instantiate(0); err != nil {
		t.Fatal(err)
	}
	if want := []string{"remove 1 refused", "instantiate", "remove 1 refused"}; !slices.Equal(*logp, want) {
		t.Errorf("destroyed, instantiated again: backend calls %q, want %q", *logp, want)
	}
	*logp = nil
	held := g.loopHeld[0]
	if held.From != loops[0] || held.To != loops[1] {
		t.Fatalf("held edge %v -> %v, want the first loop before the second", held.From, held.To)
	}
	// The other way round makes a cycle in the driver's graph.
	if err := g.AddDependency(loops[1], loops[0]); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("an edge against a held one: %v, want ErrInvalidValue", err)
	}
	if es, _ := g.Edges(); len(es) != 0 || len(*logp) != 0 {
		t.Fatalf("after the refused edge: %d edges, backend calls %q; want none", len(es), *logp)
	}
	if err := g.AddDependency(loops[0], loops[1]); err != nil {
		t.Fatal(err)
	}
	if len(*logp) != 0 || len(g.loopHeld) != 0 {
		t.Errorf("the user's edge: backend calls %q, %d edges still held; want none and none", *logp, len(g.loopHeld))
	}
	if es, _ := g.Edges(); len(es) != 1 {
		t.Errorf("the graph has %d edges, want the user's one", len(es))
	}
}
