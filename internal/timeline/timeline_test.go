package timeline

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const mib = 1 << 20

// small is a four-layer step: activations live from their forward step to
// their backward step, a temporary reuses a freed range, the output
// outlives the graph; names need escaping.
func small() Layout {
	return Layout{
		Title: `mlp <train> step & "update"`,
		Steps: []string{"alloc x", "fc1 fwd", "relu fwd", "fc2 fwd", "loss", "fc2 bwd", "relu bwd", "fc1 bwd", "sgd", "free x"},
		Allocs: []Alloc{
			{Name: "x", Offset: 0, Size: 3 * mib, Start: 0, End: 9, Phys: []int{0, 1}},
			{Name: "h1", Offset: 3 * mib, Size: 2 * mib, Start: 1, End: 7, Phys: []int{1, 2}},
			{Name: "a1", Offset: 6 * mib, Size: 2 * mib, Start: 2, End: 6, Phys: []int{3}},
			{Name: "logits", Offset: 8 * mib, Size: 512 << 10, Start: 3, End: 5, Phys: []int{4}},
			{Name: "dlogits & tmp", Offset: 8 * mib, Size: 1 * mib, Start: 5, End: 8, Phys: []int{4}},
			{Name: "grad norm", Offset: 10 * mib, Size: 512, Start: 7, End: 10, Phys: []int{3}},
		},
		ChunkBytes:      2 * mib,
		ReservedBytes:   12 * mib,
		LowerBoundBytes: 8*mib + 512,
	}
}

func render(t *testing.T, l Layout) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, l); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Layout
	}{
		{"small", small()},
		{"nophys", func() Layout {
			l := small()
			l.Title = "cuda backend"
			l.ChunkBytes = 0
			for i := range l.Allocs {
				l.Allocs[i].Phys = nil
			}
			return l
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := render(t, tc.l)
			path := filepath.Join("testdata", tc.name+".svg")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from the output (run go test -update and review the diff)", path)
			}
		})
	}
}

// parse decodes an SVG and returns its elements' names in order, the text
// of every <title>, and the root's width and height.
func parse(t *testing.T, svg []byte) (elems []string, titles []string, w, h float64) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	d.Strict = true
	var inTitle bool
	var cur strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elems = append(elems, tok.Name.Local)
			if len(elems) == 1 {
				if tok.Name.Space != "http://www.w3.org/2000/svg" || tok.Name.Local != "svg" {
					t.Fatalf("root is %v", tok.Name)
				}
				for _, a := range tok.Attr {
					v, _ := strconv.ParseFloat(a.Value, 64)
					switch a.Name.Local {
					case "width":
						w = v
					case "height":
						h = v
					}
				}
			}
			if tok.Name.Local == "title" {
				inTitle = true
				cur.Reset()
			}
		case xml.CharData:
			if inTitle {
				cur.Write(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "title" {
				inTitle = false
				titles = append(titles, cur.String())
			}
		}
	}
	return elems, titles, w, h
}

func TestWellFormed(t *testing.T) {
	l := small()
	l.Steps = append([]string(nil), l.Steps...)
	l.Steps[0] = "bad \x01 <char> & ]]> \"quotes\" 'apos' \u2028"
	elems, titles, _, _ := parse(t, render(t, l))
	if elems[0] != "svg" {
		t.Fatalf("root %q", elems[0])
	}
	var step0, x, title bool
	for _, s := range titles {
		step0 = step0 || strings.HasPrefix(s, "step 0: bad \uFFFD <char> & ]]> \"quotes\" 'apos'")
		if strings.HasPrefix(s, "x\n") {
			x = true
			for _, want := range []string{"size 3.0 MiB (3145728 B)", "virtual [0x0, 0x300000)", "allocated at step 0", "freed at step 9 (free x)", "physical chunks 0-1"} {
				if !strings.Contains(s, want) {
					t.Errorf("x's tooltip %q lacks %q", s, want)
				}
			}
		}
	}
	if !step0 || !x {
		t.Fatalf("tooltips missing (step 0: %v, x: %v) in %q", step0, x, titles)
	}
	out := string(render(t, l))
	title = strings.Contains(out, "mlp &lt;train&gt; step &amp; &#34;update&#34;")
	if !title {
		t.Fatal("the title is not escaped as expected")
	}
}

func TestEdgeCases(t *testing.T) {
	t.Run("no allocations", func(t *testing.T) {
		l := Layout{Steps: []string{"a", "b"}}
		out := render(t, l)
		parse(t, out)
		if !bytes.Contains(out, []byte("0 allocations · 2 steps")) || !bytes.Contains(out, []byte("not known for this graph")) {
			t.Fatalf("unexpected output:\n%s", out)
		}
	})
	t.Run("outlives the graph", func(t *testing.T) {
		l := Layout{Steps: []string{"alloc", "use"}, Allocs: []Alloc{{Name: "out", Size: 100, Start: 0, End: 2}}}
		out := render(t, l)
		_, titles, _, _ := parse(t, out)
		found := false
		for _, s := range titles {
			found = found || strings.HasPrefix(s, "out\n") && strings.Contains(s, "outlives the graph")
		}
		if !found {
			t.Fatalf("no tooltip says the allocation outlives the graph: %q", titles)
		}
		// The arrow past the plot's right edge.
		if n := strings.Count(string(out), `<path d="M`); n != 3 { // key arrow, live line, this arrow
			t.Fatalf("%d paths", n)
		}
	})
	t.Run("one step, zero-size and zero-length", func(t *testing.T) {
		l := Layout{Steps: []string{"only"}, Allocs: []Alloc{{Name: "z", Start: 0, End: 0}, {Name: "o", Size: 1, Start: 0, End: 1}}, ChunkBytes: 2 * mib}
		l.Allocs[0].Phys = []int{0}
		parse(t, render(t, l))
	})
	for _, tc := range []struct {
		name string
		l    Layout
		want string
	}{
		{"no steps", Layout{}, "no steps"},
		{"nil steps with allocations", Layout{Allocs: []Alloc{{Name: "a", Size: 1}}}, "no steps"},
		{"start past the end", Layout{Steps: []string{"a"}, Allocs: []Alloc{{Name: "a", Start: 1, End: 1}}}, "lifetime [1, 1)"},
		{"end before start", Layout{Steps: []string{"a", "b"}, Allocs: []Alloc{{Name: "a", Start: 1, End: 0}}}, "lifetime [1, 0)"},
		{"end past len", Layout{Steps: []string{"a"}, Allocs: []Alloc{{Name: "a", Start: 0, End: 2}}}, "not within the 1 steps"},
		{"negative start", Layout{Steps: []string{"a"}, Allocs: []Alloc{{Name: "a", Start: -1, End: 1}}}, "lifetime [-1, 1)"},
		{"overflow", Layout{Steps: []string{"a"}, Allocs: []Alloc{{Name: "a", Offset: 1 << 63, Size: 1 << 63, End: 1}}}, "overflows"},
		{"phys without chunk size", Layout{Steps: []string{"a"}, Allocs: []Alloc{{Name: "a", Size: 1, End: 1, Phys: []int{0}}}}, "ChunkBytes is 0"},
		{"phys count", Layout{Steps: []string{"a"}, ChunkBytes: 2 * mib, Allocs: []Alloc{{Name: "a", Offset: mib, Size: 2 * mib, End: 1, Phys: []int{0}}}}, "touches 2 chunks but has 1"},
		{"negative phys", Layout{Steps: []string{"a"}, ChunkBytes: 2 * mib, Allocs: []Alloc{{Name: "a", Size: 1, End: 1, Phys: []int{-1}}}}, "negative physical chunk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			err := Render(&b, tc.l)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if b.Len() != 0 {
				t.Fatal("wrote output for an invalid layout")
			}
		})
	}
}

// synth makes a training-step-like layout: forward activations live until
// their backward step, temporaries in between, first-fit addresses that
// reuse freed ranges, and physical chunks mapped as the host backend does
// (virtual chunk i on physical chunk i) but for a few remapped ranges.
func synth(nAllocs, nSteps int, seed uint64) Layout {
	r := rand.New(rand.NewPCG(seed, seed+1))
	l := Layout{Title: fmt.Sprintf("synthetic: %d allocations, %d steps", nAllocs, nSteps), ChunkBytes: 2 * mib}
	layers := nSteps / 3
	for i := 0; i < nSteps; i++ {
		switch {
		case i < layers:
			l.Steps = append(l.Steps, fmt.Sprintf("layer%02d.linear fwd (gemm + bias + activation)", i))
		case i < 2*layers:
			l.Steps = append(l.Steps, fmt.Sprintf("layer%02d.linear bwd", 2*layers-1-i))
		default:
			l.Steps = append(l.Steps, fmt.Sprintf("optimizer step %d", i-2*layers))
		}
	}
	type live struct{ off, end uint64 }
	for i := 0; i < nAllocs; i++ {
		var a Alloc
		switch {
		case i < nAllocs/2: // activation: fwd step -> matching bwd step
			s := r.IntN(layers)
			a = Alloc{Name: fmt.Sprintf("act%d", i), Start: s, End: 2*layers - 1 - s}
		case i < nAllocs*9/10: // temporary
			s := r.IntN(nSteps - 1)
			a = Alloc{Name: fmt.Sprintf("tmp%d", i), Start: s, End: min(nSteps, s+1+r.IntN(12))}
		default: // outlives the graph
			s := r.IntN(nSteps)
			a = Alloc{Name: fmt.Sprintf("out%d", i), Start: s, End: nSteps}
		}
		a.Size = uint64(1+r.IntN(16)) * mib / uint64(1+r.IntN(4))
		l.Allocs = append(l.Allocs, a)
	}
	// First fit over addresses, 512-byte aligned, among allocations whose
	// lifetimes overlap.
	for i := range l.Allocs {
		a := &l.Allocs[i]
		var busy []live
		for _, b := range l.Allocs[:i] {
			if b.Start < max(a.End, a.Start+1) && a.Start < max(b.End, b.Start+1) {
				busy = append(busy, live{b.Offset, b.Offset + b.Size})
			}
		}
		sort.Slice(busy, func(i, j int) bool { return busy[i].off < busy[j].off })
		var off uint64
		for _, b := range busy {
			if off+a.Size <= b.off {
				break
			}
			off = max(off, (b.end+511)/512*512)
		}
		a.Offset = off
	}
	var end uint64
	for i := range l.Allocs {
		a := &l.Allocs[i]
		first, last := a.chunks(l.ChunkBytes)
		for v := first; v < last; v++ {
			p := int(v)
			if v >= 20 && v < 24 { // remapped: shares chunks 2-5
				p = int(v) - 18
			}
			a.Phys = append(a.Phys, p)
		}
		end = max(end, a.Offset+a.Size)
	}
	l.ReservedBytes = (end + l.ChunkBytes - 1) / l.ChunkBytes * l.ChunkBytes
	var peak uint64
	for s := range nSteps {
		var sum uint64
		for _, a := range l.Allocs {
			if a.Start <= s && s < a.End {
				sum += a.Size
			}
		}
		peak = max(peak, sum)
	}
	l.LowerBoundBytes = peak
	return l
}

// TestReadable renders a large layout and checks the canvas stays of a
// sensible size and that no two labels overlap.
func TestReadable(t *testing.T) {
	for _, n := range []struct{ allocs, steps int }{{100, 300}, {30, 12}, {400, 2000}} {
		l := synth(n.allocs, n.steps, 7)
		if err := l.validate(); err != nil {
			t.Fatal(err)
		}
		r := newRenderer(&l)
		r.render()
		_, _, w, h := parse(t, r.b.Bytes())
		if w < 800 || h < 400 || w > 6000 || h > 1400 {
			t.Errorf("%v: canvas %.0f×%.0f", n, w, h)
		}
		for i, a := range r.labels {
			if a.x0 < 0 || a.x1 > w || a.y0 < 0 || a.y1 > h {
				t.Errorf("%v: label %d %+v outside the %.0f×%.0f canvas", n, i, a, w, h)
			}
			for j, b := range r.labels[:i] {
				if a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 {
					t.Fatalf("%v: labels %d %+v and %d %+v overlap", n, i, a, j, b)
				}
			}
		}
		if len(r.labels) < 10 {
			t.Errorf("%v: only %d labels placed", n, len(r.labels))
		}
		if os.Getenv("TIMELINE_OUT") != "" {
			os.WriteFile(filepath.Join(os.Getenv("TIMELINE_OUT"), fmt.Sprintf("synth_%d_%d.svg", n.allocs, n.steps)), r.b.Bytes(), 0o644)
		}
	}
}

func TestColourByPhysicalChunk(t *testing.T) {
	l := Layout{Steps: []string{"a", "b", "c"}, ChunkBytes: 2 * mib, Allocs: []Alloc{
		{Name: "A", Offset: 0, Size: 1, Start: 0, End: 1, Phys: []int{5}},
		{Name: "B", Offset: 4 * mib, Size: 3 * mib, Start: 1, End: 2, Phys: []int{5, 1}},
		{Name: "C", Offset: 0, Size: 1, Start: 2, End: 3, Phys: []int{6}},
		{Name: "D", Offset: 8 * mib, Size: 1, Start: 2, End: 3}, // unknown among known
	}}
	r := newRenderer(&l)
	fill := func(i int) string { f, _ := r.colours(i, l.Allocs[i]); return f }
	if fill(0) != fill(1) || fill(0) == fill(2) || fill(3) == fill(0) || fill(3) == fill(2) {
		t.Fatalf("fills %q %q %q %q: want A = B (chunk 5), C and D different", fill(0), fill(1), fill(2), fill(3))
	}
	rs := r.runs()
	// Virtual chunks 0 -> {5, 6} (a conflict: two allocations disagree),
	// 2 -> 5, 3 -> 1, 4 -> nothing known (D has no Phys).
	if len(rs) != 3 || rs[0].multi == nil || rs[1].p0 != 5 || rs[2].p0 != 1 {
		t.Fatalf("runs %+v", rs)
	}
	// Without any Phys, allocations get colours of their own.
	for i := range l.Allocs {
		l.Allocs[i].Phys = nil
	}
	r = newRenderer(&l)
	if fill(0) == fill(1) || fill(1) == fill(2) {
		t.Fatalf("fills without chunks: %q %q %q", fill(0), fill(1), fill(2))
	}
}

func TestRuns(t *testing.T) {
	// Identity mapping is one run; a remapped range starts another.
	l := Layout{Steps: []string{"a"}, ChunkBytes: 2 * mib, Allocs: []Alloc{
		{Name: "A", Offset: 0, Size: 6 * mib, End: 1, Phys: []int{0, 1, 2}},
		{Name: "B", Offset: 6 * mib, Size: 4 * mib, End: 1, Phys: []int{0, 1}},
		{Name: "C", Offset: 10 * mib, Size: 1, End: 1, Phys: []int{7}},
	}}
	r := newRenderer(&l)
	var got []string
	for _, rn := range r.runs() {
		got = append(got, fmt.Sprintf("%s <- %s %v", rn.physName(), r.virtName(rn), rn.allocs))
	}
	want := []string{"P0-2 <- 0-6 MiB [A]", "P0-1 <- 6-10 MiB [B]", "P7 <- 10-12 MiB [C]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs\n%q\nwant\n%q", got, want)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 * mib: "3.0 MiB", 5 << 30: "5.00 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
