package gpugraph_test

import (
	"errors"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestDiffBuildNativeTwoDevices builds the differential test's two-device
// capture programs (FuzzDifferential's inputs, as TestDifferentialCUDA
// makes them) on the fake native backend (native_fake_internal_test.go):
// the cuda backend's capture path, on two host devices. On two GPUs such
// programs were refused at build with "node belongs to another graph"
// (device 1's stream reported nodes of a second view of the capture's
// graph). Every program must build, with the program's shape, and each
// top-level node must run on the device the program placed it on. The
// fake cannot run graphs, and does not model stream-ordered allocation:
// programs with allocations are left out.
func TestDiffBuildNativeTwoDevices(t *testing.T) {
	built := 0
	for _, tg := range []string{"FuzzDifferential", "FuzzWholeGraphUpdate"} {
		for _, in := range diffInputs(t, tg, 300) {
			p, _ := decode(in)
			if !p.multi || !p.capture || hasAlloc(p.top) {
				continue
			}
			built++
			t.Run("", func(t *testing.T) {
				env := newFakeNativeDiffEnv(t, p)
				b, err := env.build(p)
				var e *gg.Error
				if err != nil && !errors.As(err, &e) {
					t.Fatalf("build: %v\n%v", err, p)
				}
				if err != nil {
					t.Fatalf("build refused: %v\n%v", err, p)
				}
				if err := checkShape(p, b); err != nil {
					t.Fatalf("shape: %v\n%v", err, p)
				}
				for _, nd := range p.top.nodes {
					if got := b.node[nd].Device().Properties().Ordinal; got != nd.dev {
						t.Fatalf("%s (%v) runs on device %d, placed on %d\n%v", nd.name, nd.kind, got, nd.dev, p)
					}
				}
			})
		}
	}
	if built < 10 {
		t.Fatalf("only %d two-device capture programs without allocations", built)
	}
	t.Logf("%d two-device capture programs built", built)
}

// hasAlloc reports whether g or a graph in it allocates.
func hasAlloc(g *dgraph) bool {
	for _, nd := range g.nodes {
		if nd.kind == dAlloc || nd.kind == dFree {
			return true
		}
		for _, b := range nd.body {
			if hasAlloc(b) {
				return true
			}
		}
	}
	return false
}

// newFakeNativeDiffEnv is newDiffEnv and openPeer on fake native devices,
// for building p.
func newFakeNativeDiffEnv(t *testing.T, p *diffProg) *diffEnv {
	d, d1 := gg.OpenFakeNative(t, 0), gg.OpenFakeNative(t, 1)
	env := &diffEnv{t: t, d: d, d1: d1, ptr: make([]gg.DevicePtr, len(p.res)), host: make([][]byte, len(p.res))}
	for i := range env.s {
		env.s[i] = must[*gg.Stream](t)(d.NewStream())
	}
	env.ev = must[*gg.Event](t)(d.NewEvent(0))
	env.s1 = must[*gg.Stream](t)(d1.NewStream())
	env.ev1 = must[*gg.Event](t)(d1.NewEvent(0))
	ok(t, d.EnablePeerAccess(d1))
	ok(t, d1.EnablePeerAccess(d))
	for i, r := range p.res {
		switch r.kind {
		case resDev, resCtr:
			env.ptr[i] = must[gg.DevicePtr](t)(env.dev(p, i).Malloc(r.size))
		case resHost:
			env.host[i] = make([]byte, r.size)
		}
	}
	return env
}
