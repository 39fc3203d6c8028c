package driver

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// fastCall against libc, which every test machine has: memcmp reads its
// three register arguments. (The launch path's stack arguments are covered
// by the GPU tests: cuLaunchKernel takes its kernel parameters as the 10th.)
func TestFastCall(t *testing.T) {
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	memcmp, err := purego.Dlsym(libc, "memcmp")
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
