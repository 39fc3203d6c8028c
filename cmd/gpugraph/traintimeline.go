package main

import (
	"errors"
	"fmt"
	"os"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/timeline"
	"github.com/gpugraph/gpugraph/internal/train"
)

// writeTimeline draws the captured step's graph allocations: each one's
// virtual range over the step's execution order, and the physical chunks
// behind it (host backend), so the reuse shows at a glance.
func writeTimeline(path string, c *gg.CapturedGraph, tc train.Config, bound uint64) (err error) {
	l, err := c.Exec().MemLayout()
	if err != nil {
		return err
	}
	st, err := c.Graph().Device().MemoryStats()
	if err != nil {
		return err
	}
	tl := timeline.Layout{
		Title:           fmt.Sprintf("graph memory of one captured training step: %v", tc),
		ChunkBytes:      l.ChunkBytes,
		ReservedBytes:   st.GraphReserved,
		LowerBoundBytes: bound,
	}
	for _, n := range l.Nodes {
		tl.Steps = append(tl.Steps, nodeLabel(n))
	}
	for i, a := range l.Allocs {
		name := fmt.Sprintf("#%d", i)
		if users := firstUser(a.Alloc); users != "" {
			name += " " + users
		}
		tl.Allocs = append(tl.Allocs, timeline.Alloc{Name: name, Offset: a.Offset, Size: a.Size,
			Start: a.Start, End: a.End, Phys: a.Phys})
	}
	if !hasPhys(l) {
		tl.ChunkBytes = 0 // the driver does not say which physical memory backs what
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return timeline.Render(f, tl)
}

// nodeLabel names a node for the picture: its kernel, or its kind.
func nodeLabel(n *gg.Node) string {
	p, err := n.Params()
	if err != nil {
		return n.Type().String()
	}
	switch k := p.(type) {
	case gg.KernelParams:
		if k.Kernel != nil {
			return k.Kernel.Name
		}
	case gg.NativeNodeParams:
		if k.Name != "" {
			return k.Name
		}
	}
	return n.Type().String()
}

// firstUser names the first kernel that depends on an alloc node: what the
// allocation is for.
func firstUser(alloc *gg.Node) string {
	outs, err := alloc.Dependents()
	if err != nil || len(outs) == 0 {
		return ""
	}
	return "for " + nodeLabel(outs[0])
}

func hasPhys(l gg.MemLayout) bool {
	for _, a := range l.Allocs {
		if a.Phys != nil {
			return true
		}
	}
	return false
}
