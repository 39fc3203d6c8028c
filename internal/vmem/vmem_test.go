//go:build linux

package vmem

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// rss reads the process's resident set size in bytes.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func TestCommitDecommitReturnsMemory(t *testing.T) {
	r, err := Reserve(1<<30, Granularity)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.Addr()%Granularity != 0 || r.Size() != 1<<30 {
		t.Fatalf("reservation %#x+%d not aligned or sized", r.Addr(), r.Size())
	}
	const n = 64 << 20
	if err := r.Commit(0, n); err != nil {
		t.Fatal(err)
	}
	before := rss(t)
	b := unsafe.Slice((*byte)(r.Pointer(0)), n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	touched := rss(t)
	if touched-before < n/2 {
		t.Fatalf("touching %d MiB raised RSS by only %d bytes", n>>20, touched-before)
	}
	if err := r.Decommit(0, n); err != nil {
		t.Fatal(err)
	}
	if after := rss(t); touched-after < n/2 {
		t.Fatalf("decommit lowered RSS by only %d bytes", touched-after)
	}
	// Recommitted memory reads as zero.
	if err := r.Commit(0, Granularity); err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 {
		t.Fatal("recommitted page not zero")
	}
	if !r.Contains(r.Addr(), 1) || r.Contains(r.Addr()+r.Size(), 1) || r.Contains(r.Addr(), r.Size()+1) {
		t.Fatal("Contains is wrong at the edges")
	}
}

// TestPhysAliasing maps one physical chunk at two addresses: a write through
// one is read through the other, and Release zeroes it.
func TestPhysAliasing(t *testing.T) {
	r, err := Reserve(4*Granularity, Granularity)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	p, err := NewPhys("test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Grow(2); err != nil {
		t.Fatal(err)
	}
	for _, off := range []uintptr{0, 2 * Granularity} {
		if err := r.MapChunk(off, p, 1, true); err != nil {
			t.Fatal(err)
		}
	}
	a := unsafe.Slice((*byte)(r.Pointer(0)), Granularity)
	b := unsafe.Slice((*byte)(r.Pointer(2*Granularity)), Granularity)
	a[100] = 42
	if b[100] != 42 {
		t.Fatal("the two mappings do not share memory")
	}
	if err := p.Release(1); err != nil {
		t.Fatal(err)
	}
	if a[100] != 0 {
		t.Fatal("released chunk still holds data")
	}
	if err := r.Protect(0, 4096, false); err != nil {
		t.Fatal(err)
	}
	if err := r.UnmapChunk(2 * Granularity); err != nil {
		t.Fatal(err)
	}
}
