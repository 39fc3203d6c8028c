//go:build !linux

package gpugraph

import (
	"bytes"
	"runtime"
	"strconv"
)

// threadID identifies the calling goroutine (outside Linux, by its id, read
// from its stack header). It is called only while a destructor runs.
func threadID() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}

// Outside Linux no Device has a cudaDev, so none of these is called.

func (d *Device) cudaNewUserObject(opName string, o *UserObject, refs int, flags UserObjectFlags) error {
	panic("unreachable")
}

func (o *UserObject) cudaRetain(opName string, n int) error  { panic("unreachable") }
func (o *UserObject) cudaRelease(opName string, n int) error { panic("unreachable") }
func (g *Graph) cudaRetainUserObject(opName string, o *UserObject, n int, flags GraphUserObjectFlags) error {
	panic("unreachable")
}
func (g *Graph) cudaReleaseUserObject(opName string, o *UserObject, n int) error {
	panic("unreachable")
}
