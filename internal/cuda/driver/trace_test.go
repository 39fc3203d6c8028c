package driver

import (
	"bytes"
	"testing"
)

// TestTraceLine: one call, one line: its number, the entry point, the
// argument words in hex and the CUresult; nothing once the trace stops.
func TestTraceLine(t *testing.T) {
	var b bytes.Buffer
	TraceTo(&b)
	trace.Load().log("cuGraphLaunch", []uintptr{0x7f00, 0}, 0)
	trace.Load().log("cuStreamSynchronize", []uintptr{0x10}, 719)
	TraceTo(nil)
	if trace.Load() != nil {
		t.Fatal("the trace goes on after TraceTo(nil)")
	}
	want := "1 cuGraphLaunch 0x7f00 0x0 = 0\n2 cuStreamSynchronize 0x10 = 719\n"
	if b.String() != want {
		t.Errorf("trace %q, want %q", b.String(), want)
	}
}
