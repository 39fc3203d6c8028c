package gpugraph_test

import (
	"errors"
	"fmt"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// TestInjectedDriverFailures fails each driver call a scenario makes, one
// run per call: every failure must come back as a typed error (the injected
// CUresult is CUDA_ERROR_OUT_OF_MEMORY, ErrMemoryAllocation), unless it is
// of a call listed in toleratedFailures, whose failure the backend absorbs
// by design; the injected failure must hit a call in every run (the
// scenario makes the same calls each time), and at least one typed error
// must come back. Nothing may panic or hang, Close must release what the
// run had taken (the device's free memory returns to where it was), and the
// next clean run must work.
func TestInjectedDriverFailures(t *testing.T) {
	probe := openCUDA(t) // keeps the context, reads free memory
	defer probe.Close()
	scenario := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		d, err := gg.Open("cuda")
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, d.Close()) }()
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		out, err := d.Malloc(4 * 256)
		if err != nil {
			return err
		}
		g, err := d.NewGraph()
		if err != nil {
			return err
		}
		a, p, err := g.AddMemAllocNode(gg.MemAllocParams{Size: 4 * 256})
		if err != nil {
			return err
		}
		k, err := g.AddKernelNode(gg.KernelParams{Kernel: leakKernel, Grid: gg.Dim1(1), Block: gg.Dim1(256), Args: []any{p, 256}}, a)
		if err != nil {
			return err
		}
		c, err := g.AddMemcpyNode(gg.DtoD(out, p, 4*256), k)
		if err != nil {
			return err
		}
		if _, err := g.AddMemFreeNode(p, c); err != nil {
			return err
		}
		e, err := g.Instantiate(0)
		if err != nil {
			return err
		}
		for range 2 {
			if err := e.Launch(s); err != nil {
				return err
			}
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		got := make([]int32, 256)
		if err := d.Memcpy(gg.DtoH(gg.Bytes(got), out)); err != nil {
			return err
		}
		for i, v := range got {
			if v != int32(i) {
				return fmt.Errorf("wrong result: element %d is %d", i, v)
			}
		}
		return errors.Join(e.Destroy(), g.Destroy(), d.Free(out))
	}
	ok(t, scenario()) // warm: modules compiled, pools made
	free0, _ := must2u(t)(probe.MemGetInfo())
	before := driver.Calls()
	ok(t, scenario())
	calls := driver.Calls() - before
	var typed int
	tolerated := map[string]int{}
	last := free0
	for n := int64(1); n <= calls; n++ {
		driver.InjectFault(n, 2) // CUDA_ERROR_OUT_OF_MEMORY
		err := scenario()
		hit, from := driver.Injected(), driver.InjectedCaller()
		driver.InjectFault(0, 0)
		var ge *gg.Error
		switch {
		case hit == "":
			t.Errorf("call %d of %d: the scenario made fewer driver calls than the clean run (%v)", n, calls, err)
		case err == nil:
			if _, ok := toleratedFailures[hit]; !ok {
				t.Errorf("call %d of %d (%s, from %s) failed and the scenario succeeded: a failure nobody reported", n, calls, hit, from)
			}
			tolerated[hit]++
		case errors.As(err, &ge) && errors.Is(err, gg.ErrMemoryAllocation):
			typed++
		default:
			t.Errorf("call %d of %d (%s) failed: %v, want a typed ErrMemoryAllocation", n, calls, hit, err)
		}
		if err := scenario(); err != nil {
			t.Fatalf("clean run after failing call %d: %v", n, err)
		}
		if free, _ := must2u(t)(probe.MemGetInfo()); free < last {
			t.Errorf("failing call %d (%v) left %d bytes of device memory taken", n, err, last-free)
			last = free
		}
	}
	if typed == 0 {
		t.Errorf("none of the %d failed calls came back as a typed error", calls)
	}
	t.Logf("%d driver calls in the scenario; %d failures returned typed errors; tolerated: %v", calls, typed, tolerated)
	free1, _ := must2u(t)(probe.MemGetInfo())
	if free1 < free0 {
		t.Errorf("device memory leaked: %d bytes", free0-free1)
	}
}

// toleratedFailures are the driver entry points whose failure the cuda
// backend absorbs by design, with where and why; the failure of any other
// call must reach the caller as a typed error.
var toleratedFailures = map[string]string{
	"cuMemFree_v2":              "Device.Close frees what the program left allocated and ignores the driver's refusal (a graph allocation already freed by its free node is not live)",
	"cuCtxSynchronize":          "Device.Close synchronizes twice, before and after ending open captures; the first one's error is superseded by the second's",
	"cuCtxSetCurrent":           "Device.Close synchronizes three times (the gpugraph package's wait, then the backend's before and after ending open captures), each making the context current again: a failure of an earlier one is superseded by the last one's (measured: the injected failures that hit it came from Device.Close's first two synchronizes)",
	"cuDeviceGetDefaultMemPool": "Device.Close skips trimming the default pool when the driver cannot name it",
}

func must2u(t *testing.T) func(a, b uint64, err error) (uint64, uint64) {
	return func(a, b uint64, err error) (uint64, uint64) {
		t.Helper()
		ok(t, err)
		return a, b
	}
}
