package backendtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// Conformance scenarios of external semaphores. The cuda backend can only
// import semaphores from a graphics API, and the GPU machine runs no
// Vulkan, so on cuda these assert the refusals: NewExternalSemaphore is not
// supported, imports of bad descriptors fail with the driver's error, and
// the argument checks (shared by both backends) refuse what they refuse on
// host.

// externalSemaphoreSources: where semaphores come from.
func externalSemaphoreSources(t *testing.T, d *gg.Device) {
	cuda := d.Properties().Backend == gg.BackendCUDA
	_, err := d.ImportExternalSemaphoreFD(2, 0) // OPAQUE_WIN32 is no fd
	IsCode(t, err, gg.ErrInvalidValue)

	s, err := d.NewExternalSemaphore()
	if cuda {
		IsCode(t, err, gg.ErrNotSupported)
	} else {
		OK(t, err)
		OK(t, s.Destroy())
	}

	// An fd that is no semaphore: the host backend imports nothing; the
	// driver refuses it with the error it gave on H100 and H200 (driver
	// 580.159.04): cudaErrorInvalidValue for fd -1 as a timeline
	// semaphore, cudaErrorUnknown (999) for the others.
	for _, c := range []struct {
		name   string
		kind   gg.ExternalSemaphoreHandleType
		fd     func() (int, func())
		driver int // the driver's error number
	}{
		{"timeline fd -1", gg.ExternalSemaphoreHandleTimelineSemaphoreFD, func() (int, func()) { return -1, func() {} }, 1},
		{"opaque fd -1", gg.ExternalSemaphoreHandleOpaqueFD, func() (int, func()) { return -1, func() {} }, 999},
		{"timeline fd of /dev/null", gg.ExternalSemaphoreHandleTimelineSemaphoreFD, func() (int, func()) {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			return int(f.Fd()), func() { f.Close() }
		}, 999},
	} {
		fd, closeFD := c.fd()
		s, err := d.ImportExternalSemaphoreFD(c.kind, fd)
		if err == nil { // the driver took the fd
			s.Destroy()
			t.Fatalf("%s: imported", c.name)
		}
		closeFD()
		if !cuda {
			IsCode(t, err, gg.ErrNotSupported)
			continue
		}
		var e *gg.Error
		if !errors.As(err, &e) || errors.Is(err, gg.ErrNotSupported) {
			t.Fatalf("%s: %v is not the driver's error", c.name, err)
		}
		if e.Code.Num() != c.driver {
			t.Errorf("%s: driver says %s (%d), want error %d: %v", c.name, e.Code.Name(), e.Code.Num(), c.driver, err)
		}
	}
}

// externalSemaphoreArgs: the argument checks of stream
// operations and nodes, the same on both backends.
func externalSemaphoreArgs(t *testing.T, d *gg.Device) {
	s := NewStream(t, d)
	g := NewGraph(t, d)
	host, err := gg.Open(gg.BackendHost) // another device, one that makes semaphores
	OK(t, err)
	t.Cleanup(func() { host.Close() })
	foreign := Must[*gg.ExternalSemaphore](t)(host.NewExternalSemaphore())
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
		IsCode(t, s.SignalExternalSemaphores(c.sems, c.values), c.stream)
		IsCode(t, s.WaitExternalSemaphores(c.sems, c.values), c.stream)
		_, err := g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: c.sems, Values: c.values})
		IsCode(t, err, c.node)
		_, err = g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: c.sems, Values: c.values})
		IsCode(t, err, c.node)
	}
	if n := Must[[]*gg.Node](t)(g.Nodes()); len(n) != 0 {
		t.Fatalf("%d nodes after refused calls", len(n))
	}
	OK(t, s.Synchronize())
}

// externalSemaphoreSignalWait: a stream signals, another
// stream and a graph wait, Go reads the value. Needs a semaphore the
// backend makes: on cuda it checks that NewExternalSemaphore is refused
// and stops.
func externalSemaphoreSignalWait(t *testing.T, d *gg.Device) {
	sem, err := d.NewExternalSemaphore()
	if d.Properties().Backend == gg.BackendCUDA {
		IsCode(t, err, gg.ErrNotSupported)
		t.Skip("the driver has no semaphores of its own; a Vulkan one would be needed")
	}
	OK(t, err)
	a, b := NewStream(t, d), NewStream(t, d)
	g := NewGraph(t, d)
	w := Must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreWaitParams{Semaphores: sems(sem), Values: []uint64{2}}))
	Must[*gg.Node](t)(g.AddNode(gg.ExtSemaphoreSignalParams{Semaphores: sems(sem), Values: []uint64{3}}, w))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	OK(t, b.WaitExternalSemaphores(sems(sem), []uint64{1}))
	OK(t, b.SignalExternalSemaphores(sems(sem), []uint64{2}))
	OK(t, e.Launch(a))
	OK(t, a.SignalExternalSemaphores(sems(sem), []uint64{1})) // after the launch: stream order holds it back
	IsCode(t, a.Query(), gg.ErrNotReady)
	OK(t, sem.Signal(1))
	Within(t, "the streams", func() error { return errors.Join(a.Synchronize(), b.Synchronize()) })
	OK(t, sem.Wait(context.Background(), 3))
	if v := Must[uint64](t)(sem.Value()); v != 3 {
		t.Fatalf("value %d, want 3", v)
	}
	OK(t, sem.Destroy())
}

func sems(s ...*gg.ExternalSemaphore) []*gg.ExternalSemaphore { return s }

// Within fails the test if f does not return within a generous bound: a
// guard against hangs, not synchronisation. On a hang, unstick (if given)
// releases what f waits for, so that the failure is reported instead of
// hanging the device's Close.
func Within(t *testing.T, what string, f func() error, unstick ...func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return
	case <-time.After(20 * time.Second):
	}
	for _, u := range unstick {
		u()
	}
	t.Errorf("%s did not finish", what)
	if len(unstick) > 0 {
		<-done
	}
	t.FailNow()
}
