package gpugraph_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// TestCUDAFirstLaunchWhileHeld asks the driver whether a kernel's first
// launch on a device, which loads it (at cuModuleGetFunction, lazily, by
// default since CUDA 12.2), waits in the call for work queued before it in
// another stream. The work is a host function that returns only when the
// test says so after the launch returns: if the launch waits for it, a
// program written that way never returns. That was the pattern of the
// first default-stream scenarios, which hold a stream and then launch a
// kernel not yet used on the device. With a non-blocking and then a
// blocking stream held (a wait with either held is a context
// synchronization; one only while the blocking stream is held, loading
// through the legacy stream), the
// launch is made into a non-blocking stream, a blocking stream and the
// legacy stream, with a kernel launched before as the control; each answer
// is logged. The test fails only if a launch does not return even once the
// held stream is released.
func TestCUDAFirstLaunchWhileHeld(t *testing.T) {
	d := openCUDA(t)
	t.Logf("CUDA_MODULE_LOADING=%q (unset: the driver's default, lazy since CUDA 12.2)", os.Getenv("CUDA_MODULE_LOADING"))
	one := gg.Dim1(1)
	heldNonBlocking := must[*gg.Stream](t)(d.NewStream())
	heldBlocking := must[*gg.Stream](t)(d.NewStreamWithFlags(gg.StreamDefault))
	nonBlocking := must[*gg.Stream](t)(d.NewStream())
	blocking := must[*gg.Stream](t)(d.NewStreamWithFlags(gg.StreamDefault))
	legacy := must[*gg.Stream](t)(d.StreamLegacy())
	// Everything but the kernels under test is used once before.
	for _, s := range []*gg.Stream{heldNonBlocking, heldBlocking, nonBlocking, blocking, legacy} {
		ok(t, s.Launch(kA, one, one))
		ok(t, s.LaunchHostFunc(func() {}))
	}
	bounded(t, "Device.Synchronize before the probes", d.Synchronize)

	probe := 0
	for _, h := range []struct {
		what string
		s    *gg.Stream
	}{{"a non-blocking stream", heldNonBlocking}, {"a blocking stream", heldBlocking}} {
		for _, c := range []struct {
			what string
			s    *gg.Stream
			k    *gg.Kernel
		}{
			{"a kernel launched before (the control), into a non-blocking stream", nonBlocking, kA},
			{"a kernel never launched on the device, into a non-blocking stream", nonBlocking, firstLaunchKernel(probe + 1)},
			{"a kernel never launched on the device, into a blocking stream", blocking, firstLaunchKernel(probe + 2)},
			{"a kernel never launched on the device, into the legacy stream", legacy, firstLaunchKernel(probe + 3)},
		} {
			probe++
			what := fmt.Sprintf("probe %d, %s held, %s", probe, h.what, c.what)
			if h.s == heldBlocking && c.s == legacy {
				// The legacy stream's launch waits for the held blocking
				// stream by the stream rules, whatever loading does; the
				// call should still return at once.
				what += " (the kernel waits for the held stream; the call should not)"
			}
			release := make(chan struct{})
			released := false
			ok(t, h.s.LaunchHostFunc(func() { <-release }))
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- c.s.Launch(c.k, one, one) }()
			select {
			case err := <-done:
				t.Logf("%s: returned %v in %v", what, errText(err), time.Since(start).Round(time.Microsecond))
			case <-time.After(5 * time.Second):
				close(release)
				released = true
				select {
				case err := <-done:
					t.Logf("%s: did not return within 5 s; returned %v %v after the held stream was released (the call waited for the held work)",
						what, errText(err), time.Since(start).Round(time.Millisecond))
				case <-time.After(30 * time.Second):
					t.Fatalf("%s: did not return within 5 s, nor within 30 s after the held stream was released", what)
				}
			}
			if !released {
				close(release)
			}
			bounded(t, fmt.Sprintf("probe %d: Device.Synchronize", probe), d.Synchronize)
		}
	}
}

// firstLaunchKernel is an empty kernel of its own name, so that its first
// launch on a device loads it.
func firstLaunchKernel(i int) *gg.Kernel {
	name := fmt.Sprintf("first_launch_probe_%d", i)
	return &gg.Kernel{
		Name: name,
		Go:   func(gg.Block, gg.Args) {},
		CUDA: fmt.Sprintf(`extern "C" __global__ void %s() {}`, name),
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
