package gpugraph

import (
	"bufio"
	"fmt"
	"github.com/gpugraph/gpugraph/internal/host"
	"io"
	"strings"
)

// WriteDOT writes the graph in Graphviz DOT form, as cudaGraphDebugDotPrint
// does: one cluster per graph (child graphs nested in their node's cluster),
// one box per node labelled with its id, type and parameters, one arrow per
// edge. Render it with `dot -Tsvg`.
func (g *Graph) WriteDOT(w io.Writer) error {
	const opName = "Graph.WriteDOT"
	if err := g.lock(opName); err != nil {
		return err
	}
	g.mu.Unlock()
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "digraph dot {")
	next := 0
	if _, err := writeDOTGraph(bw, g, &next); err != nil {
		return err
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}

// writeDOTGraph writes g as a cluster and returns the ids of its root nodes,
// read while g is locked.
func writeDOTGraph(w *bufio.Writer, g *Graph, next *int) ([]int, error) {
	if err := g.lock("Graph.WriteDOT"); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	*next++
	gname := fmt.Sprintf("graph_%d", *next)
	fmt.Fprintf(w, "subgraph cluster_%s {\nlabel=%q graph[style=\"dashed\"];\n", gname, gname)
	name := func(n *Node) string { return fmt.Sprintf("%s_node_%d", gname, n.id) }
	for _, n := range g.nodes {
		shape := "rectangle"
		if n.typ == NodeEmpty {
			shape = "circle"
		}
		fmt.Fprintf(w, "%q [style=\"solid\" shape=%q label=%q];\n", name(n), shape, dotLabel(n))
		if n.child != nil {
			first := *next + 1
			roots, err := writeDOTGraph(w, n.child, next)
			if err != nil {
				return nil, err
			}
			for _, id := range roots {
				fmt.Fprintf(w, "%q -> \"graph_%d_node_%d\" [style=\"dashed\"];\n", name(n), first, id)
			}
		}
		if err := writeDOTBodies(w, n, name(n), next); err != nil {
			return nil, err
		}
	}
	for _, n := range g.nodes {
		for _, d := range n.deps {
			fmt.Fprintf(w, "%q -> %q%s;\n", name(d), name(n), g.dotEdgeAttrs(d, n))
		}
	}
	fmt.Fprintln(w, "}")
	var roots []int
	for _, n := range g.nodes {
		if len(n.deps) == 0 {
			roots = append(roots, n.id)
		}
	}
	return roots, nil
}

func dotLabel(n *Node) string {
	lines := []string{fmt.Sprint(n.id), strings.ToUpper(strings.ReplaceAll(n.typ.String(), " ", "_"))}
	switch p := n.params.(type) {
	case KernelParams:
		name := "<nil>"
		if p.Kernel != nil {
			name = p.Kernel.Name
		}
		lines = append(lines, name, fmt.Sprintf("grid %v block %v", p.Grid, p.Block))
		if p.SharedMem > 0 {
			lines = append(lines, fmt.Sprintf("shared %d", p.SharedMem))
		}
	case MemcpyParams:
		lines = append(lines, fmt.Sprintf("%s %d bytes", p.Kind(), p.Size))
	case MemAllocParams:
		lines = append(lines, fmt.Sprintf("%d bytes", p.Size))
	case MemFreeParams:
		if a, ok := host.AllocOf(n.be).(*Node); ok {
			lines = append(lines, fmt.Sprintf("frees node %d of graph %d", a.id, a.g.id))
		}
	case ExtSemaphoreSignalParams, ExtSemaphoreWaitParams:
		lines = append(lines, extSemLabel(p)...)
	case MemsetParams:
		lines = append(lines, fmt.Sprintf("value %#x elem %d", p.Value, p.ElementSize),
			fmt.Sprintf("%dx%d pitch %d", p.Width, p.Height, p.Pitch))
	case ConditionalParams:
		lines = append(lines, condDOTLabel(p)...)
	}
	return strings.Join(lines, "\n")
}
