package host

import (
	"sync"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// Body is a kernel's Go body. Dim3, Block and Args have the memory layout
// of the gpugraph package's public types of the same names, which converts
// its Kernel.Go to a Body (TestBodyLayout there): a block is then one call
// with one Block built, as fast as the body called in place.
type Body func(Block, Args)

// Dim3 is a grid or block shape or index.
type Dim3 struct{ X, Y, Z int }

// Block is one block of a Go kernel: which block of the grid it is, the
// shapes, its shared memory, and the graph launch running it.
type Block struct {
	Idx, Dim, Grid Dim3
	Shared         []byte
	RT             Runtime
}

// Args are a launch's argument words.
type Args struct{ W []uint64 }

// Runtime is what a block reaches of the graph launch running it:
// conditional handles, device graph launch, programmatic dependent launch.
// The zero Runtime is a kernel launched into a stream.
type Runtime struct {
	ctx *kernelCtx
	pdl *pdlBlock
}

// kernelCtx names the kernel node a block belongs to.
type kernelCtx struct {
	e    *Exec
	node int32 // the kernel's index in e.ops

	// holds are the graphs this kernel launched fire-and-forget: each
	// stays pending until the kernel returns, so that the kernel cannot
	// launch it again however fast it ran (the GPU refuses a second launch
	// from one kernel every time; a goroutine may finish first).
	holdMu sync.Mutex
	holds  []*Exec
}

// hold keeps x pending until the kernel returns.
func (c *kernelCtx) hold(x *Exec) {
	x.mu.Lock()
	x.dl.pending++
	x.mu.Unlock()
	c.holdMu.Lock()
	c.holds = append(c.holds, x)
	c.holdMu.Unlock()
}

// release ends the holds of the kernel's launches.
func (c *kernelCtx) release() {
	c.holdMu.Lock()
	hs := c.holds
	c.holds = nil
	c.holdMu.Unlock()
	for _, x := range hs {
		x.mu.Lock()
		x.dl.pending--
		x.cond.Broadcast()
		x.mu.Unlock()
	}
}

// kernelOp is a Go kernel launch, checked and marshalled. It is kept small:
// stream queues and op tables hold ops by value.
type kernelOp struct {
	body Body
	name string
	// blk is every block's Block but for Idx and Shared: built once, at
	// lowering, and passed as it is when the grid has one block. Building
	// it per call cost a store-forwarding stall on every launch of every
	// node (about 8 ns: the compiler zeroes the struct, stores fields into
	// it and reloads it in wider words to copy it to the callee).
	// blk.RT.ctx names the kernel node of an Exec (setCtx).
	blk    Block
	shared int32
	devRT  bool   // the kernel launches graphs (backend.Kernel.DeviceRuntime)
	ptrs   uint16 // which of the first 16 arguments are pointers (fits beside devRT: ops stay small)
	// plain: one block, no shared memory, no pointer arguments to check:
	// a graph node runs it with one call and nothing else (Exec.execNode).
	plain bool
	args  []uint64
}

func (o *kernelOp) ctx() *kernelCtx { return o.blk.RT.ctx }

// setCtx makes o a kernel node of an Exec.
func (o *kernelOp) setCtx(c *kernelCtx) { o.blk.RT.ctx = c }

func dims(d [3]uint32) Dim3 { return Dim3{int(d[0]), int(d[1]), int(d[2])} }

func count(d Dim3) int { return d.X * d.Y * d.Z }

// kernelOf lowers a launch; the argument words are the op's own.
func kernelOf(l *backend.Launch, args []uint64) kernelOp {
	body, _ := l.Kernel.Go.(Body)
	o := kernelOp{body: body, name: l.Kernel.Name, blk: Block{Dim: dims(l.Block), Grid: dims(l.Grid)},
		shared: int32(l.Shared), devRT: l.Kernel.DeviceRuntime, ptrs: uint16(l.Kernel.Pointers), args: args}
	o.plain = count(o.blk.Grid) == 1 && o.shared == 0 && o.ptrs == 0 && !o.devRT // exec ends its launches' holds
	return o
}

// exec runs the launch; a panic in a one-block kernel is the caller's to
// recover (op.run, or a graph's runner).
func (o *kernelOp) exec(d *Device) *backend.Error {
	if o.devRT {
		return o.execHolding(d)
	}
	return o.run(d)
}

// execHolding runs a kernel that may launch graphs, and ends the holds of
// its launches when it returns, panicking included.
func (o *kernelOp) execHolding(d *Device) *backend.Error {
	if c := o.ctx(); c != nil {
		defer c.release()
	}
	return o.run(d)
}

func (o *kernelOp) run(d *Device) *backend.Error {
	if o.ptrs != 0 && d.cfg.Check { // ptrs first: a kernel without pointers pays nothing
		if err := d.checkPointers(o); err != nil {
			return err
		}
	}
	if pk := o.ctx().pdlKernel(); pk != nil {
		return o.runEarly(d, pk)
	}
	n := count(o.blk.Grid)
	if n == 1 {
		o.runOne()
		return nil
	}
	k := *o // the closure escapes to the pool; keep o itself on the stack
	if perr := d.Pool.For(n, func(lo, hi int) { k.blocks(d, lo, hi) }); perr != nil {
		return d.panicError("kernel "+o.name, perr)
	}
	return nil
}

func (o *kernelOp) runOne() {
	if o.shared == 0 {
		o.body(o.blk, Args{o.args})
		return
	}
	b := o.blk
	b.Shared = sharedBuf(o.shared)
	o.body(b, Args{o.args})
}

func (o *kernelOp) blocks(d *Device, lo, hi int) {
	gx, gxy := o.blk.Grid.X, o.blk.Grid.X*o.blk.Grid.Y
	b := o.blk
	b.Shared = sharedBuf(o.shared)
	for i := lo; i < hi; i++ {
		clear(b.Shared)
		b.Idx = Dim3{i % gx, i % gxy / gx, i / gxy}
		o.body(b, Args{o.args})
	}
}

func sharedBuf(n int32) []byte {
	if n == 0 {
		return nil
	}
	return make([]byte, n)
}
