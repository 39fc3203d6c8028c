package gpugraph_test

import (
	"errors"
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// scale multiplies n floats at x by a.
var scale = &gg.Kernel{
	Name:   "scale",
	Params: []gg.ParamType{gg.Pointer, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		x := gg.Slice[float32](a.Ptr(0), a.Int(2))
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < len(x) {
				x[i] *= a.Float32(1)
			}
		}
	},
	CUDA: `extern "C" __global__ void scale(float* x, float a, int n) {
		int i = blockIdx.x * blockDim.x + threadIdx.x;
		if (i < n) x[i] *= a;
	}`,
}

// Issue work op by op into a stream.
func ExampleStream() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s, _ := dev.NewStream()
	x, _ := dev.Malloc(4 * 4)
	host := []float32{1, 2, 3, 4}
	s.Memcpy(gg.HtoD(x, gg.Bytes(host)))
	s.Launch(scale, gg.Dim1(1), gg.Dim1(128), x, float32(10), len(host))
	s.Memcpy(gg.DtoH(gg.Bytes(host), x))
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(host)
	// Output: [10 20 30 40]
}

// Define a graph once (copy in, two kernels, copy out), instantiate it, and
// launch it several times. The memcpy nodes refer to the host slice, so
// refilling it between launches feeds the next launch.
func ExampleGraph_Instantiate() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	const n = 4
	x, _ := dev.Malloc(4 * n)
	in, out := make([]float32, n), make([]float32, n)

	g, _ := dev.NewGraph()
	cpIn, _ := g.AddMemcpyNode(gg.HtoD(x, gg.Bytes(in)))
	k1, _ := g.AddKernelNode(gg.KernelParams{Kernel: scale, Grid: gg.Dim1(1), Block: gg.Dim1(32), Args: []any{x, float32(2), n}}, cpIn)
	k2, _ := g.AddKernelNode(gg.KernelParams{Kernel: scale, Grid: gg.Dim1(1), Block: gg.Dim1(32), Args: []any{x, float32(3), n}}, k1)
	g.AddMemcpyNode(gg.DtoH(gg.Bytes(out), x), k2)

	exec, err := g.Instantiate(0)
	if err != nil {
		log.Fatal(err)
	}
	s, _ := dev.NewStream()
	for launch := 1; launch <= 3; launch++ {
		for i := range in {
			in[i] = float32(launch)
		}
		exec.Launch(s)
		if err := s.Synchronize(); err != nil {
			log.Fatal(err)
		}
		fmt.Println(out)
	}
	// Output:
	// [6 6 6 6]
	// [12 12 12 12]
	// [18 18 18 18]
}

// Errors name the CUDA error, the call and the node, and change nothing.
func ExampleGraph_AddDependency() {
	dev, _ := gg.Open("host")
	defer dev.Close()
	g, _ := dev.NewGraph()
	a, _ := g.AddEmptyNode()
	b, _ := g.AddEmptyNode(a)
	err := g.AddDependency(b, a)
	fmt.Println(err)
	fmt.Println(errors.Is(err, gg.ErrInvalidValue))
	// Output:
	// gpugraph: Graph.AddDependency: empty node 0: invalid argument (cudaErrorInvalidValue): the edges would make a cycle
	// true
}

// Capture stream code into a graph: a fork into a second stream and a join
// back, then replay. Nothing runs until the graph is launched.
func ExampleStream_BeginCapture() {
	dev, _ := gg.Open("host")
	defer dev.Close()
	s1, _ := dev.NewStream()
	s2, _ := dev.NewStream()
	fork, _ := dev.NewEvent(0)
	join, _ := dev.NewEvent(0)
	say := func(msg string) func() { return func() { fmt.Println(msg) } }

	s1.BeginCapture(gg.CaptureModeGlobal)
	s1.LaunchHostFunc(say("A"))
	s1.Record(fork)
	s2.Wait(fork) // s2 joins the capture
	s2.LaunchHostFunc(say("C, after A"))
	s2.Record(join)
	s1.Wait(join) // and is joined back
	s1.LaunchHostFunc(say("D, after C"))
	g, err := s1.EndCapture()
	if err != nil {
		log.Fatal(err)
	}
	nodes, _ := g.Nodes()
	fmt.Println(len(nodes), "nodes captured")

	exec, _ := g.Instantiate(0)
	exec.Launch(s1)
	s1.Synchronize()
	// Output:
	// 3 nodes captured
	// A
	// C, after A
	// D, after C
}
