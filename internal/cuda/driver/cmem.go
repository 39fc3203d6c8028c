package driver

import (
	"sync"
	"unsafe"
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
	b, err := mapAnon(n)
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

// unmapCMem unmaps m's memory without taking the arena (its user holds it
// until after this runs, or is done with it).
func unmapCMem(m *CMem) { unmap(m.buf) }

// FreeCMem unmaps an arena; it must not be used after.
func FreeCMem(m *CMem) {
	m.Lock()
	defer m.Unlock()
	if m.buf != nil {
		unmap(m.buf)
		m.buf = nil
	}
}

// zeroed returns n zeroed bytes of the arena: the driver's structs have
// reserved fields and padding that must be zero.
func (m *CMem) zeroed(n uintptr) unsafe.Pointer {
	p := m.Alloc(int(n))
	clear(unsafe.Slice((*byte)(p), n))
	return p
}

// put copies *v into zeroed arena memory, which the caller holds locked,
// and returns the copy: the C structs a driver call reads through a pointer.
func put[T any](m *CMem, v *T) *T {
	p := (*T)(m.zeroed(unsafe.Sizeof(*v)))
	*p = *v
	return p
}

// putSlice copies s into zeroed arena memory and returns the copy's
// address, or 0 for an empty s (the driver takes NULL for no array).
func putSlice[T any](m *CMem, s []T) uintptr {
	if len(s) == 0 {
		return 0
	}
	var zero T
	arr := unsafe.Slice((*T)(m.zeroed(uintptr(len(s))*unsafe.Sizeof(zero))), len(s))
	copy(arr, s)
	return uintptr(unsafe.Pointer(&arr[0]))
}

// sliceptr is the address of s's first element, or nil for an empty s (the
// driver takes NULL for no array). Pass it as uintptr(sliceptr(s)) in the
// arguments of Driver.call, which keeps s alive for the call. s must hold
// no Go pointers.
func sliceptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}
