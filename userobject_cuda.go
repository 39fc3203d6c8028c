//go:build linux

package gpugraph

import (
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// threadID identifies the calling goroutine's OS thread. Destructor
// goroutines are locked to their thread, so while one runs, its thread runs
// nothing else.
func threadID() int64 { return int64(syscall.Gettid()) }

// User objects on the cuda backend are the driver's: one C callback (purego
// callbacks are a limited resource) serves every object; its argument is
// the object's id in cudaUserObjects. The driver calls it on a thread of its
// own, possibly inside an API call, so it only queues the destructor for the
// device's destructor goroutine, where it runs as on the host backend.
var (
	userObjectCallbackOnce sync.Once
	userObjectCallback     uintptr
	cudaUserObjects        sync.Map // id -> *UserObject
	userObjectIDs          atomic.Uintptr
)

func cudaUserObjectCallback() uintptr {
	userObjectCallbackOnce.Do(func() {
		userObjectCallback = purego.NewCallback(func(id uintptr) uintptr {
			if v, ok := cudaUserObjects.LoadAndDelete(id); ok {
				o := v.(*UserObject)
				o.dev.scheduleDestructor(o.destroy)
			}
			return 0
		})
	})
	return userObjectCallback
}

// cudaNewUserObject creates o's native object (cuUserObjectCreate); the
// driver checks refs and flags.
func (d *Device) cudaNewUserObject(op string, o *UserObject, refs int, flags UserObjectFlags) error {
	o.id = userObjectIDs.Add(1)
	cudaUserObjects.Store(o.id, o)
	cb := cudaUserObjectCallback()
	err := d.cuCall(op, func() error {
		return d.cu.drv.Call("cuUserObjectCreate", uintptr(unsafe.Pointer(&o.cu)), o.id, cb, uintptr(refs), uintptr(flags))
	})
	if err != nil {
		cudaUserObjects.Delete(o.id)
	}
	return err
}

// cudaUserObjectCall makes a user object driver call: cuUserObjectRetain,
// cuUserObjectRelease, cuGraphRetainUserObject, cuGraphReleaseUserObject.
func (d *Device) cudaUserObjectCall(op, name string, args ...uintptr) error {
	return d.cuCall(op, func() error { return d.cu.drv.Call(name, args...) })
}
