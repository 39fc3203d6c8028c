package driver

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/dl"
)

// fastCall against libc, which every test machine has: memcmp reads its
// three register arguments. (The launch path's stack arguments are covered
// by the GPU tests: cuLaunchKernel takes its kernel parameters as the 10th.)
func TestFastCall(t *testing.T) {
	libc, err := dl.Open("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	memcmp, err := dl.Sym(libc, "memcmp")
	if err != nil {
		t.Fatal(err)
	}
	a, b := []byte("gpugraph-a"), []byte("gpugraph-b")
	for _, c := range []struct {
		n    uintptr
		want int32
	}{{9, 0}, {10, -1}} {
		r := fastCall(memcmp, [12]uintptr{uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0])), c.n})
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
		if got := int32(r); (got < 0) != (c.want < 0) || (got == 0) != (c.want == 0) {
			t.Fatalf("memcmp(%d) = %d, want sign of %d", c.n, got, c.want)
		}
	}
}

// BenchmarkFastCall is the price of the foreign call alone, the floor of
// the Go side of every launch: fastCall and purego.SyscallN into libc's
// labs, which does nothing worth timing. The launch benchmarks' Go-over-C
// gap (BenchmarkCUDALaunchPath) can be no smaller than "fastcall".
func BenchmarkFastCall(b *testing.B) {
	libc, err := dl.Open("libc.so.6")
	if err != nil {
		b.Skipf("no libc.so.6: %v", err)
	}
	labs, err := dl.Sym(libc, "labs")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fastcall", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if r := fastCall(labs, [12]uintptr{uintptr(-i)}); r != uintptr(i) {
				b.Fatalf("labs(%d) = %d", -i, r)
			}
		}
	})
	b.Run("purego", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if r, _, _ := purego.SyscallN(labs, uintptr(-i)); r != uintptr(i) {
				b.Fatalf("labs(%d) = %d", -i, r)
			}
		}
	})
}
