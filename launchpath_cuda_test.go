//go:build linux

package gpugraph

import (
	"os"
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/cuda"
)

var emptyKernel = &Kernel{Name: "empty", Go: func(Block, Args) {}, CUDA: `extern "C" __global__ void empty() {}`}

// BenchmarkCUDALaunchPath splits the host cost of a stream launch on the
// cuda backend: through the API (Stream.Launch) or straight to the driver
// binding, each from an OS thread that has the device's context current or
// from whatever thread the goroutine runs on. 1000 launches and a
// synchronize per op. With GG_LAUNCH_LOOP naming the library built from
// tools/bench/launchloop.c, "c-loop" runs the same 1000 launches as a C
// loop in this process, the native reference side by side.
func BenchmarkCUDALaunchPath(b *testing.B) {
	d, err := Open("cuda")
	if err != nil {
		b.Skipf("no CUDA device: %v", err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	c := d.be.(*cuda.Device)
	bk := lowerKernel(emptyKernel)
	f, err := c.Function(&bk)
	if err != nil {
		b.Fatal(err)
	}
	one := Dim1(1)
	api := func() error { return s.Launch(emptyKernel, one, one) }
	drv := c.Driver()
	raw := func() error { return drv.Launch(f, dims(one), dims(one), 0, s.NativeStream(), 0) }
	type variant struct {
		name    string
		launch  func() error
		current bool
		batch   func() error // 1000 launches at once
	}
	vs := []variant{{"api", api, false, nil}, {"api-current", api, true, nil}, {"raw", raw, false, nil}, {"raw-current", raw, true, nil}}
	if lib := os.Getenv("GG_LAUNCH_LOOP"); lib != "" {
		h, err := purego.Dlopen(lib, purego.RTLD_NOW)
		if err != nil {
			b.Fatal(err)
		}
		var loop func(f, stream uintptr, n int32) int32
		purego.RegisterLibFunc(&loop, h, "gg_launch_loop")
		vs = append(vs, variant{"c-loop", nil, false, func() error {
			if r := loop(f, s.NativeStream(), 1000); r != 0 {
				return newErr("gg_launch_loop", ErrLaunchFailure, "CUresult %d", r)
			}
			return nil
		}})
	}
	for _, v := range vs {
		b.Run(v.name, func(b *testing.B) {
			if v.current {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if err := drv.SetCurrent(c.Context()); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if v.batch != nil {
					if err := v.batch(); err != nil {
						b.Fatal(err)
					}
				}
				for i := 0; v.batch == nil && i < 1000; i++ {
					if err := v.launch(); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/launch")
		})
	}
}
