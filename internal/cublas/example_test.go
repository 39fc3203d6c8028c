package cublas_test

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cublas"
)

// A cuBLAS handle on a gpugraph stream, with its own workspace so that the
// call can be captured: C(2×3) = A(2×4)·B(4×3), row-major. It needs a GPU
// and libcublas, so it is compiled but not run by go test.
func Example() {
	d, err := gg.Open("cuda")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	lib, err := cublas.Load()
	if err != nil {
		fmt.Println(err)
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
	h.SetStream(s.NativeStream())
	h.SetWorkspace(uintptr(ws), cublas.WorkspaceHopper)

	a, _ := d.Malloc(4 * 2 * 4)
	b, _ := d.Malloc(4 * 4 * 3)
	c, _ := d.Malloc(4 * 2 * 3)
	d.Memcpy(gg.HtoD(a, gg.Bytes([]float32{1, 2, 3, 4, 5, 6, 7, 8})))
	d.Memcpy(gg.HtoD(b, gg.Bytes([]float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1})))

	s.BeginCapture(gg.CaptureModeGlobal)
	h.SgemmRowMajor(false, false, 2, 3, 4, 1, uintptr(a), 4, uintptr(b), 3, 0, uintptr(c), 3)
	g, err := s.EndCapture()
	if err != nil {
		fmt.Println(err)
		return
	}
	e, _ := g.Instantiate(0)
	e.Launch(s)
	s.Synchronize()
	out := make([]float32, 6)
	d.Memcpy(gg.DtoH(gg.Bytes(out), c))
	fmt.Println(out) // [5 6 7 13 14 15]
}
