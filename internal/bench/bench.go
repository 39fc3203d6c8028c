// Package bench holds the launch-overhead benchmarks shared by `go test
// -bench` and `gpugraph bench`: the same work issued as N kernel launches
// into a stream and as one launch of an N-node graph, for several DAG shapes.
package bench

import (
	"fmt"
	"math"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Empty is a kernel that does nothing, so that only launch cost is measured.
var Empty = &gg.Kernel{
	Name: "empty",
	Go:   func(gg.Block, gg.Args) {},
	CUDA: `extern "C" __global__ void empty() {}`,
}

// Shape builds a DAG of about n nodes through add, which adds one node
// depending on the given nodes and returns it.
type Shape struct {
	Name  string
	Build func(n int, add func(deps ...int) int) int // returns the node count
}

// Shapes are the DAG shapes of the launch benchmark.
var Shapes = []Shape{
	{"chain", chain},
	{"fanout", func(n int, add func(...int) int) int {
		// One root, n-2 parallel nodes, one sink (n >= 3); smaller n is a chain.
		if n < 3 {
			return chain(n, add)
		}
		root := add()
		mid := make([]int, 0, n-2)
		for i := 0; i < n-2; i++ {
			mid = append(mid, add(root))
		}
		add(mid...)
		return n
	}},
	{"tree", func(n int, add func(...int) int) int {
		// A binary tree: node i depends on its parent (i-1)/2.
		for i := 0; i < n; i++ {
			if i == 0 {
				add()
			} else {
				add((i - 1) / 2)
			}
		}
		return n
	}},
	{"wavefront", func(n int, add func(...int) int) int {
		// A side×side grid, side = round(sqrt(n)); each cell depends on the
		// cells to its left and above.
		side := int(math.Round(math.Sqrt(float64(n))))
		idx := make([]int, side*side)
		for r := 0; r < side; r++ {
			for c := 0; c < side; c++ {
				var deps []int
				if c > 0 {
					deps = append(deps, idx[r*side+c-1])
				}
				if r > 0 {
					deps = append(deps, idx[(r-1)*side+c])
				}
				idx[r*side+c] = add(deps...)
			}
		}
		return side * side
	}},
}

func chain(n int, add func(...int) int) int {
	for i := 0; i < n; i++ {
		if i == 0 {
			add()
		} else {
			add(i - 1)
		}
	}
	return n
}

// Sizes are the node counts measured.
var Sizes = []int{1, 10, 100, 1000}

var one = gg.Dim1(1)

// BuildGraph builds shape with empty-kernel nodes on d.
func BuildGraph(d *gg.Device, s Shape, n int) (*gg.Graph, int, error) {
	g, err := d.NewGraph()
	if err != nil {
		return nil, 0, err
	}
	var nodes []*gg.Node
	var ferr error
	count := s.Build(n, func(deps ...int) int {
		ds := make([]*gg.Node, len(deps))
		for i, x := range deps {
			ds[i] = nodes[x]
		}
		nd, err := g.AddKernelNode(gg.KernelParams{Kernel: Empty, Grid: one, Block: one}, ds...)
		if err != nil && ferr == nil {
			ferr = err
		}
		nodes = append(nodes, nd)
		return len(nodes) - 1
	})
	return g, count, ferr
}

// StreamLaunches measures n empty-kernel launches into s followed by one
// Synchronize; one op is the whole batch.
//
// Every measurement of a run uses the one stream the caller made, as the
// native reference does: on the GPU, kernel work in a second stream slows
// later dependent graph nodes of the first by about 0.18 µs each, even once
// that stream is destroyed (tools/bench/native/launch.cu with OTHER_STREAM=1 shows
// it natively), which a stream per measurement would charge to gpugraph.
func StreamLaunches(s *gg.Stream, n int) func(b *testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for j := 0; j < n; j++ {
				if err := s.Launch(Empty, one, one); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
	}
}

// Queue is how many launches GraphLaunchQueued queues before it waits, as
// Taskflow's run_n(taskflow, 100).wait() does in the side-by-side run.
const Queue = 100

// GraphLaunch measures one launch into s of an instantiated graph of shape
// followed by Synchronize.
func GraphLaunch(s *gg.Stream, shape Shape, n int) func(b *testing.B) {
	return graphLaunch(s, shape, n, 1)
}

// GraphLaunchQueued measures q launches into s of one instantiated graph
// of shape, back to back, followed by one Synchronize: what an inference
// loop or a simulation does, with the wake-up of the workers spread over
// the q launches. ns/node is per node of every launch.
func GraphLaunchQueued(s *gg.Stream, shape Shape, n, q int) func(b *testing.B) {
	return graphLaunch(s, shape, n, q)
}

func graphLaunch(s *gg.Stream, shape Shape, n, q int) func(b *testing.B) {
	return func(b *testing.B) {
		g, count, err := BuildGraph(s.Device(), shape, n)
		if err != nil {
			b.Fatal(err)
		}
		ex, err := g.Instantiate(0)
		if err != nil {
			b.Fatal(err)
		}
		defer g.Destroy()
		defer ex.Destroy()
		b.ReportAllocs()
		for b.Loop() {
			for range q {
				if err := ex.Launch(s); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(count*q), "ns/node")
	}
}

// Name is the sub-benchmark name for a shape and size.
func Name(shape string, n int) string { return fmt.Sprintf("%s/n=%d", shape, n) }
