package gpugraph

import (
	"strings"
	"testing"
)

// TestCondUpdatable checks the pairing rule whole-graph update applies to
// conditional nodes: same type and size, handles created in the same order
// in the graph at the same nesting level; defaults and flags may change.
func TestCondUpdatable(t *testing.T) {
	d, err := Open("host")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// build makes a graph with two handles created in the order given by
	// swap, and a node of type typ and size using the second-created handle
	// (or, with inBody, a node in the body of a WHILE node of the graph).
	build := func(typ ConditionalType, size int, swap, inBody bool, def uint32) *Node {
		g, err := d.NewGraph()
		if err != nil {
			t.Fatal(err)
		}
		h0, _ := g.ConditionalHandleCreate(def, 0)
		h1, _ := g.ConditionalHandleCreate(def, ConditionalAssignDefault)
		use, other := h1, h0
		if swap {
			use, other = h0, h1
		}
		at := g
		if inBody {
			w, err := g.AddNode(ConditionalParams{Handle: other, Type: ConditionalWhile, Size: 1})
			if err != nil {
				t.Fatal(err)
			}
			at = w.conds.bodies[0]
		}
		n, err := at.AddNode(ConditionalParams{Handle: use, Type: typ, Size: size})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	old := build(ConditionalIf, 2, false, false, 0)
	for _, c := range []struct {
		name string
		new  *Node
		why  string // "" if updatable
	}{
		{"same", build(ConditionalIf, 2, false, false, 0), ""},
		{"other defaults", build(ConditionalIf, 2, false, false, 7), ""},
		{"other type", build(ConditionalSwitch, 2, false, false, 0), "type"},
		{"other size", build(ConditionalIf, 1, false, false, 0), "bodies"},
		{"handles created in another order", build(ConditionalIf, 2, true, false, 0), "creation order"},
		{"in a body", build(ConditionalIf, 2, false, true, 0), "nesting level"},
	} {
		ok, why := condUpdatable(old, c.new)
		if ok != (c.why == "") || !strings.Contains(why, c.why) {
			t.Errorf("%s: condUpdatable = %v, %q; want reason containing %q", c.name, ok, why, c.why)
		}
	}
	if ok, _ := condUpdatable(old, &Node{typ: NodeKernel}); ok {
		t.Error("a kernel node pairs with a conditional node")
	}
}
