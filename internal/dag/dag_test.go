package dag

import (
	"slices"
	"testing"
)

// g is a graph of ints: deps[i] are i's dependencies.
type g map[int][]int

func (g g) deps(n int) []int { return g[n] }

func (g g) outs(n int) []int {
	var os []int
	for m := range len(g) {
		if slices.Contains(g[m], n) {
			os = append(os, m)
		}
	}
	return os
}

func TestTopoOrder(t *testing.T) {
	for _, c := range []struct {
		name  string
		g     g
		want  []int
		cycle bool
	}{
		{"diamond", g{0: nil, 1: {0}, 2: {0}, 3: {1, 2}}, []int{0, 1, 2, 3}, false},
		{"creation order among roots", g{0: {2}, 1: nil, 2: nil}, []int{1, 2, 0}, false},
		{"cycle", g{0: nil, 1: {0, 2}, 2: {1}}, nil, true},
	} {
		nodes := make([]int, len(c.g))
		for i := range nodes {
			nodes[i] = i
		}
		order, bad, ok := TopoOrder(nodes, c.g.deps, c.g.outs)
		if ok == c.cycle {
			t.Fatalf("%s: ok %v", c.name, ok)
		}
		if c.cycle {
			if bad != 1 && bad != 2 {
				t.Errorf("%s: bad node %d is not on the cycle", c.name, bad)
			}
			continue
		}
		if !slices.Equal(order, c.want) {
			t.Errorf("%s: order %v, want %v", c.name, order, c.want)
		}
	}
}

func TestAncestorsAndRemove(t *testing.T) {
	gr := g{0: nil, 1: {0}, 2: {1}, 3: {0}}
	a := Ancestors(2, gr.deps)
	if len(a) != 2 || !a[0] || !a[1] {
		t.Fatalf("ancestors of 2: %v", a)
	}
	if got := Remove([]int{1, 2, 3, 2}, 2); !slices.Equal(got, []int{1, 3, 2}) {
		t.Fatalf("Remove: %v", got)
	}
	if got := Remove([]int{1}, 5); !slices.Equal(got, []int{1}) {
		t.Fatalf("Remove of an absent node: %v", got)
	}
}

func TestCopyEdges(t *testing.T) {
	type node struct{ deps, outs []*node }
	a, b := &node{}, &node{}
	b.deps, a.outs = []*node{a}, []*node{b}
	to := map[*node]*node{a: {}, b: {}}
	CopyEdges([]*node{a, b}, to, func(n *node) (*[]*node, *[]*node) { return &n.deps, &n.outs })
	if len(to[b].deps) != 1 || to[b].deps[0] != to[a] || len(to[a].outs) != 1 || to[a].outs[0] != to[b] {
		t.Fatal("the copies' edges are not between copies")
	}
}
