//go:build !windows

package driver

import "golang.org/x/sys/unix"

// mapAnon maps n bytes of anonymous memory, outside the Go heap.
func mapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

func unmap(b []byte) { unix.Munmap(b) }
