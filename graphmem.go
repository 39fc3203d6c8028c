package gpugraph

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/gpugraph/gpugraph/internal/alloc"
	"github.com/gpugraph/gpugraph/internal/vmem"
)

// MemAllocParams describe an allocation node (cudaMemAllocNodeParams).
type MemAllocParams struct {
	Size     int             // bytes, at least 1
	Location int             // the resident device's ordinal
	Access   []MemAccessDesc // other devices that may access the memory
	// Ptr is the allocation's address, assigned when the node is created
	// and fixed for the node's life; ignored when adding a node.
	Ptr DevicePtr
}

// MemAccessDesc grants a device read-write access to an allocation, as
// cudaMemAccessDesc with cudaMemAccessFlagsProtReadWrite (the only access
// alloc nodes support).
type MemAccessDesc struct{ Device int }

// MemFreeParams describe a free node: Ptr is a graph allocation's address.
type MemFreeParams struct{ Ptr DevicePtr }

func (MemAllocParams) NodeType() NodeType { return NodeMemAlloc }
func (MemFreeParams) NodeType() NodeType  { return NodeMemFree }

// GraphMemStats report the device's graph memory
// (cudaDeviceGetGraphMemAttribute): Used is physical memory currently
// associated with graphs or live graph allocations, Reserved is that plus
// memory cached for reuse; High values are high-water marks.
type GraphMemStats struct {
	UsedCurrent, UsedHigh         uint64
	ReservedCurrent, ReservedHigh uint64
}

const (
	graphVASize     = 1 << 40 // address space for graph allocations, per device
	graphRegionSize = 1 << 30 // a graph's address space grows in regions of this size
	graphAllocAlign = 512     // what the driver spaces graph allocations by
	checkAllocAlign = 4096    // in checking mode each allocation has pages of its own
)

// graphMem is a device's graph memory on the host backend.
//
// Addresses: each graph with alloc nodes owns regions (graphVA) of a
// device-wide graph address range, va; place gives each alloc node its
// range.
//
// Physical memory: an executable graph maps the 2 MiB chunks its
// allocations span onto physical chunks when a launch starts, or at Upload
// (bind). Chunks belong to the arena of the stream the graph is bound to;
// every graph bound to one stream maps its i-th chunk onto the arena's i-th
// physical chunk, so graphs launched into one stream share memory and the
// stream needs as much as its largest graph. A graph launched into another
// stream is bound (remapped) to that stream's arena, in execution order
// after its previous launch. An allocation still live when its graph's
// launch ends keeps its physical chunks (pinLive): they leave the arena,
// which gets fresh ones, until the allocation is freed.
type graphMem struct {
	d     *Device
	check bool

	mu      sync.Mutex
	va      *vmem.Reservation
	regions *alloc.Allocator // regions of graphs, in va offsets
	phys    *vmem.Phys
	holes   []int // chunk indexes released to the system, reusable
	spare   []int // backed chunks nobody uses (reserved, not used)
	nchunks int
	arenas  map[*Stream]*arena
	pins    map[int]int   // chunk -> live allocations holding it
	allocs  []*graphAlloc // by address
	used    int           // chunks in arenas or pinned
	stats   GraphMemStats
}

// arena is the physical memory that the graphs bound to one stream share
// (see graphMem).
type arena struct {
	chunks []int  // physical chunk per slot; -1 where a live allocation took it
	gen    uint64 // bumped when a chunk is replaced
	execs  map[*Exec]struct{}
}

// graphVA is the address space of one graph: regions, alloc nodes, and a
// reference count (the graph, its executable graphs, outstanding
// allocations) that releases the regions.
type graphVA struct {
	regions []region
	allocs  []*graphAlloc // in creation order
	refs    int
}

type region struct{ off, size uintptr }

// graphAlloc is one alloc node's allocation. Its lifetime is tracked twice:
// outstanding at API level, from the Launch that allocates it until the
// call that frees it, which is what refuses a relaunch and a double free at
// call time; live at execution level, from its alloc node to its free,
// which decides pinning and, in checking mode, access.
type graphAlloc struct {
	node        *Node
	va          *graphVA
	off, span   uintptr // in gm.va; span is the size rounded to the alignment
	size        int
	freedBy     *Node // the free node in the owning graph, if any
	outstanding bool  // API level: allocated by a Launch, no free issued yet
	live        bool  // execution level
	pinned      []int // physical chunks held while live after its graph's launch
}

func (a *graphAlloc) ptr(gm *graphMem) DevicePtr { return DevicePtr(gm.va.Addr() + a.off) }

// graphMemory returns the device's graph memory, creating it on first use.
func (d *Device) graphMemory() (*graphMem, error) {
	d.gmMu.Lock()
	defer d.gmMu.Unlock()
	if d.gm != nil {
		return d.gm, nil
	}
	va, err := vmem.Reserve(graphVASize, 16<<30)
	if err != nil {
		return nil, err
	}
	phys, err := vmem.NewPhys("gpugraph-graph-memory")
	if err != nil {
		va.Release()
		return nil, err
	}
	d.gm = &graphMem{d: d, check: d.memCheck, va: va, phys: phys,
		regions: alloc.New(uint64(va.Size()), vmem.Granularity),
		arenas:  map[*Stream]*arena{}, pins: map[int]int{}}
	return d.gm, nil
}

// close releases the device's graph memory.
func (gm *graphMem) close() {
	if gm == nil {
		return
	}
	gm.va.Release()
	gm.phys.Close()
}

func (gm *graphMem) align() uintptr {
	if gm.check {
		return checkAllocAlign
	}
	return graphAllocAlign
}

// place assigns the address range of a new alloc node n of g (g is locked):
// the lowest-waste gap, in g's regions, that overlaps no allocation still
// possibly live when n runs, that is, no allocation of g other than those
// whose free node is an ancestor of n (DESIGN.md §3). A new region is taken
// when no gap fits.
func (gm *graphMem) place(g *Graph, n *Node, size int) (*graphAlloc, error) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if g.va == nil {
		g.va = &graphVA{refs: 1}
	}
	v := g.va
	span := (uintptr(size) + gm.align() - 1) &^ (gm.align() - 1)
	anc := ancestors(n)
	type iv struct{ lo, hi uintptr }
	var blocked []iv
	for _, x := range v.allocs {
		if x.freedBy == nil || !anc[x.freedBy] {
			blocked = append(blocked, iv{x.off, x.off + x.span})
		}
	}
	sort.Slice(blocked, func(i, j int) bool { return blocked[i].lo < blocked[j].lo })
	best, bestGap := uintptr(0), ^uintptr(0)
	for _, r := range v.regions {
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
		v.regions = append(v.regions, region{uintptr(off), rsize})
		best = uintptr(off)
	}
	a := &graphAlloc{node: n, va: v, off: best, span: span, size: size}
	v.allocs = append(v.allocs, a)
	i := sort.Search(len(gm.allocs), func(i int) bool { return gm.allocs[i].off >= a.off })
	gm.allocs = append(gm.allocs, nil)
	copy(gm.allocs[i+1:], gm.allocs[i:])
	gm.allocs[i] = a
	return a, nil
}

// ancestors returns the set of nodes n transitively depends on.
func ancestors(n *Node) map[*Node]bool {
	seen := map[*Node]bool{}
	stack := append([]*Node(nil), n.deps...)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, x.deps...)
	}
	return seen
}

// lookup returns the allocation whose range holds the address at offset off
// of gm.va, live or not. The most recently placed one wins where ranges of
// allocations with disjoint lifetimes overlap.
func (gm *graphMem) lookupLocked(off uintptr) *graphAlloc {
	var found *graphAlloc
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
func (gm *graphMem) allocAtLocked(p DevicePtr, want func(*graphAlloc) bool) *graphAlloc {
	if !gm.va.Contains(uintptr(p), 1) {
		return nil
	}
	off := uintptr(p) - gm.va.Addr()
	i := sort.Search(len(gm.allocs), func(i int) bool { return gm.allocs[i].off >= off })
	var found *graphAlloc
	for ; i < len(gm.allocs) && gm.allocs[i].off == off; i++ {
		if found == nil || want(gm.allocs[i]) {
			found = gm.allocs[i]
		}
	}
	return found
}

func isOutstanding(a *graphAlloc) bool { return a.outstanding }
func isUnfreed(a *graphAlloc) bool     { return a.freedBy == nil }

// chunksOf returns the chunk offsets (in gm.va) the allocations span,
// sorted and without duplicates.
func chunksOf(as []*graphAlloc) []uintptr {
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
func (gm *graphMem) newChunkLocked() (int, error) {
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

func (gm *graphMem) addUsedLocked(chunks int) {
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
func (gm *graphMem) stealLocked(to *arena) (int, bool) {
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
	for e := range ar.execs {
		if e.issued.Load() != e.finished.Load() {
			return false
		}
	}
	return true
}

// binding is what an executable graph has mapped.
type binding struct {
	chunks []uintptr // chunk offsets the graph's allocations span
	stream *Stream   // arena bound to, nil if none
	gen    uint64
	phys   []int // physical chunk mapped at each of chunks, -1 if none
}

// bind maps e's chunks onto the arena of s, remapping only chunks whose
// physical memory changed. It runs in execution order, after e's previous
// launch has finished.
func (gm *graphMem) bind(e *Exec, s *Stream) error {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	b := &e.bind
	ar := gm.arenas[s]
	if b.stream == s && ar != nil && b.gen == ar.gen {
		return nil
	}
	if b.stream != nil && b.stream != s {
		if old := gm.arenas[b.stream]; old != nil {
			delete(old.execs, e)
		}
	}
	if ar == nil {
		ar = &arena{execs: map[*Exec]struct{}{}}
		gm.arenas[s] = ar
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
	for _, a := range e.persist {
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
	b.stream, b.gen = s, ar.gen
	if !complete {
		b.gen = ^uint64(0)
	}
	ar.execs[e] = struct{}{}
	return nil
}

// unbindLocked unmaps e's chunks, except those holding live allocations.
func (gm *graphMem) unbindLocked(e *Exec) {
	b := &e.bind
	if b.stream != nil {
		if ar := gm.arenas[b.stream]; ar != nil {
			delete(ar.execs, e)
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

// allocated marks a's allocation live: its alloc node has run.
func (gm *graphMem) allocated(a *graphAlloc) {
	gm.mu.Lock()
	a.live = true
	if gm.check {
		gm.va.Protect(a.off, a.span, true)
	}
	gm.mu.Unlock()
}

// freed ends a's lifetime (a free node, FreeAsync or Free has run) and
// releases chunks it pinned. A free issued outside the allocating graph also
// drops the reference the outstanding allocation held on the graph's
// address space: only now is nothing queued before the free left to use it.
func (gm *graphMem) freed(a *graphAlloc, dropRef bool) {
	gm.mu.Lock()
	gm.freedLocked(a)
	if dropRef {
		gm.releaseVALocked(a.va)
	}
	gm.mu.Unlock()
}

func (gm *graphMem) freedLocked(a *graphAlloc) {
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

// pinLive runs when a launch of e ends: allocations of e that are still live
// take their physical chunks out of the arena, which gets fresh ones, so
// that no other graph bound to the stream maps over live data.
func (gm *graphMem) pinLive(e *Exec) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	b := &e.bind
	ar := gm.arenas[b.stream]
	for _, a := range e.persist {
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

// trim releases physical memory not in use: spare chunks, and the arenas of
// streams whose graphs are all idle (their graphs are unmapped and will be
// mapped again at their next launch). Live allocations keep their memory.
func (gm *graphMem) trim() {
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
		for e := range ar.execs {
			gm.unbindLocked(e)
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

// releaseVA drops one reference on a graph's address space and returns its
// regions when none is left.
func (gm *graphMem) releaseVALocked(v *graphVA) {
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

func (gm *graphMem) anyMappedLocked(off uintptr) bool {
	for _, a := range gm.allocs {
		if a.off < off+vmem.Granularity && off < a.off+a.span {
			return true
		}
	}
	return false
}

// describe names the graph allocation holding address p, for fault reports.
func (gm *graphMem) describe(p uintptr) string {
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
	return fmt.Sprintf("%#x is in the %d-byte graph allocation at %#x made by %v of graph %d, which is %s",
		p, a.size, uint64(a.ptr(gm)), a.node, a.node.g.id, state)
}

// GraphMemStats reports the device's graph memory footprint.
func (d *Device) GraphMemStats() (GraphMemStats, error) {
	if err := d.check("Device.GraphMemStats"); err != nil {
		return GraphMemStats{}, err
	}
	if d.cuda != nil {
		return d.cudaGraphMemStats("Device.GraphMemStats")
	}
	gm := d.gmIfAny()
	if gm == nil {
		return GraphMemStats{}, nil
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	return gm.stats, nil
}

// ResetGraphMemHigh sets the high-water marks to the current values
// (cudaDeviceSetGraphMemAttribute of the High attributes to 0).
func (d *Device) ResetGraphMemHigh() error {
	if err := d.check("Device.ResetGraphMemHigh"); err != nil {
		return err
	}
	if d.cuda != nil {
		return d.cudaResetGraphMemHigh("Device.ResetGraphMemHigh")
	}
	if gm := d.gmIfAny(); gm != nil {
		gm.mu.Lock()
		gm.stats.UsedHigh, gm.stats.ReservedHigh = gm.stats.UsedCurrent, gm.stats.ReservedCurrent
		gm.mu.Unlock()
	}
	return nil
}

// TrimGraphMem returns graph memory that is not in use to the system
// (cudaDeviceGraphMemTrim): memory cached for reuse, and the memory of
// streams whose graphs are neither running nor queued. Live allocations
// keep theirs. Graphs it unmaps are mapped again when next launched.
func (d *Device) TrimGraphMem() error {
	if err := d.check("Device.TrimGraphMem"); err != nil {
		return err
	}
	if d.cuda != nil {
		return d.cudaTrimGraphMem("Device.TrimGraphMem")
	}
	if gm := d.gmIfAny(); gm != nil {
		gm.trim()
	}
	return nil
}

// GraphMemNodesSupported reports whether the device supports graph memory
// nodes: a driver of CUDA 11.4 or later with memory pools, as seed 001 §2
// checks.
func (d *Device) GraphMemNodesSupported() bool {
	p := d.props
	return p.DriverVersion >= 11040 && p.MemoryPoolsSupported
}

func (d *Device) gmIfAny() *graphMem {
	d.gmMu.Lock()
	defer d.gmMu.Unlock()
	return d.gm
}

// graphBytes returns [p, p+n) as bytes if it lies inside one graph
// allocation (live or not: liveness is a matter of execution order, which
// node parameters cannot know), or handled=false if p is not graph memory.
func (d *Device) graphBytes(p DevicePtr, n int) ([]byte, bool, error) {
	gm := d.gmIfAny()
	if gm == nil || !gm.va.Contains(uintptr(p), 1) {
		return nil, false, nil
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	off := uintptr(p) - gm.va.Addr()
	a := gm.lookupLocked(off)
	if a == nil {
		return nil, true, fmt.Errorf("%#x is graph memory that no allocation covers", uint64(p))
	}
	if off+uintptr(n) > a.off+uintptr(a.size) {
		return nil, true, fmt.Errorf("[%#x, +%d) runs past the end of the %d-byte graph allocation at %#x",
			uint64(p), n, a.size, uint64(a.ptr(gm)))
	}
	if n == 0 {
		return nil, true, nil
	}
	return unsafe.Slice((*byte)(gm.va.Pointer(off)), n), true, nil
}

// checkMemParams validates the parameters of a memory node that need no
// graph state.
func (d *Device) checkMemParams(opName string, p NodeParams) error {
	switch p := p.(type) {
	case MemAllocParams:
		if p.Size <= 0 {
			return newErr(opName, ErrInvalidValue, "allocation of %d bytes", p.Size)
		}
		if p.Location != 0 {
			return newErr(opName, ErrInvalidDevice, "device %d does not exist", p.Location)
		}
		for _, a := range p.Access {
			if a.Device != 0 {
				return newErr(opName, ErrInvalidDevice, "access for device %d, which does not exist", a.Device)
			}
		}
		if uint64(p.Size) > graphVASize/2 {
			return newErr(opName, ErrMemoryAllocation, "allocation of %d bytes", p.Size)
		}
	case MemFreeParams:
		if p.Ptr == 0 {
			return newErr(opName, ErrInvalidValue, "free of a null pointer")
		}
	}
	return nil
}

// addMemNode gives a new alloc node its address, or checks what a new free
// node frees. g is locked; n is not yet in the graph.
func (gm *graphMem) addMemNode(opName string, g *Graph, n *Node) error {
	switch p := n.params.(type) {
	case MemAllocParams:
		a, err := gm.place(g, n, p.Size)
		if err != nil {
			return newErr(opName, ErrMemoryAllocation, "no address space for %d bytes: %v", p.Size, err)
		}
		n.alloc = a
		p.Ptr = a.ptr(gm)
		p.Access = append([]MemAccessDesc(nil), p.Access...)
		n.params = p
	case MemFreeParams:
		gm.mu.Lock()
		defer gm.mu.Unlock()
		a := gm.allocAtLocked(p.Ptr, isUnfreed)
		switch {
		case a == nil:
			return newErr(opName, ErrInvalidValue, "%#x is not the address of a graph allocation", uint64(p.Ptr))
		case a.freedBy != nil && a.va == g.va:
			return newErr(opName, ErrInvalidValue, "the allocation at %#x is already freed by %v", uint64(p.Ptr), a.freedBy)
		case a.freedBy != nil:
			return newErr(opName, ErrInvalidValue, "the allocation at %#x is freed in its own graph, by %v", uint64(p.Ptr), a.freedBy)
		}
		if a.va == g.va {
			a.freedBy = n
		}
		n.alloc = a
	}
	return nil
}

// issueLaunch applies a launch of e to allocation state at call time, under
// the launching stream's lock: it refuses a relaunch while an allocation of
// the previous launch is outstanding (unless e frees them on launch), and a
// free node for an allocation that is not outstanding.
func (gm *graphMem) issueLaunch(opName string, e *Exec) error {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	if !e.autoFree {
		for _, a := range e.persist {
			if a.outstanding {
				return nodeErr(opName, a.node, ErrInvalidValue,
					"the allocation of the previous launch is still live: free it first, or instantiate with InstantiateAutoFreeOnLaunch")
			}
		}
	}
	for _, x := range e.frees {
		if !x.a.outstanding {
			return nodeErr(opName, x.node, ErrInvalidValue,
				"frees the allocation at %#x, which is not allocated (its graph was not launched, or it was freed)", uint64(x.a.ptr(gm)))
		}
	}
	for _, a := range e.persist {
		if !a.outstanding {
			a.outstanding = true
			a.va.refs++
		}
	}
	for _, x := range e.frees {
		x.a.outstanding = false // its reference goes when the free node runs
	}
	return nil
}

// FreeAsync frees memory in stream order (cudaFreeAsync): a graph allocation
// that is live after its graph's launch, or memory from MallocAsync. Work
// queued in s before the free may still use the memory; nothing after it
// may.
func (s *Stream) FreeAsync(p DevicePtr) error {
	const opName = "Stream.FreeAsync"
	if err := s.usable(opName); err != nil {
		return err
	}
	if p == 0 {
		return nil // cudaFreeAsync(NULL) succeeds
	}
	if s.be != nil {
		return s.cudaFreeAsync(opName, p)
	}
	if s.capturing.Load() {
		if _, captured, err := s.captureNode(opName, MemFreeParams{p}); captured {
			return err
		}
	}
	if gm := s.dev.gmIfAny(); gm != nil && gm.va.Contains(uintptr(p), 1) {
		var a *graphAlloc
		return s.enqueue(opName, op{kind: opCall, host: func() { gm.freed(a, true) }}, func() (uint64, error) {
			gm.mu.Lock()
			defer gm.mu.Unlock()
			if a = gm.allocAtLocked(p, isOutstanding); a == nil || !a.outstanding {
				return 0, newErr(opName, ErrInvalidValue, "%#x is not a live graph allocation", uint64(p))
			}
			a.outstanding = false
			return 0, nil
		})
	}
	if handled, err := s.dev.poolFreeAsync(opName, p, s); handled {
		return err
	}
	return newErr(opName, ErrInvalidValue, "%#x was not allocated by MallocAsync or by a graph", uint64(p))
}

// freeGraphAlloc frees a graph allocation synchronously (the caller has
// synchronized the device), reporting handled=false if p is not graph memory.
func (d *Device) freeGraphAlloc(opName string, p DevicePtr) (bool, error) {
	gm := d.gmIfAny()
	if gm == nil || !gm.va.Contains(uintptr(p), 1) {
		return false, nil
	}
	gm.mu.Lock()
	defer gm.mu.Unlock()
	a := gm.allocAtLocked(p, isOutstanding)
	if a == nil || !a.outstanding {
		return true, newErr(opName, ErrInvalidValue, "%#x is not a live graph allocation", uint64(p))
	}
	a.outstanding = false
	gm.freedLocked(a)
	gm.releaseVALocked(a.va)
	return true, nil
}
