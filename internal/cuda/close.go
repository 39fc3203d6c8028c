package cuda

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// What a Device made, so that Close can release it. The primary context is
// shared with every other Device of the same ordinal and with CUDA
// libraries in the process, so the driver frees nothing when one Device
// closes unless it is told, object by object.

// kind is a driver object type, in the order Close releases them.
type kind uint8

const (
	kindExec kind = iota
	kindGraph
	kindEvent
	kindExtSem
	kindStream
	kindPool
	kindModule
	kinds
)

// owned is what a device made and has not destroyed: handles by kind, and
// the references to user objects the program holds.
type owned struct {
	mu    sync.Mutex
	h     [kinds]map[uintptr]bool
	users map[*UserObject]int
	mem   map[uint64]bool // Malloc and MallocAsync pointers not freed
	// graphMem holds the addresses of the device's alloc nodes: a graph
	// allocation not freed by the program stays live after its graph and
	// executable graphs are destroyed, so Close frees it, while those
	// graphs still hold the address (no other allocation can have it).
	graphMem map[uint64]bool
}

// ownGraphMem records the address of an alloc node.
func (d *Device) ownGraphMem(p uint64) {
	d.owned.mu.Lock()
	if d.owned.graphMem == nil {
		d.owned.graphMem = map[uint64]bool{}
	}
	d.owned.graphMem[p] = true
	d.owned.mu.Unlock()
}

// ownMem records (or, with live false, forgets) an allocation the program
// must free: Close frees what is left.
func (d *Device) ownMem(p uint64, live bool) {
	d.owned.mu.Lock()
	if live {
		if d.owned.mem == nil {
			d.owned.mem = map[uint64]bool{}
		}
		d.owned.mem[p] = true
	} else {
		delete(d.owned.mem, p)
	}
	d.owned.mu.Unlock()
}

func (d *Device) own(k kind, h uintptr) {
	if h == 0 {
		return
	}
	d.owned.mu.Lock()
	if d.owned.h[k] == nil {
		d.owned.h[k] = map[uintptr]bool{}
	}
	d.owned.h[k][h] = true
	d.owned.mu.Unlock()
}

func (d *Device) disown(k kind, h uintptr) {
	d.owned.mu.Lock()
	delete(d.owned.h[k], h)
	d.owned.mu.Unlock()
}

// userRefs adds n (negative to drop) to the program's references to o.
func (d *Device) userRefs(o *UserObject, n int) {
	d.owned.mu.Lock()
	if d.owned.users == nil {
		d.owned.users = map[*UserObject]int{}
	}
	d.owned.users[o] += n
	if d.owned.users[o] <= 0 {
		delete(d.owned.users, o)
	}
	d.owned.mu.Unlock()
}

// Owned counts what the device made and has not released, by kind, for
// leak tests: executable graphs, graphs, events, external semaphores,
// streams, pools, modules, allocations and user objects.
func (d *Device) Owned() map[string]int {
	d.owned.mu.Lock()
	defer d.owned.mu.Unlock()
	names := [kinds]string{"execs", "graphs", "events", "semaphores", "streams", "pools", "modules"}
	m := map[string]int{"user objects": len(d.owned.users)}
	for k, hs := range d.owned.h {
		m[names[k]] = len(hs)
	}
	m["allocations"] = len(d.owned.mem)
	return m
}

// MemGetInfo is cuMemGetInfo: the device's free and total memory.
func (d *Device) MemGetInfo() (free, total uint64, err error) {
	err = d.Do(func() error { var err error; free, total, err = d.drv.MemGetInfo(); return err })
	return free, total, err
}

// Close releases everything the device made, then its retain of the
// primary context:
//
//  1. captures left open on its streams are ended and their graphs
//     destroyed (a global-mode capture left open would make every later
//     unsafe call in the process fail);
//  2. it waits for the device's work;
//  3. executable graphs, graphs, events, semaphores and streams are
//     destroyed, the program's references to user objects released,
//     allocations freed, pools destroyed, cached memory trimmed and
//     modules unloaded;
//  4. the capture thread ends and the primary context is released.
//
// After a sticky error (a kernel fault) the context cannot be used again:
// Close resets it (cuDevicePrimaryCtxReset), so that a device opened
// afterwards in the process works, and reports the error.
func (d *Device) Close() error {
	openDevices.remove(d)
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	d.owned.mu.Lock()
	handles := d.owned.h
	d.owned.h = [kinds]map[uintptr]bool{}
	users := d.owned.users
	d.owned.users = nil
	mem := d.owned.mem
	d.owned.mem = nil
	graphMem := d.owned.graphMem
	d.owned.graphMem = nil
	d.owned.mu.Unlock()
	list := func(k kind) []uintptr {
		var hs []uintptr
		for h := range handles[k] {
			hs = append(hs, h)
		}
		slices.Sort(hs)
		return hs
	}

	// A sticky error first: then every call fails, and only a reset helps.
	// Otherwise end the captures (a synchronize during a global capture is
	// refused) and wait for the work.
	syncErr := d.do(d.drv.CtxSynchronize)
	sticky := syncErr != nil && stickyCode(Err(syncErr))
	if !sticky {
		for _, s := range list(kindStream) {
			keep(d.endOpenCapture(s))
		}
		syncErr = d.do(d.drv.CtxSynchronize)
		sticky = syncErr != nil && stickyCode(Err(syncErr))
	}
	if !sticky {
		keep(syncErr)
		keep(d.do(func() error {
			var errs []error
			// Before the graphs go, while they hold their addresses. One
			// freed where the device cannot see it (a graph's free node)
			// is not live: the driver refuses it, fine here.
			for p := range graphMem {
				d.drv.MemFree(p)
			}
			for p := range mem {
				d.drv.MemFree(p)
			}
			for _, h := range list(kindExec) {
				errs = append(errs, d.drv.GraphExecDestroy(h))
			}
			for _, h := range list(kindGraph) {
				errs = append(errs, d.drv.GraphDestroy(h))
			}
			for _, h := range list(kindEvent) {
				errs = append(errs, d.drv.EventDestroy(h))
			}
			for _, h := range list(kindExtSem) {
				errs = append(errs, d.drv.DestroyExternalSemaphore(h))
			}
			for _, h := range list(kindStream) {
				errs = append(errs, d.drv.StreamDestroy(h))
			}
			for o, n := range users {
				errs = append(errs, d.drv.UserObjectRelease(o.h, uint32(n)))
			}
			d.mu.Lock()
			d.allocs = nil
			d.mu.Unlock()
			for _, h := range list(kindPool) {
				errs = append(errs, d.drv.MemPoolDestroy(h))
			}
			if pool, err := d.drv.DeviceGetDefaultMemPool(d.ord); err == nil {
				errs = append(errs, d.drv.MemPoolTrimTo(pool, 0))
			}
			errs = append(errs, d.drv.DeviceGraphMemTrim(d.ord))
			for _, h := range list(kindModule) {
				errs = append(errs, d.drv.ModuleUnload(h))
			}
			return errors.Join(errs...)
		}))
	}
	d.mu.Lock()
	d.funcs = map[any]uintptr{}
	d.mu.Unlock()
	d.fast.Clear()
	d.names.Clear()
	d.forgetHostFuncs()
	if d.capCalls != nil {
		close(d.capCalls)
	}
	if sticky {
		// Every object of the context is gone with the reset.
		keep(syncErr)
		keep(d.drv.PrimaryContextReset(d.ord))
	}
	keep(d.drv.PrimaryContextRelease(d.ord))
	driver.FreeCMem(d.cm)
	if len(errs) == 0 {
		return nil
	}
	// The first failure's code; every failure in the detail.
	first := Err(errs[0])
	var e *backend.Error
	if len(errs) > 1 && errors.As(first, &e) {
		var more []string
		for _, err := range errs[1:] {
			more = append(more, err.Error())
		}
		e.Detail += "; then " + strings.Join(more, "; ")
	}
	return first
}

// endOpenCapture ends a capture left open on stream h and destroys what
// it captured.
func (d *Device) endOpenCapture(h uintptr) error {
	var ci driver.CaptureInfo
	if err := d.do(func() error { var err error; ci, err = d.drv.StreamGetCaptureInfo(h); return err }); err != nil {
		return err
	}
	if ci.Status == 0 { // CU_STREAM_CAPTURE_STATUS_NONE
		return nil
	}
	g, into, _ := d.endCapture(h)
	if g != 0 && g != into { // a graph into which the capture went is not the capture's
		return d.do(func() error { return d.drv.GraphDestroy(g) })
	}
	return nil // an invalidated capture ends with an error and no graph
}

// stickyCode reports the driver errors that leave the context unusable:
// the faults, and 709 (context is destroyed), which every call answers on
// a primary context that another Device's fault killed; only a reset
// makes it usable again.
func stickyCode(err error) bool {
	var e *backend.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code.Num() {
	case 700, 701, 702, 709, 714, 715, 716, 717, 718, 719, 720:
		return true
	}
	return false
}
