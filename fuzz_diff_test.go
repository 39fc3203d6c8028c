package gpugraph_test

// Differential fuzzing (issue 16): random graphs that compute something,
// run on the host backend and checked, buffer by buffer, against a
// sequential evaluation of the same description in plain Go.
//
// A fuzz input decodes into a program (diffProg): a graph description over
// a few device buffers, host staging buffers, graph allocations, loop
// counters and conditional handles. Every node declares the resources it
// may touch, and the generator orders any two nodes that touch one resource,
// one of them writing, so every topological order computes the same result:
// the reference takes a random one. Whatever the decoder reads past the end
// of the input is zero, so every input is a valid program.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/backend/backendtest"
)

// FuzzDifferential builds a random graph of kernels, copies (host to
// device, device to device, device to host), memsets, host functions,
// graph allocations, child graphs and IF, WHILE and SWITCH nodes, with the
// explicit API or by stream capture, launches it several times with
// per-node changes (Exec.SetParams, Exec.SetEnabled) in between, and after
// every launch compares every buffer with the reference.
//
//	go test -run '^$' -fuzz FuzzDifferential .
func FuzzDifferential(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add(s.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) { skipRefused(t, runDifferential(t, gg.BackendHost, in)) })
}

// FuzzWholeGraphUpdate builds graph A and graph B, the same program with
// other parameters (now and then another topology), updates an executable
// graph of A to B with Exec.Update and launches it: the buffers must be
// those of a fresh executable graph of B and of the reference. A refused
// update must be an ErrGraphExecUpdateFailure, and the executable graph must
// go on computing A.
//
//	go test -run '^$' -fuzz FuzzWholeGraphUpdate .
func FuzzWholeGraphUpdate(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add(s.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) { skipRefused(t, runWholeGraphUpdate(t, gg.BackendHost, in)) })
}

// skipRefused skips an input whose program the backend refused.
func skipRefused(t *testing.T, r diffRun) {
	t.Helper()
	if r.refused {
		t.Skip(strings.Join(r.refusals, "\n"))
	}
}

// diffRun is what a backend decided about one input: the refusals it met
// ("stage: code"), in order; refused is set when the program itself was
// refused and never launched.
type diffRun struct {
	refusals []string
	errs     []string // the errors in full, for the reader
	refused  bool
	changes  []string // what each change between launches did, for the reader

	gap string // a known difference of the cuda backend's results (knownGap)
}

// diffLast is the environment of the last input run, for TestDifferentialCUDA
// (the tests of this package do not run in parallel).
var diffLast *diffEnv

// knownGap skips an input whose cuda results differ from the reference in
// a way docs/reliability.md explains ("Host and driver"), recording it for
// TestDifferentialCUDA to count; it returns for any other difference.
// There are none now: a difference in results fails the input. A gap
// found later goes here, explained, until it is closed.
func (env *diffEnv) knownGap(p *diffProg, what string) {
	if env.d.Properties().Backend != gg.BackendCUDA || env.run.gap == "" {
		return
	}
	env.t.Skipf("known gap: %s\n%s", env.run.gap, what)
}

// code names the error code of err, an *Error.
func code(err error) string {
	var e *gg.Error
	if errors.As(err, &e) && e.Code != nil {
		return e.Code.Name()
	}
	return fmt.Sprintf("%T", err)
}

// refusal is refusal, recorded.
func (env *diffEnv) refusal(what string, err error, p *diffProg) bool {
	env.t.Helper()
	if !refusal(env.t, what, err, p) {
		return false
	}
	env.run.refusals = append(env.run.refusals, what+": "+code(err))
	env.run.errs = append(env.run.errs, what+": "+err.Error())
	return true
}

// refusedAt records that the program was refused at stage what.
func (env *diffEnv) refusedAt(what string, err error) diffRun {
	env.run.refusals = append(env.run.refusals, what+": "+code(err))
	env.run.errs = append(env.run.errs, what+": "+err.Error())
	env.run.refused = true
	env.t.Logf("refused: %s: %v", what, err)
	return env.run
}

// maxDiffProgram bounds an input, as maxGraphProgram does and for the same
// reason: the minimizer's cost grows with the square of the length.
const maxDiffProgram = 160

const (
	diffBufs  = 3  // device buffers: resources 0..2
	diffHosts = 2  // host staging buffers: resources 3..4
	diffBytes = 64 // bytes in each
	maxTemps  = 2  // graph allocations live at once
	maxLoop   = 64 // WHILE iterations the reference allows (the programs need at most 3)
)

// Resources.

type resKind uint8

const (
	resDev    resKind = iota // device buffer (Device.Malloc)
	resHost                  // host staging buffer
	resTemp                  // graph allocation (alloc node, MallocAsync)
	resCtr                   // a WHILE node's counter, 4 bytes of device memory
	resHandle                // conditional handle
)

type diffRes struct {
	kind   resKind
	size   int    // bytes
	dev    int    // a device buffer's device (two-device programs)
	dflt   uint32 // handle default
	assign bool   // ConditionalAssignDefault
}

// Nodes.

type dkind uint8

const (
	dKernel dkind = iota // dst[i] = diffOps[fn](dst[i], src[i], i, k)
	dSet                 // sets handle h to (src[0]+k) % mod
	dCount               // WHILE body: decrements counter dst, clears h at 0
	dMemset
	dCopy
	dHost // dst[i] = dst[i]*mul + add over a host buffer
	dAlloc
	dFree
	dChild
	dCond
	dEmpty
)

var dkindNames = [...]string{"kernel", "set", "countdown", "memset", "memcpy", "host", "alloc", "free", "child", "cond", "empty"}

func (k dkind) String() string { return dkindNames[k] }

// Copy directions.
const (
	cDtoD = iota
	cHtoD
	cDtoH
)

type touch struct {
	r int
	w bool
}

type dnode struct {
	kind  dkind
	name  string // path in the program, for messages
	deps  []int  // earlier nodes of the same graph
	foot  []touch
	fixed bool // the program's invariants rest on it: never changed
	off   bool // disabled (Exec.SetEnabled)

	fn, dst, src, n, grid, block int    // kernels; dst, src: every memory node
	k, val, mod                  uint32 // kernel constant, memset value, setter modulus
	doff, soff, size             int    // byte offsets (dst, src) and size of a copy
	esize, width, height, pitch  int    // memset
	ckind                        int    // copy direction
	mul, add                     byte   // host function
	ctype                        gg.ConditionalType
	h                            int // handle resource
	body                         []*dgraph
	strm, route                  int // capture: stream, dependencies through events
	dev                          int // the device it runs on (two-device programs: Graph.AddNodeOn, or a stream of device 1)
}

type dgraph struct{ nodes []*dnode }

type diffProg struct {
	res      []diffRes
	top      *dgraph
	capture  bool
	mode     gg.CaptureMode
	memCheck bool
	autoFree bool
	upload   bool
	pinned   bool // the host buffers are pinned memory (MallocHost), not Go memory
	multi    bool // two devices: buffers and top-level work on either, peer access both ways (placeDevices)
	launches int
	seed     uint32
	live     int  // the allocation left live for AutoFreeOnLaunch, or -1
	refuse   bool // B of FuzzWholeGraphUpdate: an update to it must fail
}

// The kernels. All four take (dst, src Pointer, n Int32, k Uint32) and
// compute elementwise over min(n, grid*block) words, so that grid, block,
// n and the function can each change on their own.
var diffOps = [...]func(d, s uint32, i int, k uint32) uint32{
	func(d, s uint32, i int, k uint32) uint32 { return d + s + k },
	func(d, s uint32, i int, k uint32) uint32 { return d*(k|1) + s },
	func(d, s uint32, i int, k uint32) uint32 { return d ^ (bits.RotateLeft32(s, int(k&31)) + uint32(i)) },
	func(d, s uint32, i int, k uint32) uint32 { return s*3 + k*uint32(i) },
}

// diffOpsCUDA are diffOps in CUDA C++, over unsigned d, s, k and int i.
var diffOpsCUDA = [len(diffOps)]string{
	"d + s + k",
	"d*(k|1u) + s",
	"d ^ (__funnelshift_l(s, s, k & 31u) + (unsigned)i)",
	"s*3u + k*(unsigned)i",
}

var diffKernels = func() (ks [len(diffOps)]*gg.Kernel) {
	for j, op := range diffOps {
		ks[j] = &gg.Kernel{
			Name:   fmt.Sprintf("diff%d", j),
			Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Uint32},
			CUDA: fmt.Sprintf(`extern "C" __global__ void diff%d(unsigned* dp, const unsigned* sp, int n, unsigned k) {
	int i = blockIdx.x*blockDim.x + threadIdx.x;
	if (i < n) { unsigned d = dp[i], s = sp[i]; dp[i] = %s; }
}`, j, diffOpsCUDA[j]),
			Go: func(b gg.Block, a gg.Args) {
				n, k := a.Int(2), a.Uint32(3)
				d, s := gg.Slice[uint32](a.Ptr(0), n), gg.Slice[uint32](a.Ptr(1), n)
				for t := 0; t < b.Dim.X; t++ {
					if i := b.Idx.X*b.Dim.X + t; i < n {
						d[i] = op(d[i], s[i], i, k)
					}
				}
			},
		}
	}
	return ks
}()

var (
	kDiffSet = &gg.Kernel{
		Name:   "diff_set",
		Params: []gg.ParamType{gg.Uint64, gg.Pointer, gg.Uint32, gg.Uint32},
		CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void diff_set(cudaGraphConditionalHandle h, const unsigned* v, unsigned k, unsigned mod) {
	cudaGraphSetConditional(h, (v[0] + k) % mod);
}`,
		Go: func(b gg.Block, a gg.Args) {
			v := gg.Slice[uint32](a.Ptr(1), 1)[0]
			b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), (v+a.Uint32(2))%a.Uint32(3))
		},
	}
	kDiffCount = &gg.Kernel{
		Name:   "diff_count",
		Params: []gg.ParamType{gg.Uint64, gg.Pointer},
		CUDA: gg.SetConditionalCUDA + `extern "C" __global__ void diff_count(cudaGraphConditionalHandle h, int* c) {
	if (--c[0] <= 0) cudaGraphSetConditional(h, 0);
}`,
		Go: func(b gg.Block, a gg.Args) {
			c := gg.Slice[int32](a.Ptr(1), 1)
			if c[0]--; c[0] <= 0 {
				b.SetConditional(gg.ConditionalHandle(a.Uint64(0)), 0)
			}
		},
	}
)

// Decoding.

// rd reads an input byte by byte; past its end it reads zeros.
type rd struct {
	b []byte
	i int
}

func (r *rd) u8() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

// n reads a number below k (k > 0).
func (r *rd) n(k int) int { return r.u8() % k }

func (r *rd) u32() uint32 { return uint32(r.u8())*0x01000193 ^ uint32(r.u8())<<24 }

// gctx is a graph being generated: the last writer of each resource and
// the readers since, which the next node that conflicts must follow.
type gctx struct {
	g       *dgraph
	name    string
	top     bool // memory and conditional nodes allowed
	body    bool // in a conditional body: device work only
	child   bool // in a child graph: no child graphs
	lastW   map[int]int
	readers map[int][]int
}

func newCtx(name string, top, body, child bool) *gctx {
	return &gctx{g: &dgraph{}, name: name, top: top, body: body, child: child, lastW: map[int]int{}, readers: map[int][]int{}}
}

type diffGen struct {
	r    *rd
	p    *diffProg
	live []int // graph allocations not yet freed, in program order
}

func addTouch(foot []touch, r int, w bool) []touch {
	for i := range foot {
		if foot[i].r == r {
			foot[i].w = foot[i].w || w
			return foot
		}
	}
	return append(foot, touch{r, w})
}

// add appends nd to x with some random dependencies and those its
// footprint needs.
func (gn *diffGen) add(x *gctx, nd *dnode) {
	r := gn.r
	var deps []int
	if len(x.g.nodes) > 0 {
		for k := r.n(3); k > 0; k-- {
			if d := r.n(len(x.g.nodes)); !slices.Contains(deps, d) {
				deps = append(deps, d)
			}
		}
	}
	for _, tc := range nd.foot {
		if w, ok := x.lastW[tc.r]; ok && !slices.Contains(deps, w) {
			deps = append(deps, w)
		}
		if tc.w {
			for _, d := range x.readers[tc.r] {
				if !slices.Contains(deps, d) {
					deps = append(deps, d)
				}
			}
		}
	}
	idx := len(x.g.nodes)
	for _, tc := range nd.foot {
		if tc.w {
			x.lastW[tc.r] = idx
			x.readers[tc.r] = nil
		} else {
			x.readers[tc.r] = append(x.readers[tc.r], idx)
		}
	}
	c := r.u8()
	nd.strm, nd.route = c&1, c>>1&1 // bit 2 chose a child graph by a launch into the capture, which the driver refuses
	nd.deps = deps
	nd.name = fmt.Sprintf("%s#%d", x.name, idx)
	x.g.nodes = append(x.g.nodes, nd)
}

func (gn *diffGen) newRes(r diffRes) int {
	gn.p.res = append(gn.p.res, r)
	return len(gn.p.res) - 1
}

// devTargets lists what device work may touch: the device buffers and the
// live graph allocations.
func (gn *diffGen) devTargets() []int { return append([]int{0, 1, 2}, gn.live...) }

func pick(r *rd, from []int) int { return from[r.n(len(from))] }

func (gn *diffGen) words(res int) int { return gn.p.res[res].size / 4 }

func (gn *diffGen) op(x *gctx) {
	switch gn.r.n(10) {
	case 0, 1, 2:
		gn.kernel(x)
	case 3:
		gn.memset(x)
	case 4:
		gn.copy(x)
	case 5:
		if x.body {
			gn.kernel(x)
		} else {
			gn.host(x)
		}
	case 6:
		if x.top && len(gn.live) < maxTemps {
			gn.alloc(x)
		} else {
			gn.kernel(x)
		}
	case 7:
		if x.top && len(gn.live) > 0 {
			gn.free(x)
		} else {
			gn.memset(x)
		}
	case 8:
		if !x.child {
			gn.childGraph(x)
		} else {
			gn.add(x, &dnode{kind: dEmpty})
		}
	case 9:
		if x.top {
			gn.cond(x)
		} else {
			gn.add(x, &dnode{kind: dEmpty})
		}
	}
}

func (gn *diffGen) kernel(x *gctx) {
	r := gn.r
	ts := gn.devTargets()
	nd := &dnode{kind: dKernel, dst: pick(r, ts), src: pick(r, ts), fn: r.n(len(diffOps)), k: r.u32(), grid: 1 + r.n(4), block: 1 + r.n(8)}
	nd.n = 1 + r.n(min(gn.words(nd.dst), gn.words(nd.src)))
	nd.foot = addTouch(addTouch(nil, nd.dst, true), nd.src, false)
	if r.n(3) == 0 { // another target, for Exec.SetParams to move to
		nd.foot = addTouch(nd.foot, pick(r, ts), true)
	}
	gn.add(x, nd)
}

func (gn *diffGen) memsetValue(es int) uint32 {
	v := gn.r.u32()
	if es < 4 {
		v &= 1<<(8*es) - 1
	}
	return v
}

// memsetShape chooses offset, width, height and pitch for nd in its dst.
func (gn *diffGen) memsetShape(nd *dnode, twoD bool) {
	r, size, es := gn.r, gn.p.res[nd.dst].size, nd.esize
	nd.height, nd.pitch = 1, 0
	if twoD {
		w := 1 + r.n(4)
		pitch := w*es + es*r.n(3)
		h := 2 + r.n(2)
		if total := pitch*(h-1) + w*es; total <= size {
			nd.width, nd.height, nd.pitch = w, h, pitch
			nd.doff = es * r.n((size-total)/es+1)
			return
		}
	}
	elems := size / es
	nd.doff = es * r.n(elems)
	nd.width = 1 + r.n(elems-nd.doff/es)
}

func (gn *diffGen) memset(x *gctx) {
	r := gn.r
	ts := gn.devTargets()
	nd := &dnode{kind: dMemset, dst: pick(r, ts), esize: []int{1, 2, 4}[r.n(3)]}
	nd.val = gn.memsetValue(nd.esize)
	gn.memsetShape(nd, r.n(4) == 0)
	nd.foot = addTouch(nil, nd.dst, true)
	if r.n(3) == 0 {
		nd.foot = addTouch(nd.foot, pick(r, ts), true)
	}
	gn.add(x, nd)
}

func (gn *diffGen) copyShape(nd *dnode) {
	r := gn.r
	ds, ss := gn.p.res[nd.dst].size, gn.p.res[nd.src].size
	nd.size = 1 + r.n(min(ds, ss))
	nd.doff = r.n(ds - nd.size + 1)
	nd.soff = r.n(ss - nd.size + 1)
}

func (gn *diffGen) copy(x *gctx) {
	r := gn.r
	ts := gn.devTargets()
	hs := []int{diffBufs, diffBufs + 1}
	nd := &dnode{kind: dCopy, ckind: r.n(3)}
	if x.body { // bodies copy device memory only
		nd.ckind = cDtoD
	}
	switch nd.ckind {
	case cDtoD:
		nd.dst = pick(r, ts)
		nd.src = ts[(slices.Index(ts, nd.dst)+1+r.n(len(ts)-1))%len(ts)] // another buffer: no overlap
	case cHtoD:
		nd.dst, nd.src = pick(r, ts), pick(r, hs)
		if !gn.p.pinned {
			nd.src = hs[0] // the host buffer no host node writes (host)
		}
	case cDtoH:
		nd.dst, nd.src = pick(r, hs), pick(r, ts)
	}
	gn.copyShape(nd)
	nd.foot = addTouch(addTouch(nil, nd.dst, true), nd.src, false)
	if r.n(3) == 0 {
		dsts := ts
		if nd.ckind == cDtoH {
			dsts = hs
		}
		nd.foot = addTouch(nd.foot, pick(r, dsts), true)
	}
	gn.add(x, nd)
}

func (gn *diffGen) host(x *gctx) {
	r := gn.r
	// With pageable host buffers a host node writes only the second:
	// copies read only the first (copy), since what a copy reads of
	// pageable memory a host node of the same launch wrote is not
	// settled (the GPU answered both ways: docs/memory.md).
	hosts := diffHosts
	if !gn.p.pinned {
		hosts = 1
	}
	first := diffBufs + diffHosts - hosts
	nd := &dnode{kind: dHost, dst: first + r.n(hosts), mul: byte(r.u8() | 1), add: byte(r.u8())}
	nd.foot = addTouch(nil, nd.dst, true)
	if r.n(3) == 0 {
		nd.foot = addTouch(nd.foot, first+r.n(hosts), true)
	}
	gn.add(x, nd)
}

// alloc adds an alloc node and a memset that fills the allocation: its
// contents are undefined until then, and the memset is fixed so that they
// stay defined whatever changes.
func (gn *diffGen) alloc(x *gctx) {
	r := gn.r
	t := gn.newRes(diffRes{kind: resTemp, size: 4 * (1 + r.n(16))})
	gn.add(x, &dnode{kind: dAlloc, dst: t, fixed: true, foot: []touch{{t, true}}})
	gn.add(x, &dnode{kind: dMemset, dst: t, esize: 4, width: gn.p.res[t].size / 4, height: 1, val: r.u32(), fixed: true, foot: []touch{{t, true}}})
	gn.live = append(gn.live, t)
}

func (gn *diffGen) free(x *gctx) {
	r := gn.r
	i := r.n(len(gn.live))
	t := gn.live[i]
	if r.n(2) == 0 { // copy the result out first, or it is lost
		nd := &dnode{kind: dCopy, ckind: cDtoD, dst: r.n(diffBufs), src: t}
		gn.copyShape(nd)
		nd.foot = addTouch(addTouch(nil, nd.dst, true), t, false)
		gn.add(x, nd)
	}
	gn.add(x, &dnode{kind: dFree, dst: t, fixed: true, foot: []touch{{t, true}}})
	gn.live = slices.Delete(gn.live, i, i+1)
}

// inner generates k nodes of a child graph or a conditional body.
func (gn *diffGen) inner(x *gctx, k int) {
	for ; k > 0; k-- {
		switch gn.r.n(6) {
		case 0, 1:
			gn.kernel(x)
		case 2:
			gn.memset(x)
		case 3:
			gn.copy(x)
		case 4:
			if x.body {
				gn.kernel(x)
			} else {
				gn.host(x)
			}
		case 5:
			if x.child {
				gn.add(x, &dnode{kind: dEmpty})
			} else {
				gn.childGraph(x)
			}
		}
	}
}

// footOf is the union of the footprints of g's nodes.
func footOf(foot []touch, g *dgraph) []touch {
	for _, nd := range g.nodes {
		for _, tc := range nd.foot {
			foot = addTouch(foot, tc.r, tc.w)
		}
	}
	return foot
}

func (gn *diffGen) childGraph(x *gctx) {
	name := fmt.Sprintf("%s#%d.", x.name, len(x.g.nodes))
	c := newCtx(name+"c", false, x.body, true)
	gn.inner(c, 1+gn.r.n(3))
	gn.add(x, &dnode{kind: dChild, body: []*dgraph{c.g}, foot: footOf(nil, c.g)})
}

// cond adds a conditional node, the kernel that sets its value unless the
// handle's default does, and for WHILE a counter and the memset that sets
// it: the body counts it down, so the loop runs at most 3 times.
func (gn *diffGen) cond(x *gctx) {
	r := gn.r
	ctype := gg.ConditionalType(r.n(3))
	size := 1
	switch ctype {
	case gg.ConditionalIf:
		size = 1 + r.n(2)
	case gg.ConditionalSwitch:
		size = 1 + r.n(3)
	}
	setter := r.n(3) != 0
	h := gn.newRes(diffRes{kind: resHandle, dflt: uint32(r.n(4))})
	gn.p.res[h].assign = !setter || r.n(2) == 0
	nd := &dnode{kind: dCond, ctype: ctype, h: h, foot: []touch{{h, true}}}
	if setter {
		mod := uint32(2 + r.n(3))
		if ctype == gg.ConditionalSwitch {
			mod = uint32(size + 1) // sometimes no body
		}
		src := r.n(diffBufs)
		gn.add(x, &dnode{kind: dSet, h: h, src: src, k: uint32(r.u8()), mod: mod, foot: []touch{{h, true}, {src, false}}})
	}
	if ctype == gg.ConditionalWhile {
		ctr := gn.newRes(diffRes{kind: resCtr, size: 4})
		gn.add(x, &dnode{kind: dMemset, dst: ctr, esize: 4, width: 1, height: 1, val: uint32(r.n(4)), fixed: true, foot: []touch{{ctr, true}}})
		nd.dst = ctr
		nd.foot = addTouch(nd.foot, ctr, true)
	}
	name := fmt.Sprintf("%s#%d.", x.name, len(x.g.nodes))
	for b := 0; b < size; b++ {
		c := newCtx(fmt.Sprintf("%sb%d", name, b), false, true, false)
		if ctype == gg.ConditionalWhile {
			gn.add(c, &dnode{kind: dCount, h: h, dst: nd.dst, fixed: true, foot: []touch{{h, true}, {nd.dst, true}}})
		}
		gn.inner(c, r.n(4))
		nd.body = append(nd.body, c.g)
		nd.foot = footOf(nd.foot, c.g)
	}
	gn.add(x, nd)
}

// decode turns an input into a program, and returns a reader for the
// launches and changes: the input read backwards, so that a program that
// reads all of it still meets changes.
func decode(in []byte) (*diffProg, *rd) {
	in = in[:min(len(in), maxDiffProgram)]
	r := &rd{b: in}
	flags := r.u8()
	p := &diffProg{capture: flags&1 != 0, mode: gg.CaptureMode((flags >> 1 & 3) % 3), memCheck: flags&8 != 0,
		autoFree: flags&16 != 0, upload: flags&32 != 0, pinned: flags&64 != 0, live: -1}
	nops := 1 + r.n(12)
	p.launches = 2 + r.n(3)
	p.seed = uint32(r.u8()) | uint32(r.u8())<<8
	for i := 0; i < diffBufs; i++ {
		p.res = append(p.res, diffRes{kind: resDev, size: diffBytes})
	}
	for i := 0; i < diffHosts; i++ {
		p.res = append(p.res, diffRes{kind: resHost, size: diffBytes})
	}
	gn := &diffGen{r: r, p: p}
	x := newCtx("", true, false, false)
	for i := 0; i < nops; i++ {
		gn.op(x)
	}
	// Free what is left, but for one allocation that AutoFreeOnLaunch frees
	// at the next launch: it must read back as computed meanwhile.
	for len(gn.live) > 0 {
		if p.autoFree && len(gn.live) == 1 {
			p.live = gn.live[0]
			break
		}
		gn.free(x)
	}
	p.top = x.g
	gn.placeDevices()
	back := slices.Clone(in)
	slices.Reverse(back)
	return p, &rd{b: back}
}

// placeDevices reads, after the whole program, whether it runs on two
// devices, and if so where each device buffer lives and where each
// top-level kernel, memset, memcpy and host node runs. Read last, so that
// an input of a single-device program decodes as it did before devices
// came: one that reads all its bytes stays on one device.
//
// A two-device program enables peer access both ways, grants device 1
// access to every graph allocation (the alloc node's access descriptors,
// or under capture a memory pool whose access includes device 1), and
// captures device 1's work in a stream of device 1 that joins the capture
// through an event. Memory, conditional, child graph and handle-setting
// nodes stay on device 0, the graph's; so does all work in child graphs
// and conditional bodies. Where work runs changes nothing in what it
// computes: the reference ignores it.
func (gn *diffGen) placeDevices() {
	r, p := gn.r, gn.p
	if r.u8()%3 != 1 {
		return
	}
	p.multi = true
	for i := range diffBufs {
		p.res[i].dev = r.n(2)
	}
	for _, nd := range p.top.nodes {
		if placeable(nd.kind) {
			nd.dev = r.n(2)
		}
		if p.capture {
			nd.strm = nd.dev // stream 1 is device 1's
		}
	}
}

// placeable reports whether a top-level node of kind k may run on device 1.
func placeable(k dkind) bool {
	return k == dKernel || k == dMemset || k == dCopy || k == dHost
}

// Program text, for failures.

func (p *diffProg) resName(i int) string {
	return fmt.Sprintf("%c%d", "dhtcH"[p.res[i].kind], i)
}

func (p *diffProg) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capture %v (mode %d), memcheck %v, autofree %v, upload %v, pinned %v, two devices %v, %d launches, seed %#x\nresources:",
		p.capture, p.mode, p.memCheck, p.autoFree, p.upload, p.pinned, p.multi, p.launches, p.seed)
	for i, r := range p.res {
		switch r.kind {
		case resHandle:
			fmt.Fprintf(&b, " %s(default %d, assign %v)", p.resName(i), r.dflt, r.assign)
		case resDev:
			fmt.Fprintf(&b, " %s(%dB, device %d)", p.resName(i), r.size, r.dev)
		default:
			fmt.Fprintf(&b, " %s(%dB)", p.resName(i), r.size)
		}
	}
	b.WriteString("\n")
	p.write(&b, p.top, "  ")
	return b.String()
}

func (p *diffProg) write(b *strings.Builder, g *dgraph, indent string) {
	for _, nd := range g.nodes {
		fmt.Fprintf(b, "%s%s %s", indent, nd.name, p.nodeText(nd))
		fmt.Fprintf(b, " deps %v", nd.deps)
		if nd.dev != 0 {
			fmt.Fprintf(b, " on device %d", nd.dev)
		}
		if nd.fixed {
			b.WriteString(" fixed")
		}
		if nd.off {
			b.WriteString(" disabled")
		}
		b.WriteString("\n")
		for i, body := range nd.body {
			fmt.Fprintf(b, "%s  body %d:\n", indent, i)
			p.write(b, body, indent+"    ")
		}
	}
}

func (p *diffProg) nodeText(nd *dnode) string {
	rn := p.resName
	switch nd.kind {
	case dKernel:
		return fmt.Sprintf("kernel diff%d %s <- %s n=%d k=%#x grid=%d block=%d", nd.fn, rn(nd.dst), rn(nd.src), nd.n, nd.k, nd.grid, nd.block)
	case dSet:
		return fmt.Sprintf("set %s = (%s[0]+%d)%%%d", rn(nd.h), rn(nd.src), nd.k, nd.mod)
	case dCount:
		return fmt.Sprintf("countdown %s, clears %s", rn(nd.dst), rn(nd.h))
	case dMemset:
		return fmt.Sprintf("memset %s+%d = %#x, %d x %dB x %d rows, pitch %d", rn(nd.dst), nd.doff, nd.val, nd.width, nd.esize, nd.height, nd.pitch)
	case dCopy:
		return fmt.Sprintf("memcpy %s+%d <- %s+%d, %dB", rn(nd.dst), nd.doff, rn(nd.src), nd.soff, nd.size)
	case dHost:
		return fmt.Sprintf("host %s = %s*%d+%d", rn(nd.dst), rn(nd.dst), nd.mul, nd.add)
	case dAlloc, dFree:
		return fmt.Sprintf("%v %s", nd.kind, rn(nd.dst))
	case dCond:
		return fmt.Sprintf("%v %s size %d", nd.ctype, rn(nd.h), len(nd.body))
	}
	return nd.kind.String()
}

// The reference.

type diffState struct {
	mem [][]byte // by resource; nil for handles
	hv  []uint32 // handle values, by resource
	// staged are the pageable host buffers as they were when the launch
	// was called, by resource: what a memcpy node copies from them,
	// unless a copy into pageable memory before it staged its source
	// again (restaged, by node; after: copiesAfter).
	staged   [][]byte
	restaged map[*dnode][]byte
	after    map[*dnode][]*dnode
}

var ne = binary.NativeEndian

// initial is the state before the first launch: buffers filled from the
// program's seed, counters zero.
func (p *diffProg) initial() *diffState {
	st := &diffState{mem: make([][]byte, len(p.res)), hv: make([]uint32, len(p.res))}
	x := p.seed*2654435761 | 1
	for i, r := range p.res {
		if r.kind == resHandle {
			continue
		}
		st.mem[i] = make([]byte, r.size)
		if r.kind == resDev || r.kind == resHost {
			for j := range st.mem[i] {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				st.mem[i][j] = byte(x)
			}
		}
	}
	return st
}

func (st *diffState) clone() *diffState {
	c := &diffState{mem: make([][]byte, len(st.mem)), hv: slices.Clone(st.hv)}
	for i, m := range st.mem {
		c.mem[i] = slices.Clone(m)
	}
	return c
}

// launch evaluates one launch of the program in st, in a topological order
// drawn from rng.
func (p *diffProg) launch(st *diffState, rng *uint32) error {
	for i, r := range p.res {
		if r.kind == resHandle && r.assign {
			st.hv[i] = r.dflt
		}
	}
	// A memcpy node reads pageable host memory as staged at the launch
	// call or where the last copy into pageable memory before it
	// completed (docs/driver-pageable.txt); pinned memory when it runs.
	// Host nodes of pageable programs never write what copies read
	// (diffGen.host): what such a copy would read is not settled.
	st.staged = make([][]byte, len(p.res))
	for i, r := range p.res {
		if r.kind == resHost && !p.pinned {
			st.staged[i] = slices.Clone(st.mem[i])
		}
	}
	if !p.pinned { // only pageable programs stage again
		st.restaged, st.after = map[*dnode][]byte{}, p.copiesAfter()
	}
	defer func() { st.staged, st.restaged, st.after = nil, nil, nil }()
	return p.eval(st, p.top, rng)
}

// order is a topological order of g, each step taking a random ready node.
func order(g *dgraph, rng *uint32) []int {
	n := len(g.nodes)
	indeg := make([]int, n)
	succ := make([][]int, n)
	for i, nd := range g.nodes {
		indeg[i] = len(nd.deps)
		for _, d := range nd.deps {
			succ[d] = append(succ[d], i)
		}
	}
	var ready, out []int
	for i := range n {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		*rng = *rng*1664525 + 1013904223
		j := int(*rng>>16) % len(ready)
		i := ready[j]
		ready = slices.Delete(ready, j, j+1)
		out = append(out, i)
		for _, s := range succ[i] {
			if indeg[s]--; indeg[s] == 0 {
				ready = append(ready, s)
			}
		}
	}
	return out
}

// copiesAfter maps each copy node to the copy nodes after it, in its
// graph and, through the child graph nodes holding it, in theirs (the
// nodes of child graphs after it included; conditional bodies are not
// looked into: they hold no copies of host memory).
func (p *diffProg) copiesAfter() map[*dnode][]*dnode {
	type at struct {
		g *dgraph
		i int
	}
	parent := map[*dgraph]at{}
	succ := map[*dgraph][][]int{}
	var walk func(g *dgraph)
	walk = func(g *dgraph) {
		s := make([][]int, len(g.nodes))
		for i, nd := range g.nodes {
			for _, d := range nd.deps {
				s[d] = append(s[d], i)
			}
			if nd.kind == dChild {
				parent[nd.body[0]] = at{g, i}
				walk(nd.body[0])
			}
		}
		succ[g] = s
	}
	walk(p.top)
	var all func(g *dgraph, add func(*dnode))
	all = func(g *dgraph, add func(*dnode)) {
		for _, nd := range g.nodes {
			add(nd)
			if nd.kind == dChild {
				all(nd.body[0], add)
			}
		}
	}
	out := map[*dnode][]*dnode{}
	var each func(g *dgraph)
	each = func(g *dgraph) {
		for i, x := range g.nodes {
			if x.kind == dChild {
				each(x.body[0])
			}
			if x.kind != dCopy {
				continue
			}
			seen := map[*dnode]bool{}
			add := func(nd *dnode) {
				if nd.kind == dCopy && !seen[nd] {
					seen[nd] = true
					out[x] = append(out[x], nd)
				}
			}
			visited := map[at]bool{}
			var visit func(a at)
			visit = func(a at) {
				if visited[a] {
					return
				}
				visited[a] = true
				nd := a.g.nodes[a.i]
				add(nd)
				if nd.kind == dChild {
					all(nd.body[0], add)
				}
				for _, s := range succ[a.g][a.i] {
					visit(at{a.g, s})
				}
			}
			for c := (at{g, i}); ; {
				for _, s := range succ[c.g][c.i] {
					visit(at{c.g, s})
				}
				up, ok := parent[c.g]
				if !ok {
					break
				}
				c = up
			}
		}
	}
	each(p.top)
	return out
}

func (p *diffProg) eval(st *diffState, g *dgraph, rng *uint32) error {
	for _, i := range order(g, rng) {
		if err := p.evalNode(st, g.nodes[i], rng); err != nil {
			return err
		}
	}
	return nil
}

func (p *diffProg) evalNode(st *diffState, nd *dnode, rng *uint32) error {
	if nd.off {
		return nil
	}
	switch nd.kind {
	case dKernel:
		d, s := st.mem[nd.dst], st.mem[nd.src]
		for i := range min(nd.n, nd.grid*nd.block) {
			ne.PutUint32(d[4*i:], diffOps[nd.fn](ne.Uint32(d[4*i:]), ne.Uint32(s[4*i:]), i, nd.k))
		}
	case dSet:
		st.hv[nd.h] = (ne.Uint32(st.mem[nd.src]) + nd.k) % nd.mod
	case dCount:
		c := int32(ne.Uint32(st.mem[nd.dst])) - 1
		ne.PutUint32(st.mem[nd.dst], uint32(c))
		if c <= 0 {
			st.hv[nd.h] = 0
		}
	case dMemset:
		d := st.mem[nd.dst]
		for row := range nd.height {
			for e := range nd.width {
				at := d[nd.doff+row*nd.pitch+e*nd.esize:]
				switch nd.esize {
				case 1:
					at[0] = byte(nd.val)
				case 2:
					ne.PutUint16(at, uint16(nd.val))
				case 4:
					ne.PutUint32(at, nd.val)
				}
			}
		}
	case dCopy:
		src := st.mem[nd.src]
		if st.staged != nil && st.staged[nd.src] != nil {
			src = st.staged[nd.src]
			if r, ok := st.restaged[nd]; ok {
				src = r
			}
		}
		copy(st.mem[nd.dst][nd.doff:nd.doff+nd.size], src[nd.soff:])
		if st.staged != nil && st.staged[nd.dst] != nil {
			// Into pageable memory: the copies after it stage their
			// pageable sources again.
			for _, y := range st.after[nd] {
				if st.staged[y.src] != nil {
					st.restaged[y] = slices.Clone(st.mem[y.src])
				}
			}
		}
	case dHost:
		hostOp(st.mem[nd.dst], nd.mul, nd.add)
	case dChild:
		return p.eval(st, nd.body[0], rng)
	case dCond:
		v := st.hv[nd.h]
		switch nd.ctype {
		case gg.ConditionalIf:
			if v != 0 {
				return p.eval(st, nd.body[0], rng)
			} else if len(nd.body) == 2 {
				return p.eval(st, nd.body[1], rng)
			}
		case gg.ConditionalWhile:
			for it := 0; st.hv[nd.h] != 0; it++ {
				if it == maxLoop {
					return fmt.Errorf("%s: the reference loops more than %d times", nd.name, maxLoop)
				}
				if err := p.eval(st, nd.body[0], rng); err != nil {
					return err
				}
			}
		case gg.ConditionalSwitch:
			if int(v) < len(nd.body) {
				return p.eval(st, nd.body[v], rng)
			}
		}
	}
	return nil
}

func hostOp(b []byte, mul, add byte) {
	for i := range b {
		b[i] = b[i]*mul + add
	}
}

// The device side.

type diffEnv struct {
	t  *testing.T
	d  *gg.Device
	s  [3]*gg.Stream // 0 and 1: capture and launches; 2: capture of bodies
	ev *gg.Event
	// Two-device programs: device 1, its stream (device 1's work under
	// capture), its event, and the pool of device 0 that device 1 may
	// access (captured allocations).
	d1   *gg.Device
	s1   *gg.Stream
	ev1  *gg.Event
	pool *gg.MemPool
	ptr  []gg.DevicePtr // device buffers and counters, by resource
	host [][]byte       // host buffers, by resource
	run  diffRun
}

// diffBuilt is one graph built from a program: this graph's allocations,
// handles and nodes.
type diffBuilt struct {
	g    *gg.Graph
	top  *gg.Graph // where handles are created: g, or the capture's graph
	ptr  []gg.DevicePtr
	h    map[int]gg.ConditionalHandle
	node map[*dnode]*gg.Node
}

func newDiffEnv(t *testing.T, backend string, p *diffProg) *diffEnv {
	var opts []gg.Option
	if p.memCheck && backend == gg.BackendHost { // the checking mode is the host backend's
		opts = append(opts, gg.WithMemCheck())
	}
	d, err := gg.Open(backend, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	env := &diffEnv{t: t, d: d, ptr: make([]gg.DevicePtr, len(p.res)), host: make([][]byte, len(p.res))}
	diffLast = env
	for i := range env.s {
		env.s[i] = must[*gg.Stream](t)(d.NewStream())
	}
	env.ev = must[*gg.Event](t)(d.NewEvent(0))
	if p.multi {
		env.openPeer(backend, opts)
	}
	for i, r := range p.res {
		switch r.kind {
		case resDev, resCtr:
			env.ptr[i] = must[gg.DevicePtr](t)(env.dev(p, i).Malloc(r.size))
		case resHost:
			if p.pinned {
				env.host[i] = must[[]byte](t)(d.MallocHost(r.size))
			} else {
				env.host[i] = make([]byte, r.size)
			}
		}
	}
	return env
}

// openPeer opens device 1 for a two-device program, with peer access both
// ways and a pool of device 0 that device 1 may access. On host it makes
// the backend a two-device one for the test; on cuda, with fewer than two
// GPUs or none that can access the other, it skips the input.
func (env *diffEnv) openPeer(backend string, opts []gg.Option) {
	t := env.t
	if backend == gg.BackendHost {
		if n, _ := gg.DeviceCount(backend); n < 2 {
			ok(t, gg.SetHostDeviceCount(2))
			t.Cleanup(func() { gg.SetHostDeviceCount(n) })
		}
	} else if n, _ := gg.DeviceCount(backend); n < 2 {
		t.Skipf("a two-device program; the %s backend has %d device(s)", backend, n)
	}
	d1, err := gg.Open(backend, append(opts, gg.WithOrdinal(1))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d1.Close() })
	backendtest.EnablePeers(t, env.d, d1)
	env.d1 = d1
	env.s1 = must[*gg.Stream](t)(d1.NewStream())
	env.ev1 = must[*gg.Event](t)(d1.NewEvent(0))
	env.pool = must[*gg.MemPool](t)(env.d.NewMemPool(gg.MemPoolProps{Location: 0}))
	t.Cleanup(func() { env.pool.Destroy() })
	ok(t, env.pool.SetAccess(1, gg.AccessReadWrite))
}

// dev is the device of resource i: device 1 for a device buffer placed
// there, else device 0.
func (env *diffEnv) dev(p *diffProg, i int) *gg.Device {
	if p.res[i].kind == resDev && p.res[i].dev == 1 {
		return env.d1
	}
	return env.d
}

// event is an event of st's device, for st to record.
func (env *diffEnv) event(st *gg.Stream) *gg.Event {
	if env.d1 != nil && st.Device() == env.d1 {
		return env.ev1
	}
	return env.ev
}

// captureStreams are the streams a capture of p's top-level graph uses:
// two of device 0, or device 0's and device 1's.
func (env *diffEnv) captureStreams(p *diffProg) []*gg.Stream {
	if p.multi {
		return []*gg.Stream{env.s[0], env.s1}
	}
	return []*gg.Stream{env.s[0], env.s[1]}
}

// load sets the device and host buffers to st.
func (env *diffEnv) load(p *diffProg, st *diffState) {
	for i, r := range p.res {
		switch r.kind {
		case resDev, resCtr:
			ok(env.t, env.dev(p, i).Memcpy(gg.HtoD(env.ptr[i], st.mem[i])))
		case resHost:
			copy(env.host[i], st.mem[i])
		}
	}
}

// snapshot reads every buffer the reference can predict.
func (env *diffEnv) snapshot(p *diffProg, b *diffBuilt) [][]byte {
	out := make([][]byte, len(p.res))
	for i, r := range p.res {
		switch {
		case r.kind == resDev || r.kind == resCtr || i == p.live:
			out[i] = make([]byte, r.size)
			ok(env.t, env.dev(p, i).Memcpy(gg.DtoH(out[i], b.ptr[i])))
		case r.kind == resHost:
			out[i] = slices.Clone(env.host[i])
		}
	}
	return out
}

// diff describes how got differs from the reference, or is "".
func diff(p *diffProg, got [][]byte, st *diffState) string {
	var b strings.Builder
	for i, g := range got {
		if g != nil && !bytes.Equal(g, st.mem[i]) {
			fmt.Fprintf(&b, "%s:\n   got % x\n  want % x\n", p.resName(i), g, st.mem[i])
		}
	}
	return b.String()
}

func (b *diffBuilt) handle(p *diffProg, h int) (gg.ConditionalHandle, error) {
	if v, ok := b.h[h]; ok {
		return v, nil
	}
	var flags gg.ConditionalFlags
	if p.res[h].assign {
		flags = gg.ConditionalAssignDefault
	}
	v, err := b.top.ConditionalHandleCreate(p.res[h].dflt, flags)
	b.h[h] = v
	return v, err
}

// params are the parameters of a kernel, memset, memcpy or host node.
func (env *diffEnv) params(b *diffBuilt, nd *dnode) gg.NodeParams {
	switch nd.kind {
	case dKernel:
		return gg.KernelParams{Kernel: diffKernels[nd.fn], Grid: gg.Dim1(nd.grid), Block: gg.Dim1(nd.block),
			Args: []any{b.ptr[nd.dst], b.ptr[nd.src], nd.n, nd.k}}
	case dSet:
		return gg.KernelParams{Kernel: kDiffSet, Grid: one, Block: one, Args: []any{b.h[nd.h], b.ptr[nd.src], nd.k, nd.mod}}
	case dCount:
		return gg.KernelParams{Kernel: kDiffCount, Grid: one, Block: one, Args: []any{b.h[nd.h], b.ptr[nd.dst]}}
	case dMemset:
		return gg.MemsetParams{Dst: b.ptr[nd.dst] + gg.DevicePtr(nd.doff), Value: nd.val, ElementSize: nd.esize,
			Width: nd.width, Height: nd.height, Pitch: nd.pitch}
	case dCopy:
		switch nd.ckind {
		case cHtoD:
			return gg.HtoD(b.ptr[nd.dst]+gg.DevicePtr(nd.doff), env.host[nd.src][nd.soff:nd.soff+nd.size])
		case cDtoH:
			return gg.DtoH(env.host[nd.dst][nd.doff:nd.doff+nd.size], b.ptr[nd.src]+gg.DevicePtr(nd.soff))
		}
		return gg.DtoD(b.ptr[nd.dst]+gg.DevicePtr(nd.doff), b.ptr[nd.src]+gg.DevicePtr(nd.soff), nd.size)
	case dHost:
		buf, mul, add := env.host[nd.dst], nd.mul, nd.add
		return gg.HostParams{Fn: func() { hostOp(buf, mul, add) }}
	}
	panic(nd.kind)
}

// build makes a graph of p, with the explicit API or by capture.
func (env *diffEnv) build(p *diffProg) (b *diffBuilt, err error) {
	b = &diffBuilt{ptr: slices.Clone(env.ptr), h: map[int]gg.ConditionalHandle{}, node: map[*dnode]*gg.Node{}}
	if !p.capture {
		if b.g, err = env.d.NewGraph(); err != nil {
			return b, err
		}
		b.top = b.g
		return b, env.addAll(p, b, b.g, p.top, nil)
	}
	streams := env.captureStreams(p)
	s0, s1 := streams[0], streams[1]
	if err := s0.BeginCapture(p.mode); err != nil {
		return b, err
	}
	// s1 joins the capture through an event, and is joined back at the end.
	info, err := s0.CaptureInfo()
	b.top = info.Graph
	if err == nil {
		err = s0.Record(env.ev)
	}
	if err == nil {
		err = s1.Wait(env.ev)
	}
	if err == nil {
		err = env.addAll(p, b, nil, p.top, streams)
	}
	if err == nil {
		err = s1.Record(env.event(s1))
	}
	if err == nil {
		err = s0.Wait(env.event(s1))
	}
	g, endErr := s0.EndCapture()
	if err == nil {
		err = endErr
	}
	b.g = g
	return b, err
}

// addAll adds the nodes of dg to g, or captures them into streams.
func (env *diffEnv) addAll(p *diffProg, b *diffBuilt, g *gg.Graph, dg *dgraph, streams []*gg.Stream) error {
	ns := make([]*gg.Node, len(dg.nodes))
	for i, nd := range dg.nodes {
		deps := make([]*gg.Node, len(nd.deps))
		for j, d := range nd.deps {
			deps[j] = ns[d]
		}
		var err error
		if streams == nil {
			ns[i], err = env.addNode(p, b, g, nd, deps)
		} else {
			ns[i], err = env.captureNode(p, b, nd, deps, streams)
		}
		if err != nil {
			return fmt.Errorf("%s (%v): %w", nd.name, nd.kind, err)
		}
		b.node[nd] = ns[i]
	}
	return nil
}

func (env *diffEnv) addNode(p *diffProg, b *diffBuilt, g *gg.Graph, nd *dnode, deps []*gg.Node) (n *gg.Node, err error) {
	switch nd.kind {
	case dKernel, dSet, dCount, dMemset, dCopy, dHost:
		if nd.kind == dSet {
			if _, err := b.handle(p, nd.h); err != nil {
				return nil, err
			}
		}
		if nd.dev == 1 {
			return g.AddNodeOn(env.d1, env.params(b, nd), deps...)
		}
		return g.AddNode(env.params(b, nd), deps...)
	case dEmpty:
		return g.AddEmptyNode(deps...)
	case dAlloc:
		ap := gg.MemAllocParams{Size: p.res[nd.dst].size}
		if p.multi {
			ap.Access = []gg.MemAccessDesc{{Device: 1}}
		}
		n, b.ptr[nd.dst], err = g.AddMemAllocNode(ap, deps...)
		return n, err
	case dFree:
		return g.AddMemFreeNode(b.ptr[nd.dst], deps...)
	case dChild:
		cg, err := env.child(p, b, nd)
		if err != nil {
			return nil, err
		}
		if n, err = g.AddChildGraphNode(cg, deps...); err != nil {
			return nil, err
		}
		return n, b.embedded(n, nd)
	case dCond:
		return env.condNode(p, b, g, nd, deps)
	}
	panic(nd.kind)
}

// child builds the graph of a child graph node.
func (env *diffEnv) child(p *diffProg, b *diffBuilt, nd *dnode) (*gg.Graph, error) {
	cg, err := env.d.NewGraph()
	if err != nil {
		return nil, err
	}
	return cg, env.addAll(p, b, cg, nd.body[0], nil)
}

// embedded points the nodes of nd's child graph at their copies in the
// graph embedded in n, the nodes the executable graph knows.
func (b *diffBuilt) embedded(n *gg.Node, nd *dnode) error {
	emb, err := n.ChildGraph()
	if err != nil {
		return err
	}
	for _, inner := range nd.body[0].nodes {
		m, err := emb.ClonedNode(b.node[inner])
		if err != nil {
			return err
		}
		b.node[inner] = m
		if inner.kind == dChild {
			if err := b.embedded(m, inner); err != nil {
				return err
			}
		}
	}
	return nil
}

func (env *diffEnv) condNode(p *diffProg, b *diffBuilt, g *gg.Graph, nd *dnode, deps []*gg.Node) (*gg.Node, error) {
	h, err := b.handle(p, nd.h)
	if err != nil {
		return nil, err
	}
	n, err := g.AddNode(gg.ConditionalParams{Handle: h, Type: nd.ctype, Size: len(nd.body)}, deps...)
	if err != nil {
		return nil, err
	}
	bodies, err := n.ConditionalBodies()
	if err != nil {
		return nil, err
	}
	for i, body := range nd.body {
		if !p.capture {
			err = env.addAll(p, b, bodies[i], body, nil)
		} else { // capture into the body, as cudaStreamBeginCaptureToGraph does
			sb := env.s[2]
			if err = sb.BeginCaptureToGraph(bodies[i], nil, p.mode); err == nil {
				err = env.addAll(p, b, nil, body, []*gg.Stream{sb})
				if _, e := sb.EndCapture(); err == nil {
					err = e
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// captureNode captures nd into streams[nd.strm] after deps, and returns the
// node captured.
func (env *diffEnv) captureNode(p *diffProg, b *diffBuilt, nd *dnode, deps []*gg.Node, streams []*gg.Stream) (*gg.Node, error) {
	st := streams[nd.strm%len(streams)]
	if err := env.setDeps(st, streams, deps, nd.route == 1); err != nil {
		return nil, err
	}
	var err error
	switch nd.kind {
	case dKernel, dSet, dCount:
		if nd.kind == dSet {
			if _, err := b.handle(p, nd.h); err != nil {
				return nil, err
			}
		}
		err = st.LaunchKernel(env.params(b, nd).(gg.KernelParams))
	case dMemset:
		err = st.Memset(env.params(b, nd).(gg.MemsetParams))
	case dCopy:
		err = st.Memcpy(env.params(b, nd).(gg.MemcpyParams))
	case dHost:
		err = st.LaunchHostFunc(env.params(b, nd).(gg.HostParams).Fn)
	case dAlloc:
		if p.multi { // from a pool device 1 may access: so may it the allocation
			b.ptr[nd.dst], err = st.MallocFromPoolAsync(p.res[nd.dst].size, env.pool)
		} else {
			b.ptr[nd.dst], err = st.MallocAsync(p.res[nd.dst].size)
		}
	case dFree:
		err = st.FreeAsync(b.ptr[nd.dst])
	case dEmpty, dChild, dCond:
		err = env.captureGraphNode(p, b, st, nd, deps)
	}
	if err != nil {
		return nil, err
	}
	info, err := st.CaptureInfo()
	if err != nil {
		return nil, err
	}
	if len(info.Dependencies) != 1 {
		return nil, fmt.Errorf("after capturing one operation, the stream depends on %d nodes", len(info.Dependencies))
	}
	return info.Dependencies[0], nil
}

// captureGraphNode captures a node without a stream operation: it is added
// to the capture's graph and made the stream's dependencies, as CUDA code
// does.
func (env *diffEnv) captureGraphNode(p *diffProg, b *diffBuilt, st *gg.Stream, nd *dnode, deps []*gg.Node) error {
	var cg *gg.Graph
	if nd.kind == dChild {
		var err error
		if cg, err = env.child(p, b, nd); err != nil {
			return err
		}
	}
	info, err := st.CaptureInfo()
	if err != nil {
		return err
	}
	var n *gg.Node
	switch nd.kind {
	case dEmpty:
		n, err = info.Graph.AddEmptyNode(deps...)
	case dChild:
		if n, err = info.Graph.AddChildGraphNode(cg, deps...); err == nil {
			err = b.embedded(n, nd)
		}
	case dCond:
		n, err = env.condNode(p, b, info.Graph, nd, deps)
	}
	if err != nil {
		return err
	}
	return st.UpdateCaptureDependencies([]*gg.Node{n}, gg.SetCaptureDependencies)
}

// setDeps makes deps the dependencies of st's next work: directly, or the
// first so and each other one through an event recorded in another stream.
func (env *diffEnv) setDeps(st *gg.Stream, streams []*gg.Stream, deps []*gg.Node, route bool) error {
	if !route || len(streams) < 2 || len(deps) < 2 {
		return st.UpdateCaptureDependencies(deps, gg.SetCaptureDependencies)
	}
	other := streams[0]
	if other == st {
		other = streams[1]
	}
	if err := st.UpdateCaptureDependencies(deps[:1], gg.SetCaptureDependencies); err != nil {
		return err
	}
	ev := env.event(other)
	for _, d := range deps[1:] {
		for _, err := range []error{other.UpdateCaptureDependencies([]*gg.Node{d}, gg.SetCaptureDependencies), other.Record(ev), st.Wait(ev)} {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// checkShape checks that a graph built from p has the program's nodes and
// edges: capture must record exactly the dependencies it was given.
func checkShape(p *diffProg, b *diffBuilt) error {
	ns, err := b.g.Nodes()
	if err != nil {
		return err
	}
	if len(ns) != len(p.top.nodes) {
		return fmt.Errorf("graph has %d nodes, the program %d", len(ns), len(p.top.nodes))
	}
	for _, nd := range p.top.nodes {
		n := b.node[nd]
		got, err := n.Dependencies()
		if err != nil {
			return err
		}
		if len(got) != len(nd.deps) {
			return fmt.Errorf("%s: %d dependencies, want %d", nd.name, len(got), len(nd.deps))
		}
		for _, d := range nd.deps {
			if !slices.Contains(got, b.node[p.top.nodes[d]]) {
				return fmt.Errorf("%s: dependency #%d missing", nd.name, d)
			}
		}
	}
	return nil
}

// refusal reports whether err is a refusal the programs may meet (an
// *Error), and fails the test on any other error.
func refusal(t *testing.T, what string, err error, p *diffProg) bool {
	t.Helper()
	if err == nil {
		return false
	}
	var e *gg.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %v is not an *Error\n%v", what, err, p)
	}
	return true
}

// Changes.

// mutable lists the nodes whose parameters an executable graph built as b
// can change (all of them when b is nil).
func (p *diffProg) mutable(b *diffBuilt) []*dnode {
	var out []*dnode
	var walk func(g *dgraph)
	walk = func(g *dgraph) {
		for _, nd := range g.nodes {
			known := b == nil || b.node[nd] != nil
			switch nd.kind {
			case dKernel, dSet, dMemset, dCopy, dHost:
				if !nd.fixed && known {
					out = append(out, nd)
				}
			case dChild: // a new child graph (SetParams with ChildGraphParams), unless capture hid its nodes
				if b != nil && known && b.node[nd.body[0].nodes[0]] != nil {
					out = append(out, nd)
				}
			}
			for _, body := range nd.body {
				walk(body)
			}
		}
	}
	walk(p.top)
	return out
}

// choose picks a resource of nd's footprint of the same class as r (device
// memory or host memory), or r.
func (p *diffProg) choose(rr *rd, nd *dnode, r int, write bool) int {
	host := p.res[r].kind == resHost
	var cs []int
	for _, tc := range nd.foot {
		k := p.res[tc.r].kind
		if (tc.w || !write) && (k == resHost) == host && (k == resDev || k == resTemp || k == resHost) {
			cs = append(cs, tc.r)
		}
	}
	if len(cs) == 0 {
		return r
	}
	return pick(rr, cs)
}

// mutate changes nd's parameters, keeping them valid: targets move within
// the footprint, sizes within the buffers.
func (p *diffProg) mutate(r *rd, nd *dnode) {
	size := func(res int) int { return p.res[res].size }
	switch nd.kind {
	case dKernel:
		switch r.n(5) {
		case 0:
			nd.fn = r.n(len(diffOps))
		case 1:
			nd.k = r.u32()
		case 2:
			nd.grid, nd.block = 1+r.n(4), 1+r.n(8)
		case 3:
			nd.dst, nd.src = p.choose(r, nd, nd.dst, true), p.choose(r, nd, nd.src, false)
		}
		nd.n = 1 + r.n(min(size(nd.dst), size(nd.src))/4)
	case dSet:
		nd.k = uint32(r.u8())
	case dMemset:
		if r.n(2) == 0 {
			nd.val = r.u32()
		}
		if nd.height > 1 { // a 2D memset keeps its shape
			if d := p.choose(r, nd, nd.dst, true); nd.doff+nd.pitch*(nd.height-1)+nd.width*nd.esize <= size(d) {
				nd.dst = d
			}
		} else {
			nd.dst = p.choose(r, nd, nd.dst, true)
			nd.esize = []int{1, 2, 4}[r.n(3)]
			elems := size(nd.dst) / nd.esize
			nd.doff = nd.esize * r.n(elems)
			nd.width = 1 + r.n(elems-nd.doff/nd.esize)
		}
		if nd.esize < 4 {
			nd.val &= 1<<(8*nd.esize) - 1
		}
	case dCopy:
		if r.n(2) == 0 {
			dst, src := p.choose(r, nd, nd.dst, true), p.choose(r, nd, nd.src, false)
			if dst != src {
				nd.dst, nd.src = dst, src
			}
		}
		ds, ss := size(nd.dst), size(nd.src)
		nd.size = 1 + r.n(min(ds, ss))
		nd.doff, nd.soff = r.n(ds-nd.size+1), r.n(ss-nd.size+1)
	case dHost:
		nd.mul, nd.add = byte(r.u8()|1), byte(r.u8())
	}
}

// change applies one random change to e (built as b) and to p, and says
// what it did.
func (env *diffEnv) change(p *diffProg, b *diffBuilt, e *gg.Exec, r *rd) string {
	cands := p.mutable(b)
	if len(cands) == 0 {
		return "no node to change"
	}
	nd := cands[r.n(len(cands))]
	n := b.node[nd]
	switch {
	case nd.kind == dChild:
		// A new graph for the child graph node: the same nodes and edges,
		// other parameters.
		old := cloneGraph(nd.body[0])
		for _, m := range p.mutable(nil) {
			if r.n(2) == 0 && slices.Contains(nd.body[0].nodes, m) {
				p.mutate(r, m)
			}
		}
		tmp := &diffBuilt{ptr: b.ptr, h: b.h, node: map[*dnode]*gg.Node{}}
		cg, err := env.d.NewGraph()
		if err == nil {
			err = env.addAll(p, tmp, cg, nd.body[0], nil)
		}
		if err == nil {
			err = e.SetParams(n, gg.ChildGraphParams{Graph: cg})
		}
		if env.refusal("child graph update", err, p) {
			restoreGraph(nd.body[0], old)
			return fmt.Sprintf("%s: new child graph refused: %v", nd.name, err)
		}
		return fmt.Sprintf("%s: new child graph", nd.name)
	case r.n(4) == 0 && (nd.kind == dKernel || nd.kind == dMemset || nd.kind == dCopy):
		err := e.SetEnabled(n, nd.off)
		if env.refusal("SetEnabled", err, p) {
			return fmt.Sprintf("%s: SetEnabled(%v) refused: %v", nd.name, nd.off, err)
		}
		nd.off = !nd.off
		return fmt.Sprintf("%s: enabled %v", nd.name, !nd.off)
	}
	old := *nd
	p.mutate(r, nd)
	if err := e.SetParams(n, env.params(b, nd)); env.refusal("SetParams", err, p) {
		*nd = old
		return fmt.Sprintf("%s: SetParams(%s) refused: %v", nd.name, p.nodeText(nd), err)
	}
	return fmt.Sprintf("%s: now %s", nd.name, p.nodeText(nd))
}

// cloneGraph copies the parameters of g's nodes (not their identity).
func cloneGraph(g *dgraph) []dnode {
	var out []dnode
	for _, nd := range g.nodes {
		out = append(out, *nd)
	}
	return out
}

func restoreGraph(g *dgraph, old []dnode) {
	for i, nd := range g.nodes {
		*nd = old[i]
	}
}

// unupdatable makes a change that no update may make: the direction of a
// copy (device to device becomes host to device), or the shape of a 2D
// memset. It says what it did, or "" if p has no such node.
func (p *diffProg) unupdatable(r *rd) string {
	var cs []*dnode
	var walk func(g *dgraph)
	walk = func(g *dgraph) {
		for _, nd := range g.nodes {
			if (nd.kind == dCopy && nd.ckind == cDtoD) || (nd.kind == dMemset && nd.height > 1) {
				cs = append(cs, nd)
			}
			for _, b := range nd.body {
				walk(b)
			}
		}
	}
	walk(p.top)
	if len(cs) == 0 {
		return ""
	}
	nd := cs[r.n(len(cs))]
	if nd.kind == dCopy {
		nd.ckind, nd.src, nd.soff = cHtoD, diffBufs, 0
		return nd.name + ": now a copy from host memory"
	}
	nd.height--
	if nd.height == 1 {
		nd.pitch = 0
	}
	return fmt.Sprintf("%s: now %d rows", nd.name, nd.height)
}

// deepCopy copies a program, node by node, for another graph of it.
func (p *diffProg) deepCopy() *diffProg {
	c := *p
	c.res = slices.Clone(p.res)
	var cp func(g *dgraph) *dgraph
	cp = func(g *dgraph) *dgraph {
		out := &dgraph{}
		for _, nd := range g.nodes {
			m := *nd
			m.body = nil
			for _, b := range nd.body {
				m.body = append(m.body, cp(b))
			}
			out.nodes = append(out.nodes, &m)
		}
		return out
	}
	c.top = cp(p.top)
	return &c
}

// The targets.

// runDifferential runs input in on the backend and returns what the
// backend refused.
func runDifferential(t *testing.T, backend string, in []byte) diffRun {
	p, r := decode(in)
	env := newDiffEnv(t, backend, p)
	st := p.initial()
	env.load(p, st)
	b, err := env.build(p)
	if refusal(t, "build", err, p) {
		return env.refusedAt("build", err)
	}
	if err := checkShape(p, b); err != nil {
		t.Fatalf("%v\n%v", err, p)
	}
	var flags gg.InstantiateFlags
	if p.autoFree {
		flags |= gg.InstantiateAutoFreeOnLaunch
	}
	e, err := b.g.Instantiate(flags)
	if refusal(t, "Instantiate", err, p) {
		return env.refusedAt("Instantiate", err)
	}
	rng := p.seed | 1
	var log []string
	var last *gg.Stream // the stream of the last launch
	var lastStats gg.GraphMemStats
	for l := range p.launches {
		if l > 0 {
			for k := r.n(4); k > 0; k-- {
				log = append(log, env.change(p, b, e, r))
			}
			env.run.changes = append(env.run.changes[:0], log...)
		}
		s := env.s[r.n(2)]
		if l == 0 && p.upload {
			ok(t, e.Upload(s))
		}
		if err := e.Launch(s); err != nil {
			t.Fatalf("launch %d: %v\n%v\n%s", l, err, p, strings.Join(log, "\n"))
		}
		if err := s.Synchronize(); err != nil {
			t.Fatalf("launch %d: %v\n%v\n%s", l, err, p, strings.Join(log, "\n"))
		}
		if err := p.launch(st, &rng); err != nil {
			t.Fatalf("%v\n%v", err, p)
		}
		if d := diff(p, env.snapshot(p, b), st); d != "" {
			env.knownGap(p, fmt.Sprintf("launch %d differs from the reference:\n%s", l, d))
			t.Fatalf("launch %d differs from the reference:\n%s\nprogram:\n%v\nchanges:\n%s", l, d, p, strings.Join(log, "\n"))
		}
		// A relaunch into the stream of the last launch maps no more graph
		// memory: the stream's physical memory holds the graph's
		// allocations, and an auto-free graph frees the last launch's live
		// one first, so that it holds one launch's worth.
		stats, err := env.d.GraphMemStats()
		ok(t, err)
		if s == last && stats != lastStats {
			t.Fatalf("launch %d into the stream of launch %d: graph memory %+v, then %+v\nprogram:\n%v\nchanges:\n%s", l, l-1, lastStats, stats, p, strings.Join(log, "\n"))
		}
		last, lastStats = s, stats
		log = append(log, fmt.Sprintf("launch %d in stream %d: ok", l, slices.Index(env.s[:], s)))
	}
	return env.run
}

// runWholeGraphUpdate runs input in on the backend and returns what the
// backend refused.
func runWholeGraphUpdate(t *testing.T, backend string, in []byte) diffRun {
	pa, r := decode(in)
	pb := pa.deepCopy()
	var log []string
	for k := 1 + r.n(3); k > 0; k-- {
		if ms := pb.mutable(nil); len(ms) > 0 {
			nd := ms[r.n(len(ms))]
			pb.mutate(r, nd)
			log = append(log, fmt.Sprintf("B: %s: %s", nd.name, pb.nodeText(nd)))
		}
	}
	for i := range pb.res {
		if pb.res[i].kind == resHandle && pb.res[i].assign && r.n(2) == 0 {
			pb.res[i].dflt = uint32(r.n(4))
			log = append(log, fmt.Sprintf("B: %s default %d", pb.resName(i), pb.res[i].dflt))
		}
	}
	switch r.n(8) {
	case 6: // a change no update may make
		if what := pb.unupdatable(r); what != "" {
			pb.refuse = true
			log = append(log, "B: "+what)
		}
	case 7: // another topology: an extra sink
		pb.top.nodes = append(pb.top.nodes, &dnode{kind: dEmpty, name: "#extra"})
		pb.refuse = true
		log = append(log, "B: an extra empty node")
	}
	env := newDiffEnv(t, backend, pa)
	s0 := pa.initial()
	ga, err := env.build(pa)
	if refusal(t, "build A", err, pa) {
		return env.refusedAt("build A", err)
	}
	gb, err := env.build(pb)
	if refusal(t, "build B", err, pb) {
		return env.refusedAt("build B", err)
	}
	var flags gg.InstantiateFlags
	if pa.autoFree {
		flags |= gg.InstantiateAutoFreeOnLaunch
	}
	ea, err := ga.g.Instantiate(flags)
	if refusal(t, "Instantiate A", err, pa) {
		return env.refusedAt("Instantiate A", err)
	}
	rng := pa.seed | 1
	// run launches e (built as b) from the initial state and compares with
	// the reference of p; it returns the buffers.
	run := func(what string, p *diffProg, b *diffBuilt, e *gg.Exec) [][]byte {
		t.Helper()
		env.load(p, s0)
		s := env.s[r.n(2)]
		if err := e.Launch(s); err != nil {
			t.Fatalf("%s: %v\nA:\n%v\n%s", what, err, pa, strings.Join(log, "\n"))
		}
		if err := s.Synchronize(); err != nil {
			t.Fatalf("%s: %v\nA:\n%v\n%s", what, err, pa, strings.Join(log, "\n"))
		}
		st := s0.clone()
		if err := p.launch(st, &rng); err != nil {
			t.Fatalf("%v\n%v", err, p)
		}
		got := env.snapshot(p, b)
		if d := diff(p, got, st); d != "" {
			env.knownGap(p, fmt.Sprintf("%s differs from the reference:\n%s", what, d))
			t.Fatalf("%s differs from the reference:\n%s\nA:\n%v\n%s", what, d, pa, strings.Join(log, "\n"))
		}
		return got
	}
	run("A", pa, ga, ea)
	info, err := ea.Update(gb.g)
	if err != nil {
		if !errors.Is(err, gg.ErrGraphExecUpdateFailure) {
			t.Fatalf("update refused with %v, not ErrGraphExecUpdateFailure\nA:\n%v\n%s", err, pa, strings.Join(log, "\n"))
		}
		if info.Result == gg.UpdateSuccess {
			t.Fatalf("update failed (%v) with result %v", err, info.Result)
		}
		env.run.refusals = append(env.run.refusals, fmt.Sprintf("Update: %s, %v", code(err), info.Result))
		env.run.errs = append(env.run.errs, "Update: "+err.Error())
		t.Logf("update refused (%v); B is A with\n%s", err, strings.Join(log, "\n"))
		run("A after a refused update", pa, ga, ea)
		return env.run
	}
	if pb.refuse {
		t.Fatalf("update accepted (%v), want a refusal\nA:\n%v\n%s", info.Result, pa, strings.Join(log, "\n"))
	}
	updated := run("A updated to B", pb, gb, ea)
	eb, err := gb.g.Instantiate(flags)
	if refusal(t, "Instantiate B", err, pb) {
		return env.refusedAt("Instantiate B", err)
	}
	fresh := run("B", pb, gb, eb)
	for i := range updated {
		if !bytes.Equal(updated[i], fresh[i]) {
			t.Fatalf("%s: updated % x, fresh % x", pb.resName(i), updated[i], fresh[i])
		}
	}
	return env.run
}

// features names what a program exercises, for the seeds' test.
func (p *diffProg) features() map[string]bool {
	f := map[string]bool{"explicit": !p.capture, "capture": p.capture, "memcheck": p.memCheck, "autofree": p.live >= 0, "multi": p.multi}
	devOf := func(r int) int { // the device of a resource's memory
		if p.res[r].kind == resDev {
			return p.res[r].dev
		}
		return 0
	}
	var walk func(g *dgraph, top bool)
	walk = func(g *dgraph, top bool) {
		for _, nd := range g.nodes {
			f["dev1"] = f["dev1"] || nd.dev == 1
			if nd.kind == dCopy && nd.ckind == cDtoD && p.multi {
				// a copy between devices, or by one device of the other's memory
				f["peercopy"] = f["peercopy"] || devOf(nd.dst) != devOf(nd.src) || devOf(nd.src) != nd.dev
			}
			switch nd.kind {
			case dAlloc:
				f["alloc"] = true
				f["poolaccess"] = f["poolaccess"] || p.multi && p.capture
			case dHost:
				f["host"] = true
			case dCopy:
				f[[...]string{"dtod", "htod", "dtoh"}[nd.ckind]] = true
			case dMemset:
				f["2d"] = f["2d"] || nd.height > 1
			case dChild:
				f["child"] = true
			case dCond:
				f[fmt.Sprintf("%v%d", nd.ctype, len(nd.body))] = true
			}
			f["events"] = f["events"] || p.capture && top && nd.route == 1 && len(nd.deps) > 1
			for _, b := range nd.body {
				walk(b, false)
			}
		}
	}
	walk(p.top, true)
	return f
}

// The seeds: inputs found by a search over random ones, each exercising
// the features it names (TestDiffSeedShapes keeps them so). The last four
// are two-device programs: work on device 1 (dev1), copies across devices
// (peercopy), allocations captured from a pool device 1 may access
// (poolaccess).
var diffSeeds = []struct {
	features string
	in       []byte
}{
	{"capture IF1 SWITCH3 alloc autofree child host htod memcheck", []byte("=~\xff1Zw]\xc0\x84\x9c\xfc2\xa4\xbe\x02\x1f\xbc\xb5\xf4\xc8\xbd\x96\xbc\x8f\xa9\xa3]!\xe3G\x96\xf0.\xaa\xd5\x1c\x99l\xe8\x0a\xee\xef\xbdYZ}\xe7~\x9b\xb5ON/%\x9f\x08\x9c\x9b~\x8a{<\xf4BIE\xd7/[\x0a")},
	{"explicit SWITCH1 alloc child host htod dtoh", []byte("\xe4!d\x9d)\x0f\x19\x04\xec5i\x92-\xc3\xf7\x1a>\xd0\xba-\xd0s\x16\xf4\xeaHH\xf4\x7f3\xd4M\x81q[dK\xc8VTH\xbf]?\x86\x01\x03_\xa0\xa6\xaf\x03o0IE\xdd\xdb")},
	{"capture 2d IF2 WHILE1 alloc dtod events", []byte("\xb3\xe1O\xcf2I\xe2\xa2Q\x84\xe0\xb5@1\x1ansh6)\xe1\xd0\x99MOf\xc5.\xf9Pm\xe5\xabZ\x9e\xf5'-\x05E\xac#\x83P\xe9\x8f\x8e\x0a{\x06\xd0\xf6\x85\xcb\xf8\xb1\x0f\x9d\xe2me|\xa5\xf8\xa9\x96\xb3\x98")},
	{"explicit SWITCH2 WHILE1 memcheck", []byte(">u\xa2\x01\xe8\x13M\x7f\x98/\x083i\xbe\xa6\xdc\xc07\xee\x86\x81\xd3\x03G\xfb\xe6\xf0\xfb\xb0\xbdA\x12\xf5iF\x91\xfeZ\x87Y\x9dI")},
	{"explicit IF2 alloc autofree memcheck", []byte("\xdaV\xab\x98dm\x06\xb1\xfa\xeb\x8c\x04\xf5V\x1e0}\x808\x86\xda\xd1;\xdbf\xa6*\xc7G\xc3\x10\x98WG")},
	{"capture SWITCH2 dtoh", []byte("\x83\x94S\x84\x8d\x18\xadv\xd6\x96F\xf4e?Y&\x01<\x96\xd6\xe8^\xd1\x8c\xfb\x90\xd9\x80\xf0\x04\xeas\xef\x88\x95\xce=\xe4XE\xda\xd3\x9a")},
	{"explicit 2d IF1", []byte("\xe0\xc6\x05$tw\x8dn\x17&\x81\xb6\x97\xc8\x8dL\x9ew\x87\xb7\xd5\xdf\xd3\xad")},
	{"capture SWITCH1", []byte("u\x96\x0fe\xe2\xe7\x7f,1\xd76\xc6\xa2)\x9dp\x1d\x98<'`\xf0r\x10")},
	{"explicit SWITCH3 dtod memcheck", []byte("\x8e\xa6\xad\xfa\x1dhQ\x83\xde\xd2\xb0\x8c\x1e\xd3\x1c;\xfe\xc2\xba\x9d\xcf\xd8\xcf\x17F")},
	{"explicit multi dev1 peercopy alloc", []byte("\x80\xe4\xacn L\x8b\xd51\xbf!\xa4\xd3\x1c\xa6\xf6\x0c\xaa\xfc2\xd2\x82\xc4\xb2\x1e\xc77\x1f\x90\x9a")},
	{"capture multi dev1 peercopy poolaccess events", []byte("\xcf<\xae\xe5\xf7t\x0d\x8c\xa8\x81\xf5#\xd4qE\x06iu\xd7n)\x03\x97\xf2\x15\xa3\x82Y\xcd\xb0\x1b")},
	{"explicit multi dev1 autofree alloc host", []byte("vI\xf9F\xea\xa6MI\x0d\xde\xd2\xbd\xff\x03`1\xab)\xcf\xb2\xe2\xe7(l\xf3WZ\x1d@\x8b\xe7\xe1\x80\xa9W\x9a#\xf0\xb4WD")},
	{"capture multi dev1 autofree poolaccess htod dtoh", []byte("q\x87\xeep\xd2.\xddS<\x83\xea\x9b\x9b\x8f6\xe1\x88\xdd\xfbH\x9f\xea\x9a\xd3\xbf\xadm\xb6Fb\x1bUE^\xb9k\x8d\x09}g\xe7\x15\x0c\xe1\xe2\x88k\x8d_\xfd")},
}

// TestDiffSeedShapes checks that each seed still decodes into a program
// with the features it names, should the decoder change.
func TestDiffSeedShapes(t *testing.T) {
	for _, s := range diffSeeds {
		p, _ := decode(s.in)
		f := p.features()
		for _, want := range strings.Fields(s.features) {
			if !f[want] {
				t.Errorf("seed %q: no %s in\n%v", s.features, want, p)
			}
		}
	}
}
