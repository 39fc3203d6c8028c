//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintVariants(t *testing.T) {
	vs := []nativeVariant{{"api", 1, nil}, {"C loop", -1, nil}, {"host", -2, nil}}
	// Three rounds: the API's medians 2.2 against the C loop's 2.0 (1.10),
	// its rounds' ratios 1.05, 1.10, 1.20 (paired 1.10).
	samples := [][]float64{{2100, 2200, 2400}, {2000, 2000, 2000}, {5000, 6000, 7000}}
	var b bytes.Buffer
	printVariants(&b, vs, samples, 1000, 2)
	got := b.String()
	for _, want := range []string{"api                               2.20   1.10   1.10   [2.10 2.20 2.40]",
		"C loop                            2.00   1.00   1.00", "host                              6.00      -      -"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

func TestNativeConfigCheck(t *testing.T) {
	for _, c := range []nativeConfig{{Rounds: 0, Time: 1, Sizes: []int{1}}, {Rounds: 1, Time: 0, Sizes: []int{1}},
		{Rounds: 1, Time: 1}, {Rounds: 1, Time: 1, Sizes: []int{0}}} {
		if c.check() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := defaultNativeConfig().check(); err != nil {
		t.Error(err)
	}
}
