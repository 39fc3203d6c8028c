package main

import (
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// scale multiplies x[i] by a: Go for the host backend, CUDA C for GPUs.
var scale = &gg.Kernel{
	Name:   "scale",
	Params: []gg.ParamType{gg.Pointer, gg.Float32, gg.Int32},
	Go: func(b gg.Block, args gg.Args) {
		x := gg.Slice[float32](args.Ptr(0), args.Int(2))
		for t := range b.Dim.X {
			if i := b.Idx.X*b.Dim.X + t; i < len(x) {
				x[i] *= args.Float32(1)
			}
		}
	},
	CUDA: `extern "C" __global__ void scale(float* x, float a, int n) {
		int i = blockIdx.x * blockDim.x + threadIdx.x;
		if (i < n) x[i] *= a;
	}`,
}

func main() {
	dev, err := gg.Open("host") // "cuda" runs the same program on an NVIDIA GPU
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	in, out := []float32{1, 2, 3, 4}, make([]float32, 4)
	x, _ := dev.Malloc(4 * len(in))

	// Define the work once: copy in, x *= 2, x *= 3, copy out. (Each call
	// returns an error too; Instantiate reports a graph that is not whole.)
	g, _ := dev.NewGraph()
	cp, _ := g.AddMemcpyNode(gg.HtoD(x, gg.Bytes(in)))
	k := gg.KernelParams{Kernel: scale, Grid: gg.Dim1(1), Block: gg.Dim1(128), Args: []any{x, float32(2), len(in)}}
	k1, _ := g.AddKernelNode(k, cp)
	k.Args = []any{x, float32(3), len(in)}
	k2, _ := g.AddKernelNode(k, k1)
	g.AddMemcpyNode(gg.DtoH(gg.Bytes(out), x), k2)

	// Instantiate it once, launch it as often as you like.
	exec, err := g.Instantiate(0)
	if err != nil {
		log.Fatal(err)
	}
	s, _ := dev.NewStream()
	for range 2 {
		exec.Launch(s)
		if err := s.Synchronize(); err != nil {
			log.Fatal(err)
		}
		fmt.Println(out)
		copy(in, []float32{10, 20, 30, 40}) // the next launch copies the new input
	}
}
