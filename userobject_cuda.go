package gpugraph

import (
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
)

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
func (d *Device) cudaNewUserObject(opName string, o *UserObject, refs int, flags UserObjectFlags) error {
	o.id = userObjectIDs.Add(1)
	cudaUserObjects.Store(o.id, o)
	cb := cudaUserObjectCallback()
	err := d.cuCall(opName, func() error {
		h, err := d.cuda.drv.UserObjectCreate(o.id, cb, uint32(refs), uint32(flags))
		if err == nil {
			o.cu = h
		}
		return err
	})
	if err != nil {
		cudaUserObjects.Delete(o.id)
	}
	return err
}

// cudaRetain is cuUserObjectRetain.
func (o *UserObject) cudaRetain(opName string, n int) error {
	return o.dev.cuCall(opName, func() error { return o.dev.cuda.drv.UserObjectRetain(o.cu, uint32(n)) })
}

// cudaRelease is cuUserObjectRelease.
func (o *UserObject) cudaRelease(opName string, n int) error {
	return o.dev.cuCall(opName, func() error { return o.dev.cuda.drv.UserObjectRelease(o.cu, uint32(n)) })
}

// cudaRetainUserObject is cuGraphRetainUserObject.
func (g *Graph) cudaRetainUserObject(opName string, o *UserObject, n int, flags GraphUserObjectFlags) error {
	return g.dev.cuCall(opName, func() error { return g.dev.cuda.drv.GraphRetainUserObject(g.cu, o.cu, uint32(n), uint32(flags)) })
}

// cudaReleaseUserObject is cuGraphReleaseUserObject.
func (g *Graph) cudaReleaseUserObject(opName string, o *UserObject, n int) error {
	return g.dev.cuCall(opName, func() error { return g.dev.cuda.drv.GraphReleaseUserObject(g.cu, o.cu, uint32(n)) })
}
