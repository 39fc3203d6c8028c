package gpugraph_test

import (
	"errors"
	"fmt"
	"log"

	gg "github.com/gpugraph/gpugraph"
)

// countTo adds one to a counter in device memory and, until it reaches n,
// relaunches the graph running it once it is done: a loop on the device.
var countTo = &gg.Kernel{
	Name:   "count_to",
	Params: []gg.ParamType{gg.Pointer, gg.Uint32},
	Go: func(b gg.Block, a gg.Args) {
		c := gg.Slice[uint32](a.Ptr(0), 1)
		if c[0]++; c[0] < a.Uint32(1) {
			b.LaunchGraph(b.CurrentGraphExec(), gg.TailLaunch)
		}
	},
	CUDA: `extern "C" __global__ void count_to(unsigned* c, unsigned n) {
		if (++c[0] < n) cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
	}`,
	DeviceRuntime: true,
}

// start launches the device graph h fire-and-forget.
var start = &gg.Kernel{
	Name:   "start",
	Params: []gg.ParamType{gg.Uint64},
	Go: func(b gg.Block, a gg.Args) {
		b.LaunchGraph(a.Uint64(0), gg.FireAndForget) // a refusal is returned to the kernel only
	},
	CUDA: `extern "C" __global__ void start(unsigned long long h) {
		cudaGraphLaunch((cudaGraphExec_t)h, cudaStreamGraphFireAndForget);
	}`,
	DeviceRuntime: true,
}

// A device graph relaunches itself until a counter reaches 5, with no
// round trip to the host: launched from the host, then from a kernel of
// another graph.
func ExampleBlock_LaunchGraph() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s, _ := dev.NewStream()
	counter, _ := dev.Malloc(4)
	one := gg.Dim1(1)

	g, _ := dev.NewGraph()
	g.AddKernelNode(gg.KernelParams{Kernel: countTo, Grid: one, Block: one, Args: []any{counter, 5}})
	loop, err := g.InstantiateWithParams(&gg.InstantiateParams{
		Flags:        gg.InstantiateDeviceLaunch | gg.InstantiateUpload,
		UploadStream: s,
	})
	if err != nil {
		log.Fatal(err)
	}
	count := func() uint32 {
		c := make([]uint32, 1)
		if err := dev.Memcpy(gg.DtoH(gg.Bytes(c), counter)); err != nil {
			log.Fatal(err)
		}
		return c[0]
	}

	s.Memset(gg.Memset32(counter, 0, 1))
	loop.Launch(s)
	s.Synchronize()
	fmt.Println("from the host:", count())

	h, _ := loop.DeviceHandle()
	launcher, _ := dev.NewGraph()
	launcher.AddKernelNode(gg.KernelParams{Kernel: start, Grid: one, Block: one, Args: []any{h}})
	host, _ := launcher.Instantiate(0)
	s.Memset(gg.Memset32(counter, 0, 1))
	host.Launch(s)
	if err := s.Synchronize(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("from the device:", count())
	// Output:
	// from the host: 5
	// from the device: 5
}

// Instantiation for device launch refuses what a device graph cannot do and
// says which node.
func ExampleGraph_InstantiateWithParams() {
	dev, err := gg.Open("host")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	g, _ := dev.NewGraph()
	k, _ := g.AddKernelNode(gg.KernelParams{Kernel: scale, Grid: gg.Dim1(1), Block: gg.Dim1(1), Args: []any{gg.DevicePtr(0), float32(1), 0}})
	g.AddHostNode(func() {}, k)
	p := &gg.InstantiateParams{Flags: gg.InstantiateDeviceLaunch}
	_, err = g.InstantiateWithParams(p)
	fmt.Println(errors.Is(err, gg.ErrInvalidValue))
	fmt.Println(p.Result, "-", p.ErrNode.Type(), "node")
	// Output:
	// true
	// node operation not supported - host node
}
