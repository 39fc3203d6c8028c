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
