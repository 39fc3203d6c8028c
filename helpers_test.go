package gpugraph_test

import (
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/backend/backendtest"
)

// open returns a fresh host device, closed at the end of the test.
func open(t testing.TB) *gg.Device {
	t.Helper()
	d, err := gg.Open("host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// The kernels and helpers the tests share with the conformance suite, under
// the names they use here.

func must[T any](t testing.TB) func(T, error) T { return backendtest.Must[T](t) }

type tracked = backendtest.Tracked

var (
	ok       = backendtest.OK
	isCode   = backendtest.IsCode
	stream   = backendtest.NewStream
	graph    = backendtest.NewGraph
	kA       = backendtest.KA
	kB       = backendtest.KB
	kC       = backendtest.KC
	kD       = backendtest.KD
	endOK    = backendtest.EndOK
	forkJoin = backendtest.ForkJoin
	addAlloc = backendtest.AddAlloc

	condConst      = backendtest.CondConst
	condCountDown  = backendtest.CondCountDown
	condMark       = backendtest.CondMark
	newCondBuf     = backendtest.NewCondBuf
	addCond        = backendtest.AddCond
	ifElseScenario = backendtest.IfElseScenario

	setAt   = backendtest.SetAt
	readU32 = backendtest.ReadU32
	chainOf = backendtest.ChainOf

	newTracked  = backendtest.NewTracked
	instantiate = backendtest.Instantiate
	handle      = backendtest.Handle
	newPDLGraph = backendtest.NewPDLGraph
	pdlChain    = backendtest.PDLChain
	pdlStage    = backendtest.PDLStage
	within      = backendtest.Within
	addOne      = backendtest.AddOne
)

var one = gg.Dim1(1)

// fill32 writes v to every element of a float32 buffer.
var fill32 = &gg.Kernel{
	Name:   "fill32",
	Params: []gg.ParamType{gg.Pointer, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		x := gg.Slice[float32](a.Ptr(0), a.Int(2))
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < len(x) {
				x[i] = a.Float32(1)
			}
		}
	},
}

// axpy computes y[i] += a*x[i].
var axpy = &gg.Kernel{
	Name:   "axpy",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(3)
		x, y := gg.Slice[float32](a.Ptr(0), n), gg.Slice[float32](a.Ptr(1), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				y[i] += a.Float32(2) * x[i]
			}
		}
	},
}

func readF32(t testing.TB, d *gg.Device, p gg.DevicePtr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	ok(t, d.Memcpy(gg.DtoH(gg.Bytes(out), p)))
	return out
}
