//go:build !windows

package dl

import "github.com/ebitengine/purego"

// Open loads the shared library name (dlopen with RTLD_NOW|RTLD_GLOBAL).
// The error carries dlopen's reason.
func Open(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// Sym returns the address of symbol name in lib (dlsym).
func Sym(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }
