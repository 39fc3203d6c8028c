//go:build !linux

// Package cuda binds the CUDA driver API; only Linux is supported.
package cuda

import "errors"

// ErrNoDriver is returned by Load outside Linux.
var ErrNoDriver = errors.New("cuda: the cuda backend needs Linux")
