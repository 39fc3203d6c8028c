//go:build !linux

// Package driver binds the CUDA driver API; only Linux is supported.
package driver

import "errors"

// ErrNoDriver is returned by Load outside Linux.
var ErrNoDriver = errors.New("cuda: the cuda backend needs Linux")

// Driver is not available outside Linux.
type Driver struct{}

// Load fails outside Linux.
func Load() (*Driver, error) { return nil, ErrNoDriver }

// MemsetD32Async fails outside Linux. (The GPU tests of package gpugraph,
// which build everywhere, call it on a native stream.)
func (d *Driver) MemsetD32Async(dst uint64, value uint32, n int, stream uintptr) error {
	return ErrNoDriver
}
