package gpugraph

import (
	"fmt"
	"testing"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// The root package's part of a launch, measured apart from any driver: a
// stream or executable graph whose backend does nothing but, optionally,
// evict the caches as the driver's microseconds inside a real launch do.
// Between two cuda launches the driver has run for 2-4 µs, and what the
// root path reads (the Stream, the Device, the Kernel, their code) is no
// longer in the first-level cache: the path costs its cache misses more
// than its instructions. Time on this machine says little; instructions
// and misses per launch are exact under cachegrind:
//
//	go test -c -o /tmp/gg.test . && valgrind --tool=cachegrind --cache-sim=yes \
//	    /tmp/gg.test -test.run '^$' -test.bench 'RootLaunchPath/stream/evict=256KiB' -test.benchtime 20000x
//
// and the same with bare/evict=256KiB, subtracted, divided by the launches
// (docs/performance-log.md, "The stream launch path").

// evictBuf is touched line by line to evict the caches.
var evictBuf = make([]uint64, 4<<20/8)

//go:noinline
func evict(words int) {
	for i := 0; i < words; i += 8 { // one store per 64-byte line
		evictBuf[i]++
	}
}

type evictStream struct {
	backend.Stream
	words int
}

func (s evictStream) Launch(*backend.Launch) error { evict(s.words); return nil }

type evictExec struct {
	backend.Exec
	words int
}

func (e evictExec) Launch(backend.Stream) error { evict(e.words); return nil }

func BenchmarkRootLaunchPath(b *testing.B) {
	k := &Kernel{Name: "empty", CUDA: `extern "C" __global__ void empty() {}`, Go: func(Block, Args) {}}
	one := Dim1(1)
	for _, kib := range []int{0, 256} {
		d, err := Open(BackendHost)
		if err != nil {
			b.Fatal(err)
		}
		s, err := d.NewStream()
		if err != nil {
			b.Fatal(err)
		}
		g, err := d.NewGraph()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.AddKernelNode(KernelParams{Kernel: k, Grid: one, Block: one}); err != nil {
			b.Fatal(err)
		}
		x, err := g.Instantiate(0)
		if err != nil {
			b.Fatal(err)
		}
		words := kib << 10 / 8
		sbe, xbe := s.be, x.be
		s.be, x.be = evictStream{sbe, words}, evictExec{xbe, words}
		for _, v := range []struct {
			name   string
			launch func() error
		}{
			{"stream", func() error { return s.Launch(k, one, one) }},
			{"exec", func() error { return x.Launch(s) }},
			{"bare", func() error { evict(words); return nil }},
		} {
			b.Run(fmt.Sprintf("%s/evict=%dKiB", v.name, kib), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := v.launch(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		s.be, x.be = sbe, xbe
		d.Close()
	}
}
