package gpugraph

import "testing"

// TestTopoOrderFindsCycles exercises the cycle check that AddDependencies and
// Instantiate rely on, on node sets built by hand (the public API never lets
// a cycle into a graph).
func TestTopoOrderFindsCycles(t *testing.T) {
	mk := func(n int, edges [][2]int) []*Node {
		ns := make([]*Node, n)
		for i := range ns {
			ns[i] = &Node{id: i}
		}
		for _, e := range edges {
			ns[e[1]].deps = append(ns[e[1]].deps, ns[e[0]])
			ns[e[0]].outs = append(ns[e[0]].outs, ns[e[1]])
		}
		return ns
	}
	cases := []struct {
		name  string
		n     int
		edges [][2]int
		cycle bool
	}{
		{"empty", 0, nil, false},
		{"diamond", 4, [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}}, false},
		{"self loop", 1, [][2]int{{0, 0}}, true},
		{"triangle", 3, [][2]int{{0, 1}, {1, 2}, {2, 0}}, true},
		{"cycle behind a root", 4, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 1}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := mk(tc.n, tc.edges)
			order, bad := topoOrder(ns)
			if (bad != nil) != tc.cycle {
				t.Fatalf("cycle reported %v, want %v", bad != nil, tc.cycle)
			}
			if tc.cycle {
				return
			}
			pos := map[*Node]int{}
			for i, n := range order {
				pos[n] = i
			}
			for _, n := range ns {
				for _, d := range n.deps {
					if pos[d] >= pos[n] {
						t.Fatalf("%d ordered before its dependency %d", n.id, d.id)
					}
				}
			}
		})
	}
}
