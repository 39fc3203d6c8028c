package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	gg "github.com/gpugraph/gpugraph"
)

// stepProfile times the pieces of one captured training step on the
// device, with no profiler: the step is captured once more with a timing
// event recorded (as an event record node, RecordExternal) after each
// piece, on the stream that piece ran on, and every replay reads each
// event's time since the step's first. The time between two events of a
// stream is what ran, or waited, on it between them.
//
// The events are nodes of the graph, so the profiled step is a little
// slower than the plain one; the report says by how much.
type stepProfile struct {
	main   *gg.Stream
	marks  []profMark
	events []*gg.Event
	times  [][]float64 // per mark: its time since the first, per replay (µs)
}

type profMark struct {
	what string
	side bool // on the sync stream, not the step's
}

// Mark is train.Model.Mark: it records a timing event on s.
func (p *stepProfile) Mark(s *gg.Stream, what string) error {
	if p.main == nil {
		p.main = s
	}
	ev, err := s.Device().NewEvent(0)
	if err != nil {
		return err
	}
	if err := s.RecordExternal(ev); err != nil {
		return errors.Join(err, ev.Destroy())
	}
	p.events = append(p.events, ev)
	p.marks = append(p.marks, profMark{what: what, side: s != p.main})
	return nil
}

// sample reads the events of the replay just finished (the stream
// synchronized).
func (p *stepProfile) sample() error {
	if len(p.times) == 0 {
		p.times = make([][]float64, len(p.events))
	}
	p.times[0] = append(p.times[0], 0)
	for i, ev := range p.events[1:] {
		i++
		d, err := gg.ElapsedTime(p.events[0], ev)
		if err != nil {
			return fmt.Errorf("step profile, event %q: %w", p.marks[i].what, err)
		}
		p.times[i] = append(p.times[i], float64(d)/float64(time.Microsecond))
	}
	return nil
}

func (p *stepProfile) destroy() error {
	var err error
	for _, ev := range p.events {
		err = errors.Join(err, ev.Destroy())
	}
	p.events = nil
	return err
}

// profRow is one piece of the step: [start, end] in µs since the step's
// first event, medians over the replays.
type profRow struct {
	what       string
	side       bool
	start, end float64
}

// rows turns the marks into intervals: a piece starts where the previous
// mark of its stream was (the sync stream's first piece at the step's start).
func (p *stepProfile) rows() []profRow {
	med := make([]float64, len(p.times))
	for i, ts := range p.times {
		s := slices.Clone(ts)
		slices.Sort(s)
		med[i] = s[len(s)/2]
	}
	var rows []profRow
	last := map[bool]float64{}
	for i, m := range p.marks {
		if i == 0 {
			continue // "start"
		}
		rows = append(rows, profRow{what: m.what, side: m.side, start: last[m.side], end: med[i]})
		last[m.side] = med[i]
	}
	return rows
}

// report prints the rows as a table with a bar per piece, and the step's
// time split into compute on the step's stream, sync work, and waits.
func (p *stepProfile) report(w io.Writer, title string, plain time.Duration) {
	rows := p.rows()
	if len(rows) == 0 {
		return
	}
	total := 0.0
	for _, r := range rows {
		total = max(total, r.end)
	}
	fmt.Fprintf(w, "\n%s: median of %d replays, %d timing events in the step (its device time %.1f µs; the plain step's wall time %.1f µs)\n",
		title, len(p.times[0]), len(p.events), total, float64(plain)/float64(time.Microsecond))
	const width = 50
	bar := func(a, b float64) string {
		i, j := int(a/total*width+0.5), int(b/total*width+0.5)
		j = max(j, i+1)
		return strings.Repeat(" ", i) + strings.Repeat("#", min(j, width)-i) + strings.Repeat(" ", max(width-j, 0))
	}
	fmt.Fprintf(w, "  %-6s %-22s %8s %8s  |%s|\n", "stream", "piece", "start µs", "µs", strings.Repeat("-", width))
	sum := map[string]float64{}
	for _, r := range rows {
		stream := "step"
		if r.side {
			stream = "sync"
		}
		d := r.end - r.start
		fmt.Fprintf(w, "  %-6s %-22s %8.1f %8.1f  |%s|\n", stream, r.what, r.start, d, bar(r.start, r.end))
		sum[stream+" "+profKind(r.what)] += d
	}
	var keys []string
	for k := range sum {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(w, "  by kind:")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s %.1f µs (%.0f%%)", k, sum[k], 100*sum[k]/total)
	}
	fmt.Fprintln(w)
}

// profKind groups pieces for the summary: GEMMs, all-reduces, waits,
// updates and the rest (elementwise kernels).
func profKind(what string) string {
	switch {
	case strings.Contains(what, "GEMM"):
		return "GEMM"
	case strings.HasPrefix(what, "all-reduce"):
		return "all-reduce"
	case strings.HasPrefix(what, "wait"):
		return "wait"
	case strings.HasPrefix(what, "update"):
		return "update"
	}
	return "elementwise"
}
