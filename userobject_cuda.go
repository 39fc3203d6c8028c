package gpugraph

import "github.com/gpugraph/gpugraph/internal/backend"

// cudaNewUserObject creates o's native object (cuUserObjectCreate); the
// driver checks refs and flags. The driver calls the destructor on a
// thread of its own, possibly inside an API call, so the backend only
// queues it for the device's destructor goroutine, where it runs as on the
// host backend.
func (d *Device) newDriverUserObject(uo backend.UserObjects, opName string, o *UserObject, refs int, flags UserObjectFlags) error {
	be, err := uo.NewUserObject(func() { d.scheduleDestructor(o.destroy) }, refs, uint(flags))
	if err != nil {
		return backendErr(opName, err)
	}
	o.be = be
	return nil
}

// cudaRetain is cuUserObjectRetain.
func (o *UserObject) cudaRetain(opName string, n int) error {
	return backendErr(opName, o.be.Retain(n))
}

// cudaRelease is cuUserObjectRelease.
func (o *UserObject) cudaRelease(opName string, n int) error {
	return backendErr(opName, o.be.Release(n))
}

// cudaRetainUserObject is cuGraphRetainUserObject.
func (g *Graph) cudaRetainUserObject(opName string, o *UserObject, n int, flags GraphUserObjectFlags) error {
	return backendErr(opName, g.be.(graphUserObjects).RetainUserObject(o.be, n, uint(flags)))
}

// cudaReleaseUserObject is cuGraphReleaseUserObject.
func (g *Graph) cudaReleaseUserObject(opName string, o *UserObject, n int) error {
	return backendErr(opName, g.be.(graphUserObjects).ReleaseUserObject(o.be, n))
}

// graphUserObjects is implemented by graphs whose driver keeps user object
// references (cuGraphRetainUserObject).
type graphUserObjects interface {
	RetainUserObject(o backend.UserObject, n int, flags uint) error
	ReleaseUserObject(o backend.UserObject, n int) error
}
