//go:build linux

package driver

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CMem is memory outside the Go heap, for what the driver reads through
// pointers: kernel parameter arrays (which hold pointers, and so must not be
// Go memory) and option arrays. It is a bump allocator reset by Reset.
type CMem struct {
	mu   sync.Mutex
	buf  []byte
	used int
}

// NewCMem maps n bytes.
func NewCMem(n int) (*CMem, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	return &CMem{buf: b}, nil
}

// Lock takes the arena for one call; Unlock resets it.
func (m *CMem) Lock()   { m.mu.Lock(); m.used = 0 }
func (m *CMem) Unlock() { m.mu.Unlock() }

// Alloc returns n bytes, 8-aligned, valid until Unlock.
func (m *CMem) Alloc(n int) unsafe.Pointer {
	n = (n + 7) &^ 7
	if m.used+n > len(m.buf) {
		panic("cuda: CMem arena exhausted")
	}
	p := unsafe.Pointer(&m.buf[m.used])
	m.used += n
	return p
}

// String copies s, NUL-terminated.
func (m *CMem) String(s string) *byte {
	p := (*byte)(m.Alloc(len(s) + 1))
	b := unsafe.Slice(p, len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return p
}

// Params lays out kernel arguments as cuLaunchKernel wants them: an array
// of pointers, each to one 8-byte argument value, all in the arena.
func (m *CMem) Params(args []uint64) uintptr {
	if len(args) == 0 {
		return 0
	}
	ptrs := unsafe.Slice((*uintptr)(m.Alloc(8*len(args))), len(args))
	vals := unsafe.Slice((*uint64)(m.Alloc(8*len(args))), len(args))
	for i, a := range args {
		vals[i] = a
		ptrs[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	return uintptr(unsafe.Pointer(&ptrs[0]))
}

func unix_Munmap(m *CMem) { unix.Munmap(m.buf) }
