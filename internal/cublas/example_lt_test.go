package cublas_test

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
)

// A layer's forward and backward GEMMs with their epilogues fused, as a
// training step calls them, row-major: forward H = relu(X·Wᵀ + b) writes
// the ReLU mask (RELU_AUX_BIAS); backward, the GEMM that makes the layer's
// output gradient dH = dY2·W2 also applies the mask, dZ = dH ⊙ mask, and
// sums the bias gradient db over the batch (DRELU_BGRAD). The sizes are
// TestGPULtTrainingStep's (batch 48, 40 inputs, 72 units, 24 outputs of
// the next layer; a next layer of one output, K = 1 for DRELU_BGRAD, Plan
// refuses: see LtMatmul.CheckSupported), and the calls run once before
// they are captured, as in TestGPULtCapture. Without a GPU it prints why
// and returns; it is
// compiled, not run, by go test (TestGPULtExample runs it on the GPU
// machine).
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
	// put copies a rows×cols float32 matrix, element (r, c) = f(r, c), to
	// the device (cudaMalloc's 256-byte alignment, which the plans assume).
	put := func(rows, cols int, f func(r, c int) float32) uintptr {
		x := make([]float32, rows*cols)
		for r := range rows {
			for c := range cols {
				x[r*cols+c] = f(r, c)
			}
		}
		p, _ := d.Malloc(4 * len(x))
		d.Memcpy(gg.HtoD(p, gg.Bytes(x)))
		return uintptr(p)
	}
	zero := func(r, c int) float32 { return 0 }

	// Small integers and half-integer biases: every sum is exact in
	// float32, and no value before the ReLU is 0.
	const B, in, hid, out = 48, 40, 72, 24
	X := put(B, in, func(r, c int) float32 { return float32((r+2*c)%5 - 2) })
	W := put(hid, in, func(j, c int) float32 { return float32((j+c)%3 - 1) })
	b := put(1, hid, func(_, j int) float32 { return float32(j%4) - 1.5 })
	H := put(B, hid, zero)
	fwd := cublas.LtMatmul{TransB: true, M: B, N: hid, K: in, LDA: in, LDB: in, LDC: hid,
		ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F, BiasType: cublas.R32F,
		Epilogue: cublas.EpilogueReluAuxBias, AuxLD: cublas.LtAuxLD(hid), MaxWorkspace: cublas.WorkspaceHopper}
	mask, _ := d.Malloc(fwd.AuxBytes())
	defer d.Free(mask)
	// The next layer's weights W2 (out×hid) and its output gradient dY2.
	dY2 := put(B, out, func(r, o int) float32 { return float32((r+o)%3 - 1) })
	W2 := put(out, hid, func(o, j int) float32 { return float32((o+2*j)%3 - 1) })
	dZ := put(B, hid, zero)
	db := put(1, hid, zero)
	bwd := cublas.LtMatmul{M: B, N: hid, K: out, LDA: out, LDB: hid, LDC: hid,
		ABType: cublas.R32F, CDType: cublas.R32F, Compute: cublas.Compute32F, BiasType: cublas.R32F,
		Epilogue: cublas.EpilogueDReluBGrad, AuxLD: fwd.AuxLD, MaxWorkspace: cublas.WorkspaceHopper}

	// Plans first (the heuristic), then the calls.
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
	step := func() error {
		if err := pf.Matmul(cublas.LtArgs{Alpha: 1, A: X, B: W, D: H, Bias: b, Aux: uintptr(mask)}, s.NativeStream(), uintptr(ws), cublas.WorkspaceHopper); err != nil {
			return err
		}
		return pb.Matmul(cublas.LtArgs{Alpha: 1, A: dY2, B: W2, D: dZ, Bias: db, Aux: uintptr(mask)}, s.NativeStream(), uintptr(ws), cublas.WorkspaceHopper)
	}
	// Once on the stream (the first call of each kernel loads it), then
	// the outputs cleared and the same calls captured into a graph, as a
	// training step's would be.
	if err := step(); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range []struct {
		p uintptr
		n int
	}{{H, B * hid}, {dZ, B * hid}, {db, hid}} {
		d.Memcpy(gg.HtoD(gg.DevicePtr(o.p), make([]byte, 4*o.n)))
	}
	s.BeginCapture(gg.CaptureModeGlobal)
	err1 := step()
	g, err := s.EndCapture()
	for _, err := range []error{err1, err} {
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	e, _ := g.Instantiate(0)
	defer e.Destroy()
	e.Launch(s)
	if err := s.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	get := func(p uintptr, n int) []float32 {
		out := make([]float32, n)
		d.Memcpy(gg.DtoH(gg.Bytes(out), gg.DevicePtr(p)))
		return out
	}
	sum := func(x []float32) (t float64) {
		for _, v := range x {
			t += float64(v)
		}
		return t
	}
	hv, dzv, dbv := get(H, B*hid), get(dZ, B*hid), get(db, hid)
	active := 0
	for _, v := range hv {
		if v > 0 {
			active++
		}
	}
	fmt.Printf("H  %v… %d of %d units active\n", hv[:8], active, len(hv)) // relu(X·Wᵀ + b), row 0
	fmt.Printf("dZ %v… sum %v\n", dzv[:8], sum(dzv))                      // (dY2·W2) ⊙ mask, row 0
	fmt.Printf("db %v… sum %v\n", dbv[:8], sum(dbv))                      // dZ summed over the batch
	// It prints, on a GPU:
	// H  [0 3.5 0 2.5 2.5 0 1.5 5.5]… 1956 of 3456 units active
	// dZ [0 -8 0 16 -8 0 16 -8]… sum 48
	// db [0 -16 8 8 -16 8 16 0]… sum 48
}
