package main

import (
	"bytes"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestRun runs the pipeline on two host devices, as main does.
func TestRun(t *testing.T) {
	defer gg.SetHostDeviceCount(1)
	var out bytes.Buffer
	if err := run(&out, "host"); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	if !strings.HasSuffix(out.String(), "OK\n") {
		t.Fatalf("output does not end in OK:\n%s", out.String())
	}
}
