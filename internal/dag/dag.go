// Package dag holds the graph algorithms that the gpugraph package's view
// of a graph and the host backend's mirror of it both need, written once
// over any node type.
package dag

import "slices"

// TopoOrder returns nodes in an order where every node follows its
// dependencies (Kahn's algorithm, stable in the order of nodes). If the
// nodes contain a cycle it returns ok=false and a node on or behind it.
func TopoOrder[N comparable](nodes []N, deps, outs func(N) []N) (order []N, bad N, ok bool) {
	indeg := make(map[N]int, len(nodes))
	for _, n := range nodes {
		indeg[n] = len(deps(n))
		if indeg[n] == 0 {
			order = append(order, n)
		}
	}
	for i := 0; i < len(order); i++ {
		for _, o := range outs(order[i]) {
			if indeg[o]--; indeg[o] == 0 {
				order = append(order, o)
			}
		}
	}
	if len(order) != len(nodes) {
		for _, n := range nodes {
			if indeg[n] > 0 {
				return nil, n, false
			}
		}
	}
	return order, bad, true
}

// Ancestors returns the set of nodes that n transitively depends on.
func Ancestors[N comparable](n N, deps func(N) []N) map[N]bool {
	seen := map[N]bool{}
	stack := slices.Clone(deps(n))
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, deps(x)...)
	}
	return seen
}

// Remove removes the first n from ns, in place.
func Remove[N comparable](ns []N, n N) []N {
	if i := slices.Index(ns, n); i >= 0 {
		return slices.Delete(ns, i, i+1)
	}
	return ns
}

// CopyEdges gives the copy to[n] of each node n the edges of n, between
// copies, in the same order; edges returns a node's dependency and
// dependent lists.
func CopyEdges[N comparable](nodes []N, to map[N]N, edges func(N) (deps, outs *[]N)) {
	for _, n := range nodes {
		nd, no := edges(n)
		md, mo := edges(to[n])
		for _, d := range *nd {
			*md = append(*md, to[d])
		}
		for _, o := range *no {
			*mo = append(*mo, to[o])
		}
	}
}
