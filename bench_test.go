package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/bench"
)

// BenchmarkLaunch compares, per node, N kernel launches into a stream with
// one launch of an N-node graph of each shape. Run with
//
//	go test -run '^$' -bench Launch -count 6 .
func BenchmarkLaunch(b *testing.B) {
	s := hostStream(b)
	for _, n := range bench.Sizes {
		b.Run(bench.Name("stream", n), bench.StreamLaunches(s, n))
		for _, shape := range bench.Shapes {
			b.Run(bench.Name("graph-"+shape.Name, n), bench.GraphLaunch(s, shape, n))
		}
	}
}

// BenchmarkLaunchQueued is BenchmarkLaunch's graphs launched bench.Queue
// times back to back before one Synchronize: the engine's own cost per
// node, with the workers' wake-up spread over the launches. Run with
//
//	go test -run '^$' -bench LaunchQueued -count 6 .
func BenchmarkLaunchQueued(b *testing.B) {
	s := hostStream(b)
	for _, n := range bench.Sizes {
		for _, shape := range bench.Shapes {
			b.Run(bench.Name("graph-"+shape.Name, n), bench.GraphLaunchQueued(s, shape, n, bench.Queue))
		}
	}
}

// hostStream is a stream of a host device closed when b ends.
func hostStream(b *testing.B) *gg.Stream {
	d, err := gg.Open("host")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	return s
}
