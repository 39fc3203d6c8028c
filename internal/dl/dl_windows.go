//go:build windows

package dl

// Open answers ErrUnsupported: CUDA's libraries are loaded on Linux only.
func Open(name string) (uintptr, error) { return 0, ErrUnsupported }

// Sym answers ErrUnsupported.
func Sym(lib uintptr, name string) (uintptr, error) { return 0, ErrUnsupported }
