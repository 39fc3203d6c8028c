package driver

import "unsafe"

// User objects (CUuserObject): a C destructor and its argument, reference
// counted by their owners and the graphs that hold them.

// UserObjectCreate creates an object whose destroy(ptr) the driver calls,
// on a thread of its own, when the last reference goes.
func (d *Driver) UserObjectCreate(ptr, destroy uintptr, refs, flags uint32) (uintptr, error) {
	var o uintptr
	err := d.call("cuUserObjectCreate", uintptr(unsafe.Pointer(&o)), ptr, destroy, uintptr(refs), uintptr(flags))
	return o, err
}

func (d *Driver) UserObjectRetain(obj uintptr, n uint32) error {
	return d.call("cuUserObjectRetain", obj, uintptr(n))
}

func (d *Driver) UserObjectRelease(obj uintptr, n uint32) error {
	return d.call("cuUserObjectRelease", obj, uintptr(n))
}

// GraphRetainUserObject gives g n references to obj: new ones, or with
// flags CU_GRAPH_USER_OBJECT_MOVE (1) n of the caller's.
func (d *Driver) GraphRetainUserObject(g, obj uintptr, n, flags uint32) error {
	return d.call("cuGraphRetainUserObject", g, obj, uintptr(n), uintptr(flags))
}

func (d *Driver) GraphReleaseUserObject(g, obj uintptr, n uint32) error {
	return d.call("cuGraphReleaseUserObject", g, obj, uintptr(n))
}
