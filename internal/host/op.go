package host

import (
	"encoding/binary"
	"runtime"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/sched"
)

type opKind uint8

const (
	opEmpty opKind = iota
	opKernel
	opHost
	opMemcpy
	opMemset
	opRecord
	opWait
	opGraph
	opCall  // internal bookkeeping run in stream order (frees, pool waits)
	opAlloc // a graph allocation's lifetime starts
	opFree  // a graph allocation's lifetime ends
	opCond  // a conditional node: runs its bodies
	opExtSemSignal
	opExtSemWait
)

// seqForeignFree in an opFree's seq marks the free of another graph's
// allocation.
const seqForeignFree = 1

// op is one unit of work, prepared and checked: a stream holds a queue of
// them and an executable graph holds one per node. run is the only place
// work is executed.
type op struct {
	kind   opKind
	kern   kernelOp
	host   func()
	dst    []byte // memcpy, memset
	src    []byte // memcpy
	set    memsetOp
	ev     *Event
	seq    uint64 // event record sequence number, or wait target
	launch *launch
	galloc *GraphAlloc // opAlloc, opFree
	off    bool        // a disabled graph node (Exec.SetEnabled): runs as empty
	cond   *condOp     // opCond
	xs     *extSemOp   // opExtSemSignal, opExtSemWait
	// A graph's memcpy op from pageable host memory reads its source at
	// the launch call (staged); stage is its slot, plus one, in the
	// launch's staging buffers (0: an op of a conditional body, or a
	// stream's).
	staged bool
	stage  int32
	// A graph's memcpy op into pageable host memory stages the pageable
	// sources of the copies after it again (launch.restage).
	restages bool
}

type memsetOp struct {
	value         uint32
	elem, width   int
	height, pitch int
}

// run executes the op. A panic (a bad host function, a fault on device
// memory) becomes the error CUDA would report.
func (o *op) run(d *Device) (err *backend.Error) {
	defer func() {
		if p := recover(); p != nil {
			err = d.panicError(o.what(), p)
		}
	}()
	return o.exec(d)
}

// exec executes the op; a panic is the caller's to recover (a graph's
// runner does it once per worker, not once per node: Exec.nodePanic).
func (o *op) exec(d *Device) *backend.Error {
	switch o.kind {
	case opKernel:
		return o.kern.exec(d)
	case opHost, opCall:
		o.host()
	case opMemcpy:
		copy(o.dst, o.src)
	case opMemset:
		o.set.run(o.dst)
	case opRecord:
		o.ev.Complete(o.seq)
	case opWait:
		o.ev.Wait(o.seq)
	case opGraph:
		return o.launch.run()
	case opAlloc:
		d.GraphMemIfAny().Allocated(o.galloc)
	case opFree:
		d.GraphMemIfAny().Freed(o.galloc, o.seq == seqForeignFree)
	case opCond:
		return o.cond.run()
	case opExtSemSignal, opExtSemWait:
		o.runExtSem()
	}
	return nil
}

func (o *op) what() string {
	switch o.kind {
	case opKernel:
		return "kernel " + o.kern.name
	case opHost:
		return "host function"
	case opMemcpy:
		return "memcpy"
	case opMemset:
		return "memset"
	}
	return "graph"
}

func (s *memsetOp) run(dst []byte) {
	var pat [4]byte
	binary.LittleEndian.PutUint32(pat[:], s.value)
	rowBytes := s.width * s.elem
	for r := 0; r < s.height; r++ {
		row := dst[r*s.pitch : r*s.pitch+rowBytes]
		if s.value == 0 {
			clear(row)
			continue
		}
		if s.elem == 1 {
			for i := range row {
				row[i] = pat[0]
			}
			continue
		}
		for i := 0; i < len(row); i += s.elem {
			copy(row[i:i+s.elem], pat[:s.elem])
		}
	}
}

// IllegalAddress is implemented by what a device memory access panics with
// when the address is no device memory (the gpugraph package's
// IllegalAddressError): it fails the work with ErrIllegalAddress.
type IllegalAddress interface {
	error
	IllegalAddress()
}

// panicError is the error of work that panicked with p.
//
// It must be called while the panic is being recovered (from the deferred
// function that recovered it), unless p is a *sched.Panicked that already
// holds the site: the detail names what panicked (the kernel, by name) and
// the file and line that raised the panic, the first frame outside the Go
// runtime.
func (d *Device) panicError(what string, p any) *backend.Error {
	site := sched.Recovered(p)
	where := ""
	if w := site.Where(); w != "" {
		where = " at " + w
	}
	fail := func(code *backend.Code, format string, args ...any) *backend.Error {
		e := backend.Errorf(code, format, args...)
		e.Detail += where
		e.Op = what
		return e
	}
	switch e := site.Value.(type) {
	case IllegalAddress:
		return fail(backend.ErrIllegalAddress, "%s: %v", what, e)
	case runtime.Error:
		if a, ok := e.(interface{ Addr() uintptr }); ok {
			if report := d.GraphMemIfAny().Describe(a.Addr()); report != "" {
				return fail(backend.ErrIllegalAddress, "%s: fault at %#x: %s", what, a.Addr(), report)
			}
			return fail(backend.ErrIllegalAddress, "%s: fault at %#x, which is not accessible device memory", what, a.Addr())
		}
	}
	return fail(backend.ErrLaunchFailure, "%s panicked: %v", what, site.Value)
}

// at is a copy of e naming node (a tag).
func at(e *backend.Error, node any) *backend.Error {
	c := *e
	c.Node = node
	return &c
}
