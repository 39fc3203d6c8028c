package host

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/alloc"
	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/vmem"
)

// Sizes of graph memory.
const (
	GraphVASize     = 1 << 40 // address space for graph allocations, per device
	graphRegionSize = 1 << 30 // a graph's address space grows in regions of this size
	graphAllocAlign = 512     // what the driver spaces graph allocations by
	checkAllocAlign = 4096    // in checking mode each allocation has pages of its own
)

// GraphMem is a device's graph memory.
//
// Addresses: each graph with alloc nodes owns regions (a GraphVA) of a
// device-wide graph address range; Place gives each alloc node its range,
// where the caller's rule allows reuse.
//
// Physical memory: an executable graph maps the 2 MiB chunks its
// allocations span onto physical chunks when a launch starts, or at Upload
// (Bind). Chunks belong to the arena of the stream the graph is bound to;
// every graph bound to one stream maps its i-th chunk onto the arena's i-th
// physical chunk, so graphs launched into one stream share memory and the
// stream needs as much as its largest graph. A graph launched into another
// stream is bound (remapped) to that stream's arena, in execution order
// after its previous launch. An allocation still live when its graph's
// launch ends keeps its physical chunks (PinLive): they leave the arena,
// which gets fresh ones, until the allocation is freed.
type GraphMem struct {
	check bool

	mu      sync.Mutex
	va      *vmem.Reservation
	regions *alloc.Allocator // regions of graphs, in va offsets
	phys    *vmem.Phys
	holes   []int // chunk indexes released to the system, reusable
	spare   []int // backed chunks nobody uses (reserved, not used)
	nchunks int
	arenas  map[any]*arena
	pins    map[int]int   // chunk -> live allocations holding it
	allocs  []*GraphAlloc // by address
	used    int           // chunks in arenas or pinned
	stats   backend.GraphMemStats
}

// arena is the physical memory that the graphs bound to one stream share.
type arena struct {
	chunks []int  // physical chunk per slot; -1 where a live allocation took it
	gen    uint64 // bumped when a chunk is replaced
	binds  map[*Binding]struct{}
}

// GraphVA is the address space of one graph: regions, alloc nodes, and a
// reference count (the graph, its executable graphs, outstanding
// allocations) that releases the regions.
type GraphVA struct {
	regions []region
	allocs  []*GraphAlloc // in creation order
	refs    int
}

type region struct{ off, size uintptr }

// GraphAlloc is one alloc node's allocation. Its lifetime is tracked twice:
// outstanding at API level, from the Launch that allocates it until the
// call that frees it, which is what refuses a relaunch and a double free at
// call time; live at execution level, from its alloc node to its free,
// which decides pinning and, in checking mode, access.
type GraphAlloc struct {
	Node    any    // the alloc node, as the caller names it
	Owner   string // the node and its graph, for fault reports
	Size    int
	FreedBy any // the free node in the owning graph (its tag), if any

	freedBy *Node
	access  []int // other devices the allocation is accessible from (its node's descriptors)

	va          *GraphVA
	off, span   uintptr // in gm.va; span is the size rounded to the alignment
	outstanding bool
	live        bool
	pinned      []int // physical chunks held while live after its graph's launch
}

// VA is the address space the allocation is in: its graph's.
func (a *GraphAlloc) VA() *GraphVA { return a.va }

// Ptr is the allocation's address.
func (gm *GraphMem) Ptr(a *GraphAlloc) uint64 { return uint64(gm.va.Addr() + a.off) }

// NewGraphMem reserves a device's graph address range. check makes
// allocations inaccessible outside their lifetime.
func NewGraphMem(check bool) (*GraphMem, error) {
	va, err := vmem.Reserve(GraphVASize, 16<<30)
	if err != nil {
		return nil, err
	}
	phys, err := vmem.NewPhys("gpugraph-graph-memory")
	if err != nil {
		va.Release()
		return nil, err
	}
	return &GraphMem{check: check, va: va, phys: phys,
		regions: alloc.New(uint64(va.Size()), vmem.Granularity),
		arenas:  map[any]*arena{}, pins: map[int]int{}}, nil
}

// Close releases the device's graph memory.
func (gm *GraphMem) Close() {
	if gm == nil {
		return
	}
	gm.va.Release()
	gm.phys.Close()
}

// Contains reports whether p is in the graph address range.
func (gm *GraphMem) Contains(p uint64) bool { return gm != nil && gm.va.Contains(uintptr(p), 1) }

func (gm *GraphMem) align() uintptr {
	if gm.check {
		return checkAllocAlign
	}
	return graphAllocAlign
}

// Place assigns the address range of a new alloc node of the graph whose
// address space is *v (created here on first use): the lowest-waste gap, in
// its regions, that overlaps no allocation of the graph except those that
// reusable allows (the caller's rule: those freed by an ancestor of the
// node). A new region is taken when no gap fits.
func (gm *GraphMem) Place(v **GraphVA, size int, reusable func(*GraphAlloc) bool, node any, owner string) (*GraphAlloc, error) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if *v == nil {
		*v = &GraphVA{refs: 1}
	}
	va := *v
	span := (uintptr(size) + gm.align() - 1) &^ (gm.align() - 1)
	type iv struct{ lo, hi uintptr }
	var blocked []iv
	for _, x := range va.allocs {
		if !reusable(x) {
			blocked = append(blocked, iv{x.off, x.off + x.span})
		}
	}
	sort.Slice(blocked, func(i, j int) bool { return blocked[i].lo < blocked[j].lo })
	best, bestGap := uintptr(0), ^uintptr(0)
	for _, r := range va.regions {
		at := r.off
		consider := func(lo, hi uintptr) {
			if hi > lo && hi-lo >= span && hi-lo < bestGap {
				best, bestGap = lo, hi-lo
			}
		}
		for _, b := range blocked {
			if b.hi <= r.off || b.lo >= r.off+r.size {
				continue
			}
			consider(at, b.lo)
			at = max(at, b.hi)
		}
		consider(at, r.off+r.size)
	}
	if bestGap == ^uintptr(0) {
		rsize := max(graphRegionSize, (span+vmem.Granularity-1)&^(vmem.Granularity-1))
		off, err := gm.regions.Alloc(uint64(rsize))
		if err != nil {
			return nil, err
		}
		va.regions = append(va.regions, region{uintptr(off), rsize})
		best = uintptr(off)
	}
	a := &GraphAlloc{Node: node, Owner: owner, va: va, off: best, span: span, Size: size}
	va.allocs = append(va.allocs, a)
	i := sort.Search(len(gm.allocs), func(i int) bool { return gm.allocs[i].off >= a.off })
	gm.allocs = append(gm.allocs, nil)
	copy(gm.allocs[i+1:], gm.allocs[i:])
	gm.allocs[i] = a
	return a, nil
}

// lookupLocked returns the allocation whose range holds the address at
// offset off of gm.va, live or not. The most recently placed one wins
// where ranges of allocations with disjoint lifetimes overlap.
func (gm *GraphMem) lookupLocked(off uintptr) *GraphAlloc {
	var found *GraphAlloc
	for _, a := range gm.allocs {
		if a.off > off {
			break
		}
		if off < a.off+a.span {
			found = a
		}
	}
	return found
}

// allocAtLocked returns the allocation starting at p: of those (in-graph
// reuse gives several one address), one for which want is true, else any.
func (gm *GraphMem) allocAtLocked(p uint64, want func(*GraphAlloc) bool) *GraphAlloc {
	if !gm.va.Contains(uintptr(p), 1) {
		return nil
	}
	off := uintptr(p) - gm.va.Addr()
	i := sort.Search(len(gm.allocs), func(i int) bool { return gm.allocs[i].off >= off })
	var found *GraphAlloc
	for ; i < len(gm.allocs) && gm.allocs[i].off == off; i++ {
		if found == nil || want(gm.allocs[i]) {
			found = gm.allocs[i]
		}
	}
	return found
}

func isOutstanding(a *GraphAlloc) bool { return a.outstanding }
func isUnfreed(a *GraphAlloc) bool     { return a.FreedBy == nil }

// FreeTarget finds what a new free node of the graph with address space v
// frees at p: an allocation of v not yet freed by a node of v, or one of
// another graph that its own graph does not free. It returns the
// allocation, or what is wrong.
func (gm *GraphMem) FreeTarget(v *GraphVA, p uint64) (*GraphAlloc, string) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	a := gm.allocAtLocked(p, isUnfreed)
	switch {
	case a == nil:
		return nil, fmt.Sprintf("%#x is not the address of a graph allocation", p)
	case a.FreedBy != nil && a.va == v:
		return nil, fmt.Sprintf("the allocation at %#x is already freed by %v", p, a.FreedBy)
	case a.FreedBy != nil:
		return nil, fmt.Sprintf("the allocation at %#x is freed in its own graph, by %v", p, a.FreedBy)
	}
	return a, ""
}

// chunksOf returns the chunk offsets (in gm.va) the allocations span,
// sorted and without duplicates.
func chunksOf(as []*GraphAlloc) []uintptr {
	set := map[uintptr]bool{}
	for _, a := range as {
		for c := a.off &^ (vmem.Granularity - 1); c < a.off+a.span; c += vmem.Granularity {
			set[c] = true
		}
	}
	cs := make([]uintptr, 0, len(set))
	for c := range set {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
	return cs
}

// newChunkLocked returns a physical chunk for an arena: a spare one, or a
// new one (which raises reserved memory).
func (gm *GraphMem) newChunkLocked() (int, error) {
	if k := len(gm.spare); k > 0 {
		c := gm.spare[k-1]
		gm.spare = gm.spare[:k-1]
		return c, nil
	}
	var c int
	if k := len(gm.holes); k > 0 {
		c = gm.holes[k-1]
		gm.holes = gm.holes[:k-1]
	} else {
		if err := gm.phys.Grow(gm.nchunks + 1); err != nil {
			return 0, err
		}
		c = gm.nchunks
		gm.nchunks++
	}
	gm.stats.ReservedCurrent += vmem.Granularity
	gm.stats.ReservedHigh = max(gm.stats.ReservedHigh, gm.stats.ReservedCurrent)
	return c, nil
}

func (gm *GraphMem) addUsedLocked(chunks int) {
	gm.used += chunks
	gm.stats.UsedCurrent = uint64(gm.used) * vmem.Granularity
	gm.stats.UsedHigh = max(gm.stats.UsedHigh, gm.stats.UsedCurrent)
}

// stealLocked takes a chunk from the arena of another stream whose graphs are
// all idle (every launch issued has finished), as the driver reuses memory
// across streams once earlier executions are done. The graphs bound there
// see their arena change and remap at their next launch. A stream whose
// graphs run or are queued keeps its memory, so concurrent launches never
// share it.
func (gm *GraphMem) stealLocked(to *arena) (int, bool) {
	for _, ar := range gm.arenas {
		if ar == to || !ar.idle() {
			continue
		}
		for j := len(ar.chunks) - 1; j >= 0; j-- {
			if c := ar.chunks[j]; c >= 0 {
				ar.chunks = ar.chunks[:j] // slots after j were empty
				ar.gen++
				return c, true
			}
		}
		ar.chunks = nil
	}
	return 0, false
}

// idle reports whether no graph bound to the arena is running or queued.
func (ar *arena) idle() bool {
	for b := range ar.binds {
		if !b.idle() {
			return false
		}
	}
	return true
}

// Binding is what one executable graph has mapped of its graph's address
// space.
type Binding struct {
	va      *GraphVA
	persist []*GraphAlloc // allocations the graph does not free
	idle    func() bool   // no launch of the graph is running or queued
	chunks  []uintptr     // chunk offsets the graph's allocations span
	stream  any           // arena bound to, nil if none
	gen     uint64
	phys    []int // physical chunk mapped at each of chunks, -1 if none
}

// NewBinding makes the binding of an executable graph of the graph with
// address space v (nil if it allocates nothing), which holds a reference
// on v until Release. persist are the allocations the graph does not free;
// idle reports whether no launch of it is running or queued.
func (gm *GraphMem) NewBinding(v *GraphVA, persist []*GraphAlloc, idle func() bool) *Binding {
	b := &Binding{va: v, persist: persist, idle: idle}
	if v == nil {
		return b
	}
	gm.mu.Lock()
	v.refs++
	b.chunks = chunksOf(v.allocs)
	gm.mu.Unlock()
	b.phys = make([]int, len(b.chunks))
	for i := range b.phys {
		b.phys[i] = -1
	}
	return b
}

// Empty reports whether the graph maps nothing.
func (b *Binding) Empty() bool { return len(b.chunks) == 0 }

// Persist are the allocations the graph does not free.
func (b *Binding) Persist() []*GraphAlloc { return b.persist }

// Bind maps b's chunks onto the arena of stream, remapping only chunks
// whose physical memory changed. It runs in execution order, after the
// graph's previous launch has finished.
func (gm *GraphMem) Bind(b *Binding, stream any) error {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	ar := gm.arenas[stream]
	if b.stream == stream && ar != nil && b.gen == ar.gen {
		return nil
	}
	if b.stream != nil && b.stream != stream {
		if old := gm.arenas[b.stream]; old != nil {
			delete(old.binds, b)
		}
	}
	if ar == nil {
		ar = &arena{binds: map[*Binding]struct{}{}}
		gm.arenas[stream] = ar
	}
	for len(ar.chunks) < len(b.chunks) {
		ar.chunks = append(ar.chunks, -1)
	}
	for i := range b.chunks {
		if ar.chunks[i] >= 0 {
			continue
		}
		if c, ok := gm.stealLocked(ar); ok {
			ar.chunks[i] = c // stays used, in another arena
			continue
		}
		c, err := gm.newChunkLocked()
		if err != nil {
			return err
		}
		ar.chunks[i] = c
		gm.addUsedLocked(1)
	}
	// Chunks holding this graph's own live allocations (kept across an
	// Upload) stay mapped. Other graphs' pinned chunks are remapped away.
	var own map[int]bool
	for _, a := range b.persist {
		for _, c := range a.pinned {
			if own == nil {
				own = map[int]bool{}
			}
			own[c] = true
		}
	}
	complete := true
	for i, off := range b.chunks {
		if b.phys[i] == ar.chunks[i] {
			continue
		}
		if own[b.phys[i]] {
			// A live allocation of this graph (kept across an Upload) is
			// there: leave it mapped, and remap at the next bind.
			complete = false
			continue
		}
		if err := gm.va.MapChunk(off, gm.phys, ar.chunks[i], !gm.check); err != nil {
			return err
		}
		b.phys[i] = ar.chunks[i]
	}
	if gm.check {
		// Mappings are inaccessible until alloc nodes run; make sure the
		// ones kept from an earlier bind are too.
		for i, off := range b.chunks {
			if b.phys[i] == ar.chunks[i] {
				gm.va.Protect(off, vmem.Granularity, false)
			}
		}
	}
	b.stream, b.gen = stream, ar.gen
	if !complete {
		b.gen = ^uint64(0)
	}
	ar.binds[b] = struct{}{}
	return nil
}

// Release unmaps a destroyed executable graph's memory once its launches
// are done (except chunks holding live allocations), and drops its
// reference on the graph's address space.
func (gm *GraphMem) Release(b *Binding) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	gm.unbindLocked(b)
	if b.va != nil {
		gm.releaseVALocked(b.va)
		b.va = nil
	}
}

// unbindLocked unmaps b's chunks, except those holding live allocations.
func (gm *GraphMem) unbindLocked(b *Binding) {
	if b.stream != nil {
		if ar := gm.arenas[b.stream]; ar != nil {
			delete(ar.binds, b)
		}
	}
	for i, off := range b.chunks {
		if b.phys[i] >= 0 && gm.pins[b.phys[i]] == 0 {
			gm.va.UnmapChunk(off)
			b.phys[i] = -1
		}
	}
	b.stream = nil
}

// Allocated marks a's allocation live: its alloc node has run.
func (gm *GraphMem) Allocated(a *GraphAlloc) {
	gm.mu.Lock()
	a.live = true
	if gm.check {
		gm.va.Protect(a.off, a.span, true)
	}
	gm.mu.Unlock()
}

// Freed ends a's lifetime (a free node, FreeAsync or Free has run) and
// releases chunks it pinned. A free issued outside the allocating graph
// also drops the reference the outstanding allocation held on the graph's
// address space (dropRef): only now is nothing queued before the free left
// to use it.
func (gm *GraphMem) Freed(a *GraphAlloc, dropRef bool) {
	gm.mu.Lock()
	gm.freedLocked(a)
	if dropRef {
		gm.releaseVALocked(a.va)
	}
	gm.mu.Unlock()
}

func (gm *GraphMem) freedLocked(a *GraphAlloc) {
	if !a.live {
		return
	}
	a.live = false
	if gm.check {
		gm.va.Protect(a.off, a.span, false)
	}
	for _, c := range a.pinned {
		if gm.pins[c]--; gm.pins[c] == 0 {
			delete(gm.pins, c)
			gm.spare = append(gm.spare, c)
			gm.addUsedLocked(-1)
		}
	}
	a.pinned = nil
}

// PinLive runs when a launch ends: allocations of the graph that are still
// live take their physical chunks out of the arena, which gets fresh ones,
// so that no other graph bound to the stream maps over live data.
func (gm *GraphMem) PinLive(b *Binding) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	ar := gm.arenas[b.stream]
	for _, a := range b.persist {
		if !a.live {
			continue
		}
		for i, off := range b.chunks {
			if off+vmem.Granularity <= a.off&^(vmem.Granularity-1) || off >= a.off+a.span {
				continue
			}
			c := b.phys[i]
			a.pinned = append(a.pinned, c)
			if gm.pins[c]++; gm.pins[c] > 1 {
				continue // already out of the arena
			}
			// The chunk stays used, by the allocation, and leaves the arena
			// (bind ran at the start of this launch, so the slot still
			// holds c); the next bind to the stream fills the slot.
			ar.chunks[i] = -1
			ar.gen++
		}
	}
}

// Trim releases physical memory not in use: spare chunks, and the arenas of
// streams whose graphs are all idle (their graphs are unmapped and will be
// mapped again at their next launch). Live allocations keep their memory.
func (gm *GraphMem) Trim() {
	if gm == nil {
		return
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	release := func(c int) {
		gm.phys.Release(c)
		gm.holes = append(gm.holes, c)
		gm.stats.ReservedCurrent -= vmem.Granularity
	}
	for s, ar := range gm.arenas {
		if !ar.idle() {
			continue
		}
		for b := range ar.binds {
			gm.unbindLocked(b)
		}
		for _, c := range ar.chunks {
			if c >= 0 {
				release(c)
				gm.addUsedLocked(-1)
			}
		}
		delete(gm.arenas, s)
	}
	for _, c := range gm.spare {
		release(c)
	}
	gm.spare = nil
}

// Stats reports the footprint.
func (gm *GraphMem) Stats() backend.GraphMemStats {
	if gm == nil {
		return backend.GraphMemStats{}
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	return gm.stats
}

// ResetHigh sets the high-water marks to the current values.
func (gm *GraphMem) ResetHigh() {
	if gm == nil {
		return
	}
	gm.mu.Lock()
	gm.stats.UsedHigh, gm.stats.ReservedHigh = gm.stats.UsedCurrent, gm.stats.ReservedCurrent
	gm.mu.Unlock()
}

// ReleaseVA drops one reference on a graph's address space (a destroyed
// graph's) and returns its regions when none is left.
func (gm *GraphMem) ReleaseVA(v *GraphVA) {
	gm.mu.Lock()
	gm.releaseVALocked(v)
	gm.mu.Unlock()
}

func (gm *GraphMem) releaseVALocked(v *GraphVA) {
	if v.refs--; v.refs > 0 {
		return
	}
	for _, r := range v.regions {
		for off := r.off; off < r.off+r.size; off += vmem.Granularity {
			// Only chunks that were mapped need restoring, but unmapping a
			// reservation is cheap compared with tracking them.
			if gm.anyMappedLocked(off) {
				gm.va.UnmapChunk(off)
			}
		}
		gm.regions.Free(uint64(r.off))
	}
	keep := gm.allocs[:0]
	for _, a := range gm.allocs {
		if a.va != v {
			keep = append(keep, a)
		}
	}
	gm.allocs = keep
}

func (gm *GraphMem) anyMappedLocked(off uintptr) bool {
	for _, a := range gm.allocs {
		if a.off < off+vmem.Granularity && off < a.off+a.span {
			return true
		}
	}
	return false
}

// Describe names the graph allocation holding address p, for fault
// reports; "" if p is not graph memory.
func (gm *GraphMem) Describe(p uintptr) string {
	if gm == nil || !gm.va.Contains(p, 1) {
		return ""
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	a := gm.lookupLocked(p - gm.va.Addr())
	if a == nil {
		return fmt.Sprintf("%#x is graph memory that no allocation covers", p)
	}
	state := "not live (not yet allocated, or already freed)"
	if a.live {
		state = "live"
	}
	return fmt.Sprintf("%#x is in the %d-byte graph allocation at %#x made by %s, which is %s",
		p, a.Size, gm.Ptr(a), a.Owner, state)
}

// Bytes returns [p, p+n) as bytes if it lies inside one graph allocation
// (live or not: liveness is a matter of execution order, which node
// parameters cannot know), or handled=false if p is not graph memory.
func (gm *GraphMem) Bytes(p uint64, n int) ([]byte, bool, error) {
	if gm == nil || !gm.va.Contains(uintptr(p), 1) {
		return nil, false, nil
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	off := uintptr(p) - gm.va.Addr()
	a := gm.lookupLocked(off)
	if a == nil {
		return nil, true, fmt.Errorf("%#x is graph memory that no allocation covers", p)
	}
	if off+uintptr(n) > a.off+uintptr(a.Size) {
		return nil, true, fmt.Errorf("[%#x, +%d) runs past the end of the %d-byte graph allocation at %#x",
			p, n, a.Size, gm.Ptr(a))
	}
	if n == 0 {
		return nil, true, nil
	}
	return unsafe.Slice((*byte)(gm.va.Pointer(off)), n), true, nil
}

// IssueLaunch applies a launch to allocation state at call time, under the
// launching stream's lock: it refuses a relaunch while an allocation of the
// previous launch is outstanding (unless the graph frees them on launch,
// autoFree), and a free node (frees, by their nodes) of an allocation that
// is not outstanding. It returns the node at fault and why.
func (gm *GraphMem) IssueLaunch(persist []*GraphAlloc, frees []*GraphAlloc, freeNodes []any, autoFree bool) (any, string) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if !autoFree {
		for _, a := range persist {
			if a.outstanding {
				return a.Node, "the allocation of the previous launch is still live: free it first, or instantiate with InstantiateAutoFreeOnLaunch"
			}
		}
	}
	for i, a := range frees {
		if !a.outstanding {
			return freeNodes[i], fmt.Sprintf("frees the allocation at %#x, which is not allocated (its graph was not launched, or it was freed)", gm.Ptr(a))
		}
	}
	for _, a := range persist {
		if !a.outstanding {
			a.outstanding = true
			a.va.refs++
		}
	}
	for _, a := range frees {
		a.outstanding = false // its reference goes when the free node runs
	}
	return nil, ""
}

// TakeOutstanding ends, at API level, the live graph allocation at p
// (FreeAsync): handled is false if p is not graph memory. The caller
// queues Freed(a, true) in stream order.
func (gm *GraphMem) TakeOutstanding(p uint64) (a *GraphAlloc, handled bool, err error) {
	if !gm.Contains(p) {
		return nil, false, nil
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if a = gm.allocAtLocked(p, isOutstanding); a == nil || !a.outstanding {
		return nil, true, fmt.Errorf("%#x is not a live graph allocation", p)
	}
	a.outstanding = false
	return a, true, nil
}

// Free frees a graph allocation synchronously (the caller has synchronized
// the device): handled is false if p is not graph memory.
func (gm *GraphMem) Free(p uint64) (handled bool, err error) {
	if !gm.Contains(p) {
		return false, nil
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	a := gm.allocAtLocked(p, isOutstanding)
	if a == nil || !a.outstanding {
		return true, fmt.Errorf("%#x is not a live graph allocation", p)
	}
	a.outstanding = false
	gm.freedLocked(a)
	gm.releaseVALocked(a.va)
	return true, nil
}

// Layout is where allocations live: for each, its address, its offset from
// the lowest chunk of all of them, and, once b is bound, the physical chunk
// under each chunk it overlaps (nil while unbound).
func (gm *GraphMem) Layout(b *Binding, as []*GraphAlloc) (ptrs []uint64, offs []uint64, phys [][]int) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	base := ^uintptr(0)
	for _, a := range as {
		base = min(base, a.off)
	}
	base &^= vmem.Granularity - 1 // offsets then count whole chunks
	ptrs, offs, phys = make([]uint64, len(as)), make([]uint64, len(as)), make([][]int, len(as))
	for k, a := range as {
		ptrs[k], offs[k] = gm.Ptr(a), uint64(a.off-base)
		if len(b.chunks) == 0 || b.stream == nil {
			continue
		}
		for c := a.off &^ (vmem.Granularity - 1); c < a.off+a.span; c += vmem.Granularity {
			p := -1
			if j := sort.Search(len(b.chunks), func(j int) bool { return b.chunks[j] >= c }); j < len(b.chunks) && b.chunks[j] == c {
				p = b.phys[j]
			}
			phys[k] = append(phys[k], p)
		}
	}
	return ptrs, offs, phys
}

// accessible reports whether the graph allocation holding p was made
// accessible from device ord by its node's access descriptors. Where
// allocations with different access reuse a range, the driver maps it for
// all of them; relying on that is an error, so the allocation placed there
// last decides here.
func (gm *GraphMem) accessible(p uint64, ord int) bool {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	a := gm.lookupLocked(uintptr(p) - gm.va.Addr())
	return a != nil && slices.Contains(a.access, ord)
}
