//go:build linux && amd64

package driver

import "unsafe"

// A lighter foreign call for the hot paths (kernel and graph launches):
// purego.SyscallN copies its arguments through two 32-word buffers and a
// pooled 50-word struct and passes all 32 as stack arguments, which costs a
// few hundred nanoseconds on a 3-4 µs launch. fastCall passes at most 12
// words, from the caller's stack, through runtime.cgocall (the same switch
// to the system stack that purego uses) into a small trampoline.

// callArgs is read by fastcallTrampoline: keep the layout in step with
// fastcall_linux_amd64.s.
type callArgs struct {
	fn uintptr
	a  [12]uintptr
	r1 uintptr
}

//go:linkname runtime_cgocall runtime.cgocall
//go:noescape
func runtime_cgocall(fn uintptr, arg unsafe.Pointer) int32

// fastcallTrampolineABI0 is the address of the trampoline.
var fastcallTrampolineABI0 uintptr

func init() { fastcallTrampolineABI0 = abi0PC() }

func abi0PC() uintptr

// fastCall calls the C function fn with up to 12 integer arguments.
func fastCall(fn uintptr, a [12]uintptr) uintptr {
	args := callArgs{fn: fn, a: a}
	runtime_cgocall(fastcallTrampolineABI0, unsafe.Pointer(&args))
	return args.r1
}
