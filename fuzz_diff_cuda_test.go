package gpugraph_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// TestDifferentialCUDA runs the two differential targets on the cuda
// backend, over their seeds, their checked-in corpus and random inputs
// ($GPUGRAPH_DIFF_INPUTS, default 300): each input runs on host and on cuda,
// both must match the reference after every launch, and both must refuse
// the same things (the program, a change, an update) with the same error
// code, since the host backend decides as the driver does. Every input
// opens and closes its own cuda device, so this also runs Close on
// hundreds of random graphs, memory nodes and captures left behind.
//
// Two-device programs (about one input in eight) run on two GPUs where
// the machine has them; with one GPU they run on two host devices only,
// against the reference, and the log says how many did.
func TestDifferentialCUDA(t *testing.T) {
	// The keeps hold the primary contexts (each input's Open retains them,
	// cheaply): device 0's, and device 1's for the two-device programs.
	keep0 := openCUDA(t) // skips the test without a GPU
	gpus, err := gg.DeviceCount(gg.BackendCUDA)
	ok(t, err)
	keeps := append([]*gg.Device{keep0}, openDevice1(t, gpus)...)
	defer func() {
		for _, d := range keeps {
			d.Close()
		}
	}()
	keep := keeps[0]
	lost := 0 // contexts lost to a fault on the GPU
	t.Logf("%d GPU(s): two-device programs run on %s", gpus, map[bool]string{true: "GPUs 0 and 1", false: "two host devices only"}[gpus >= 2])
	n := 300
	logAll := os.Getenv("GPUGRAPH_DIFF_LOG") == "1"
	if v, err := strconv.Atoi(os.Getenv("GPUGRAPH_DIFF_INPUTS")); err == nil {
		n = v
	}
	if testing.Short() {
		n = min(n, 40)
	}
	freeBefore, _, err := keep.MemGetInfo()
	ok(t, err)
	targets := []struct {
		name string
		run  func(*testing.T, string, []byte) diffRun
	}{
		{"FuzzDifferential", runDifferential},
		{"FuzzWholeGraphUpdate", runWholeGraphUpdate},
	}
	for _, tg := range targets {
		inputs := diffInputs(t, tg.name, n)
		var refused, differ, multi, hostOnly int
		gaps := map[string]int{}
		for i, in := range inputs {
			var host, cuda diffRun
			var hostOK, cudaOK bool
			p, _ := decode(in)
			if p.multi {
				multi++
			}
			t.Run(fmt.Sprintf("%s/%03d", tg.name, i), func(t *testing.T) {
				hostOK = t.Run("host", func(t *testing.T) { host = tg.run(t, gg.BackendHost, in) })
				if p.multi && gpus < 2 {
					hostOnly++
					return
				}
				cudaOK = t.Run("cuda", func(t *testing.T) { cuda = tg.run(t, gg.BackendCUDA, in) })
				if logAll {
					// GPUGRAPH_DIFF_LOG=1: every input's program and what
					// cuda did, to read what ran before a fault.
					t.Logf("program:\n%v\nchanges on cuda:\n\t%s", p, strings.Join(cuda.changes, "\n\t"))
				}
				if diffLast != nil && diffLast.run.gap != "" {
					gaps[diffLast.run.gap]++
					return
				}
				if hostOK && cudaOK && (host.refused != cuda.refused || !slices.Equal(host.refusals, cuda.refusals)) {
					if g := knownGap(host, cuda); g != "" {
						gaps[g]++
						return
					}
					differ++
					p, _ := decode(in)
					t.Errorf("the backends decide differently\nhost: %q\ncuda: %q\nhost, in full:\n\t%s\ncuda, in full:\n\t%s\nprogram:\n%v\nchanges on host:\n\t%s\nchanges on cuda:\n\t%s\ninput: %q",
						host.refusals, cuda.refusals, strings.Join(host.errs, "\n\t"), strings.Join(cuda.errs, "\n\t"), p,
						strings.Join(host.changes, "\n\t"), strings.Join(cuda.changes, "\n\t"), in)
				}
			})
			if cuda.refused {
				refused++
			}
			// A fault on the GPU (an illegal address, a launch failure) is
			// sticky: the input is a finding, and the run goes on after a
			// reset of the contexts (Close resets a context it finds
			// lost), up to three times.
			for _, d := range keeps {
				if err := d.Synchronize(); err != nil {
					lost++
					t.Errorf("%s/%03d left GPU %d unusable: %v\nit may need the inputs before it: try -test.run 'TestDifferentialCUDA$/^%s$/^(%03d|%03d)$' (under compute-sanitizer to see an access), or GPUGRAPH_DIFF_LOG=1",
						tg.name, i, d.Properties().Ordinal, err, tg.name, max(i-1, 0), i)
					for _, k := range keeps {
						k.Close()
					}
					if lost == 3 {
						keeps = nil
						t.Fatalf("three lost contexts: stopping")
					}
					k0, err := gg.Open(gg.BackendCUDA)
					if err != nil {
						keeps = nil
						t.Fatalf("after the lost context the device does not open again (the driver kept the context): %v", err)
					}
					keeps = append([]*gg.Device{k0}, openDevice1(t, gpus)...)
					keep = keeps[0]
					break
				}
			}
		}
		t.Logf("%s: %d inputs (%d of two devices), %d refused on cuda, %d decided differently", tg.name, len(inputs), multi, refused, differ)
		if hostOnly > 0 {
			t.Logf("%s: %d two-device inputs ran on two host devices only (against the reference): the machine has %d GPU", tg.name, hostOnly, gpus)
		}
		for g, n := range gaps {
			t.Logf("%s: known gap, %d inputs: %s", tg.name, n, g)
		}
	}
	ok(t, keep.Synchronize())
	freeAfter, _, err := keep.MemGetInfo()
	ok(t, err)
	t.Logf("free device memory %d MiB before, %d MiB after; %d contexts lost", freeBefore>>20, freeAfter>>20, lost)
	if lost == 0 && freeAfter+64<<20 < freeBefore {
		t.Errorf("free device memory fell by %d MiB over the inputs", (freeBefore-freeAfter)>>20)
	}
}

// diffInputs returns a target's seeds, its corpus under testdata/fuzz and n
// random inputs (fixed seed, so a failure reproduces).
func diffInputs(t *testing.T, target string, n int) [][]byte {
	var out [][]byte
	for _, s := range diffSeeds {
		out = append(out, s.in)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	for _, f := range files {
		in, err := readCorpusFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, in)
	}
	rng := rand.New(rand.NewPCG(16, uint64(len(target))))
	for range n {
		in := make([]byte, 8+rng.IntN(maxDiffProgram-8))
		for j := range in {
			in[j] = byte(rng.Uint32())
		}
		out = append(out, in)
	}
	return out
}

// readCorpusFile reads a one-value []byte file of go test's corpus
// ("go test fuzz v1" then `[]byte("...")`).
func readCorpusFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, found := strings.CutPrefix(line, "[]byte("); found {
			s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
			return []byte(s), err
		}
	}
	return nil, fmt.Errorf("no []byte value")
}

// knownGap names the known way (docs/reliability.md, "Host and driver")
// in which the two runs of one input decide differently, or is "": those
// are counted, not failed; any other difference fails the test.
// There are none now; a gap found later goes here, explained, until it is
// closed.
func knownGap(host, cuda diffRun) string { return "" }

// openDevice1 opens device 1, when there are two GPUs.
func openDevice1(t *testing.T, gpus int) []*gg.Device {
	if gpus < 2 {
		return nil
	}
	return []*gg.Device{must[*gg.Device](t)(gg.Open(gg.BackendCUDA, gg.WithOrdinal(1)))}
}
