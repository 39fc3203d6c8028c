package gpugraph

import "testing"

// The rule Exec.SetParams and Exec.Update apply to external semaphore
// nodes: the node type and the number of semaphores stay, the rest may
// change.
func TestExtSemUpdatable(t *testing.T) {
	a, b := &ExternalSemaphore{}, &ExternalSemaphore{}
	one := []*ExternalSemaphore{a}
	for _, c := range []struct {
		name     string
		old, new NodeParams
		ok       bool
	}{
		{"same", ExtSemaphoreSignalParams{one, []uint64{1}}, ExtSemaphoreSignalParams{one, []uint64{1}}, true},
		{"other value", ExtSemaphoreSignalParams{one, []uint64{1}}, ExtSemaphoreSignalParams{one, []uint64{7}}, true},
		{"other semaphore", ExtSemaphoreWaitParams{one, []uint64{1}}, ExtSemaphoreWaitParams{[]*ExternalSemaphore{b}, []uint64{1}}, true},
		{"more semaphores", ExtSemaphoreSignalParams{one, []uint64{1}}, ExtSemaphoreSignalParams{[]*ExternalSemaphore{a, b}, []uint64{1, 2}}, false},
		{"fewer semaphores", ExtSemaphoreWaitParams{[]*ExternalSemaphore{a, b}, []uint64{1, 2}}, ExtSemaphoreWaitParams{one, []uint64{1}}, false},
		{"signal to wait", ExtSemaphoreSignalParams{one, []uint64{1}}, ExtSemaphoreWaitParams{one, []uint64{1}}, false},
		{"not semaphore params", ExtSemaphoreSignalParams{one, []uint64{1}}, EmptyParams{}, false},
		{"nil", nil, ExtSemaphoreSignalParams{one, []uint64{1}}, false},
	} {
		ok, why := extSemUpdatable(c.old, c.new)
		if ok != c.ok || ok != (why == "") {
			t.Errorf("%s: extSemUpdatable = %v, %q; want %v", c.name, ok, why, c.ok)
		}
	}
}

// Go code neither signals, waits on nor reads a semaphore the driver
// imported: the graphics API it came from does. (A fake handle on a host
// device, since the GPU machine has no Vulkan to export one.)
func TestExtSemImportedIsNotGoSide(t *testing.T) {
	d, err := Open("host")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := &ExternalSemaphore{dev: d, kind: ExternalSemaphoreHandleTimelineSemaphoreFD, be: fakeSem{}}
	_, verr := s.Value()
	for name, err := range map[string]error{
		"Signal": s.Signal(1),
		"Wait":   s.Wait(t.Context(), 1),
		"Value":  verr,
	} {
		if e, ok := err.(*Error); !ok || e.Code != ErrNotSupported {
			t.Errorf("%s on an imported semaphore: %v, want ErrNotSupported", name, err)
		}
	}
}

// fakeSem stands for a semaphore a driver imported.
type fakeSem struct{}

func (fakeSem) Destroy() error { return nil }
