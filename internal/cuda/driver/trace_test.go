package driver

import (
	"bytes"
	"testing"
)

// TestTraceLine: a call is a line before it (its number, the entry point,
// the argument words in hex) and one after (its number and CUresult);
// nothing once the trace stops.
func TestTraceLine(t *testing.T) {
	var b bytes.Buffer
	TraceTo(&b)
	t0 := trace.Load()
	t0.end(t0.begin("cuGraphLaunch", []uintptr{0x7f00, 0}), 0)
	n := t0.begin("cuStreamSynchronize", []uintptr{0x10})
	t0.end(n, 719)
	TraceTo(nil)
	t0.end(t0.begin("cuCtxSynchronize", nil), 0) // a call in flight when the trace stopped
	if trace.Load() != nil {
		t.Fatal("the trace goes on after TraceTo(nil)")
	}
	want := "1 cuGraphLaunch 0x7f00 0x0\n1 = 0\n2 cuStreamSynchronize 0x10\n2 = 719\n"
	if b.String() != want {
		t.Errorf("trace %q, want %q", b.String(), want)
	}
}
