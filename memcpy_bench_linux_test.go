package gpugraph_test

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	gg "github.com/gpugraph/gpugraph"
)

// BenchmarkCUDAMemcpyHtoD times Stream.Memcpy from host memory to the
// device, as a training loop copies each batch into its static input
// buffer: from an ordinary Go slice (pageable), from pageable memory mapped
// with transparent huge pages asked for, and from pinned memory (each copy
// then waited for with Synchronize). Sizes: the reference model's batch
// (512 KiB) and the large model's (8 MiB).
func BenchmarkCUDAMemcpyHtoD(b *testing.B) {
	d := openCUDA(b)
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	for _, size := range []int{512 << 10, 8 << 20} {
		dst, err := d.Malloc(size)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Free(dst)
		huge, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Munmap(huge)
		_ = unix.Madvise(huge, unix.MADV_HUGEPAGE)
		pinned, err := d.MallocHost(size)
		if err != nil {
			b.Fatal(err)
		}
		defer d.FreeHost(pinned)
		for _, src := range []struct {
			name string
			buf  []byte
		}{{"pageable", make([]byte, size)}, {"hugepage", huge}, {"pinned", pinned}} {
			for i := range src.buf {
				src.buf[i] = byte(i)
			}
			b.Run(fmt.Sprintf("%s/%dKiB", src.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					if err := s.Memcpy(gg.HtoD(dst, src.buf)); err != nil {
						b.Fatal(err)
					}
					if err := s.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
