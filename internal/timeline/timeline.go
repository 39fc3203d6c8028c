// Package timeline draws how a graph's memory is reused: a self-contained
// SVG with execution order across and virtual address down the side, one
// rectangle per allocation over its lifetime, coloured by the physical
// memory behind it.
//
// Reading the picture: two rectangles at the same height never overlap in
// time (the later one reuses the earlier one's addresses after its free);
// rectangles of one colour share a physical chunk. The strip and the panel
// on the right say which virtual chunks each physical chunk backs. The
// grey line is the bytes live at each step; the dashed lines are the
// reserved bytes and their lower bound. Hovering a rectangle shows the
// allocation, hovering empty space shows the step.
package timeline

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Layout is a graph's memory: its steps (nodes in execution order) and
// its allocations.
type Layout struct {
	Title string
	// Steps names the graph's nodes in execution order, e.g. "fc1 fwd".
	Steps  []string
	Allocs []Alloc
	// ChunkBytes is the size of a physical chunk (2 MiB on the host
	// backend); 0 when no allocation has Phys.
	ChunkBytes uint64
	// ReservedBytes is the physical memory the graph holds; LowerBoundBytes
	// the least any valid execution order needs (the largest total size of
	// allocations that can be live at once).
	ReservedBytes, LowerBoundBytes uint64
}

// Alloc is one graph allocation.
type Alloc struct {
	Name string
	// Offset and Size place it in the graph's virtual address space.
	Offset, Size uint64
	// Start is the step of the alloc node; End the step of the free node,
	// or len(Steps) when the allocation outlives the graph's execution.
	// The allocation is live over [Start, End).
	Start, End int
	// Phys[i] is the physical chunk backing the i-th chunk the allocation
	// touches: virtual chunk Offset/ChunkBytes + i, for every chunk that
	// [Offset, Offset+Size) overlaps. nil when unknown (cuda backend).
	Phys []int
}

// chunks returns the virtual chunks [first, last) a touches.
func (a Alloc) chunks(chunk uint64) (first, last uint64) {
	first = a.Offset / chunk
	last = (a.Offset + a.Size + chunk - 1) / chunk
	if last == first { // zero size
		last++
	}
	return first, last
}

func (l *Layout) validate() error {
	if len(l.Steps) == 0 {
		return errors.New("timeline: the layout has no steps")
	}
	for i, a := range l.Allocs {
		if a.Start < 0 || a.Start >= len(l.Steps) || a.End < a.Start || a.End > len(l.Steps) {
			return fmt.Errorf("timeline: allocation %d (%q): lifetime [%d, %d) is not within the %d steps", i, a.Name, a.Start, a.End, len(l.Steps))
		}
		if a.Offset+a.Size < a.Offset {
			return fmt.Errorf("timeline: allocation %d (%q): offset %#x + size %#x overflows", i, a.Name, a.Offset, a.Size)
		}
		if a.Phys == nil {
			continue
		}
		if l.ChunkBytes == 0 {
			return fmt.Errorf("timeline: allocation %d (%q) has physical chunks but ChunkBytes is 0", i, a.Name)
		}
		first, last := a.chunks(l.ChunkBytes)
		if uint64(len(a.Phys)) != last-first {
			return fmt.Errorf("timeline: allocation %d (%q) touches %d chunks but has %d physical chunks", i, a.Name, last-first, len(a.Phys))
		}
		for _, p := range a.Phys {
			if p < 0 {
				return fmt.Errorf("timeline: allocation %d (%q): negative physical chunk %d", i, a.Name, p)
			}
		}
	}
	return nil
}

// Geometry, in pixels. Labels use a 10 px monospace font, whose advance
// is about 0.6 em, so text widths can be known without a font.
const (
	glyphW    = 6.0 // advance of a 10 px monospace glyph
	glyphH    = 10.0
	marginL   = 84.0 // y tick labels
	headerH   = 70.0
	arrowGap  = 14.0 // outlives-the-graph arrows
	stripW    = 22.0
	panelGap  = 16.0
	panelW    = 300.0
	rowH      = 14.0
	maxName   = 32 // runes of a step name under the axis
	plotWidth = 1200.0
)

// box is a text's extent, kept to test that labels do not overlap.
type box struct{ x0, y0, x1, y1 float64 }

type renderer struct {
	l      *Layout
	b      bytes.Buffer
	sw     float64 // width of a step
	pw, ph float64 // plot size
	top    float64 // plot top
	ymax   uint64  // address at the plot's top edge
	labels []box   // alloc and panel labels placed
	phys   bool    // some allocation has Phys
}

// Render writes l as an SVG image.
func Render(w io.Writer, l Layout) error {
	if err := l.validate(); err != nil {
		return err
	}
	r := newRenderer(&l)
	r.render()
	_, err := w.Write(r.b.Bytes())
	return err
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

func newRenderer(l *Layout) *renderer {
	r := &renderer{l: l, top: headerH}
	n := float64(len(l.Steps))
	r.sw = clamp(plotWidth/n, 2, 48)
	r.pw = math.Max(r.sw*n, 400)
	r.sw = r.pw / n
	r.ph = clamp(16*float64(len(l.Allocs)), 360, 900)
	var end uint64
	for _, a := range l.Allocs {
		end = max(end, a.Offset+a.Size)
		r.phys = r.phys || a.Phys != nil
	}
	end = max(end, l.ReservedBytes, l.LowerBoundBytes)
	unit := l.ChunkBytes
	if unit == 0 {
		unit = 1 << 20
	}
	r.ymax = max(unit, (end+unit-1)/unit*unit)
	return r
}

// x is the left edge of step i; y the height of address a.
func (r *renderer) x(i int) float64    { return marginL + float64(i)*r.sw }
func (r *renderer) y(a uint64) float64 { return r.top + r.ph - float64(a)/float64(r.ymax)*r.ph }

func (r *renderer) stripX() float64 { return marginL + r.pw + arrowGap }
func (r *renderer) panelX() float64 {
	if !r.phys { // no strip
		return r.stripX() + panelGap
	}
	return r.stripX() + stripW + panelGap
}

// panelWidth is narrower when there is nothing to list.
func (r *renderer) panelWidth() float64 {
	if !r.phys {
		return 200
	}
	return panelW
}

func (r *renderer) bottomH() float64 {
	n := 0
	for _, s := range r.l.Steps {
		n = max(n, min(utf8.RuneCountInString(s), maxName))
	}
	return 30 + float64(n)*glyphW + 10
}

func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// clip shortens s to n runes, ending in "…" when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	rs := []rune(s)
	return string(rs[:n-1]) + "…"
}

func textW(s string) float64 { return float64(utf8.RuneCountInString(s)) * glyphW }

// Bytes formats a byte count with a binary unit.
func Bytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// hue spreads small integers around the colour wheel (golden angle).
func hue(i int) float64 { return math.Mod(float64(i)*137.508, 360) }

func (r *renderer) colours(i int, a Alloc) (fill, stroke string) {
	if a.Phys != nil {
		h := f(hue(a.Phys[0]))
		return "hsl(" + h + ",62%,78%)", "hsl(" + h + ",45%,35%)"
	}
	if r.phys { // others are known: this one is the odd one out
		return "#e0e0e0", "#777"
	}
	h := f(hue(i))
	return "hsl(" + h + ",40%,84%)", "hsl(" + h + ",30%,40%)"
}

func (r *renderer) p(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

func (r *renderer) render() {
	width := r.panelX() + r.panelWidth() + 10
	height := r.top + r.ph + r.bottomH()
	r.p(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="monospace" font-size="10">`+"\n",
		f(width), f(height), f(width), f(height))
	r.p(`<rect width="100%%" height="100%%" fill="#fff"/>` + "\n")
	r.header(width)
	r.steps()
	r.yAxis()
	r.allocs()
	r.guides()
	r.strip()
	r.panel()
	r.p("</svg>\n")
}

func (r *renderer) header(width float64) {
	l := r.l
	title := l.Title
	if title == "" {
		title = "graph memory"
	}
	r.p(`<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", esc(clip(title, int((width-20)/8.4))))
	line := fmt.Sprintf("reserved %s · lower bound %s", Bytes(l.ReservedBytes), Bytes(l.LowerBoundBytes))
	if l.LowerBoundBytes > 0 {
		line += fmt.Sprintf(" (×%.2f)", float64(l.ReservedBytes)/float64(l.LowerBoundBytes))
	}
	line += fmt.Sprintf(" · peak live %s · %d allocations · %d steps", Bytes(r.peak()), len(l.Allocs), len(l.Steps))
	if l.ChunkBytes > 0 {
		line += " · chunk " + Bytes(l.ChunkBytes)
	}
	r.p(`<text x="10" y="38" font-size="11">%s</text>`+"\n", esc(clip(line, int((width-20)/6.6))))
	// Key.
	y := 56.0
	x := 10.0
	key := func(sample, text string) {
		r.p(sample+"\n", f(x), f(y-3.5), f(x+24), f(y-3.5))
		r.p(`<text x="%s" y="%s">%s</text>`+"\n", f(x+28), f(y), esc(text))
		x += 28 + textW(text) + 18
	}
	key(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#c0392b" stroke-dasharray="5 3"/>`, "reserved")
	key(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#2471a3" stroke-dasharray="5 3"/>`, "lower bound")
	key(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#555" stroke-width="1.5"/>`, "bytes live")
	r.p(`<path d="M%s %sl6 4l-6 4z" fill="#555"/>`+"\n", f(x), f(y-7.5))
	text := "outlives the graph"
	r.p(`<text x="%s" y="%s">%s</text>`+"\n", f(x+10), f(y), esc(text))
	x += 10 + textW(text) + 18
	if r.phys {
		text = "colour: first physical chunk"
	} else {
		text = "colour: allocation (physical chunks unknown)"
	}
	r.p(`<text x="%s" y="%s" fill="#555">%s</text>`+"\n", f(x), f(y), esc(text))
}

// live returns the bytes live at each step.
func (r *renderer) live() []uint64 {
	d := make([]int64, len(r.l.Steps)+1)
	for _, a := range r.l.Allocs {
		d[a.Start] += int64(a.Size)
		d[a.End] -= int64(a.Size)
	}
	out := make([]uint64, len(r.l.Steps))
	var s int64
	for i := range out {
		s += d[i]
		out[i] = uint64(s)
	}
	return out
}

func (r *renderer) peak() uint64 {
	var m uint64
	for _, v := range r.live() {
		m = max(m, v)
	}
	return m
}

// niceStep returns a step of the 1-2-5 series at least min.
func niceStep(min float64) float64 {
	if min <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(min)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= min*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// steps draws the x axis: a column per step (its tooltip names it), step
// numbers and, below them, step names as many as fit.
func (r *renderer) steps() {
	l := r.l
	bottom := r.top + r.ph
	r.p(`<g fill="#000" fill-opacity="0">` + "\n")
	for i, s := range l.Steps {
		r.p(`<rect x="%s" y="%s" width="%s" height="%s"><title>step %d: %s</title></rect>`+"\n",
			f(r.x(i)), f(r.top), f(r.sw), f(r.ph), i, esc(s))
	}
	r.p("</g>\n")
	every := max(1, int(niceStep(32/r.sw)))
	r.p(`<g stroke="#eee">` + "\n")
	for i := 0; i < len(l.Steps); i += every {
		r.p(`<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", f(r.x(i)), f(r.top), f(r.x(i)), f(bottom))
	}
	r.p("</g>\n")
	r.p(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#999"/>`+"\n", f(marginL), f(r.top), f(r.pw), f(r.ph))
	r.p(`<g text-anchor="middle" fill="#333">` + "\n")
	for i := 0; i < len(l.Steps); i += every {
		r.p(`<text x="%s" y="%s">%d</text>`+"\n", f(r.x(i)+r.sw/2), f(bottom+13), i)
	}
	r.p("</g>\n")
	names := int(math.Ceil((glyphH + 1) / r.sw))
	r.p(`<g text-anchor="end" fill="#555">` + "\n")
	for i := 0; i < len(l.Steps); i += names {
		x, y := r.x(i)+r.sw/2+3.5, bottom+22
		r.p(`<text x="%s" y="%s" transform="rotate(-90 %s %s)">%s</text>`+"\n", f(x), f(y), f(x), f(y), esc(clip(l.Steps[i], maxName)))
	}
	r.p("</g>\n")
}

func (r *renderer) yAxis() {
	step := niceStep(float64(r.ymax) / (1 << 20) / 10) // MiB, at most ~10 ticks
	r.p(`<g text-anchor="end" fill="#333">` + "\n")
	for t := 0.0; t*(1<<20) <= float64(r.ymax)*(1+1e-9); t += step {
		y := r.y(uint64(t * (1 << 20)))
		r.p(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#999"/>`, f(marginL-4), f(y), f(marginL), f(y))
		r.p(`<text x="%s" y="%s">%s MiB</text>`+"\n", f(marginL-6), f(y+3.5), strconv.FormatFloat(t, 'g', 4, 64))
	}
	r.p("</g>\n")
	r.p(`<text x="14" y="%s" transform="rotate(-90 14 %s)" text-anchor="middle" fill="#333">virtual offset</text>`+"\n",
		f(r.top+r.ph/2), f(r.top+r.ph/2))
}

func (r *renderer) lifetime(a Alloc) string {
	st := fmt.Sprintf("allocated at step %d (%s)", a.Start, clip(r.l.Steps[a.Start], 60))
	if a.End == len(r.l.Steps) {
		return st + ", outlives the graph"
	}
	return st + fmt.Sprintf(", freed at step %d (%s)", a.End, clip(r.l.Steps[a.End], 60))
}

func (r *renderer) allocs() {
	l := r.l
	plotR := marginL + r.pw
	for i, a := range l.Allocs {
		x0, x1 := r.x(a.Start), r.x(a.End)
		if x1-x0 < 1 {
			x1 = x0 + 1
		}
		y0, y1 := r.y(a.Offset+a.Size), r.y(a.Offset)
		if y1-y0 < 1 {
			y0 = y1 - 1
		}
		fill, stroke := r.colours(i, a)
		tip := fmt.Sprintf("%s\nsize %s (%d B)\nvirtual [%#x, %#x)\n%s", a.Name, Bytes(a.Size), a.Size, a.Offset, a.Offset+a.Size, r.lifetime(a))
		if a.Phys != nil {
			tip += "\nphysical chunks " + ranges(a.Phys)
		} else {
			tip += "\nphysical chunks unknown"
		}
		r.p(`<g><title>%s</title>`, esc(tip))
		r.p(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="%s" stroke-width="0.8"/>`,
			f(x0), f(y0), f(x1-x0), f(y1-y0), fill, stroke)
		if a.End == len(l.Steps) {
			ym := (y0 + y1) / 2
			r.p(`<path d="M%s %sl6 4l-6 4z" fill="%s"/>`, f(plotR+2), f(ym-4), stroke)
		}
		r.label(a, x0, y0, x1, y1)
		r.p("</g>\n")
	}
}

// label writes the allocation's name inside its rectangle when at least a
// few characters fit, and its size on a second line when there is room.
func (r *renderer) label(a Alloc, x0, y0, x1, y1 float64) {
	w, h := x1-x0, y1-y0
	fit := int((w - 4) / glyphW)
	if h < glyphH+2 || fit < 1 || a.Name == "" {
		return
	}
	name := clip(a.Name, fit)
	if name != a.Name && fit < 4 { // show at least three characters and "…"
		return
	}
	lines := []string{name}
	if size := Bytes(a.Size); h >= 2*glyphH+6 && utf8.RuneCountInString(size) <= fit {
		lines = append(lines, size)
	}
	lh := glyphH + 2
	ty := (y0+y1)/2 - lh*float64(len(lines))/2 // top of the text block
	for k, s := range lines {
		base := ty + lh*float64(k) + glyphH - 1.5
		r.p(`<text x="%s" y="%s">%s</text>`, f(x0+2), f(base), esc(s))
		r.labels = append(r.labels, box{x0 + 2, base - glyphH + 1.5, x0 + 2 + textW(s), base + 2})
	}
}

// ranges formats sorted-or-not chunk numbers compactly: "0-3, 7, 9-10".
func ranges(ps []int) string {
	var parts []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ps[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func (r *renderer) guides() {
	l := r.l
	x0, x1 := f(marginL), f(marginL+r.pw)
	// Bytes live at each step, as a step line.
	var d strings.Builder
	for i, v := range r.live() {
		y := f(r.y(v))
		if i == 0 {
			fmt.Fprintf(&d, "M%s %s", f(r.x(0)), y)
		} else {
			fmt.Fprintf(&d, "V%s", y)
		}
		fmt.Fprintf(&d, "H%s", f(r.x(i+1)))
	}
	r.p(`<path d="%s" fill="none" stroke="#555" stroke-width="1.5" stroke-opacity="0.7" pointer-events="none"/>`+"\n", d.String())
	if l.ReservedBytes > 0 {
		y := f(r.y(l.ReservedBytes))
		r.p(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#c0392b" stroke-dasharray="5 3" pointer-events="none"/>`+"\n", x0, y, x1, y)
	}
	if l.LowerBoundBytes > 0 {
		y := f(r.y(l.LowerBoundBytes))
		r.p(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#2471a3" stroke-dasharray="5 3" pointer-events="none"/>`+"\n", x0, y, x1, y)
	}
}

// run is virtual chunks [v0, v1) backed by physical chunks p0, p0+1, ...
// (or, with several, by more than one physical chunk each: a conflict).
type run struct {
	v0, v1 uint64
	p0     int
	multi  []int // the physical chunks of a virtual chunk that has several
	allocs []string
}

// runs maps virtual chunks to physical ones and merges neighbours mapped
// to neighbours, so the identity mapping of a whole graph is one run.
func (r *renderer) runs() []run {
	c := r.l.ChunkBytes
	phys := map[uint64][]int{}
	names := map[uint64][]string{}
	for _, a := range r.l.Allocs {
		if a.Phys == nil {
			continue
		}
		first, _ := a.chunks(c)
		for i, p := range a.Phys {
			v := first + uint64(i)
			if !contains(phys[v], p) {
				phys[v] = append(phys[v], p)
			}
			if !containsS(names[v], a.Name) {
				names[v] = append(names[v], a.Name)
			}
		}
	}
	vs := make([]uint64, 0, len(phys))
	for v := range phys {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	var out []run
	for _, v := range vs {
		ps := phys[v]
		sort.Ints(ps)
		if n := len(out); n > 0 && len(ps) == 1 && out[n-1].multi == nil && out[n-1].v1 == v &&
			ps[0] == out[n-1].p0+int(v-out[n-1].v0) {
			out[n-1].v1++
			for _, s := range names[v] {
				if !containsS(out[n-1].allocs, s) {
					out[n-1].allocs = append(out[n-1].allocs, s)
				}
			}
			continue
		}
		rn := run{v0: v, v1: v + 1, p0: ps[0], allocs: append([]string(nil), names[v]...)}
		if len(ps) > 1 {
			rn.multi = ps
		}
		out = append(out, rn)
	}
	return out
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func containsS(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (rn run) physName() string {
	if rn.multi != nil {
		return "P" + ranges(rn.multi) + " (conflict)"
	}
	if n := int(rn.v1 - rn.v0); n > 1 {
		return fmt.Sprintf("P%d-%d", rn.p0, rn.p0+n-1)
	}
	return fmt.Sprintf("P%d", rn.p0)
}

func (r *renderer) virtName(rn run) string {
	c := r.l.ChunkBytes
	return fmt.Sprintf("%s-%s MiB", mibs(rn.v0*c), mibs(rn.v1*c))
}

func mibs(n uint64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'g', 6, 64) }

func (r *renderer) runTip(rn run) string {
	c := r.l.ChunkBytes
	tip := fmt.Sprintf("physical %s backs virtual [%#x, %#x) (%s)", rn.physName(), rn.v0*c, rn.v1*c, r.virtName(rn))
	names := rn.allocs
	more := ""
	if len(names) > 40 {
		names, more = names[:40], fmt.Sprintf(", … %d more", len(rn.allocs)-40)
	}
	return tip + "\nallocations: " + strings.Join(names, ", ") + more
}

// strip draws, beside the address axis, the physical chunk behind each
// virtual chunk (coloured as the allocations are), outlining runs of
// neighbours mapped to neighbours and naming them where the name fits.
func (r *renderer) strip() {
	if !r.phys {
		return
	}
	x := r.stripX()
	c := r.l.ChunkBytes
	for _, rn := range r.runs() {
		y0, y1 := r.y(rn.v1*c), r.y(rn.v0*c)
		if y1-y0 < 1 {
			y0 = y1 - 1
		}
		r.p(`<g><title>%s</title>`, esc(r.runTip(rn)))
		for v := rn.v0; v < rn.v1; v++ {
			h := f(hue(rn.p0 + int(v-rn.v0)))
			r.p(`<rect x="%s" y="%s" width="%s" height="%s" fill="hsl(%s,62%%,78%%)"/>`,
				f(x), f(r.y((v+1)*c)), f(stripW), f(r.y(v*c)-r.y((v+1)*c)), h)
		}
		r.p(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#333" stroke-width="0.8"/>`, f(x), f(y0), f(stripW), f(y1-y0))
		if name := rn.physName(); textW(name)+4 <= y1-y0 && rn.multi == nil {
			cx, cy := x+stripW/2+3.5, (y0+y1)/2
			// A white halo keeps the name legible over the chunk colours.
			r.p(`<text x="%s" y="%s" text-anchor="middle" transform="rotate(-90 %s %s)" stroke="#fff" stroke-width="3" paint-order="stroke">%s</text>`,
				f(cx), f(cy), f(cx), f(cy), esc(name))
		}
		r.p("</g>\n")
	}
	r.p(`<text x="%s" y="%s" text-anchor="middle" fill="#333">phys</text>`+"\n", f(x+stripW/2), f(r.top-4))
}

// panel lists the runs by physical chunk: which virtual ranges each backs.
func (r *renderer) panel() {
	x := r.panelX()
	y := r.top + 10
	if !r.phys {
		r.p(`<text x="%s" y="%s" font-weight="bold">physical chunks</text>`+"\n", f(x), f(y))
		r.p(`<text x="%s" y="%s" fill="#555">not known for this graph</text>`+"\n", f(x), f(y+rowH))
		return
	}
	r.p(`<text x="%s" y="%s" font-weight="bold">physical chunks → virtual ranges</text>`+"\n", f(x), f(y))
	runs := r.runs()
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].p0 < runs[j].p0 })
	shared := map[int]int{}
	for _, rn := range runs {
		for p := rn.p0; p < rn.p0+int(rn.v1-rn.v0); p++ {
			shared[p]++
		}
	}
	maxRows := int((r.ph - rowH) / rowH)
	fit := int(math.Floor((panelW - 16) / glyphW))
	for i, rn := range runs {
		y += rowH
		if i == maxRows-1 && len(runs) > maxRows {
			r.p(`<text x="%s" y="%s" fill="#555">… %d more (hover the strip)</text>`+"\n", f(x), f(y), len(runs)-i)
			break
		}
		var sh []int
		for p := rn.p0; p < rn.p0+int(rn.v1-rn.v0); p++ {
			if shared[p] > 1 {
				sh = append(sh, p)
			}
		}
		text := fmt.Sprintf("%s ← %s · %d alloc%s", rn.physName(), r.virtName(rn), len(rn.allocs), plural(len(rn.allocs)))
		if sh != nil {
			text += " · reused: P" + ranges(sh)
		}
		text = clip(text, fit)
		h := f(hue(rn.p0))
		r.p(`<g><title>%s</title><rect x="%s" y="%s" width="10" height="10" fill="hsl(%s,62%%,78%%)" stroke="hsl(%s,45%%,35%%)"/><text x="%s" y="%s">%s</text></g>`+"\n",
			esc(r.runTip(rn)), f(x), f(y-9), h, h, f(x+16), f(y), esc(text))
		r.labels = append(r.labels, box{x + 16, y - glyphH + 1.5, x + 16 + textW(text), y + 2})
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
