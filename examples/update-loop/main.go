// Command update-loop ports the capture-and-update loop of the CUDA
// guide (updating instantiated graphs, whole graph update):
//
//	for (int i = 0; i < 10; i++) {
//	    cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
//	    do_cuda_work(stream);
//	    cudaStreamEndCapture(stream, &graph);
//	    if (graphExec != NULL)
//	        cudaGraphExecUpdate(graphExec, graph, &errorNode, &updateResult);
//	    if (graphExec == NULL || updateResult != cudaGraphExecUpdateSuccess) {
//	        if (graphExec != NULL) cudaGraphExecDestroy(graphExec);
//	        cudaGraphInstantiate(&graphExec, graph, NULL, NULL, 0);
//	    }
//	    cudaGraphDestroy(graph);
//	    cudaGraphLaunch(graphExec, stream);
//	    cudaStreamSynchronize(stream);
//	}
//
// The work is an explicit time-stepping loop: each iteration advances a
// field x by a step with a time step dt that changes every iteration, from
// one buffer into the other (the buffers swap, so the kernel's pointer
// arguments change too), and then clamps it. Every fourth iteration also
// records a checkpoint copy, which changes the graph's topology: the update
// fails with UpdateErrorTopologyChanged, naming why, and the loop
// instantiates again, as the guide's code does. The iteration after a
// checkpoint updates the re-instantiated graph back.
//
// Every iteration's result is checked against the same arithmetic done on
// the host, and the program counts updates and instantiations.
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	gg "github.com/gpugraph/gpugraph"
)

const (
	n          = 1 << 14 // float32 elements of the field
	threads    = 256
	iterations = 10
	every      = 4 // a checkpoint every 4th iteration
)

// step writes out[i] = in[i] + dt*(c - in[i]): relaxation toward c.
var step = &gg.Kernel{
	Name:   "step",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Float32, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		cnt := a.Int(4)
		in, out := gg.Slice[float32](a.Ptr(0), cnt), gg.Slice[float32](a.Ptr(1), cnt)
		dt, c := a.Float32(2), a.Float32(3)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < cnt {
				out[i] = in[i] + dt*(c-in[i])
			}
		}
	},
	CUDA: `extern "C" __global__ void step(const float* in, float* out, float dt, float c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = in[i] + dt * (c - in[i]);
}`,
}

// clamp limits x to [lo, hi].
var clamp = &gg.Kernel{
	Name:   "clamp",
	Params: []gg.ParamType{gg.Pointer, gg.Float32, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		cnt := a.Int(3)
		x := gg.Slice[float32](a.Ptr(0), cnt)
		lo, hi := a.Float32(1), a.Float32(2)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < cnt {
				x[i] = min(max(x[i], lo), hi)
			}
		}
	},
	CUDA: `extern "C" __global__ void clamp(float* x, float lo, float hi, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = fminf(fmaxf(x[i], lo), hi);
}`,
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

// work is do_cuda_work of the guide: the stream operations of iteration it.
func work(s *gg.Stream, it int, in, out, ckpt gg.DevicePtr) error {
	grid := gg.Dim1((n + threads - 1) / threads)
	dt := float32(0.05 + 0.01*float64(it))
	if err := s.Launch(step, grid, gg.Dim1(threads), in, out, dt, float32(1), n); err != nil {
		return err
	}
	if err := s.Launch(clamp, grid, gg.Dim1(threads), out, float32(0), float32(0.9), n); err != nil {
		return err
	}
	if it%every == every-1 {
		return s.Memcpy(gg.DtoD(ckpt, out, 4*n))
	}
	return nil
}

// hostStep is the same iteration on the host.
func hostStep(x []float32, it int) {
	dt := float32(0.05 + 0.01*float64(it))
	for i := range x {
		v := x[i] + dt*(1-x[i])
		x[i] = min(max(v, 0), 0.9)
	}
}

func run(w io.Writer) error {
	dev, err := gg.Open("host")
	if err != nil {
		return err
	}
	defer dev.Close()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	var buf [2]gg.DevicePtr
	var ckpt gg.DevicePtr
	for _, p := range []*gg.DevicePtr{&buf[0], &buf[1], &ckpt} {
		if *p, err = dev.Malloc(4 * n); err != nil {
			return err
		}
		defer dev.Free(*p)
	}
	want := make([]float32, n)
	for i := range want {
		want[i] = float32(i%97) / 200
	}
	if err := dev.Memcpy(gg.HtoD(buf[0], gg.Bytes(want))); err != nil {
		return err
	}

	var exec *gg.Exec
	updates, instantiations := 0, 0
	for it := 0; it < iterations; it++ {
		in, out := buf[it%2], buf[(it+1)%2]
		if err := s.BeginCapture(gg.CaptureModeGlobal); err != nil {
			return err
		}
		if err := work(s, it, in, out, ckpt); err != nil {
			return err
		}
		graph, err := s.EndCapture()
		if err != nil {
			return err
		}
		res := gg.UpdateResultInfo{Result: gg.UpdateError}
		if exec != nil {
			res, err = exec.Update(graph)
			if err != nil && !errors.Is(err, gg.ErrGraphExecUpdateFailure) {
				return err // a bad argument, not a refused update
			}
		}
		what := "updated"
		if exec == nil || res.Result != gg.UpdateSuccess {
			if exec != nil {
				what = fmt.Sprintf("update refused (%v), instantiated again", res.Result)
				if err := exec.Destroy(); err != nil {
					return err
				}
			} else {
				what = "instantiated"
			}
			if exec, err = graph.Instantiate(0); err != nil {
				return err
			}
			instantiations++
		} else {
			updates++
		}
		if err := graph.Destroy(); err != nil {
			return err
		}
		if err := exec.Launch(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		hostStep(want, it)
		got := make([]float32, n)
		if err := dev.Memcpy(gg.DtoH(gg.Bytes(got), out)); err != nil {
			return err
		}
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-6 {
				return fmt.Errorf("iteration %d: x[%d] = %v, want %v", it, i, got[i], want[i])
			}
		}
		fmt.Fprintf(w, "iteration %d: %s; x[1] = %.5f\n", it, what, got[1])
	}
	if err := exec.Destroy(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d updates, %d instantiations over %d iterations\n", updates, instantiations, iterations)
	// An instantiation is needed first and whenever the shape changes:
	// into and out of each checkpoint iteration.
	wantInst := 1
	for it := 1; it < iterations; it++ {
		if (it%every == every-1) != ((it-1)%every == every-1) {
			wantInst++
		}
	}
	if instantiations != wantInst {
		return fmt.Errorf("%d instantiations, want %d", instantiations, wantInst)
	}
	fmt.Fprintln(w, "OK")
	return nil
}
