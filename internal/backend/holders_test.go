package backend

import (
	"strings"
	"testing"
)

// TestCheckMemoryMove: the cases of the rule the two-GPU measurement
// (docs/driver-multidev.txt, run by the conformance scenario
// ExecUpdateHoldersMatrix) does not reach: memory no open device is known
// to hold, access one way, a third device, and what the refusals say.
func TestCheckMemoryMove(t *testing.T) {
	const none, host = HeldByNone, HeldByHost
	both := func(a, b int) bool { return true }
	oneWay := func(from, to int) bool { return from == 0 && to == 1 }
	pair01 := func(from, to int) bool { return from+to == 1 }
	for _, tc := range []struct {
		name    string
		isCopy  bool
		old, nu Holders
		peer    func(from, to int) bool
		refusal string // "" if taken
	}{
		{"memset within device 0", false, Holders{0, none}, Holders{0, none}, nil, ""},
		{"memset to device 1, peer access", false, Holders{0, none}, Holders{1, none}, both, "the destination would move from memory of device 0 to memory of device 1: a memset node's destination stays"},
		{"memset from memory no device holds", false, Holders{none, none}, Holders{1, none}, nil, ""},
		{"copy's destination to device 1, no access", true, Holders{0, 0}, Holders{1, 0}, nil, "only with peer access both ways between devices 0 and 1"},
		{"copy's destination to device 1, access one way", true, Holders{0, 0}, Holders{1, 0}, oneWay, "only with peer access both ways between devices 0 and 1"},
		{"copy's destination to device 1, access both ways", true, Holders{0, 0}, Holders{1, 0}, both, ""},
		{"copy's destination to device 2, access between 0 and 1 only", true, Holders{0, 1}, Holders{2, 1}, pair01, "between devices 0 and 2"},
		{"copy's destination to device 1, source of no known device", true, Holders{0, none}, Holders{1, none}, both, ""},
		{"copy's destination to device 1, host source", true, Holders{0, host}, Holders{1, host}, both, "only when the source is device memory"},
		{"copy's destination to the host", true, Holders{0, 0}, Holders{host, 0}, both, "the copy's destination would move from memory of device 0 to host memory"},
		{"copy's destination from memory of no known device to the host", true, Holders{none, 0}, Holders{host, 0}, both, "from device memory of no open device to host memory"},
		{"copy's destination within the host", true, Holders{host, 0}, Holders{host, 0}, nil, ""},
		{"copy's source to device 1, access both ways", true, Holders{0, 0}, Holders{0, 1}, both, "the copy's source would move from memory of device 0 to memory of device 1"},
		{"copy's sides both move: the destination is named", true, Holders{0, 0}, Holders{host, 1}, both, "the copy's destination would move"},
	} {
		mv := CheckMemoryMove(tc.isCopy, tc.old, tc.nu, tc.peer)
		switch {
		case tc.refusal == "" && mv != nil:
			t.Errorf("%s: refused: %v", tc.name, mv)
		case tc.refusal != "" && mv == nil:
			t.Errorf("%s: taken, want refused saying %q", tc.name, tc.refusal)
		case mv != nil && !strings.Contains(mv.String(), tc.refusal):
			t.Errorf("%s: %q, want it saying %q", tc.name, mv, tc.refusal)
		}
	}
}
