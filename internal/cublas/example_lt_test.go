package cublas_test

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
)

// A layer's forward and backward GEMMs with their epilogues fused, as a
// training step calls them, row-major: forward H = relu(X·Wᵀ + b) writes
// the ReLU mask (RELU_AUX_BIAS); backward, the GEMM that makes the layer's
// output gradient dH = dY2·W2 also applies the mask and sums the bias
// gradient over the batch (DRELU_BGRAD). Without a GPU it prints why and
// returns; it is compiled, not run, by go test (TestGPULtExample runs it
// on the GPU machine).
//
// cuBLASLt binds to the context current on the calling thread; with none,
// to device 0's primary context, the one gpugraph's cuda backend uses. On
// another device, make its context current first (see the package
// comment).
func ExampleLtHandle_Plan() {
	d, err := gg.Open("cuda")
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	defer d.Close()
	lib, err := cublas.LoadLt()
	if err != nil {
		fmt.Println("no cuBLASLt:", err)
		return
	}
	h, err := lib.Create()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Destroy()
	s, _ := d.NewStream()
	ws, _ := d.Malloc(cublas.WorkspaceHopper)
	defer d.Free(ws)
	put := func(x []float32) uintptr {
		p, _ := d.Malloc(4 * len(x))
		d.Memcpy(gg.HtoD(p, gg.Bytes(x)))
		return uintptr(p)
	}

	// Batch 2, 3 inputs, 2 outputs: y0 = x0 - x2 + 0.5, y1 = x1 - 4.
	X := put([]float32{1, 2, 3, 4, 5, 6})
	W := put([]float32{1, 0, -1, 0, 1, 0})
	b := put([]float32{0.5, -4})
	H := put(make([]float32, 4))
	fwd := cublas.LtMatmul{TransB: true, M: 2, N: 2, K: 3, LDA: 3, LDB: 3, LDC: 2,
		ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F,
		Epilogue: cublas.EpilogueReluAuxBias, AuxLD: cublas.LtAuxLD(2), MaxWorkspace: cublas.WorkspaceHopper}
	mask, _ := d.Malloc(fwd.AuxBytes())
	defer d.Free(mask)
	// The next layer: one output, W2 = [1 1], its output gradient dY2 = [1; 2].
	dY2 := put([]float32{1, 2})
	W2 := put([]float32{1, 1})
	dZ := put(make([]float32, 4))
	db := put(make([]float32, 2))
	bwd := cublas.LtMatmul{M: 2, N: 2, K: 1, LDA: 1, LDB: 2, LDC: 2,
		ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F,
		Epilogue: cublas.EpilogueDReluBGrad, AuxLD: fwd.AuxLD, MaxWorkspace: cublas.WorkspaceHopper}

	// Plans first (the heuristic), then the calls: here captured into a
	// graph, as a training step's would be.
	pf, err := h.Plan(fwd)
	if err != nil {
		fmt.Println(err)
		return
	}
	pb, err := h.Plan(bwd)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.BeginCapture(gg.CaptureModeGlobal)
	err1 := pf.Matmul(cublas.LtArgs{Alpha: 1, A: X, B: W, D: H, Bias: b, Aux: uintptr(mask)}, s.NativeStream(), uintptr(ws), cublas.WorkspaceHopper)
	err2 := pb.Matmul(cublas.LtArgs{Alpha: 1, A: dY2, B: W2, D: dZ, Bias: db, Aux: uintptr(mask)}, s.NativeStream(), uintptr(ws), cublas.WorkspaceHopper)
	g, err := s.EndCapture()
	for _, err := range []error{err1, err2, err} {
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	e, _ := g.Instantiate(0)
	defer e.Destroy()
	e.Launch(s)
	s.Synchronize()
	get := func(p uintptr, n int) []float32 {
		out := make([]float32, n)
		d.Memcpy(gg.DtoH(gg.Bytes(out), gg.DevicePtr(p)))
		return out
	}
	fmt.Println("H ", get(H, 4))  // relu([-1.5 -2; -1.5 1])
	fmt.Println("dZ", get(dZ, 4)) // [1 1; 2 2] masked
	fmt.Println("db", get(db, 2)) // dZ summed over the batch
	// It prints, on a GPU:
	// H  [0 0 0 1]
	// dZ [0 0 0 2]
	// db [0 2]
}
