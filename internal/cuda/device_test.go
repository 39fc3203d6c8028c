package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// TestContextErrorAllocs: contextError runs after every launch, so its
// success path must not allocate (the root's TestLaunchAllocs checks the
// whole path on the GPU).
func TestContextErrorAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = contextError(nil) }); n != 0 {
		t.Fatalf("contextError(nil) allocates %.0f times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Err(nil) }); n != 0 {
		t.Fatalf("Err(nil) allocates %.0f times", n)
	}
}

func TestErrPassesThrough(t *testing.T) {
	be := backend.Errorf(backend.ErrInvalidValue, "x")
	other := errors.New("not the driver's")
	for _, c := range []struct {
		in, want error
	}{
		{nil, nil},
		{be, be},
		{other, other},
	} {
		if got := Err(c.in); got != c.want {
			t.Errorf("Err(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	d, _, err := Open(0, func(error) {})
	if err == nil {
		d.Close()
		t.Skip("a CUDA driver is present: the GPU tests cover Open")
	}
	if !errors.Is(err, backend.ErrNoDevice) {
		t.Fatalf("Open without a driver: %v, want ErrNoDevice", err)
	}
	if !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("Open without a driver: %v, want the reason libcuda.so.1 did not load", err)
	}
	if n, cerr := DeviceCount(); n != 0 || cerr == nil || cerr.Error() != err.Error() {
		t.Errorf("DeviceCount without a driver: %d, %v; want 0 and Open's error %v", n, cerr, err)
	}
}

// TestLoadError: each reason the driver cannot be used reaches the caller
// with its own code and says what is wrong.
func TestLoadError(t *testing.T) {
	for _, c := range []struct {
		in   error
		code *backend.Code
		want string
	}{
		{driver.ErrPlatform, backend.ErrNotSupported, "not supported on"},
		{&driver.VersionError{Version: 11040}, backend.ErrInsufficientDriver,
			"the NVIDIA driver supports CUDA 11.4 (cuDriverGetVersion 11040); the cuda backend needs CUDA 12.3 or later"},
		{fmt.Errorf("%w: %v", driver.ErrNoDriver, errors.New("libcuda.so.1: cannot open shared object file")), backend.ErrNoDevice,
			"libcuda.so.1 cannot be loaded: libcuda.so.1: cannot open shared object file"},
		{&driver.Result{Code: 100, Name: "CUDA_ERROR_NO_DEVICE", Call: "cuInit"}, backend.ErrNoDevice,
			"the NVIDIA driver finds no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)"},
		{&driver.Result{Code: 34, Name: "CUDA_ERROR_STUB_LIBRARY", Call: "cuInit"}, backend.ErrNoDevice, "stub"},
	} {
		err := loadError(c.in)
		if !errors.Is(err, c.code) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("loadError(%v) = %v, want %s saying %q", c.in, err, c.code.Name(), c.want)
		}
	}
}

// TestStreamLayout: a Stream is one 64-byte size class, so that what a
// launch reads of it (Stream's comment) lies on one cache line.
func TestStreamLayout(t *testing.T) {
	if n := unsafe.Sizeof(Stream{}); n != 64 {
		t.Fatalf("a Stream is %d bytes, want 64", n)
	}
	if off := unsafe.Offsetof(Stream{}.d); off != 56 {
		t.Fatalf("the fields a launch reads end at %d, want 56", off)
	}
}

// TestPeerRecord: the record of peer access behind PeerAccessEnabled
// follows what the driver answered to gpugraph's enables and disables:
// done, or already so (the access is as asked), and not a failure.
func TestPeerRecord(t *testing.T) {
	var r peerRecord
	on := func(from, to int) bool { return r.on[[2]int{from, to}] }
	fail := backend.Errorf(backend.ErrInvalidDevice, "x")
	r.record(0, 1, fail, backend.ErrPeerAccessAlreadyEnabled, true)
	if on(0, 1) {
		t.Fatal("a failed enable is recorded")
	}
	r.record(0, 1, nil, backend.ErrPeerAccessAlreadyEnabled, true)
	r.record(1, 0, backend.Errorf(backend.ErrPeerAccessAlreadyEnabled, "x"), backend.ErrPeerAccessAlreadyEnabled, true)
	if !on(0, 1) || !on(1, 0) {
		t.Fatal("an enable, done or already so, is not recorded")
	}
	r.record(0, 1, fail, backend.ErrPeerAccessNotEnabled, false)
	if !on(0, 1) {
		t.Fatal("a failed disable is recorded")
	}
	r.record(0, 1, nil, backend.ErrPeerAccessNotEnabled, false)
	r.record(1, 0, backend.Errorf(backend.ErrPeerAccessNotEnabled, "x"), backend.ErrPeerAccessNotEnabled, false)
	if on(0, 1) || on(1, 0) {
		t.Fatal("a disable, done or already so, is not recorded")
	}
}
