package nccl

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadMissing(t *testing.T) {
	_, err := load([]string{"libnccl-not-here.so.2"})
	if !errors.Is(err, ErrNoNCCL) || !strings.Contains(err.Error(), "libnccl-not-here.so.2") {
		t.Fatalf("got %v, want ErrNoNCCL naming the library tried", err)
	}
}

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{Success: "ncclSuccess", InvalidArgument: "ncclInvalidArgument", InProgress: "ncclInProgress", 42: "ncclResult(42)"} {
		if got := r.String(); got != want {
			t.Errorf("%d: %q, want %q", int32(r), got, want)
		}
	}
	e := &Error{Call: "ncclAllReduce", Result: InvalidArgument, Detail: "invalid argument"}
	if got := e.Error(); got != "ncclAllReduce: ncclInvalidArgument (invalid argument)" {
		t.Errorf("Error() = %q", got)
	}
}

// TestVersion runs where NCCL is installed (the GPU machine).
func TestVersion(t *testing.T) {
	l, err := Load()
	if err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	v, err := l.Version()
	if err != nil || v < 20900 {
		t.Fatalf("version %d, %v: want NCCL 2.9 or newer", v, err)
	}
	if _, err := l.GetUniqueID(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: NCCL %d, ncclCommInitRankScalable: %v", l.Path, v, l.CanInitRank())
}
