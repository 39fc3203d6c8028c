//go:build unix

package gpugraph_test

import (
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/bench"
)

// TestIdleCost checks that an idle host device burns no CPU: after
// launches, the stream's worker and the pool's helpers spin for a moment
// and then park. It logs the CPU used over the idle window (getrusage) and
// the wake-up latency that parking costs: a 1-node graph launched and
// synchronized after 20 ms idle, against the same launch back to back.
// GG_IDLE_SECONDS sets the window (1 s by default; docs/performance-log.md
// quotes 10 s).
func TestIdleCost(t *testing.T) {
	window := time.Second
	if v := os.Getenv("GG_IDLE_SECONDS"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatal(err)
		}
		window = time.Duration(s * float64(time.Second))
	}
	d, err := gg.Open("host")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := bench.BuildGraph(d, bench.Shapes[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := g.Instantiate(0)
	if err != nil {
		t.Fatal(err)
	}
	launch := func() time.Duration {
		t0 := time.Now()
		if err := ex.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	var hot, cold []time.Duration
	for range 20 {
		launch()
		hot = append(hot, launch()) // right after another: the worker is awake
		time.Sleep(20 * time.Millisecond)
		cold = append(cold, launch()) // after 20 ms idle: the worker has parked
	}
	slices.Sort(hot)
	slices.Sort(cold)

	time.Sleep(50 * time.Millisecond) // past any spinning
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, t0 := cpu(), time.Now()
	time.Sleep(window)
	used, wall := cpu()-c0, time.Since(t0)
	t.Logf("idle %v: %v of CPU (%.3f %% of one core); 1-node launch + synchronize: %v back to back, %v after 20 ms idle (medians of 20)",
		wall.Round(time.Millisecond), used, 100*float64(used)/float64(wall), hot[len(hot)/2], cold[len(cold)/2])
	if used > wall/20 {
		t.Fatalf("an idle device used %v of CPU in %v: its workers do not park", used, wall)
	}
}
