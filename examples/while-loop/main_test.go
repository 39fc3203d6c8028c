package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRun runs the example as main does.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	if !strings.HasSuffix(out.String(), "OK\n") {
		t.Fatalf("output does not end in OK:\n%s", out.String())
	}
}
