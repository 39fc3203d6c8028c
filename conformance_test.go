package gpugraph_test

import (
	"fmt"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/backend/backendtest"
)

// The conformance suite (internal/backend/backendtest) on both backends.
// go test -run Conformance runs it; on the GPU machine (docs/gpu.md),
//
//	gpugraph.test -test.run Conformance -test.v

func TestConformanceHost(t *testing.T) { backendtest.Run(t, open) }

func TestConformanceCUDA(t *testing.T) {
	openCUDA(t).Close() // skips the whole suite where there is no GPU
	backendtest.Run(t, openCUDA)
}

// TestDevicesHost runs the device scenarios on host with 2, 4 and 8
// devices (and 1: the refusals), each device with its own memory and
// workers: nothing assumes two.
func TestDevicesHost(t *testing.T) {
	defer gg.SetHostDeviceCount(1)
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("%d", n), func(t *testing.T) {
			if err := gg.SetHostDeviceCount(n); err != nil {
				t.Fatal(err)
			}
			backendtest.RunDevices(t, "host", n, openOrdinal("host"))
		})
	}
}

// TestDevicesCUDA runs them on the GPUs the machine has.
func TestDevicesCUDA(t *testing.T) {
	openCUDA(t).Close() // skips where there is no GPU
	n, err := gg.DeviceCount("cuda")
	if err != nil {
		t.Fatal(err)
	}
	backendtest.RunDevices(t, "cuda", n, openOrdinal("cuda"))
}

func openOrdinal(backend string) backendtest.OpenOrdinal {
	return func(t testing.TB, ordinal int) *gg.Device {
		t.Helper()
		d, err := gg.Open(backend, gg.WithOrdinal(ordinal))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
}
