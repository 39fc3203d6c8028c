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

// Call fails outside Linux.
func (d *Driver) Call(name string, args ...uintptr) error { return ErrNoDriver }
