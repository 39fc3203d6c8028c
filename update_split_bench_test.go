//go:build linux

package gpugraph

import (
	"fmt"
	"os"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/backend"
)

// stubUpdateExec is a backend executable graph whose whole-graph update
// succeeds at once, doing nothing: in place of an Exec's backend, it leaves
// Exec.Update with only this package's own part to do (its checks, its
// locks, the result, the user object references).
type stubUpdateExec struct{ backend.Exec }

func (stubUpdateExec) Update(backend.Graph) (backend.UpdateInfo, error) {
	return backend.UpdateInfo{}, nil
}

// withStubUpdate runs fn with e's backend replaced by stubUpdateExec.
func withStubUpdate(e *Exec, fn func()) {
	be := e.be
	e.be = stubUpdateExec{be}
	defer func() { e.be = be }()
	fn()
}

// BenchmarkUpdateSplit splits the cost of Exec.Update per node between this
// package and the backend, on BenchmarkInstantiate's graphs (n kernel
// nodes; g and h differ in every kernel's argument), so that a gap to the
// native cuGraphExecUpdate can be placed. Variants, in ns/node:
//
//   - api: Exec.Update from g and h in turn: every node's parameters change
//     at every update.
//   - root: the same with a backend that does nothing (stubUpdateExec):
//     this package's part alone.
//   - backend: the backend's Update called directly: on host, the pairing,
//     checks and install; on cuda, cuGraphExecUpdate through the binding
//     (Device.Do: the thread locked, the context made current, purego).
//   - c-loop (cuda, with GG_INST_LOOP naming the library built from
//     tools/bench/native/instloop.c): cuGraphExecUpdate from C, from g and h in
//     turn as api does, on the goroutine that runs the timed loop, its
//     thread locked with the device's context current.
//   - api-same, c-loop-same: from g every time, so that after the first
//     update no parameter changes (what BenchmarkInstantiate's c-loop
//     measured before it alternated the graphs too): the difference from
//     api and c-loop is the driver's cost of changed parameters.
//
// Each variant updates once before its timed loop, so that runs of a few
// iterations (-benchtime 5x) do not time a cold first update.
func BenchmarkUpdateSplit(b *testing.B) {
	var loopUpd func(e, g, h uintptr, n int32) int32
	if lib := os.Getenv("GG_INST_LOOP"); lib != "" {
		h, err := purego.Dlopen(lib, purego.RTLD_NOW)
		if err != nil {
			b.Fatal(err)
		}
		purego.RegisterLibFunc(&loopUpd, h, "gg_update_loop")
	}
	for _, bk := range []string{BackendHost, BackendCUDA} {
		d, err := Open(bk)
		if err != nil {
			continue // no GPU
		}
		for _, n := range []int{10, 100, 1000, 10000} {
			g, h := instGraph(b, d, n, 1), instGraph(b, d, n, 2)
			e, err := g.Instantiate(0)
			if err != nil {
				b.Fatal(err)
			}
			// alternate returns the graph of the i-th update: g and h in
			// turn, or g every time (same).
			alternate := func(i int, same bool) *Graph {
				if same || i&1 == 0 {
					return g
				}
				return h
			}
			// bench times update; current: on the goroutine b.Run starts
			// for the timed loop, its thread locked, with the device's
			// context current (nativeCurrent), as the C loop needs.
			bench := func(name string, same bool, update func(src *Graph) error, current bool) {
				b.Run(fmt.Sprintf("%s/n=%d/%s", bk, n, name), func(b *testing.B) {
					if current {
						nativeCurrent(b, d)
					}
					i := 0
					if err := update(alternate(i, same)); err != nil { // warm, untimed
						b.Fatal(err)
					}
					for b.Loop() {
						i++
						if err := update(alternate(i, same)); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/node")
				})
			}
			api := func(src *Graph) error { _, err := e.Update(src); return err }
			bench("api", false, api, false)
			withStubUpdate(e, func() { bench("root", false, api, false) })
			bench("backend", false, func(src *Graph) error { _, err := e.be.Update(src.be); return err }, false)
			bench("api-same", true, api, false)
			if bk == BackendCUDA && loopUpd != nil {
				cloop := func(src *Graph) error {
					if r := loopUpd(native(e.be), src.NativeGraph(), src.NativeGraph(), 1); r != 0 {
						return newErr("gg_update_loop", ErrUnknown, "CUresult %d", r)
					}
					return nil
				}
				for _, same := range []bool{false, true} {
					name := "c-loop"
					if same {
						name = "c-loop-same"
					}
					// The C loop's calls take the context from the thread,
					// as the API's do inside Device.Do: the goroutine that
					// runs the timed loop locks its thread and makes the
					// context current there.
					bench(name, same, cloop, true)
				}
			}
			e.Destroy()
			g.Destroy()
			h.Destroy()
		}
		d.Close()
	}
}

// TestUpdateRootConstant checks that this package's part of Exec.Update
// (everything but the backend's update) allocates nothing and does not grow
// with the graph: on cuda that part is all the Go side adds to
// cuGraphExecUpdate (BenchmarkUpdateSplit's root variant times it).
func TestUpdateRootConstant(t *testing.T) {
	d, err := Open(BackendHost)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, n := range []int{10, 10000} {
		g, h := instGraph(t, d, n, 1), instGraph(t, d, n, 2)
		e, err := g.Instantiate(0)
		if err != nil {
			t.Fatal(err)
		}
		withStubUpdate(e, func() {
			i := 0
			allocs := testing.AllocsPerRun(100, func() {
				src := g
				if i++; i&1 == 1 {
					src = h
				}
				if _, err := e.Update(src); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("n=%d: Exec.Update's own part makes %v allocations per update, want 0", n, allocs)
			}
		})
		e.Destroy()
		g.Destroy()
		h.Destroy()
	}
}
