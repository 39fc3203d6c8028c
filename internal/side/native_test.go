package side

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPrintVariants(t *testing.T) {
	vs := []nativeVariant{{"api", 1, nil}, {"C loop", -1, nil}, {"host", -2, nil}}
	// Three rounds: the API's medians 2.2 against the C loop's 2.0 (1.10),
	// its rounds' ratios 1.05, 1.10, 1.20 (paired 1.10).
	samples := [][]float64{{2100, 2200, 2400}, {2000, 2000, 2000}, {5000, 6000, 7000}}
	var b strings.Builder
	printVariants(&b, nativeTable{vs: vs, samples: samples, per: 1000, prec: 2})
	got := b.String()
	for _, want := range []string{"api                               2.20   1.10   1.10   [2.10 2.20 2.40]",
		"C loop                            2.00   1.00   1.00", "host                              6.00      -      -"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// The report prints its sections in bench --vs native's order, whatever
// measured it.
func TestNativeReport(t *testing.T) {
	vs := []nativeVariant{{"Stream.Launch", 1, nil}, {"C loop, cuLaunchKernel", -1, nil}}
	r := &NativeReport{Config: NativeConfig{Rounds: 2, Time: 0.3}, Date: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), Device: "NVIDIA H100", Host: "16 CPUs, x",
		launch:    nativeTable{vs: vs, samples: [][]float64{{2.2e6, 2.0e6}, {2e6, 2e6}}, per: 1e6, prec: 3},
		ownStream: 1.05, ownExec: 1.02,
		inst: []nativeSized{{10, nativeTable{vs: vs, samples: [][]float64{{100, 120}, {100, 100}}, per: 10, prec: 1}}}}
	got := r.String()
	want := []string{
		"gpugraph against the driver called from C, in one process, same handles and thread\n",
		"date:   2026-11-27 10:00:00 UTC\ndevice: NVIDIA H100\nhost:   16 CPUs, x\n",
		"runs:   2 interleaved rounds, 0.3s per variant per round;",
		"\nlaunch path: 1000 launches of an empty kernel (or a 1-node graph of it) + Synchronize, µs per launch\n",
		"  Stream.Launch                    2.100   1.05   1.05   [2.000 2.200]\n",
		"gpugraph's own path above the bare call (paired): Stream.Launch 1.05, Exec.Launch 1.02\n  Go allocations per launch: Stream.Launch 0, Exec.Launch 0\n",
		"\ninstantiate and update: graphs of n kernel nodes",
		" n=10\n  Stream.Launch                     11.0   1.10   1.10   [10.0 12.0]\n",
	}
	last := 0
	for _, w := range want {
		i := strings.Index(got, w)
		if i < last {
			t.Fatalf("report lacks %q after byte %d:\n%s", w, last, got)
		}
		last = i
	}
}

func TestNativeConfigCheck(t *testing.T) {
	for _, c := range []NativeConfig{{Rounds: 0, Time: 1, Sizes: []int{1}}, {Rounds: 1, Time: 0, Sizes: []int{1}},
		{Rounds: 1, Time: 1}, {Rounds: 1, Time: 1, Sizes: []int{0}}} {
		if err := c.check(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want a configuration error", c, err)
		}
	}
	if err := DefaultNativeConfig().check(); err != nil {
		t.Error(err)
	}
}
