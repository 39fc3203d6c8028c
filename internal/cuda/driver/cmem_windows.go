//go:build windows

package driver

// mapAnon answers ErrPlatform: the driver is not loaded on Windows, so no
// arena is needed.
func mapAnon(n int) ([]byte, error) { return nil, ErrPlatform }

func unmap(b []byte) {}
