package host

import "github.com/gpugraph/gpugraph/internal/backend"

// Block is one block of a Go kernel as the host backend runs it: the
// gpugraph package's RunBlock turns it into its public Block.
type Block struct {
	Idx, Dim, Grid [3]int
	Shared         []byte
	RT             Runtime // the graph launch running the kernel, if any
}

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
}

// kernelOp is a Go kernel launch, checked and marshalled.
type kernelOp struct {
	k           backend.Kernel
	grid, block [3]int
	shared      int
	args        []uint64
	ctx         *kernelCtx // set for kernel nodes of an Exec
	d           *Device    // set on the copy the pool runs
}

func dims(d [3]uint32) [3]int { return [3]int{int(d[0]), int(d[1]), int(d[2])} }

func count(d [3]int) int { return d[0] * d[1] * d[2] }

// kernelOf lowers a launch; the argument words are the op's own.
func kernelOf(l *backend.Launch, args []uint64) kernelOp {
	return kernelOp{k: l.Kernel, grid: dims(l.Grid), block: dims(l.Block), shared: int(l.Shared), args: args}
}

func (o *kernelOp) run(d *Device) *backend.Error {
	if pk := o.ctx.pdlKernel(); pk != nil {
		return o.runEarly(d, pk)
	}
	n := count(o.grid)
	if n == 1 {
		return o.runOne(d)
	}
	k := *o // the method value escapes to the pool; keep o itself on the stack
	k.d = d
	if perr := d.Pool.For(n, k.blocks); perr != nil {
		return d.panicError("kernel "+o.k.Name, perr)
	}
	return nil
}

func (o *kernelOp) runOne(d *Device) (err *backend.Error) {
	defer func() {
		if p := recover(); p != nil {
			err = d.panicError("kernel "+o.k.Name, p)
		}
	}()
	b := Block{Dim: o.block, Grid: o.grid, Shared: sharedBuf(o.shared), RT: Runtime{ctx: o.ctx}}
	d.runBlock(o.k.Key, b, o.args)
	return nil
}

func (o *kernelOp) blocks(lo, hi int) {
	gx, gxy := o.grid[0], o.grid[0]*o.grid[1]
	sh := sharedBuf(o.shared)
	b := Block{Dim: o.block, Grid: o.grid, Shared: sh, RT: Runtime{ctx: o.ctx}}
	for i := lo; i < hi; i++ {
		clear(sh)
		b.Idx = [3]int{i % gx, i % gxy / gx, i / gxy}
		o.d.runBlock(o.k.Key, b, o.args)
	}
}

func sharedBuf(n int) []byte {
	if n == 0 {
		return nil
	}
	return make([]byte, n)
}
