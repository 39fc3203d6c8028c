package backendtest

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// updateRefusalOrder: when several nodes of the new graph refuse a
// whole-graph update, the update names the first the driver checks:
// breadth first from the sinks, the newest sink first, each node's
// dependencies in the order of its incoming edges, a child graph's nodes at
// their child graph node; a node's own parameters and a memset on an
// allocation the new graph frees in one walk. The table is the driver's
// answer to every case (H100, driver 580: tools/probe/updorder.cu,
// docs/driver-updorder.txt), in that probe's notation:
//
//	A      alloc node                      F<i>   free node of alloc i
//	M<i>   1D memset on alloc i (refused when B frees i: UpdateError)
//	S      2D memset, width 4 -> 8         H      2D memset, height 2 -> 1
//	V      2D memset, value 1 -> 2 (taken) K      copy, source device -> pinned host
//	G<i>   copy from alloc i, source -> pinned host
//	C      child graph node holding one S  X      empty node
//
// with each node's dependencies by index after a colon.
func updateRefusalOrder(t *testing.T, d *gg.Device) {
	buf := Must[gg.DevicePtr](t)(d.Malloc(1 << 16))
	defer d.Free(buf)
	pinned := Must[[]byte](t)(d.MallocHost(4096))
	defer d.FreeHost(pinned)
	const (
		ok     = gg.UpdateSuccess
		pc     = gg.UpdateErrorParametersChanged
		failed = gg.UpdateError
	)
	cases := []struct {
		spec  string
		want  gg.UpdateResult
		named string // the node named: "#i", "#i.c" (the S in child graph i) or ""
	}{
		{"S", pc, "#0"}, {"H", pc, "#0"}, {"V", ok, ""}, {"K", pc, "#0"},
		{"A; G0:0; F0:1", pc, "#1"}, {"A; M0:0; F0:1", failed, "#1"}, {"A; M0:0", ok, ""}, {"C", pc, "#0.c"},
		{"S; A; M1:1; F1:2", pc, "#0"}, {"A; M0:0; F0:1; S", pc, "#3"}, {"A; M0:0; S:1; F0:2", pc, "#2"},
		{"S; A:0; M1:1; F1:2", failed, "#2"}, {"X; A:0; M1:1; F1:2; S:0", pc, "#4"}, {"X; S:0; A:0; M2:2; F2:3", pc, "#1"},
		{"H; A; M1:1; F1:2", pc, "#0"}, {"A; M0:0; F0:1; H", pc, "#3"},
		{"K; A; M1:1; F1:2", pc, "#0"}, {"A; M0:0; F0:1; K", pc, "#3"}, {"A; M0:0; K:1; F0:1", pc, "#2"}, {"A; K:0; M0:0; F0:2", pc, "#1"},
		{"A; M0:0; G0:1; F0:2", pc, "#2"}, {"A; G0:0; M0:1; F0:2", failed, "#2"},
		{"A; M0:0; G0:0; F0:1,2", failed, "#1"}, {"A; G0:0; M0:0; F0:1,2", pc, "#1"},
		{"A; M0:0; M0:0; F0:1,2", failed, "#1"}, {"A; A; M1:1; M0:0; F0:3; F1:2", failed, "#2"},
		{"S; S", pc, "#1"}, {"S; S:0", pc, "#1"}, {"K; S", pc, "#1"}, {"S; K", pc, "#1"}, {"K; S:0", pc, "#1"}, {"S; K:0", pc, "#1"},
		{"C; A; M1:1; F1:2", pc, "#0.c"}, {"A; M0:0; F0:1; C", pc, "#3.c"}, {"S; C", pc, "#1.c"}, {"C; S", pc, "#1"},
		{"A; M0:0; F0:1; C:2", pc, "#3.c"}, {"C; A:0; M1:1; F1:2", failed, "#2"},
	}
	for _, c := range cases {
		a, _, _ := buildOrderCase(t, d, c.spec, buf, pinned, false)
		e := Must[*gg.Exec](t)(a.Instantiate(0))
		b, nodes, inChild := buildOrderCase(t, d, c.spec, buf, pinned, true)
		res, err := e.Update(b)
		named := ""
		for i := range nodes {
			if res.ErrorNode != nil && res.ErrorNode == nodes[i] {
				named = "#" + strconv.Itoa(i)
			}
			if res.ErrorNode != nil && inChild[i] != nil && res.ErrorNode == inChild[i] {
				named = "#" + strconv.Itoa(i) + ".c"
			}
		}
		if res.Result != c.want || named != c.named || (c.want == ok) != (err == nil) ||
			(c.want != ok && !errors.Is(err, gg.ErrGraphExecUpdateFailure)) {
			t.Errorf("%-32s %v naming %q (%v), want %v naming %q", c.spec, res.Result, named, err, c.want, c.named)
		}
		OK(t, e.Destroy())
	}
}

// buildOrderCase builds the graph of spec (updateRefusalOrder's notation),
// variant B or A; nodes[i] is node i, inChild[i] the S inside child graph
// node i.
func buildOrderCase(t *testing.T, d *gg.Device, spec string, buf gg.DevicePtr, pinned []byte, b bool) (*gg.Graph, []*gg.Node, []*gg.Node) {
	t.Helper()
	g := NewGraph(t, d)
	fields := strings.Split(spec, ";")
	nodes := make([]*gg.Node, len(fields))
	inChild := make([]*gg.Node, len(fields))
	ptr := make([]gg.DevicePtr, len(fields))
	shape := func(slot gg.DevicePtr, k byte) gg.MemsetParams {
		p := gg.MemsetParams{Dst: slot, Value: 1, ElementSize: 1, Width: 4, Height: 2, Pitch: 64}
		switch {
		case b && k == 'S':
			p.Width = 8
		case b && k == 'H':
			p.Height = 1
		case b && k == 'V':
			p.Value = 2
		}
		return p
	}
	for i, f := range fields {
		f = strings.TrimSpace(f)
		letter, rest, _ := strings.Cut(f, ":")
		k, arg := letter[0], -1
		if len(letter) > 1 {
			arg = Must[int](t)(strconv.Atoi(letter[1:]))
		}
		var deps []*gg.Node
		if rest != "" {
			for _, s := range strings.Split(rest, ",") {
				deps = append(deps, nodes[Must[int](t)(strconv.Atoi(s))])
			}
		}
		slot := buf + gg.DevicePtr(1024*(i+1))
		switch k {
		case 'A':
			nodes[i], ptr[i] = AddAlloc(t, g, 4096, deps...)
		case 'F':
			nodes[i] = addFree(t, g, ptr[arg], deps...)
		case 'M':
			nodes[i] = Must[*gg.Node](t)(g.AddMemsetNode(gg.Memset8(ptr[arg], 3, 64), deps...))
		case 'S', 'H', 'V':
			nodes[i] = Must[*gg.Node](t)(g.AddMemsetNode(shape(slot, k), deps...))
		case 'K', 'G':
			src := slot + 512
			if k == 'G' {
				src = ptr[arg]
			}
			p := gg.DtoD(slot, src, 64)
			if b {
				p = gg.HtoD(slot, pinned[:64])
			}
			nodes[i] = Must[*gg.Node](t)(g.AddMemcpyNode(p, deps...))
		case 'C':
			c := NewGraph(t, d)
			Must[*gg.Node](t)(c.AddMemsetNode(shape(slot, 'S')))
			nodes[i] = Must[*gg.Node](t)(g.AddChildGraphNode(c, deps...))
			inChild[i] = Must[[]*gg.Node](t)(Must[*gg.Graph](t)(nodes[i].ChildGraph()).Nodes())[0]
		case 'X':
			nodes[i] = Must[*gg.Node](t)(g.AddEmptyNode(deps...))
		default:
			t.Fatalf("%s: bad letter %c", spec, k)
		}
	}
	return g, nodes, inChild
}
