package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// TestREADME: the program in the README is this file, byte for byte, so
// the README's program is the one these tests compile and run.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```go\n")
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok {
		t.Fatal("README.md has no ```go block")
	}
	if block != string(src) {
		t.Errorf("the README's Go program differs from examples/quickstart/main.go: copy main.go into the README's ```go block\nREADME:\n%s", block)
	}
}

// TestRun runs the program and checks what it prints.
func TestRun(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, r)
	if want := "[6 12 18 24]\n[60 120 180 240]\n"; out.String() != want {
		t.Errorf("quickstart printed %q, want %q", out.String(), want)
	}
}
