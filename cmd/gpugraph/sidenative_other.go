//go:build !linux

package main

import (
	"errors"
	"io"

	gg "github.com/gpugraph/gpugraph"
)

type nativeConfig struct {
	CUDA, CC string
	Rounds   int
	Time     float64
	Sizes    []int
}

func defaultNativeConfig() nativeConfig { return nativeConfig{} }

// benchNative needs the CUDA driver, which gpugraph loads on Linux only.
func benchNative(io.Writer, io.Writer, *gg.Device, nativeConfig) error {
	return errors.New("--vs native: the cuda backend runs on Linux only")
}
