package coll_test

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/coll"
)

// Two host devices sum a vector with an all-reduce captured into each
// device's graph, then replay the graphs.
func ExampleInitAll() {
	gg.SetHostDeviceCount(2)
	defer gg.SetHostDeviceCount(1)
	var devs []*gg.Device
	for i := range 2 {
		d, err := gg.Open("host", gg.WithOrdinal(i))
		if err != nil {
			panic(err)
		}
		defer d.Close()
		devs = append(devs, d)
	}
	comms, err := coll.InitAll(devs)
	if err != nil {
		panic(err)
	}
	execs := make([]*gg.Exec, 2)
	streams := make([]*gg.Stream, 2)
	bufs := make([]gg.DevicePtr, 2)
	for r, c := range comms {
		d := c.Device()
		streams[r], _ = d.NewStream()
		bufs[r], _ = d.Malloc(3 * 4)
		d.Memcpy(gg.HtoD(bufs[r], gg.Bytes([]float32{1, 2, float32(10 * (r + 1))})))
		// Capture the all-reduce: a node of this device's graph.
		streams[r].BeginCapture(gg.CaptureModeRelaxed)
		if err := c.AllReduce(streams[r], bufs[r], bufs[r], 3, coll.Float32, coll.Sum); err != nil {
			panic(err)
		}
		g, err := streams[r].EndCapture()
		if err != nil {
			panic(err)
		}
		execs[r], _ = g.Instantiate(0)
	}
	for range 2 { // each replay sums again
		for r, e := range execs {
			e.Launch(streams[r])
		}
	}
	for r, c := range comms {
		streams[r].Synchronize()
		got := make([]float32, 3)
		c.Device().Memcpy(gg.DtoH(gg.Bytes(got), bufs[r]))
		fmt.Println("rank", r, got)
	}
	// Output:
	// rank 0 [4 8 60]
	// rank 1 [4 8 60]
}
