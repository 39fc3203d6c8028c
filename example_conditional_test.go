package gpugraph_test

import (
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// collatz takes one Collatz step of the number at a1, counts it at a2, and
// sets the handle a0 to whether the number is not 1 yet. With a3 == 0 it
// only sets the handle: the test before the loop.
var collatz = &gg.Kernel{
	Name:   "collatz",
	Params: []gg.ParamType{gg.Uint64, gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		x, steps := gg.Slice[uint32](a.Ptr(1), 1), gg.Slice[uint32](a.Ptr(2), 1)
		if a.Int32(3) != 0 {
			if x[0]%2 == 0 {
				x[0] /= 2
			} else {
				x[0] = 3*x[0] + 1
			}
			steps[0]++
		}
		var more uint32
		if x[0] != 1 {
			more = 1
		}
		b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), more)
	},
	CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void collatz(cudaGraphConditionalHandle h, unsigned* x, unsigned* steps, int step) {
	if (step) {
		*x = *x % 2 == 0 ? *x / 2 : 3 * *x + 1;
		++*steps;
	}
	cudaGraphSetConditional(h, *x != 1);
}`,
}

// A WHILE loop that runs on the device: a kernel upstream of the
// conditional node tests the condition, and the kernel in the loop's body
// takes a step and tests it again, until the Collatz sequence reaches 1.
//
//	test -> WHILE [ step ]
func ExampleGraph_ConditionalHandleCreate() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s, _ := dev.NewStream()
	mem, _ := dev.Malloc(8) // x, steps
	x, steps := mem, mem+4

	g, _ := dev.NewGraph()
	h, _ := g.ConditionalHandleCreate(0, 0)
	one := gg.Dim1(1)
	test, _ := g.AddKernelNode(gg.KernelParams{Kernel: collatz, Grid: one, Block: one, Args: []any{h, x, steps, 0}})
	loop, err := g.AddNode(gg.ConditionalParams{Handle: h, Type: gg.ConditionalWhile, Size: 1}, test)
	if err != nil {
		log.Fatal(err)
	}
	bodies, _ := loop.ConditionalBodies()
	bodies[0].AddKernelNode(gg.KernelParams{Kernel: collatz, Grid: one, Block: one, Args: []any{h, x, steps, 1}})
	e, err := g.Instantiate(0)
	if err != nil {
		log.Fatal(err)
	}

	for _, start := range []uint32{1, 6, 27} {
		in := []uint32{start, 0}
		s.Memcpy(gg.HtoD(mem, gg.Bytes(in)))
		e.Launch(s)
		s.Memcpy(gg.DtoH(gg.Bytes(in), mem))
		if err := s.Synchronize(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d reaches 1 in %d steps\n", start, in[1])
	}
	// Output:
	// 1 reaches 1 in 0 steps
	// 6 reaches 1 in 8 steps
	// 27 reaches 1 in 111 steps
}
