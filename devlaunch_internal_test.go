package gpugraph

import (
	"errors"
	"sync/atomic"
	"testing"
)

// The device launches a device graph as it was last uploaded: an update
// (here SetParams) reaches device launches only once the graph is uploaded
// again, explicitly or by a host launch. So does the CUDA 13.0 driver on the
// H100 (docs/driver-devlaunch.txt, "upload and update").
func TestDeviceLaunchRunsUploadedVersion(t *testing.T) {
	d, err := Open("host")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	var last atomic.Int32
	one := Dim1(1)
	logK := &Kernel{Name: "log", Params: []ParamType{Int32}, Go: func(_ Block, a Args) { last.Store(a.Int32(0)) }}
	g, _ := d.NewGraph()
	n, err := g.AddKernelNode(KernelParams{Kernel: logK, Grid: one, Block: one, Args: []any{1}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := g.Instantiate(InstantiateDeviceLaunch)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := x.DeviceHandle()
	var launchErr error
	lg, _ := d.NewGraph()
	launcher := &Kernel{Name: "launcher", DeviceRuntime: true, Go: func(b Block, _ Args) { launchErr = b.LaunchGraph(h, FireAndForget) }}
	if _, err := lg.AddKernelNode(KernelParams{Kernel: launcher, Grid: one, Block: one}); err != nil {
		t.Fatal(err)
	}
	le, _ := lg.Instantiate(0)
	fromDevice := func() error {
		t.Helper()
		last.Store(0)
		if err := le.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		return launchErr
	}
	set := func(v int) func() error {
		return func() error { return x.SetParams(n, KernelParams{Kernel: logK, Grid: one, Block: one, Args: []any{v}}) }
	}
	steps := []struct {
		what   string
		before func() error
		want   *Code
		logged int32
	}{
		{"never uploaded", nil, ErrInvalidValue, 0},
		{"uploaded", func() error { return x.Upload(s) }, nil, 1},
		{"updated, not uploaded", set(2), nil, 1},
		{"uploaded again", func() error { return x.Upload(s) }, nil, 2},
		{"updated again", set(3), nil, 2},
		{"launched from the host", func() error { return x.Launch(s) }, nil, 3},
	}
	for _, c := range steps {
		if c.before != nil {
			if err := c.before(); err != nil {
				t.Fatal(err)
			}
		}
		err := fromDevice()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Fatalf("%s: device launch gave %v, want %v", c.what, err, c.want)
		}
		if got := last.Load(); got != c.logged {
			t.Fatalf("%s: the device launch logged %d, want %d", c.what, got, c.logged)
		}
	}
}
