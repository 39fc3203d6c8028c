//go:build linux

package driver

import (
	"testing"
	"unsafe"
)

// TestPutZeroes: the structs put in the arena have their padding and
// reserved fields zero even where the arena held other data before, and
// arrays come back at the address of their copy, or 0 when empty.
func TestPutZeroes(t *testing.T) {
	m := arena(t)
	m.Lock()
	dirty := unsafe.Slice((*byte)(m.Alloc(1024)), 1024)
	for i := range dirty {
		dirty[i] = 0xff
	}
	m.Unlock()

	m.Lock()
	defer m.Unlock()
	p := put(m, &KernelNodeParams{Func: 1, GridX: 2, KernelParams: 3})
	raw := unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
	if pad := raw[36:40]; pad[0]|pad[1]|pad[2]|pad[3] != 0 {
		t.Errorf("padding after sharedMemBytes: % x", pad)
	}
	if p.Func != 1 || p.GridX != 2 || p.KernelParams != 3 || p.Extra != 0 {
		t.Errorf("copy %+v", *p)
	}
	d := put(m, &ExtSemHandleDesc{Type: 1, FD: 7})
	for i, b := range unsafe.Slice((*byte)(unsafe.Pointer(d)), unsafe.Sizeof(*d)) {
		if want := byte(0); i != 0 && i != 8 && b != want {
			t.Fatalf("byte %d of the handle desc: %#x", i, b)
		}
	}
	if putSlice[MemAccessDesc](m, nil) != 0 {
		t.Error("empty array not NULL")
	}
	descs := []MemAccessDesc{{1, 0, 3}, {1, 1, 1}}
	got := cArray[MemAccessDesc](putSlice(m, descs), 2)
	if got[0] != descs[0] || got[1] != descs[1] {
		t.Errorf("array copy %v", got)
	}
}

// TestCArray copies a C array and takes NULL for none.
func TestCArray(t *testing.T) {
	m := arena(t)
	m.Lock()
	defer m.Unlock()
	if cArray[uintptr](0, 3) != nil {
		t.Error("NULL array not nil")
	}
	hs := cArray[uintptr](putSlice(m, []uintptr{4, 5, 6}), 3)
	if len(hs) != 3 || hs[0] != 4 || hs[2] != 6 {
		t.Errorf("copy %v", hs)
	}
}

// arena maps a small CMem for a test.
func arena(t *testing.T) *CMem {
	m, err := NewCMem(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmapCMem(m) })
	return m
}
