//go:build !unix

package host

// Where memory cannot be mapped or locked, pinned host memory is memory of
// the Go heap, kept alive by the gpugraph package until it is freed.

func mapHost(n int) ([]byte, error) { return make([]byte, n), nil }

func unmapHost([]byte) error { return nil }

func lockHost([]byte) {}

func unlockHost([]byte) {}
