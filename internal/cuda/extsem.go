package cuda

import (
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/cuda/driver"
)

// ExternalSemaphore is a native CUexternalSemaphore.
type ExternalSemaphore struct {
	d *Device
	h uintptr
}

// UserObject is a native CUuserObject.
type UserObject struct {
	d  *Device
	h  uintptr
	id uintptr // its key in the callback's table
}

var (
	_ backend.ExternalSemaphores = (*Device)(nil)
	_ backend.ExternalSemaphore  = (*ExternalSemaphore)(nil)
	_ backend.Native             = (*ExternalSemaphore)(nil)
	_ backend.UserObjects        = (*Device)(nil)
	_ backend.UserObject         = (*UserObject)(nil)
	_ backend.Native             = (*UserObject)(nil)
)

// Native is the CUexternalSemaphore.
func (s *ExternalSemaphore) Native() uintptr { return s.h }

// ImportExternalSemaphoreFD is cuImportExternalSemaphore of a file
// descriptor; on success the driver owns fd.
func (d *Device) ImportExternalSemaphoreFD(kind, fd int) (backend.ExternalSemaphore, error) {
	s := &ExternalSemaphore{d: d}
	err := d.Do(func() error {
		d.cm.Lock()
		defer d.cm.Unlock()
		var err error
		s.h, err = d.drv.ImportExternalSemaphore(d.cm, driver.ExtSemHandleDesc{Type: int32(kind), FD: int32(fd)})
		return err
	})
	if err != nil {
		return nil, err
	}
	d.own(kindExtSem, s.h)
	return s, nil
}

// Destroy is cuDestroyExternalSemaphore.
func (s *ExternalSemaphore) Destroy() error {
	s.d.disown(kindExtSem, s.h)
	return s.d.Do(func() error { return s.d.drv.DestroyExternalSemaphore(s.h) })
}

// ExtSems is the driver's form of the semaphores and values of a signal or
// wait.
func extSems(sems []backend.ExternalSemaphore, values []uint64) driver.ExtSems {
	hs := make([]uintptr, len(sems))
	for i, s := range sems {
		hs[i] = s.(*ExternalSemaphore).h
	}
	return driver.ExtSems{Sems: hs, Values: values}
}

// SignalExternalSemaphores is cuSignalExternalSemaphoresAsync.
func (d *Device) SignalExternalSemaphores(s backend.Stream, sems []backend.ExternalSemaphore, values []uint64) error {
	return d.extSems(s.(*Stream), true, extSems(sems, values))
}

// WaitExternalSemaphores is cuWaitExternalSemaphoresAsync.
func (d *Device) WaitExternalSemaphores(s backend.Stream, sems []backend.ExternalSemaphore, values []uint64) error {
	return d.extSems(s.(*Stream), false, extSems(sems, values))
}

func (d *Device) extSems(s *Stream, signal bool, es driver.ExtSems) error {
	d.cm.Lock()
	defer d.cm.Unlock()
	return s.call(func() error {
		if signal {
			return d.drv.SignalExternalSemaphoresAsync(d.cm, es, s.h)
		}
		return d.drv.WaitExternalSemaphoresAsync(d.cm, es, s.h)
	})
}

// User objects: one C callback (purego callbacks are a limited resource)
// serves every object; its argument is the object's id in userObjects.
var (
	userObjectCallbackOnce sync.Once
	userObjectCallback     uintptr
	userObjects            sync.Map // id -> destroy func()
	userObjectIDs          atomic.Uintptr
)

func userObjectCallbackPtr() uintptr {
	userObjectCallbackOnce.Do(func() {
		userObjectCallback = purego.NewCallback(func(id uintptr) uintptr {
			if v, ok := userObjects.LoadAndDelete(id); ok {
				v.(func())()
			}
			return 0
		})
	})
	return userObjectCallback
}

// NewUserObject is cuUserObjectCreate; the driver checks refs and flags.
func (d *Device) NewUserObject(destroy func(), refs int, flags uint) (backend.UserObject, error) {
	o := &UserObject{d: d, id: userObjectIDs.Add(1)}
	userObjects.Store(o.id, destroy)
	cb := userObjectCallbackPtr()
	err := d.Do(func() error {
		var err error
		o.h, err = d.drv.UserObjectCreate(o.id, cb, uint32(refs), uint32(flags))
		return err
	})
	if err != nil {
		userObjects.Delete(o.id)
		return nil, err
	}
	d.userRefs(o, refs)
	return o, nil
}

// Native is the CUuserObject.
func (o *UserObject) Native() uintptr { return o.h }

// Retain is cuUserObjectRetain.
func (o *UserObject) Retain(n int) error {
	err := o.d.Do(func() error { return o.d.drv.UserObjectRetain(o.h, uint32(n)) })
	if err == nil {
		o.d.userRefs(o, n)
	}
	return err
}

// Release is cuUserObjectRelease.
func (o *UserObject) Release(n int) error {
	err := o.d.Do(func() error { return o.d.drv.UserObjectRelease(o.h, uint32(n)) })
	if err == nil {
		o.d.userRefs(o, -n)
	}
	return err
}
