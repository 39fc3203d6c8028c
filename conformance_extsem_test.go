package gpugraph_test

import (
	"context"
	"errors"
	"os"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// Conformance scenarios of external semaphores. The cuda backend can only
// import semaphores from a graphics API, and the GPU machine runs no
// Vulkan, so on cuda these assert the refusals: NewExternalSemaphore is not
// supported, imports of bad descriptors fail with the driver's error, and
// the argument checks (shared by both backends) refuse what they refuse on
// host.

// TestConformanceExternalSemaphoreSources: where semaphores come from.
func TestConformanceExternalSemaphoreSources(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		cuda := d.Properties().Backend == gg.BackendCUDA
		_, err := d.ImportExternalSemaphoreFD(2, 0) // OPAQUE_WIN32 is no fd
		isCode(t, err, gg.ErrInvalidValue)

		s, err := d.NewExternalSemaphore()
		if cuda {
			isCode(t, err, gg.ErrNotSupported)
		} else {
			ok(t, err)
			ok(t, s.Destroy())
		}

		// An fd that is no semaphore: the host backend imports nothing; the
		// driver refuses it (the GPU run shows with which error).
		for _, c := range []struct {
			name string
			kind gg.ExternalSemaphoreHandleType
			fd   func() (int, func())
		}{
			{"timeline fd -1", gg.ExternalSemaphoreHandleTimelineSemaphoreFD, func() (int, func()) { return -1, func() {} }},
			{"opaque fd -1", gg.ExternalSemaphoreHandleOpaqueFD, func() (int, func()) { return -1, func() {} }},
			{"timeline fd of /dev/null", gg.ExternalSemaphoreHandleTimelineSemaphoreFD, func() (int, func()) {
				f, err := os.Open(os.DevNull)
				if err != nil {
					t.Fatal(err)
				}
				return int(f.Fd()), func() { f.Close() }
			}},
		} {
			fd, closeFD := c.fd()
			s, err := d.ImportExternalSemaphoreFD(c.kind, fd)
			if err == nil { // the driver took the fd
				s.Destroy()
				t.Fatalf("%s: imported", c.name)
			}
			closeFD()
			if !cuda {
				isCode(t, err, gg.ErrNotSupported)
				continue
			}
			var e *gg.Error
			if !errors.As(err, &e) || errors.Is(err, gg.ErrNotSupported) {
				t.Fatalf("%s: %v is not the driver's error", c.name, err)
			}
			t.Logf("%s: driver says %s (%d): %v", c.name, e.Code.Name(), e.Code.Num(), err)
		}
	})
}

// TestConformanceExternalSemaphoreArgs: the argument checks of stream
// operations and nodes, the same on both backends.
func TestConformanceExternalSemaphoreArgs(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		g := graph(t, d)
		foreign := newSem(t, open(t)) // of another (host) device
		for _, c := range []struct {
			name         string
			sems         []*gg.ExternalSemaphore
			values       []uint64
			stream, node *gg.Code
		}{
			{"empty", nil, nil, gg.ErrInvalidValue, gg.ErrInvalidValue},
			{"nil semaphore", sems(nil), []uint64{1}, gg.ErrInvalidResourceHandle, gg.ErrInvalidValue},
			{"values missing", sems(foreign), nil, gg.ErrInvalidValue, gg.ErrInvalidValue},
			{"another device's semaphore", sems(foreign), []uint64{1}, gg.ErrInvalidResourceHandle, gg.ErrInvalidValue},
		} {
			isCode(t, s.SignalExternalSemaphores(c.sems, c.values), c.stream)
			isCode(t, s.WaitExternalSemaphores(c.sems, c.values), c.stream)
			_, err := g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: c.sems, Values: c.values})
			isCode(t, err, c.node)
			_, err = g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: c.sems, Values: c.values})
			isCode(t, err, c.node)
		}
		if n := must[[]*gg.Node](t)(g.Nodes()); len(n) != 0 {
			t.Fatalf("%d nodes after refused calls", len(n))
		}
		ok(t, s.Synchronize())
	})
}

// TestConformanceExternalSemaphoreSignalWait: a stream signals, another
// stream and a graph wait, Go reads the value. Needs a semaphore the
// backend makes: on cuda it checks that NewExternalSemaphore is refused
// and stops.
func TestConformanceExternalSemaphoreSignalWait(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *gg.Device) {
		sem, err := d.NewExternalSemaphore()
		if d.Properties().Backend == gg.BackendCUDA {
			isCode(t, err, gg.ErrNotSupported)
			t.Skip("the driver has no semaphores of its own; a Vulkan one would be needed")
		}
		ok(t, err)
		a, b := stream(t, d), stream(t, d)
		g := graph(t, d)
		w := must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: sems(sem), Values: []uint64{2}}))
		must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: sems(sem), Values: []uint64{3}}, w))
		e := must[*gg.Exec](t)(g.Instantiate(0))
		ok(t, b.WaitExternalSemaphores(sems(sem), []uint64{1}))
		ok(t, b.SignalExternalSemaphores(sems(sem), []uint64{2}))
		ok(t, e.Launch(a))
		ok(t, a.SignalExternalSemaphores(sems(sem), []uint64{1})) // after the launch: stream order holds it back
		isCode(t, a.Query(), gg.ErrNotReady)
		ok(t, sem.Signal(1))
		within(t, "the streams", func() error { return errors.Join(a.Synchronize(), b.Synchronize()) })
		ok(t, sem.Wait(context.Background(), 3))
		if v := must[uint64](t)(sem.Value()); v != 3 {
			t.Fatalf("value %d, want 3", v)
		}
		ok(t, sem.Destroy())
	})
}
