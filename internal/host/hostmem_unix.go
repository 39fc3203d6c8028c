//go:build unix

package host

import "syscall"

// mapHost maps n bytes of anonymous memory and tries to lock them.
func mapHost(n int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	lockHost(b)
	return b, nil
}

func unmapHost(b []byte) error { return syscall.Munmap(b) }

// lockHost locks b in RAM if the process may (RLIMIT_MEMLOCK); a refusal
// changes nothing the backend does.
func lockHost(b []byte) { _ = syscall.Mlock(b) }

func unlockHost(b []byte) { _ = syscall.Munlock(b) }
