package gpugraph_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

func TestStrings(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{gg.CaptureModeThreadLocal, "thread-local"},
		{gg.CaptureStatusInvalidated, "invalidated"},
		{gg.CaptureStatus(7), "CaptureStatus(7)"},
		{gg.DependencyTypeProgrammatic, "programmatic"},
		{gg.ExternalSemaphoreHandleTimelineSemaphoreFD, "timeline semaphore fd"},
		{gg.InstantiateAutoFreeOnLaunch | gg.InstantiateUpload, "auto-free-on-launch|upload"},
		{gg.InstantiateFlags(0), "none"},
		{gg.InstantiateFlags(0x11), "auto-free-on-launch|InstantiateFlags(0x10)"},
		{gg.EventDisableTiming, "disable-timing"},
		{gg.UpdateResultInfo{Result: gg.UpdateErrorTopologyChanged}, "topology changed"},
		{gg.GraphMemStats{UsedCurrent: 64 << 20, UsedHigh: 3 << 10, ReservedCurrent: 1000, ReservedHigh: 2 << 30},
			"used 64 MiB (high 3 KiB), reserved 1000 B (high 2 GiB)"},
		{gg.MemPoolStats{}, "reserved 0 B (high 0 B), used 0 B (high 0 B)"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v: String() = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestPropertiesString(t *testing.T) {
	p := open(t).Properties()
	s := p.String()
	for _, want := range []string{"device 0 (host): gpugraph host (", "CUDA 13.0", "multiprocessors", "memory pools"} {
		if !strings.Contains(s, want) {
			t.Errorf("Properties.String() = %q, want it to contain %q", s, want)
		}
	}
	if st, err := open(t).MemoryStats(); err != nil || !strings.HasPrefix(st.String(), "allocated 0 B (peak 0 B)") {
		t.Errorf("MemoryStats.String() = %q, %v", st.String(), err)
	}
}

// TestCode: the error codes are the public package's own type, with CUDA's
// numbers and names, matched by errors.Is through any wrapping.
func TestCode(t *testing.T) {
	c := gg.ErrInvalidValue
	if c.Num() != 1 || c.Name() != "cudaErrorInvalidValue" || c.Error() != "invalid argument (cudaErrorInvalidValue)" {
		t.Fatalf("ErrInvalidValue: %d %q %q", c.Num(), c.Name(), c.Error())
	}
	_, err := gg.Open("nosuch")
	wrapped := fmt.Errorf("setting up: %w", err)
	var e *gg.Error
	if !errors.As(wrapped, &e) || e.Code != gg.ErrInvalidValue || !errors.Is(wrapped, gg.ErrInvalidValue) || errors.Is(wrapped, gg.ErrNoDevice) {
		t.Fatalf("Open(\"nosuch\"): %v, want an *Error wrapping ErrInvalidValue only", err)
	}
}
