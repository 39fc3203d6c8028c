//go:build !linux

package osthread

import (
	"bytes"
	"runtime"
	"strconv"
)

// ID identifies the calling goroutine, by the id in its stack header: off
// Linux there is no cheap thread id, and a goroutine locked to its thread
// stands for the thread. It costs a stack header read (about a
// microsecond).
func ID() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}
