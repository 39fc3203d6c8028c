// Package footprint measures graph memory: the lower bound of a graph's
// footprint, and the reserved memory of the scenarios in `gpugraph mem`.
package footprint

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
)

// LowerBound is the largest total size of a graph's allocations that can be
// live at once under some valid execution order of g.
//
// Allocation X must be dead before Y is allocated exactly when X's free node
// is an ancestor of Y's alloc node (or is Y's alloc node's ancestor through
// the free itself); call that X < Y. A set of allocations can be live at once
// iff no two of them are so ordered (run the ancestors of all their alloc
// nodes, and nothing else: no free of the set is among them). So the bound is
// the maximum-weight antichain of <, which by Dilworth's theorem (weighted,
// via the bipartite flow network of the order) is the total weight minus a
// maximum flow.
func LowerBound(g *gg.Graph) (int64, int, error) {
	nodes, err := g.Nodes()
	if err != nil {
		return 0, 0, err
	}
	idx := map[*gg.Node]int{}
	for i, n := range nodes {
		idx[n] = i
	}
	// anc[i] = set of ancestors of node i (bitsets by index).
	words := (len(nodes) + 63) / 64
	anc := make([][]uint64, len(nodes))
	var visit func(i int) error
	done := make([]bool, len(nodes))
	visit = func(i int) error {
		if done[i] {
			return nil
		}
		done[i] = true
		anc[i] = make([]uint64, words)
		deps, err := nodes[i].DependencyEdges()
		if err != nil {
			return err
		}
		for _, e := range deps {
			j := idx[e.From]
			if err := visit(j); err != nil {
				return err
			}
			anc[i][j/64] |= 1 << (j % 64)
			for w := range anc[i] {
				anc[i][w] |= anc[j][w]
			}
		}
		return nil
	}
	type allocation struct {
		alloc, free int // node indexes; free is -1 if the graph never frees it
		size        int64
	}
	var as []allocation
	byPtr := map[gg.DevicePtr][]int{}
	for i, n := range nodes {
		if err := visit(i); err != nil {
			return 0, 0, err
		}
		if n.Type() == gg.NodeMemAlloc {
			p, err := n.Params()
			if err != nil {
				return 0, 0, err
			}
			ap, ok := p.(gg.MemAllocParams)
			if !ok {
				return 0, 0, fmt.Errorf("%v: its size is not known (%T)", n, p)
			}
			byPtr[ap.Ptr] = append(byPtr[ap.Ptr], len(as))
			as = append(as, allocation{alloc: i, free: -1, size: int64(ap.Size)})
		}
	}
	isAnc := func(a, b int) bool { return anc[b][a/64]&(1<<(a%64)) != 0 } // a is an ancestor of b
	for i, n := range nodes {
		if n.Type() != gg.NodeMemFree {
			continue
		}
		p, _ := n.Params()
		fp, ok := p.(gg.MemFreeParams)
		if !ok {
			return 0, 0, fmt.Errorf("%v: the address it frees is not known (%T)", n, p)
		}
		// Of the allocations at this address (in-graph reuse), the free
		// belongs to the one allocated before it and not freed earlier:
		// the latest alloc that is an ancestor of the free.
		best := -1
		for _, k := range byPtr[fp.Ptr] {
			if as[k].free < 0 && isAnc(as[k].alloc, i) && (best < 0 || isAnc(as[best].alloc, as[k].alloc)) {
				best = k
			}
		}
		if best < 0 {
			for _, k := range byPtr[fp.Ptr] {
				if as[k].free < 0 {
					best = k
					break
				}
			}
		}
		if best >= 0 {
			as[best].free = i
		}
	}
	before := func(x, y int) bool { // x dies before y is allocated
		f := as[x].free
		return x != y && f >= 0 && (f == as[y].alloc || isAnc(f, as[y].alloc))
	}
	n := len(as)
	// Flow network: source 0, left 1..n, right n+1..2n, sink 2n+1.
	fn := newFlow(2*n + 2)
	var total int64
	const inf = int64(1) << 60
	for x := 0; x < n; x++ {
		total += as[x].size
		fn.edge(0, 1+x, as[x].size)
		fn.edge(1+n+x, 2*n+1, as[x].size)
		for y := 0; y < n; y++ {
			if before(x, y) {
				fn.edge(1+x, 1+n+y, inf)
			}
		}
	}
	lb := total - fn.max(0, 2*n+1)
	if lb < 0 {
		return 0, 0, fmt.Errorf("footprint: negative bound %d", lb)
	}
	return lb, n, nil
}

// flow is Dinic's maximum flow.
type flow struct {
	head       []int
	to, next   []int
	cap        []int64
	level, cur []int
}

func newFlow(n int) *flow {
	f := &flow{head: make([]int, n), level: make([]int, n), cur: make([]int, n)}
	for i := range f.head {
		f.head[i] = -1
	}
	return f
}

func (f *flow) edge(u, v int, c int64) {
	f.to, f.cap, f.next = append(f.to, v), append(f.cap, c), append(f.next, f.head[u])
	f.head[u] = len(f.to) - 1
	f.to, f.cap, f.next = append(f.to, u), append(f.cap, 0), append(f.next, f.head[v])
	f.head[v] = len(f.to) - 1
}

func (f *flow) max(s, t int) int64 {
	var total int64
	for f.bfs(s, t) {
		copy(f.cur, f.head)
		for {
			pushed := f.dfs(s, t, int64(1)<<62)
			if pushed == 0 {
				break
			}
			total += pushed
		}
	}
	return total
}

func (f *flow) bfs(s, t int) bool {
	for i := range f.level {
		f.level[i] = -1
	}
	f.level[s] = 0
	q := []int{s}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for e := f.head[u]; e >= 0; e = f.next[e] {
			if f.cap[e] > 0 && f.level[f.to[e]] < 0 {
				f.level[f.to[e]] = f.level[u] + 1
				q = append(q, f.to[e])
			}
		}
	}
	return f.level[t] >= 0
}

func (f *flow) dfs(u, t int, limit int64) int64 {
	if u == t {
		return limit
	}
	for ; f.cur[u] >= 0; f.cur[u] = f.next[f.cur[u]] {
		e := f.cur[u]
		v := f.to[e]
		if f.cap[e] > 0 && f.level[v] == f.level[u]+1 {
			if got := f.dfs(v, t, min(limit, f.cap[e])); got > 0 {
				f.cap[e] -= got
				f.cap[e^1] += got
				return got
			}
		}
	}
	return 0
}
