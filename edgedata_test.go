package gpugraph_test

import (
	"bytes"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/backend/backendtest"
)

var (
	progEdge   = gg.EdgeData{FromPort: gg.KernelNodePortProgrammatic, Type: gg.DependencyTypeProgrammatic}
	launchEdge = gg.EdgeData{FromPort: gg.KernelNodePortLaunchCompletion, Type: gg.DependencyTypeProgrammatic}
)

// A consumer started early by a programmatic edge runs while the producer
// does, and GridDependencySynchronize still shows it all the producer wrote.
func TestEdgeDataProgrammaticOverlap(t *testing.T) {
	for _, c := range []struct {
		name string
		data gg.EdgeData
	}{{"programmatic port", progEdge}, {"launch completion port", launchEdge}} {
		t.Run(c.name, func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			p := newPDLGraph(t, d, c.data, 1, 4, backendtest.WaitConsumer, true)
			e := must[*gg.Exec](t)(p.G.Instantiate(0))
			for rep := 0; rep < 5; rep++ {
				if ctl := p.Run(t, d, e, s); ctl[backendtest.CtlOverlap] != 1 {
					t.Fatalf("launch %d: the consumer did not start before the producer finished", rep)
				}
			}
		})
	}
}

// The consumer starts only once every producer block has triggered (or
// exited, when none triggers); with an ordinary edge, after the producer.
func TestEdgeDataProgrammaticTrigger(t *testing.T) {
	for _, c := range []struct {
		name    string
		data    gg.EdgeData
		trigger bool
	}{
		{"every block triggers", progEdge, true},
		{"no block triggers", progEdge, false},
		{"ordinary edge", gg.EdgeData{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := open(t)
			s := stream(t, d)
			p := newPDLGraph(t, d, c.data, 8, 8, backendtest.WaitLastBlock, c.trigger)
			e := must[*gg.Exec](t)(p.G.Instantiate(0))
			for rep := 0; rep < 4; rep++ {
				if ctl := p.Run(t, d, e, s); ctl[backendtest.CtlEarly] != 0 || ctl[backendtest.CtlTriggered] != 8 {
					t.Fatalf("launch %d: %d consumer blocks started before every producer block triggered (%d did)", rep, ctl[backendtest.CtlEarly], ctl[backendtest.CtlTriggered])
				}
			}
		})
	}
}

// A chain of kernels joined by programmatic edges, every block of each
// blocked in GridDependencySynchronize while its producer runs, inside a
// graph with ordinary work around it and in a child graph: no deadlock on
// a small pool, and each stage sees the previous one's output.
func TestEdgeDataProgrammaticChain(t *testing.T) {
	d := open(t)
	pdlChain(t, d, 12)
}

// In a kernel launched into a stream both calls do nothing.
func TestEdgeDataBlockCallsInStream(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	const n = 64
	in, out := must[gg.DevicePtr](t)(d.Malloc(4*n)), must[gg.DevicePtr](t)(d.Malloc(4*n))
	ok(t, s.Memset(gg.Memset32(in, 1, n)))
	ok(t, s.Launch(pdlStage, gg.Dim1(2), gg.Dim1(32), in, out, int32(n)))
	ok(t, s.Synchronize())
	if got := readU32(t, d, out, n); got[n-1] != 2 {
		t.Fatalf("out[%d] = %d", n-1, got[n-1])
	}
}

func TestEdgeDataDOT(t *testing.T) {
	d := open(t)
	g := graph(t, d)
	a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
	must[*gg.Node](t)(g.AddNodeWithEdgeData(kp(kB), []*gg.Node{a}, []gg.EdgeData{progEdge}))
	must[*gg.Node](t)(g.AddEmptyNode(a))
	var buf bytes.Buffer
	ok(t, g.WriteDOT(&buf))
	out := buf.String()
	if !strings.Contains(out, `"graph_1_node_0" -> "graph_1_node_1" [style="dashed" label="programmatic port, programmatic"];`) ||
		!strings.Contains(out, `"graph_1_node_0" -> "graph_1_node_2";`) {
		t.Fatalf("DOT output:\n%s", out)
	}
}

// The host executor, run with the race detector and many launches, to
// catch lost wake-ups and deadlocks on a small pool.
func TestEdgeDataProgrammaticStress(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	d := open(t)
	pdlChain(t, d, 40)
	s := stream(t, d)
	p := newPDLGraph(t, d, progEdge, 3, 5, backendtest.WaitNone, true)
	e := must[*gg.Exec](t)(p.G.Instantiate(0))
	for rep := 0; rep < 100; rep++ {
		p.Run(t, d, e, s)
	}
	ok(t, e.Destroy())
}
