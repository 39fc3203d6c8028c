//go:build !linux

package main

import "os"

// isTerminalFile reports whether f is a character device, as a terminal is
// (so are a few other devices: off Linux the progress line may then be
// shown where it is not needed, never hidden where it is).
func isTerminalFile(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
