package side

// The native side by side: the cuda backend's launch, instantiate and update
// against the same driver calls made from C in this process, on the same
// CUfunction, CUgraph, CUgraphExec, CUstream and OS thread (the sources are
// tools/bench/native, compiled here with the C compiler against the CUDA
// headers). What is left between the two columns is gpugraph's path above
// the driver: its checks, its bookkeeping and the foreign call.
//
// Variants are interleaved: every round runs each variant once, the order
// reversed every other round, so that drifts of the machine fall on all
// alike. The table gives each variant's median over the rounds, the ratio of
// the medians to the C loop's, and the median of the ratios of the rounds
// (each API sample over the C sample of its own round), which a slow drift
// moves less. The measurement (native.go) runs on Linux only; the
// configuration and the report are here.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// NativeConfig is what Native measures.
type NativeConfig struct {
	CUDA   string  // the CUDA toolkit: CUDA/include/cuda.h, CUDA/lib64/stubs
	CC     string  // C compiler
	Rounds int     // interleaved rounds
	Time   float64 // seconds per variant per round
	Sizes  []int   // node counts for instantiate and update
}

// DefaultNativeConfig returns the defaults: /usr/local/cuda, gcc, 7 rounds
// of 0.3 s, graphs of 10 to 10,000 nodes.
func DefaultNativeConfig() NativeConfig {
	return NativeConfig{CUDA: "/usr/local/cuda", CC: "gcc", Rounds: 7, Time: 0.3, Sizes: []int{10, 100, 1000, 10000}}
}

func (cfg NativeConfig) check() error {
	switch {
	case cfg.Rounds < 1:
		return configf("%d rounds: need at least 1", cfg.Rounds)
	case !(cfg.Time > 0):
		return configf("time %g s: need more than 0", cfg.Time)
	case len(cfg.Sizes) == 0:
		return configf("no graph sizes")
	}
	for _, n := range cfg.Sizes {
		if n < 1 {
			return configf("graph size %d: need at least 1", n)
		}
	}
	return nil
}

// nativeVariant is one row of a comparison: op does k units of work
// (batches of launches, instantiations or updates).
type nativeVariant struct {
	name string
	ref  int // index of its C reference in the same comparison; -1: a reference, -2: none
	op   func(k int) error
}

// nativeTable is one comparison: its variants, each one's samples in round
// order (ns per unit), and how its rows print them (divided by per, with
// prec decimals).
type nativeTable struct {
	vs      []nativeVariant
	samples [][]float64
	per     float64
	prec    int
}

// nativeSized is the instantiate and update comparison of graphs of n
// nodes.
type nativeSized struct {
	n int
	t nativeTable
}

// NativeReport is the outcome of Native. Write prints it as bench --vs
// native does.
type NativeReport struct {
	Config       NativeConfig
	Date         time.Time
	Device, Host string
	launch       nativeTable
	// gpugraph's own path above the bare call (paired), and the Go
	// allocations per launch, of Stream.Launch and Exec.Launch
	ownStream, ownExec       float64
	allocsStream, allocsExec float64
	inst                     []nativeSized
}

// Write prints the machine, the launch path table and the instantiate and
// update tables.
func (r *NativeReport) Write(w io.Writer) error {
	_, err := io.WriteString(w, r.String())
	return err
}

func (r *NativeReport) String() string {
	var b strings.Builder
	head := func() {
		fmt.Fprintf(&b, "  %-28s %9s %6s %6s   %s\n", "variant", "median", "ratio", "paired", "[runs, sorted]")
	}
	fmt.Fprintf(&b, "gpugraph against the driver called from C, in one process, same handles and thread\n")
	fmt.Fprintf(&b, "date:   %s\n", r.Date.UTC().Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(&b, "device: %s\n", r.Device)
	fmt.Fprintf(&b, "host:   %s\n", r.Host)
	fmt.Fprintf(&b, "runs:   %d interleaved rounds, %gs per variant per round; ratio = median / C median, paired = median of the rounds' ratios\n", r.Config.Rounds, r.Config.Time)
	fmt.Fprintf(&b, "\nlaunch path: %.0f launches of an empty kernel (or a 1-node graph of it) + Synchronize, µs per launch\n", r.launch.per/1000)
	head()
	printVariants(&b, r.launch)
	fmt.Fprintf(&b, "  gpugraph's own path above the bare call (paired): Stream.Launch %.2f, Exec.Launch %.2f\n", r.ownStream, r.ownExec)
	fmt.Fprintf(&b, "  Go allocations per launch: Stream.Launch %.0f, Exec.Launch %.0f\n", r.allocsStream, r.allocsExec)
	fmt.Fprintf(&b, "\ninstantiate and update: graphs of n kernel nodes (chains of 10 from one root), ns per node;\n")
	fmt.Fprintf(&b, "  update alternates two graphs whose every kernel argument differs; host: the host backend, API only\n")
	head()
	for _, s := range r.inst {
		fmt.Fprintf(&b, " n=%d\n", s.n)
		printVariants(&b, s.t)
	}
	return b.String()
}

// printVariants prints one comparison's rows: each variant's sorted runs
// (divided by t.per), median, ratio of medians to its reference and median
// of the per-round ratios.
func printVariants(w io.Writer, t nativeTable) {
	for i, v := range t.vs {
		s := make([]float64, len(t.samples[i]))
		for j, x := range t.samples[i] {
			s[j] = x / t.per
		}
		sorted := slices.Clone(s)
		slices.Sort(sorted)
		runs := make([]string, len(sorted))
		for j, x := range sorted {
			runs[j] = fmt.Sprintf("%.*f", t.prec, x)
		}
		ratio, paired := "1.00", "1.00"
		if v.ref == -2 {
			ratio, paired = "-", "-"
		}
		if v.ref >= 0 {
			ratio = fmt.Sprintf("%.2f", median(s)/median(t.samples[v.ref])*t.per)
			rs := make([]float64, len(s))
			for j := range s {
				rs[j] = t.samples[i][j] / t.samples[v.ref][j]
			}
			paired = fmt.Sprintf("%.2f", median(rs))
		}
		fmt.Fprintf(w, "  %-28s %9.*f %6s %6s   [%s]\n", v.name, t.prec, median(s), ratio, paired, strings.Join(runs, " "))
	}
}
