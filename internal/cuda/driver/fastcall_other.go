//go:build !(linux && amd64)

package driver

import "github.com/ebitengine/purego"

func fastCall(fn uintptr, a [12]uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, a[:]...)
	return r
}
