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
// kernel not yet used on the device. The launch is made into a
// non-blocking stream, a blocking stream and the legacy stream, with a
// kernel launched before as the control; each answer is logged. The test
// fails only if a launch does not return even once the held stream is
// released.
func TestCUDAFirstLaunchWhileHeld(t *testing.T) {
	d := openCUDA(t)
	t.Logf("CUDA_MODULE_LOADING=%q (unset: the driver's default, lazy since CUDA 12.2)", os.Getenv("CUDA_MODULE_LOADING"))
	one := gg.Dim1(1)
	heldStream := must[*gg.Stream](t)(d.NewStream())
	nonBlocking := must[*gg.Stream](t)(d.NewStream())
	blocking := must[*gg.Stream](t)(d.NewStreamWithFlags(gg.StreamDefault))
	legacy := must[*gg.Stream](t)(d.StreamLegacy())
	// Everything but the kernels under test is used once before.
	for _, s := range []*gg.Stream{heldStream, nonBlocking, blocking, legacy} {
		ok(t, s.Launch(kA, one, one))
		ok(t, s.LaunchHostFunc(func() {}))
	}
	bounded(t, "Device.Synchronize before the probes", d.Synchronize)

	for i, c := range []struct {
		what string
		s    *gg.Stream
		k    *gg.Kernel
	}{
		{"a kernel launched before (the control), into a non-blocking stream", nonBlocking, kA},
		{"a kernel never launched on the device, into a non-blocking stream", nonBlocking, firstLaunchKernel(1)},
		{"a kernel never launched on the device, into a blocking stream", blocking, firstLaunchKernel(2)},
		{"a kernel never launched on the device, into the legacy stream", legacy, firstLaunchKernel(3)},
	} {
		release := make(chan struct{})
		released := false
		ok(t, heldStream.LaunchHostFunc(func() { <-release }))
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- c.s.Launch(c.k, one, one) }()
		select {
		case err := <-done:
			t.Logf("probe %d, %s, while another (non-blocking) stream is held: returned %v in %v", i, c.what, errText(err), time.Since(start).Round(time.Microsecond))
		case <-time.After(5 * time.Second):
			close(release)
			released = true
			select {
			case err := <-done:
				t.Logf("probe %d, %s, while another (non-blocking) stream is held: did not return within 5 s; returned %v %v after the held stream was released (the call waited for the held work)",
					i, c.what, errText(err), time.Since(start).Round(time.Millisecond))
			case <-time.After(30 * time.Second):
				t.Fatalf("probe %d, %s: did not return within 5 s, nor within 30 s after the held stream was released", i, c.what)
			}
		}
		if !released {
			close(release)
		}
		bounded(t, fmt.Sprintf("probe %d: Device.Synchronize", i), d.Synchronize)
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
