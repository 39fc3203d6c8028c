// Command peer-pipeline is a two-stage pipeline on two devices, built as
// one graph (peer access as in the CUDA guide's graph memory chapter):
//
//	device 0: alloc (accessible from device 1) ──> stage 1 ──┐
//	device 1:                                      stage 2 <─┘ ──> free
//
// Stage 1 runs on device 0 and writes a graph allocation of device 0 whose
// alloc node grants device 1 access; stage 2 runs on device 1
// (Graph.AddNodeOn) and reads it into device 1's own memory. The graph
// belongs to device 0 and is launched into a stream of device 0; the edge
// from stage 1 to stage 2 is a dependency across devices. Every launch is
// checked against the host.
//
// It runs on the host backend with two devices (no GPU needed) or, with
// -backend cuda, on two GPUs.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	gg "github.com/gpugraph/gpugraph"
)

const (
	n       = 1 << 14 // float32 elements per launch
	threads = 256
)

// scale writes y[i] = a*i + x0: stage 1, on device 0.
var scale = &gg.Kernel{
	Name:   "scale",
	Params: []gg.ParamType{gg.Pointer, gg.Float32, gg.Float32, gg.Int32},
	Go: func(b gg.Block, args gg.Args) {
		n := args.Int(3)
		y, a, x0 := gg.Slice[float32](args.Ptr(0), n), args.Float32(1), args.Float32(2)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				y[i] = a*float32(i) + x0
			}
		}
	},
	CUDA: `extern "C" __global__ void scale(float* y, float a, float x0, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * i + x0;
}`,
}

// square writes out[i] = in[i]²: stage 2, on device 1, reading device 0's
// allocation.
var square = &gg.Kernel{
	Name:   "square",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, args gg.Args) {
		n := args.Int(2)
		in, out := gg.Slice[float32](args.Ptr(0), n), gg.Slice[float32](args.Ptr(1), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				out[i] = in[i] * in[i]
			}
		}
	},
	CUDA: `extern "C" __global__ void square(const float* in, float* out, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = in[i] * in[i];
}`,
}

func main() {
	backend := flag.String("backend", "host", "device backend: host (two devices, no GPU) or cuda (two GPUs)")
	flag.Parse()
	if err := run(os.Stdout, *backend); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

// run builds and launches the pipeline on devices 0 and 1 of backend.
func run(w io.Writer, backend string) error {
	if backend == "host" {
		if err := gg.SetHostDeviceCount(2); err != nil {
			return err
		}
	}
	if c, err := gg.DeviceCount(backend); err != nil || c < 2 {
		return fmt.Errorf("the %s backend has %d devices, the pipeline needs 2 (%v)", backend, c, err)
	}
	d0, err := gg.Open(backend, gg.WithOrdinal(0))
	if err != nil {
		return err
	}
	defer d0.Close()
	d1, err := gg.Open(backend, gg.WithOrdinal(1))
	if err != nil {
		return err
	}
	defer d1.Close()
	fmt.Fprintf(w, "devices: %s (ordinal %d), %s (ordinal %d)\n", d0.Properties().Name, d0.Properties().Ordinal,
		d1.Properties().Name, d1.Properties().Ordinal)

	out, err := d1.Malloc(4 * n) // stage 2's output, device 1's memory
	if err != nil {
		return err
	}
	defer d1.Free(out)

	g, err := d0.NewGraph()
	if err != nil {
		return err
	}
	defer g.Destroy()
	alloc, mid, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 4 * n, Location: 0,
		Access: []gg.MemAccessDesc{{Device: 1}}}) // device 1 reads it: access descriptors of the alloc node
	if err != nil {
		return err
	}
	grid, block := gg.Dim1(n/threads), gg.Dim1(threads)
	s1, err := g.AddKernelNode(gg.KernelParams{Kernel: scale, Grid: grid, Block: block, Args: []any{mid, float32(0.5), float32(-1), n}}, alloc)
	if err != nil {
		return err
	}
	s2, err := g.AddNodeOn(d1, gg.KernelParams{Kernel: square, Grid: grid, Block: block, Args: []any{mid, out, n}}, s1)
	if err != nil {
		return err
	}
	if _, err := g.AddMemFreeNode(mid, s2); err != nil {
		return err
	}
	fmt.Fprintf(w, "graph of device %d: alloc, stage 1 on device %d, stage 2 on device %d, free\n",
		g.Device().Properties().Ordinal, s1.Device().Properties().Ordinal, s2.Device().Properties().Ordinal)

	e, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer e.Destroy()
	s, err := d0.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	got := make([]float32, n)
	for launch := range 3 {
		if err := d1.Memset(gg.Memset32(out, 0, n)); err != nil {
			return err
		}
		if err := e.Launch(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := d1.Memcpy(gg.DtoH(gg.Bytes(got), out)); err != nil {
			return err
		}
		for i, v := range got {
			x := 0.5*float32(i) - 1
			if v != x*x {
				return fmt.Errorf("launch %d: out[%d] = %g, want %g", launch, i, v, x*x)
			}
		}
		fmt.Fprintf(w, "launch %d: %d results from device 1 match the host\n", launch, n)
	}
	fmt.Fprintln(w, "OK")
	return nil
}
