package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Conformance scenarios for edge data and programmatic dependent launch.
// On cuda the kernels use griddepcontrol, which needs compute capability
// 9.0.

func TestConformanceEdgeDataRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		g := graph(t, d)
		a := must[*gg.Node](t)(g.AddKernelNode(kp(kA)))
		b := must[*gg.Node](t)(g.AddNodeWithEdgeData(kp(kB), []*gg.Node{a}, []gg.EdgeData{progEdge}))
		c := must[*gg.Node](t)(g.AddEmptyNode(a))
		edgeDataRoundTrip(t, d, g, a, b, c)
	})
}

func TestConformanceEdgeDataRules(t *testing.T) {
	eachBackend(t, edgeDataRules)
}

func TestConformanceEdgeDataCapture(t *testing.T) {
	eachBackend(t, edgeDataCapture)
}

// The consumer of a programmatic edge may start before its producer ends,
// and sees all the producer wrote after GridDependencySynchronize. On the
// host backend the early start always happens; on a GPU it is a chance,
// which the test reports.
func TestConformanceEdgeDataProgrammaticLaunch(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		gpu := d.Properties().Backend == gg.BackendCUDA
		s := stream(t, d)
		for _, c := range []struct {
			name string
			data gg.EdgeData
		}{{"programmatic port", progEdge}, {"launch completion port", launchEdge}} {
			p := newPDLGraph(t, d, c.data, 1, 4, waitConsumer, true)
			e := must[*gg.Exec](t)(p.g.Instantiate(0))
			for rep := 0; rep < 2; rep++ {
				ctl := p.run(t, d, e, s)
				if gpu {
					t.Logf("%s, launch %d: consumer started while the producer ran: %v", c.name, rep, ctl[ctlOverlap] == 1)
				} else if ctl[ctlOverlap] != 1 {
					t.Fatalf("%s, launch %d: the consumer did not start early", c.name, rep)
				}
			}
		}
		// With eight producer blocks the consumer starts after all of them
		// triggered (on a GPU the count it reads may lag: reported only).
		p := newPDLGraph(t, d, progEdge, 8, 8, waitLastBlock, true)
		e := must[*gg.Exec](t)(p.g.Instantiate(0))
		ctl := p.run(t, d, e, s)
		if gpu {
			t.Logf("consumer blocks that saw fewer than 8 producer triggers: %d", ctl[ctlEarly])
		} else if ctl[ctlEarly] != 0 {
			t.Fatalf("%d consumer blocks started before every producer block triggered", ctl[ctlEarly])
		}
		pdlChain(t, d, 3)
	})
}
