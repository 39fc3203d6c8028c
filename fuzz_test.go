package gpugraph_test

import (
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// FuzzGraphOps drives graph construction, editing, capture and launch with
// an arbitrary sequence of operations, valid or not, and checks that nothing
// panics, every failure is an *Error, the two views of the edges agree, and
// whatever graph results instantiates and runs.
//
//	go test -run '^$' -fuzz FuzzGraphOps .
func FuzzGraphOps(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 1, 3, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 4, 1, 2, 5, 0, 6, 0, 1, 7})
	f.Add([]byte{8, 0, 0, 9, 3, 1, 0, 10, 2})
	f.Fuzz(runGraphProgram)
}

// maxGraphProgram bounds a program. Each operation may instantiate and
// launch the whole graph built so far, so a run costs about the square of
// the length, and the fuzzer's minimizer tries about the square of the
// length candidates for every input that finds new coverage: inputs of
// 500 to 2500 bytes kept both workers minimizing for up to the whole
// -fuzzminimizetime (60 s), and the coordinator counts no executions
// meanwhile: the stalls at 0 execs/sec.
// Beyond the bound bytes are ignored, so the minimizer's first step (cut
// the tail) drops them at once. docs/reliability-fuzz.md has the numbers.
const maxGraphProgram = 64

func runGraphProgram(t *testing.T, prog []byte) {
	prog = prog[:min(len(prog), maxGraphProgram)]
	{
		d, err := gg.Open("host")
		if err != nil {
			t.Skip(err)
		}
		defer d.Close()
		s, _ := d.NewStream()
		s2, _ := d.NewStream()
		ev, _ := d.NewEvent(0)
		g, _ := d.NewGraph()
		var nodes []*gg.Node
		pick := func(i int) *gg.Node {
			if len(nodes) == 0 || i >= 2*len(nodes) {
				return nil // sometimes an invalid (nil) node
			}
			return nodes[i%len(nodes)]
		}
		next := func(i *int) int {
			if *i >= len(prog) {
				return 0
			}
			*i++
			return int(prog[*i-1])
		}
		checkErr := func(err error) {
			var e *gg.Error
			if err != nil && !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
		}
		for i := 0; i < len(prog); {
			switch next(&i) % 11 {
			case 0: // host node with up to two dependencies
				deps := []*gg.Node{pick(next(&i)), pick(next(&i))}[:next(&i)%3]
				var n *gg.Node
				n, err = g.AddHostNode(func() {}, deps...)
				if err == nil {
					nodes = append(nodes, n)
				}
			case 1:
				err = g.AddDependency(pick(next(&i)), pick(next(&i)))
			case 2:
				err = g.RemoveDependencies(gg.Edge{From: pick(next(&i)), To: pick(next(&i))})
			case 3:
				if n := pick(next(&i)); n != nil {
					err = g.DestroyNode(n)
				}
			case 4: // replace the graph by its clone, mapping the nodes
				var c *gg.Graph
				if c, err = g.Clone(); err == nil {
					for k, n := range nodes {
						if m, e := c.ClonedNode(n); e == nil {
							nodes[k] = m
						}
					}
					g = c
				}
			case 5:
				var e *gg.Exec
				if e, err = g.Instantiate(0); err == nil {
					checkErr(e.Launch(s))
					checkErr(s.Synchronize())
				}
			case 6: // child graph node of a fresh graph
				var c *gg.Graph
				c, _ = d.NewGraph()
				c.AddHostNode(func() {})
				var n *gg.Node
				if n, err = g.AddChildGraphNode(c, pick(next(&i))); err == nil {
					nodes = append(nodes, n)
				}
			case 7: // capture a fork/join into g
				deps := []*gg.Node{}
				if n := pick(next(&i)); n != nil {
					deps = append(deps, n)
				}
				if err = s.BeginCaptureToGraph(g, deps, gg.CaptureModeGlobal); err == nil {
					checkErr(s.LaunchHostFunc(func() {}))
					checkErr(s.Record(ev))
					checkErr(s2.Wait(ev))
					checkErr(s2.LaunchHostFunc(func() {}))
					if next(&i)%2 == 0 { // join, or not
						checkErr(s2.Record(ev))
						checkErr(s.Wait(ev))
					}
					_, err = s.EndCapture()
					if ns, e := g.Nodes(); e == nil {
						nodes = append(nodes[:0], ns...)
					}
				}
			case 8:
				_, err = g.AddKernelNode(gg.KernelParams{Kernel: kA, Grid: gg.Dim1(next(&i) - 1), Block: one})
			case 9: // an invalid operation in a capture
				if err = s.BeginCapture(gg.CaptureModeGlobal); err == nil {
					checkErr(s.Query())
					_, err = s.EndCapture()
				}
			case 10:
				_, err = g.AddEmptyNode(pick(next(&i)), pick(next(&i)))
			}
			checkErr(err)
		}
		// Invariants: edges agree with dependencies and dependents, and the
		// graph runs each host node once.
		ns, err := g.Nodes()
		if err != nil {
			t.Fatal(err)
		}
		es, _ := g.Edges()
		count := 0
		for _, n := range ns {
			deps, _ := n.Dependencies()
			count += len(deps)
			for _, dep := range deps {
				outs, _ := dep.Dependents()
				found := false
				for _, o := range outs {
					found = found || o == n
				}
				if !found {
					t.Fatalf("%v depends on %v, which does not list it as a dependent", n, dep)
				}
			}
		}
		if count != len(es) {
			t.Fatalf("%d edges listed, %d dependencies", len(es), count)
		}
		e, err := g.Instantiate(0)
		if err != nil {
			t.Fatalf("graph built by valid calls does not instantiate: %v", err)
		}
		if err := e.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
}
