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
// allocations span onto physical chunks. Chunks belong to the arena of the
// stream the graph is bound to; every graph bound to one stream maps its
// i-th chunk onto the arena's i-th physical chunk, so graphs launched into
// one stream share memory and the stream needs as much as its largest
// graph. An allocation still live after its graph's launch takes its
// chunks out of the arena, which gets fresh ones, until it is freed.
//
// Decisions are made at the call, as the driver makes them: which chunks a
// launch or an upload maps (Issue), which chunks a live allocation holds
// and gives back, what a trim releases and what the footprint is are all
// settled in the order of API calls, under mu, from the state the calls
// left. Queued work only carries the decisions out (Map, Freed, Ended):
// it maps what its plan says, and the physical release of memory that
// queued work may still touch waits for that work. So GraphMemStats and
// what a trim keeps never depend on how far the streams have run, beyond
// which launches are still scheduled or running at the call.
type GraphMem struct {
	check bool

	mu      sync.Mutex
	va      *vmem.Reservation
	regions *alloc.Allocator // regions of graphs, in va offsets
	phys    *vmem.Phys
	holes   []int // chunk indexes released to the system, reusable
	nchunks int
	arenas  map[any]*arena
	order   []*arena              // arenas in creation order: steals and trims are deterministic
	held    map[int]*hold         // chunk -> the live allocations holding it
	stale   map[int][]*GraphAlloc // chunk -> freed allocations that held it; used until a trim
	doomed  map[int][]*GraphAlloc // chunk trimmed while a free of those allocations is still queued
	allocs  []*GraphAlloc         // by address
	used    int                   // chunks in arenas, held or stale; reserved is the same
	stats   backend.GraphMemStats
}

// arena is the physical memory that the graphs bound to one stream share.
type arena struct {
	stream any
	chunks []int  // physical chunk per slot; -1 where none (a live allocation took it)
	gen    uint64 // bumped when a slot changes
	binds  map[*Binding]struct{}
	inuse  []int // per slot: plans that map it and have not ended, and uploads not yet launched
	holds  int   // the number of those
}

// hold is a chunk taken out of its arena by live allocations.
type hold struct {
	n  int           // live allocations holding it
	by []*GraphAlloc // every allocation that held it since it left the arena
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
// call time and decides what memory it holds; live at execution level,
// from its alloc node to its free, which decides, in checking mode, access.
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
	pinned      []int    // physical chunks held while outstanding
	slots       []int    // the arena slot each of pinned left
	from        *arena   // the arena they left
	bind        *Binding // the executable graph's binding whose launch made it outstanding
	unrun       int      // frees issued (FreeAsync, free nodes, AutoFreeOnLaunch) that have not run yet
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
		arenas:  map[any]*arena{}, held: map[int]*hold{},
		stale: map[int][]*GraphAlloc{}, doomed: map[int][]*GraphAlloc{}}, nil
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
	// After the others at its offset: lookupLocked takes the last match,
	// the most recently placed.
	i := sort.Search(len(gm.allocs), func(i int) bool { return gm.allocs[i].off > a.off })
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

// newChunkLocked returns a fresh physical chunk (which raises reserved and
// used memory). Issue has grown the file beforehand, so it cannot fail.
func (gm *GraphMem) newChunkLocked() int {
	var c int
	if k := len(gm.holes); k > 0 {
		c = gm.holes[k-1]
		gm.holes = gm.holes[:k-1]
	} else {
		c = gm.nchunks
		gm.nchunks++
	}
	gm.addUsedLocked(1)
	return c
}

// ensureLocked makes room in the physical file for n more chunks, before
// a call changes any state, so that running out fails the call whole.
func (gm *GraphMem) ensureLocked(n int) error {
	if n <= len(gm.holes) {
		return nil
	}
	return gm.phys.Grow(gm.nchunks + n - len(gm.holes))
}

// addUsedLocked counts chunks coming into use (n > 0) or released (n < 0).
// Every chunk in use is reserved and every reserved chunk is in use (the
// driver reports the two equal, docs/driver-memnodes.txt): memory is cached
// in arenas, where graphs keep it mapped, not beside them.
func (gm *GraphMem) addUsedLocked(n int) {
	gm.used += n
	gm.stats.UsedCurrent = uint64(gm.used) * vmem.Granularity
	gm.stats.ReservedCurrent = gm.stats.UsedCurrent
	gm.stats.UsedHigh = max(gm.stats.UsedHigh, gm.stats.UsedCurrent)
	gm.stats.ReservedHigh = max(gm.stats.ReservedHigh, gm.stats.ReservedCurrent)
}

// releaseLocked returns chunk c to the system. Nothing may use it any more.
func (gm *GraphMem) releaseLocked(c int) {
	gm.phys.Release(c)
	gm.holes = append(gm.holes, c)
}

// stealLocked takes, for a launch or upload of b, a chunk from the arena
// of another stream that nothing scheduled at this call maps: no launch
// planned there that has not ended, except b's own (launches of one
// executable graph run one after another), and no upload not yet
// launched. Plans map a prefix of an arena's slots, so these are the slots
// past the longest such plan. The driver reuses such memory too
// (docs/driver-memnodes.txt, "chain in s1 and parallel in s2 together":
// 576 MiB, the 512 MiB graph moving to s2 keeps the 448 MiB of s1 that
// the 64 MiB graph scheduled there does not map). The graphs bound there
// find their arena changed and are planned anew at their next launch.
// Arenas are looked at in creation order, so that which graph loses memory
// follows the calls.
func (gm *GraphMem) stealLocked(to *arena, b *Binding) (int, bool) {
	for _, ar := range gm.order {
		if ar == to {
			continue
		}
		own := b.pend[ar]
		for j := len(ar.chunks) - 1; j >= 0 && !ar.usedBesides(j, own, len(b.chunks)); j-- {
			if c := ar.chunks[j]; c >= 0 {
				ar.chunks = ar.chunks[:j] // slots after j were empty
				ar.gen++
				return c, true
			}
		}
		if ar.holds == 0 {
			ar.chunks = nil
		}
	}
	return 0, false
}

// used reports whether a plan not ended or an upload not yet launched maps
// slot j. Plans map a prefix of the slots, so the free ones are a suffix.
func (ar *arena) used(j int) bool { return j < len(ar.inuse) && ar.inuse[j] > 0 }

// usedBesides is used, not counting own plans of n slots.
func (ar *arena) usedBesides(j, own, n int) bool {
	if j < n {
		return j < len(ar.inuse) && ar.inuse[j] > own
	}
	return ar.used(j)
}

// use counts a plan of n slots on the arena (d = 1) or its end
// (d = -1).
func (ar *arena) use(n, d int) {
	for len(ar.inuse) < n {
		ar.inuse = append(ar.inuse, 0)
	}
	for j := range n {
		ar.inuse[j] += d
	}
	ar.holds += d
}

// holdUpload makes b's upload hold its slots against trims and steals until
// the graph is launched (seed 001 §5.1: the upload maps what the launch
// will run on), or drops that hold (ar nil).
func (b *Binding) holdUpload(ar *arena) {
	if b.upAr != nil {
		b.upAr.use(len(b.chunks), -1)
	}
	b.upAr = ar
	if ar != nil {
		ar.use(len(b.chunks), 1)
	}
}

// arenaLocked returns the arena of stream, made on first use.
func (gm *GraphMem) arenaLocked(stream any) *arena {
	ar := gm.arenas[stream]
	if ar == nil {
		ar = &arena{stream: stream, binds: map[*Binding]struct{}{}}
		gm.arenas[stream] = ar
		gm.order = append(gm.order, ar)
	}
	return ar
}

// current reports whether ar is still its stream's arena (a trim drops it).
func (gm *GraphMem) current(ar *arena) bool { return ar != nil && gm.arenas[ar.stream] == ar }

// Binding is what one executable graph has mapped of its graph's address
// space: planned at calls (stream, last plan), mapped by its launches
// (phys).
type Binding struct {
	va      *GraphVA
	persist []*GraphAlloc  // allocations the graph does not free
	chunks  []uintptr      // chunk offsets the graph's allocations span
	ar      *arena         // the arena of the last plan; nil if none
	last    *Plan          // the last plan; nil if none (new, or trimmed)
	gen     uint64         // ar.gen when last was made
	upAr    *arena         // the arena of an upload not launched since, which holds its slots
	pend    map[*arena]int // launches planned on each arena that have not ended
	phys    []int          // physical chunk mapped at each of chunks, -1 if none
}

// Plan is what one launch or upload maps, decided at its call: the chunk
// at each of the graph's chunk offsets, on the arena it counts against
// until it ends. Plans are immutable; launches share an unchanged one.
type Plan struct {
	b      *Binding
	ar     *arena
	chunks []int
	keep   []bool // slots left on a live allocation of the graph (an upload with one outstanding)
}

// NewBinding makes the binding of an executable graph of the graph with
// address space v (nil if it allocates nothing), which holds a reference
// on v until Release. persist are the allocations the graph does not free.
func (gm *GraphMem) NewBinding(v *GraphVA, persist []*GraphAlloc) *Binding {
	b := &Binding{va: v, persist: persist}
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

// Issue applies, at the call and under the stream's lock, a launch of the
// executable graph with binding b into stream (or its upload, upload set):
// it refuses a relaunch while an allocation of the previous launch is
// outstanding (unless autoFree: those are freed at the start of this
// launch) and a free node (frees, by their nodes) of an allocation that is
// not outstanding; it frees what the launch frees, plans what the launch
// maps on the stream's arena, and takes the chunks of the allocations the
// launch leaves live out of the arena. It returns the plan (nil if the
// graph maps nothing) and the allocations AutoFreeOnLaunch frees, whose
// frees the launch runs at its start (Freed). The plan counts against its
// arena until Ended.
func (gm *GraphMem) Issue(b *Binding, stream any, frees []*GraphAlloc, freeNodes []any, autoFree, upload bool) (*Plan, []*GraphAlloc, *backend.Error) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if !upload {
		if !autoFree {
			for _, a := range b.lastAllocs() {
				if a.outstanding {
					err := backend.Errorf(backend.ErrInvalidValue, "the allocation of the previous launch is still live: free it first, or instantiate with InstantiateAutoFreeOnLaunch")
					err.Node = a.Node
					return nil, nil, err
				}
			}
		}
		for i, a := range frees {
			if !a.outstanding {
				err := backend.Errorf(backend.ErrInvalidValue, "frees the allocation at %#x, which is not allocated (its graph was not launched, or it was freed)", gm.Ptr(a))
				err.Node = freeNodes[i]
				return nil, nil, err
			}
		}
	}
	if err := gm.ensureLocked(len(b.chunks)); err != nil {
		return nil, nil, backend.Errorf(backend.ErrMemoryAllocation, "graph memory: %v", err)
	}
	// AutoFreeOnLaunch frees at the start of the launch, before any of its
	// nodes: what goes back to the stream's arena, the launch may map.
	var autoFreed []*GraphAlloc
	if !upload && autoFree {
		for _, a := range b.lastAllocs() {
			if a.outstanding {
				a.outstanding = false // its reference on the address space stays: re-taken below
				// The free runs at the start of this launch, in its stream:
				// the chunks go to the stream's arena (a trim may have made
				// a new one, or the last launch was into another stream),
				// so the launch maps them again and the graph's usage stays
				// at one launch's worth, as on the driver.
				gm.unpinToLocked(a, gm.arenaLocked(stream), true)
				a.unrun++
				autoFreed = append(autoFreed, a)
			}
		}
	}
	if upload {
		// The upload holds its memory from this call to the graph's next
		// launch (or destruction), however soon its mapping runs.
		var p *Plan
		if !b.Empty() {
			p = gm.planLocked(b, stream)
			b.holdUpload(p.ar)
		}
		return p, nil, nil
	}
	b.holdUpload(nil) // a launch into another stream may move the uploaded memory
	var p *Plan
	if !b.Empty() {
		p = gm.planLocked(b, stream)
		p.ar.use(len(p.chunks), 1)
		if b.pend == nil {
			b.pend = map[*arena]int{}
		}
		b.pend[p.ar]++
	}
	for _, a := range b.persist {
		if !a.outstanding {
			a.outstanding = true
			if !slices.Contains(autoFreed, a) {
				a.va.refs++
			}
		}
		gm.pinLocked(a, p)
	}
	// Free nodes of other graphs' allocations run among this launch's
	// nodes, so what they give back is for later work in the stream only.
	for _, a := range frees {
		a.outstanding = false // its reference goes when the free node runs
		gm.unpinLocked(a, gm.arenas[stream])
		a.unrun++
	}
	return p, autoFreed, nil
}

// planLocked decides what b maps for a launch or upload into stream: the
// stream arena's chunk at each of b's chunk offsets, filling empty slots
// with, in order, the chunk b mapped there if a freed allocation of b's own
// graph left it stale (no remap, nothing new), a chunk of another arena
// that nothing scheduled maps (stealLocked), or a new chunk. A slot where a live allocation of b's graph is mapped
// stays on it (an upload while the allocation of the last launch is
// outstanding). Other graphs' stale chunks are not taken: work queued
// before their frees may still use them.
func (gm *GraphMem) planLocked(b *Binding, stream any) *Plan {
	ar := gm.arenaLocked(stream)
	if b.ar != ar {
		if b.ar != nil {
			delete(b.ar.binds, b)
		}
		b.ar = ar
		ar.binds[b] = struct{}{}
		b.gen = ^uint64(0)
	}
	if b.last != nil && b.gen == ar.gen && b.last.keep == nil {
		return b.last
	}
	for len(ar.chunks) < len(b.chunks) {
		ar.chunks = append(ar.chunks, -1)
	}
	p := &Plan{b: b, ar: ar, chunks: make([]int, len(b.chunks))}
	for i := range b.chunks {
		prev := -1
		if b.last != nil {
			prev = b.last.chunks[i]
		}
		if prev >= 0 && gm.heldByLocked(prev, b.va) {
			if p.keep == nil {
				p.keep = make([]bool, len(b.chunks))
			}
			p.chunks[i], p.keep[i] = prev, true
			continue
		}
		if ar.chunks[i] < 0 {
			if prev >= 0 && gm.ownStaleLocked(prev, b.va) {
				delete(gm.stale, prev) // stays used, in the arena
				ar.chunks[i] = prev
			} else if c, ok := gm.stealLocked(ar, b); ok {
				ar.chunks[i] = c // stays used, in another arena
			} else {
				ar.chunks[i] = gm.newChunkLocked()
			}
			ar.gen++
		}
		p.chunks[i] = ar.chunks[i]
	}
	b.gen = ar.gen
	if b.last != nil && p.keep == nil && slices.Equal(b.last.chunks, p.chunks) && b.last.ar == ar {
		p = b.last // launches keep sharing the old one
	}
	b.last = p
	return p
}

// heldByLocked reports whether a live allocation of the graph with address
// space v holds chunk c.
func (gm *GraphMem) heldByLocked(c int, v *GraphVA) bool {
	h := gm.held[c]
	if h == nil || h.n == 0 {
		return false
	}
	for _, a := range h.by {
		if a.va == v && a.outstanding && slices.Contains(a.pinned, c) {
			return true
		}
	}
	return false
}

// ownStaleLocked reports whether c is stale and only allocations of the
// graph with address space v held it: that graph may map it again, at the
// addresses that held it, with no work of another graph to wait for.
func (gm *GraphMem) ownStaleLocked(c int, v *GraphVA) bool {
	by, ok := gm.stale[c]
	if !ok || len(by) == 0 {
		return false
	}
	for _, a := range by {
		if a.va != v {
			return false
		}
	}
	return true
}

// pinLocked takes the chunks of allocation a, which the launch planned p
// leaves live, out of p's arena: no other graph bound to the stream may
// map over live data, and the slots get fresh chunks when next planned.
func (gm *GraphMem) pinLocked(a *GraphAlloc, p *Plan) {
	a.pinned, a.slots, a.from, a.bind = a.pinned[:0], a.slots[:0], p.ar, p.b
	lo := a.off &^ (vmem.Granularity - 1)
	for i, off := range p.b.chunks {
		if off+vmem.Granularity <= lo || off >= a.off+a.span {
			continue
		}
		c := p.chunks[i]
		h := gm.held[c]
		if h == nil {
			h = &hold{}
			gm.held[c] = h
		}
		if h.n == 0 && i < len(p.ar.chunks) && p.ar.chunks[i] == c {
			p.ar.chunks[i] = -1 // stays used, held by the allocation
			p.ar.gen++
		}
		h.n++
		h.by = append(h.by, a)
		a.pinned = append(a.pinned, c)
		a.slots = append(a.slots, i)
	}
}

// unpinLocked ends a's hold on its chunks at the call that frees it. A
// chunk no live allocation holds any more goes back to the slot it left if
// ret, the arena of the stream the free is ordered in, is the one it left
// and the slot is still empty: later work in that stream runs after the
// free. Otherwise it stays mapped by a's graph, and so counted as used
// graph memory (cudaGraphMemAttrUsedMemCurrent is memory that graphs map)
// until a trim releases it or a's graph maps it again.
func (gm *GraphMem) unpinLocked(a *GraphAlloc, ret *arena) { gm.unpinToLocked(a, ret, false) }

// unpinToLocked is unpinLocked; any lets the chunks go to ret's empty
// slots even if ret is not the arena they left: for AutoFreeOnLaunch,
// whose free is ordered before the launch that maps them again.
func (gm *GraphMem) unpinToLocked(a *GraphAlloc, ret *arena, any bool) {
	for k, c := range a.pinned {
		h := gm.held[c]
		if h == nil {
			continue
		}
		if h.n--; h.n > 0 {
			continue
		}
		delete(gm.held, c)
		i := a.slots[k]
		if any && ret != nil && gm.current(ret) {
			for len(ret.chunks) <= i {
				ret.chunks = append(ret.chunks, -1)
			}
		}
		if ret != nil && (ret == a.from || any) && gm.current(ret) && i < len(ret.chunks) && ret.chunks[i] < 0 {
			ret.chunks[i] = c
			ret.gen++
			continue
		}
		gm.stale[c] = h.by
	}
	a.pinned, a.slots = a.pinned[:0], a.slots[:0]
}

// Map carries out a plan when its launch or upload starts, after the
// graph's previous launch has finished: it maps the planned chunks,
// remapping only those that changed.
func (gm *GraphMem) Map(p *Plan) error {
	if p == nil {
		return nil
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	b := p.b
	for i, off := range b.chunks {
		if p.keep != nil && p.keep[i] {
			continue // a live allocation is there: leave it as it is
		}
		if b.phys[i] != p.chunks[i] {
			if err := gm.va.MapChunk(off, gm.phys, p.chunks[i], !gm.check); err != nil {
				return err
			}
			b.phys[i] = p.chunks[i]
		} else if gm.check {
			// Mappings are inaccessible until alloc nodes run; make sure
			// the ones kept from an earlier launch are too.
			gm.va.Protect(off, vmem.Granularity, false)
		}
	}
	return nil
}

// Ended retires the plan of a launch that has finished: its arena may be
// idle now.
func (gm *GraphMem) Ended(p *Plan) {
	if p == nil {
		return
	}
	gm.mu.Lock()
	p.ar.use(len(p.chunks), -1)
	if p.b.pend[p.ar]--; p.b.pend[p.ar] == 0 {
		delete(p.b.pend, p.ar)
	}
	gm.mu.Unlock()
}

// Forget detaches a destroyed executable graph's binding at the call: it
// no longer holds its arena against trims (its launches still scheduled do
// until they end).
func (gm *GraphMem) Forget(b *Binding) {
	gm.mu.Lock()
	if b.ar != nil {
		delete(b.ar.binds, b)
		b.ar = nil
	}
	b.last = nil
	b.holdUpload(nil)
	gm.mu.Unlock()
}

// Release unmaps a destroyed executable graph's memory once its launches
// are done (except chunks holding allocations that are live or whose free
// is still to run), and drops its reference on the graph's address space.
func (gm *GraphMem) Release(b *Binding) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	gm.unbindLocked(b)
	if b.va != nil {
		gm.releaseVALocked(b.va)
		b.va = nil
	}
}

// unbindLocked unmaps b's chunks, except those of allocations that are
// live or freed but not released (queued work may still read them), and
// detaches b from its arena. b has nothing scheduled or running.
func (gm *GraphMem) unbindLocked(b *Binding) {
	if b.ar != nil {
		delete(b.ar.binds, b)
		b.ar = nil
	}
	b.last = nil
	b.holdUpload(nil)
	for i, off := range b.chunks {
		c := b.phys[i]
		if c < 0 || gm.held[c] != nil {
			continue
		}
		if _, ok := gm.stale[c]; ok {
			continue
		}
		if _, ok := gm.doomed[c]; ok {
			continue
		}
		gm.va.UnmapChunk(off)
		b.phys[i] = -1
	}
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

// Freed ends a's lifetime when a free runs (a free node, FreeAsync, the
// start of an AutoFreeOnLaunch relaunch). What the free changes in the
// footprint was settled at its call; here memory a trim released while the
// free was queued goes back to the system. A free issued outside the
// allocating graph also drops the reference the outstanding allocation
// held on the graph's address space (dropRef): only now is nothing queued
// before the free left to use it.
func (gm *GraphMem) Freed(a *GraphAlloc, dropRef bool) {
	gm.mu.Lock()
	gm.freedLocked(a)
	if a.freedBy == nil && a.unrun > 0 {
		if a.unrun--; a.unrun == 0 && len(gm.doomed) > 0 {
			gm.releaseDoomedLocked()
		}
	}
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
}

// releaseDoomedLocked releases the trimmed chunks whose allocations' frees
// have all run.
func (gm *GraphMem) releaseDoomedLocked() {
	for _, c := range sortedKeys(gm.doomed) {
		if by := gm.doomed[c]; allRun(by) {
			delete(gm.doomed, c)
			gm.releaseStaleLocked(c, by)
		}
	}
}

func allRun(by []*GraphAlloc) bool {
	for _, a := range by {
		if a.unrun > 0 {
			return false
		}
	}
	return true
}

// releaseStaleLocked returns a freed allocation's chunk to the system and
// unmaps it where the executable graphs that allocated there still map it.
// Their launches since have other chunks there, or have yet to map them. A
// released binding (b.va nil) is skipped: its addresses may be another
// graph's by now.
func (gm *GraphMem) releaseStaleLocked(c int, by []*GraphAlloc) {
	for _, a := range by {
		b := a.bind
		if b == nil || b.va == nil {
			continue
		}
		for i, off := range b.chunks {
			if b.phys[i] == c {
				gm.va.UnmapChunk(off)
				b.phys[i] = -1
			}
		}
	}
	gm.releaseLocked(c)
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Trim releases, at the call, the physical memory that nothing scheduled
// or running uses: the chunks of arenas that no launch or upload not yet
// ended maps (cudaDeviceGraphMemTrim keeps "blocks in use by a graph that
// is executing or scheduled"; an uploaded graph not yet launched is not,
// on the driver), and the chunks of freed allocations. The graphs of an arena it empties are
// unmapped and planned anew at their next launch. Live allocations keep
// their memory. The footprint drops now; a freed allocation's memory goes
// back to the system once its queued free has run.
func (gm *GraphMem) Trim() {
	if gm == nil {
		return
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	// An upload not yet launched does not keep its memory: on the H100 a
	// trim right after Upload leaves reserved and used at 0 once the
	// stream is synchronized (TestConformanceCUDA/GraphMemUploadAtCall,
	// docs/gpu-runs/2026-11-25-reliability.txt); the launch maps it again.
	for _, ar := range gm.order {
		for b := range ar.binds {
			if b.upAr != nil {
				b.holdUpload(nil)
			}
		}
	}
	keep := gm.order[:0]
	for _, ar := range gm.order {
		if ar.holds > 0 {
			j := len(ar.chunks)
			for j > 0 && !ar.used(j-1) {
				if c := ar.chunks[j-1]; c >= 0 {
					gm.releaseLocked(c)
					gm.addUsedLocked(-1)
				}
				j--
			}
			if j < len(ar.chunks) {
				ar.chunks = ar.chunks[:j]
				ar.gen++
			}
			keep = append(keep, ar)
			continue
		}
		for b := range ar.binds {
			gm.unbindLocked(b)
		}
		for _, c := range ar.chunks {
			if c >= 0 {
				gm.releaseLocked(c)
				gm.addUsedLocked(-1)
			}
		}
		delete(gm.arenas, ar.stream)
	}
	clear(gm.order[len(keep):])
	gm.order = keep
	for _, c := range sortedKeys(gm.stale) {
		by := gm.stale[c]
		delete(gm.stale, c)
		gm.addUsedLocked(-1)
		if allRun(by) {
			gm.releaseStaleLocked(c, by)
		} else {
			gm.doomed[c] = by
		}
	}
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
	// Allocations with disjoint lifetimes share ranges: the range is valid
	// if any of them holds all of it (a 64-byte allocation reusing a freed
	// 16-byte one's address covers 64 bytes).
	covered := false
	for _, x := range gm.allocs {
		if x.off > off {
			break
		}
		if off+uintptr(n) <= x.off+uintptr(x.Size) {
			covered = true
			break
		}
	}
	if !covered {
		return nil, true, fmt.Errorf("[%#x, +%d) runs past the end of the %d-byte graph allocation at %#x",
			p, n, a.Size, gm.Ptr(a))
	}
	if n == 0 {
		return nil, true, nil
	}
	return unsafe.Slice((*byte)(gm.va.Pointer(off)), n), true, nil
}

// TakeOutstanding ends, at API level, the live graph allocation at p
// (FreeAsync): handled is false if p is not graph memory. The caller
// queues Freed(a, true) in stream order. Its memory stays mapped by its
// graph, and used, until a trim or its graph's next launch (unpinLocked).
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
	gm.unpinLocked(a, nil) // the stream's arena is not known here: stale until trimmed or relaunched
	a.unrun++
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
	gm.unpinLocked(a, a.from) // everything is done: the chunks may go back where they were
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
		if len(b.chunks) == 0 || b.last == nil {
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
