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
// CUresult is CUDA_ERROR_OUT_OF_MEMORY, ErrMemoryAllocation), nothing may
// panic or hang, Close must release what the run had taken (the device's
// free memory returns to where it was), and the next clean run must work.
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
	last := free0
	for n := int64(1); n <= calls; n++ {
		driver.InjectFault(n, 2) // CUDA_ERROR_OUT_OF_MEMORY
		err := scenario()
		driver.InjectFault(0, 0)
		var ge *gg.Error
		switch {
		case err == nil:
			// The failed call was one whose failure is tolerated (a
			// cleanup the driver refuses harmlessly).
		case errors.As(err, &ge) && errors.Is(err, gg.ErrMemoryAllocation):
			typed++
		default:
			t.Errorf("call %d of %d failed: %v, want a typed ErrMemoryAllocation", n, calls, err)
		}
		if err := scenario(); err != nil {
			t.Fatalf("clean run after failing call %d: %v", n, err)
		}
		if free, _ := must2u(t)(probe.MemGetInfo()); free < last {
			t.Errorf("failing call %d (%v) left %d bytes of device memory taken", n, err, last-free)
			last = free
		}
	}
	free1, _ := must2u(t)(probe.MemGetInfo())
	t.Logf("%d driver calls in the scenario; %d failures returned typed errors, the rest were tolerated; free memory %d → %d MiB",
		calls, typed, free0>>20, free1>>20)
	if free1 < free0 {
		t.Errorf("device memory leaked: %d bytes", free0-free1)
	}
}

func must2u(t *testing.T) func(a, b uint64, err error) (uint64, uint64) {
	return func(a, b uint64, err error) (uint64, uint64) {
		t.Helper()
		ok(t, err)
		return a, b
	}
}
