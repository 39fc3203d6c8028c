package gpugraph

import (
	"errors"
	"sync/atomic"
	"testing"
)

// After an update (markUpdated, called by Update, SetParams and SetEnabled)
// a device graph must be uploaded again before the device may launch it;
// a host launch uploads it too.
func TestDeviceLaunchAfterUpdateNeedsUpload(t *testing.T) {
	d, err := Open("host")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, _ := d.NewStream()
	var runs atomic.Int32
	one := Dim1(1)
	g, _ := d.NewGraph()
	if _, err := g.AddKernelNode(KernelParams{Kernel: &Kernel{Name: "x", Go: func(Block, Args) { runs.Add(1) }}, Grid: one, Block: one}); err != nil {
		t.Fatal(err)
	}
	x, err := g.Instantiate(InstantiateDeviceLaunch)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := x.DeviceHandle()
	var last error
	lg, _ := d.NewGraph()
	launcher := &Kernel{Name: "launcher", DeviceRuntime: true, Go: func(b Block, _ Args) { last = b.LaunchGraph(h, FireAndForget) }}
	if _, err := lg.AddKernelNode(KernelParams{Kernel: launcher, Grid: one, Block: one}); err != nil {
		t.Fatal(err)
	}
	le, _ := lg.Instantiate(0)
	fromDevice := func() error {
		t.Helper()
		if err := le.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		return last
	}
	steps := []struct {
		what   string
		before func() error
		want   *Code
		runs   int32
	}{
		{"never uploaded", nil, ErrInvalidValue, 0},
		{"uploaded", func() error { return x.Upload(s) }, nil, 1},
		{"updated", func() error { x.markUpdated(); return nil }, ErrInvalidValue, 1},
		{"uploaded again", func() error { return x.Upload(s) }, nil, 2},
		{"updated again", func() error { x.markUpdated(); return nil }, ErrInvalidValue, 2},
		{"launched from the host", func() error { return x.Launch(s) }, nil, 4},
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
		if n := runs.Load(); n != c.runs {
			t.Fatalf("%s: the graph ran %d times, want %d", c.what, n, c.runs)
		}
	}
}
