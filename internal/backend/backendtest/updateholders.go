package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// UpdateHoldersMatrix is what the driver answers to updates of an
// executable graph's memset and memcpy nodes that move their memory among
// the holders of memory (device 0, device 1, the host), per node and by
// whole-graph update, without and with peer access: the sections "per-node
// and whole-graph updates of memset and memcpy nodes" of
// docs/driver-multidev.txt (tools/probe/multidev.cu on 2 x H100, driver
// 580), copied as they are (the gpugraph package's tests check that they
// are the file's). The rule they follow is backend.CheckMemoryMove
// (internal/backend/holders.go); scenario ExecUpdateHoldersMatrix runs
// every cell.
//
// A line is a node: "ctx c" the device whose context made it (here: the
// device of its graph), "memset on M" or "copy S->D" the memory it was
// instantiated with: 0 or 1 a device's, H pinned host memory, P pageable
// host memory. Each cell moves one side to another allocation of a kind
// ("same, value": a memset's value only) and gives the per-node update's
// answer ("node": ok or CUDA_ERROR_INVALID_VALUE) and the whole-graph
// update's ("graph": ok or the update result, ParametersChanged).
const UpdateHoldersMatrix = `
== per-node and whole-graph updates of memset and memcpy nodes, no peer access ==
ctx 0 memset on 0: | same, value: node ok, graph ok | 0: node ok, graph ok | 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 memset on 1: | same, value: node ok, graph ok | 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | 1: node ok, graph ok
ctx 0 copy 0->0: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 0->1: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 0->H: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy 0->P: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy 1->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 1->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 1->H: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy 1->P: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy H->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy H->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
ctx 0 copy P->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy P->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
ctx 1 memset on 0: | same, value: node ok, graph ok | 0: node ok, graph ok | 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 memset on 1: | same, value: node ok, graph ok | 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | 1: node ok, graph ok
ctx 1 copy 0->0: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 0->1: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 0->H: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy 0->P: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy 1->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 1->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 1->H: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy 1->P: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy H->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy H->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
ctx 1 copy P->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy P->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
== per-node and whole-graph updates of memset and memcpy nodes, peer access both ways ==
ctx 0 memset on 0: | same, value: node ok, graph ok | 0: node ok, graph ok | 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 memset on 1: | same, value: node ok, graph ok | 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | 1: node ok, graph ok
ctx 0 copy 0->0: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 0->1: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 0->H: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy 0->P: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy 1->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 1->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy 1->H: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy 1->P: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 0 copy H->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy H->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
ctx 0 copy P->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 0 copy P->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
ctx 1 memset on 0: | same, value: node ok, graph ok | 0: node ok, graph ok | 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 memset on 1: | same, value: node ok, graph ok | 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | 1: node ok, graph ok
ctx 1 copy 0->0: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 0->1: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 0->H: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy 0->P: | src 0: node ok, graph ok | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy 1->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 1->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | src H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 0: node ok, graph ok | dst 1: node ok, graph ok | dst H: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst P: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy 1->H: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy 1->P: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst H: node ok, graph ok | dst P: node ok, graph ok
ctx 1 copy H->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy H->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
ctx 1 copy P->0: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node ok, graph ok | dst 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged
ctx 1 copy P->1: | src 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src 1: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | src H: node ok, graph ok | src P: node ok, graph ok | dst 0: node CUDA_ERROR_INVALID_VALUE, graph ParametersChanged | dst 1: node ok, graph ok
`

// holdersCell is one cell of UpdateHoldersMatrix: the node (ctx, memset
// or copy, its memory's kinds) and the move, with the driver's answers.
type holdersCell struct {
	line       string // the line's node, as written
	ctx        int
	copy       bool
	dst, src   string // kinds: "0", "1", "H", "P"; src "" for a memset
	side, to   string // "dst" or "src", moved to another allocation of kind to; to "" for a memset's value only
	node, full string // the per-node and whole-graph answers
}

// holdersMatrix parses UpdateHoldersMatrix: its cells without peer access
// (peer false) and with access both ways.
func holdersMatrix(t testing.TB) map[bool][]holdersCell {
	m := map[bool][]holdersCell{}
	peer, seen := false, 0
	for _, l := range strings.Split(strings.TrimSpace(UpdateHoldersMatrix), "\n") {
		if strings.HasPrefix(l, "==") {
			peer = strings.Contains(l, "peer access both ways")
			seen++
			continue
		}
		parts := strings.Split(l, " | ")
		head := strings.TrimSuffix(parts[0], ":")
		var c holdersCell
		c.line = head
		var what, mem string
		if _, err := fmt.Sscanf(head, "ctx %d %s", &c.ctx, &what); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		switch what {
		case "memset":
			if _, err := fmt.Sscanf(head, "ctx %d memset on %s", &c.ctx, &mem); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			c.dst = mem
		case "copy":
			if _, err := fmt.Sscanf(head, "ctx %d copy %s", &c.ctx, &mem); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			s, d, ok := strings.Cut(mem, "->")
			if !ok {
				t.Fatalf("line %q: no copy", l)
			}
			c.copy, c.src, c.dst = true, s, d
		default:
			t.Fatalf("line %q: neither a memset nor a copy", l)
		}
		for _, cell := range parts[1:] {
			x := c
			label, ans, ok := strings.Cut(cell, ": node ")
			if !ok {
				t.Fatalf("cell %q of %q", cell, head)
			}
			if x.node, x.full, ok = strings.Cut(ans, ", graph "); !ok {
				t.Fatalf("cell %q of %q", cell, head)
			}
			switch {
			case label == "same, value":
			case !c.copy:
				x.side, x.to = "dst", label
			default:
				if x.side, x.to, ok = strings.Cut(label, " "); !ok {
					t.Fatalf("cell %q of %q", cell, head)
				}
			}
			m[peer] = append(m[peer], x)
		}
	}
	if seen != 2 || len(m[false]) == 0 || len(m[true]) == 0 {
		t.Fatalf("UpdateHoldersMatrix has %d sections, %d and %d cells", seen, len(m[false]), len(m[true]))
	}
	return m
}

// execUpdateHoldersMatrix: every cell of UpdateHoldersMatrix, without and
// with peer access both ways between devices 0 and 1. The node is made in
// a graph of the line's device; its per-node update (Exec.SetParams) is
// refused with ErrInvalidValue naming it, or taken, as the driver's; a
// whole-graph update (Exec.Update) from a graph of the moved node fails
// with ErrGraphExecUpdateFailure, UpdateErrorParametersChanged and that
// graph's node, or succeeds. Then each executable graph runs what it has:
// the update's memory if taken, the original's if refused (a refusal
// changes nothing).
func execUpdateHoldersMatrix(t *testing.T, backend string, count int, open OpenOrdinal) {
	d0, d1 := open(t, 0), open(t, 1)
	cells := holdersMatrix(t)
	const n = 1024
	const size = 4 * n
	// Three allocations of each kind: a node's original source (or a
	// memset's destination), a copy's original destination, and the
	// memory an update moves a side to.
	const origSrc, origDst, moved = 0, 1, 2
	type memory struct {
		dev *gg.Device // nil: host memory
		d   [3]gg.DevicePtr
		h   [3][]byte
	}
	mem := map[string]*memory{}
	for i, d := range []*gg.Device{d0, d1} {
		m := &memory{dev: d}
		for j := range m.d {
			m.d[j] = Must[gg.DevicePtr](t)(d.Malloc(size))
		}
		mem[fmt.Sprint(i)] = m
	}
	pinned := Must[[]byte](t)(d0.MallocHost(3 * size))
	t.Cleanup(func() { d0.FreeHost(pinned) })
	mem["H"], mem["P"] = &memory{}, &memory{}
	for j := range 3 {
		mem["H"].h[j] = pinned[j*size : (j+1)*size : (j+1)*size]
		mem["P"].h[j] = make([]byte, size)
	}
	streams := []*gg.Stream{NewStream(t, d0), NewStream(t, d1)}

	// A place is one allocation of a kind: its side of a copy, its bytes.
	type place struct {
		m *memory
		i int // origSrc, origDst or moved
	}
	ptr := func(p place) gg.DevicePtr { return p.m.d[p.i] }
	hostBytes := func(p place) []byte { return p.m.h[p.i] }
	fill := func(p place, v byte) {
		t.Helper()
		if p.m.dev == nil {
			for i := range hostBytes(p) {
				hostBytes(p)[i] = v
			}
			return
		}
		OK(t, p.m.dev.Memset(gg.Memset8(ptr(p), v, size)))
	}
	read := func(p place) []byte {
		t.Helper()
		if p.m.dev == nil {
			return bytes.Clone(hostBytes(p))
		}
		got := make([]byte, size)
		OK(t, p.m.dev.Memcpy(gg.DtoH(got, ptr(p))))
		return got
	}
	copyOf := func(dst, src place) gg.MemcpyParams {
		p := gg.MemcpyParams{Size: size}
		if dst.m.dev == nil {
			p.DstHost = hostBytes(dst)
		} else {
			p.Dst = ptr(dst)
		}
		if src.m.dev == nil {
			p.SrcHost = hostBytes(src)
		} else {
			p.Src = ptr(src)
		}
		return p
	}
	// want checks that place p holds v everywhere.
	want := func(what string, p place, v byte) {
		t.Helper()
		if got := read(p); !bytes.Equal(got, bytes.Repeat([]byte{v}, size)) {
			t.Errorf("%s: %#x at the start, want %#x everywhere", what, got[0], v)
		}
	}

	for _, peer := range []bool{false, true} {
		name := "no peer access"
		if peer {
			name = "peer access both ways"
		}
		t.Run(name, func(t *testing.T) {
			if peer {
				if !Must[bool](t)(d0.CanAccessPeer(d1)) || !Must[bool](t)(d1.CanAccessPeer(d0)) {
					t.Skip("the devices cannot access each other")
				}
				OK(t, d0.EnablePeerAccess(d1))
				t.Cleanup(func() { d0.DisablePeerAccess(d1) })
				OK(t, d1.EnablePeerAccess(d0))
				t.Cleanup(func() { d1.DisablePeerAccess(d0) })
			}
			for _, c := range cells[peer] {
				what := fmt.Sprintf("%s: %s %s", c.line, c.side, c.to)
				if c.to == "" {
					what = c.line + ": same, value"
				}
				dev := []*gg.Device{d0, d1}[c.ctx]
				s := streams[c.ctx]
				// The original node and the update's parameters, and
				// what each leaves where: places to clear before a
				// launch, and the value each should then hold.
				var orig, nu gg.NodeParams
				type effect struct {
					p place
					v byte
				}
				var clearAt []place
				var origEff, nuEff []effect
				if !c.copy {
					a := place{mem[c.dst], origSrc}
					to := a
					if c.to != "" {
						to = place{mem[c.to], moved}
					}
					orig, nu = gg.Memset32(ptr(a), 0x01010101, n), gg.Memset32(ptr(to), 0x02020202, n)
					clearAt = []place{a, to}
					origEff = []effect{{a, 1}}
					nuEff = []effect{{to, 2}}
					if to != a {
						origEff = append(origEff, effect{to, 0})
						nuEff = append(nuEff, effect{a, 0})
					}
				} else {
					src, dst := place{mem[c.src], origSrc}, place{mem[c.dst], origDst}
					nsrc, ndst := src, dst
					if c.side == "src" {
						nsrc = place{mem[c.to], moved}
					} else {
						ndst = place{mem[c.to], moved}
					}
					orig, nu = copyOf(dst, src), copyOf(ndst, nsrc)
					fill(src, 0x11)
					nsrcV := byte(0x11)
					if nsrc != src {
						fill(nsrc, 0x22)
						nsrcV = 0x22
					}
					clearAt = []place{dst, ndst}
					origEff = []effect{{dst, 0x11}}
					nuEff = []effect{{ndst, nsrcV}}
					if ndst != dst {
						origEff = append(origEff, effect{ndst, 0})
						nuEff = append(nuEff, effect{dst, 0})
					}
				}
				run := func(e *gg.Exec, taken bool, how string) {
					t.Helper()
					for _, p := range clearAt {
						fill(p, 0)
					}
					OK(t, e.Launch(s))
					OK(t, s.Synchronize())
					eff := origEff
					if taken {
						eff = nuEff
					}
					for _, x := range eff {
						want(fmt.Sprintf("%s, %s update %s", what, how, map[bool]string{true: "taken", false: "refused"}[taken]), x.p, x.v)
					}
				}

				g := NewGraph(t, dev)
				nd := Must[*gg.Node](t)(g.AddNode(orig))
				e := Must[*gg.Exec](t)(g.Instantiate(0))
				err := e.SetParams(nd, nu)
				switch c.node {
				case "ok":
					if err != nil {
						t.Errorf("%s: per-node update: %v, want it taken, as the driver does", what, err)
					}
				case "CUDA_ERROR_INVALID_VALUE":
					var ge *gg.Error
					switch {
					case !errors.Is(err, gg.ErrInvalidValue):
						t.Errorf("%s: per-node update: %v, want ErrInvalidValue, as the driver answers", what, err)
					case !errors.As(err, &ge) || ge.Node != nd:
						t.Errorf("%s: per-node update: the error %v does not name the node", what, err)
					}
				default:
					t.Fatalf("%s: unknown per-node answer %q", what, c.node)
				}
				run(e, err == nil, "per-node")

				e2 := Must[*gg.Exec](t)(g.Instantiate(0))
				g2 := NewGraph(t, dev)
				nd2 := Must[*gg.Node](t)(g2.AddNode(nu))
				info, err := e2.Update(g2)
				switch c.full {
				case "ok":
					if err != nil {
						t.Errorf("%s: whole-graph update: %v (%v), want it taken, as the driver does", what, err, info.Result)
					}
				case "ParametersChanged":
					switch {
					case !errors.Is(err, gg.ErrGraphExecUpdateFailure):
						t.Errorf("%s: whole-graph update: %v, want ErrGraphExecUpdateFailure, as the driver answers", what, err)
					case info.Result != gg.UpdateErrorParametersChanged || info.ErrorNode != nd2:
						t.Errorf("%s: whole-graph update: result %v naming %v, want %v naming the new graph's node %v", what, info.Result, info.ErrorNode, gg.UpdateErrorParametersChanged, nd2)
					}
				default:
					t.Fatalf("%s: unknown whole-graph answer %q", what, c.full)
				}
				run(e2, err == nil, "whole-graph")
				OK(t, e.Destroy())
				OK(t, e2.Destroy())
				OK(t, g.Destroy())
				OK(t, g2.Destroy())
			}
		})
	}
}
