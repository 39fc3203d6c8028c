package gpugraph_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// A kernel fault is the device's sticky error: every later call of that
// device fails with it and Close still works. What comes after differs:
//
//   - host: a device opened afterwards in the same process works;
//   - cuda: the driver documents an illegal address or a launch failure
//     as leaving the process "in an inconsistent state [where] any further
//     CUDA work will return the same error ... the process must be
//     terminated and relaunched" (cudaErrorIllegalAddress,
//     cudaErrorLaunchFailure). Close resets the primary context
//     (cuDevicePrimaryCtxReset), which the driver accepts, and still the
//     next Open fails with the same error, as measured on the H100
//     (driver 580): a clear typed error, never a crash or a hang. Each
//     cuda case runs in a child process, which is what a service must do.

var (
	faultStore = &gg.Kernel{
		Name:   "fault_store",
		Params: []gg.ParamType{gg.Int32},
		Go:     func(gg.Block, gg.Args) { panic("out-of-bounds store") },
		CUDA: `extern "C" __global__ void fault_store(int v) {
			*(volatile int*)(0x10) = v; // no allocation there
		}`,
	}
	faultTrap = &gg.Kernel{
		Name:   "fault_trap",
		Params: []gg.ParamType{gg.Int32},
		Go:     func(gg.Block, gg.Args) { panic("trap") },
		CUDA:   `extern "C" __global__ void fault_trap(int v) { if (v) __trap(); }`,
	}
	faultKernels = map[string]*gg.Kernel{"store": faultStore, "trap": faultTrap}
)

func TestKernelFaultIsSticky(t *testing.T) {
	for _, tc := range []struct {
		backend, kernel string
	}{{"host", "store"}, {"cuda", "store"}, {"cuda", "trap"}} {
		t.Run(tc.backend+"/"+tc.kernel, func(t *testing.T) {
			if tc.backend == "host" {
				faultSequence(t, "host", faultKernels[tc.kernel])
				return
			}
			openCUDA(t).Close() // skips without a GPU
			cmd := exec.Command(os.Args[0], "-test.run", "^TestKernelFaultChild$", "-test.v")
			cmd.Env = append(os.Environ(), "GPUGRAPH_FAULT_KERNEL="+tc.kernel)
			out, err := cmd.CombinedOutput()
			t.Logf("child process:\n%s", out)
			if err != nil || !strings.Contains(string(out), "--- PASS: TestKernelFaultChild") {
				t.Fatalf("child: %v", err)
			}
		})
	}
}

// TestKernelFaultChild is one cuda fault, in the child process
// TestKernelFaultIsSticky starts.
func TestKernelFaultChild(t *testing.T) {
	k := faultKernels[os.Getenv("GPUGRAPH_FAULT_KERNEL")]
	if k == nil {
		t.Skip("run by TestKernelFaultIsSticky in a child process")
	}
	faultSequence(t, "cuda", k)
}

// faultSequence faults a kernel on a device of backend and checks what
// follows.
func faultSequence(t *testing.T, backend string, k *gg.Kernel) {
	var d *gg.Device
	if backend == "cuda" {
		d = openCUDA(t)
	} else {
		d = must[*gg.Device](t)(gg.Open(backend))
	}
	s := must[*gg.Stream](t)(d.NewStream())
	buf := must[gg.DevicePtr](t)(d.Malloc(64))
	ok(t, s.Launch(k, gg.Dim1(1), gg.Dim1(1), 1))
	syncErr := s.Synchronize()
	var code *gg.Code
	for _, c := range []*gg.Code{gg.ErrIllegalAddress, gg.ErrLaunchFailure} {
		if errors.Is(syncErr, c) {
			code = c
		}
	}
	if code == nil {
		t.Fatalf("Synchronize after the fault: %v, want ErrIllegalAddress or ErrLaunchFailure", syncErr)
	}
	t.Logf("the fault: %v", syncErr)
	// Sticky: every later call of the device fails the same way.
	for name, err := range map[string]error{
		"Device.Synchronize": d.Synchronize(),
		"Malloc":             func() error { _, err := d.Malloc(64); return err }(),
		"Memset":             d.Memset(gg.Memset8(buf, 0, 64)),
		"Launch": func() error {
			return errors.Join(s.Launch(leakKernel, gg.Dim1(1), gg.Dim1(32), buf, 16), s.Synchronize())
		}(),
		"NewStream": func() error { _, err := d.NewStream(); return err }(),
	} {
		if !errors.Is(err, code) {
			t.Errorf("%s after the fault: %v, want %v", name, err, code)
		}
	}
	closeErr := d.Close()
	if closeErr != nil && !errors.Is(closeErr, code) {
		t.Errorf("Close after the fault: %v", closeErr)
	}
	t.Logf("Close after the fault: %v", closeErr)
	d2, err := gg.Open(backend)
	if backend == "cuda" {
		// The driver's rule: the process is done with CUDA.
		if !errors.Is(err, code) {
			t.Fatalf("Open after the fault: %v, want %v (the driver's sticky error)", err, code)
		}
		t.Logf("Open after the fault: %v", err)
		return
	}
	ok(t, err)
	defer d2.Close()
	s2 := must[*gg.Stream](t)(d2.NewStream())
	p := must[gg.DevicePtr](t)(d2.Malloc(4 * 64))
	ok(t, s2.Launch(leakKernel, gg.Dim1(1), gg.Dim1(64), p, 64))
	ok(t, s2.Synchronize())
	got := make([]int32, 64)
	ok(t, d2.Memcpy(gg.DtoH(gg.Bytes(got), p)))
	for i, v := range got {
		if v != int32(i) {
			t.Fatalf("new device after the fault: element %d is %d", i, v)
		}
	}
}
