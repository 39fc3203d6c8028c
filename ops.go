package gpugraph

import (
	"encoding/binary"
	"fmt"
)

// MemcpyParams describe a copy of Size bytes. Each side is either device
// memory (Dst, Src) or a host slice (DstHost, SrcHost), never both; the
// direction (cudaMemcpyKind) follows from which are set. Build them with
// HtoD, DtoH, DtoD or HtoH.
type MemcpyParams struct {
	Dst     DevicePtr
	DstHost []byte
	Src     DevicePtr
	SrcHost []byte
	Size    int
}

// HtoD copies src from host memory to device memory at dst.
func HtoD(dst DevicePtr, src []byte) MemcpyParams {
	return MemcpyParams{Dst: dst, SrcHost: src, Size: len(src)}
}

// DtoH copies len(dst) bytes from device memory at src into dst.
func DtoH(dst []byte, src DevicePtr) MemcpyParams {
	return MemcpyParams{DstHost: dst, Src: src, Size: len(dst)}
}

// DtoD copies n bytes between device addresses.
func DtoD(dst, src DevicePtr, n int) MemcpyParams { return MemcpyParams{Dst: dst, Src: src, Size: n} }

// HtoH copies between host slices, ordered with the stream's other work.
func HtoH(dst, src []byte) MemcpyParams {
	return MemcpyParams{DstHost: dst, SrcHost: src, Size: len(src)}
}

// Kind names the direction of the copy, as cudaMemcpyKind does.
func (p MemcpyParams) Kind() string {
	switch {
	case p.DstHost != nil && p.SrcHost != nil:
		return "HtoH"
	case p.DstHost != nil:
		return "DtoH"
	case p.SrcHost != nil:
		return "HtoD"
	}
	return "DtoD"
}

// MemsetParams describe filling Height rows of Width elements, rows Pitch
// bytes apart, with Value. ElementSize is 1, 2 or 4 bytes. Build 1D ones
// with Memset8, Memset16 and Memset32.
type MemsetParams struct {
	Dst         DevicePtr
	Value       uint32
	ElementSize int
	Width       int // elements per row
	Height      int // rows, at least 1
	Pitch       int // bytes from row to row; used when Height > 1
}

// Memset8 sets n bytes at dst to v.
func Memset8(dst DevicePtr, v byte, n int) MemsetParams {
	return MemsetParams{Dst: dst, Value: uint32(v), ElementSize: 1, Width: n, Height: 1}
}

// Memset16 sets n 16-bit words at dst to v.
func Memset16(dst DevicePtr, v uint16, n int) MemsetParams {
	return MemsetParams{Dst: dst, Value: uint32(v), ElementSize: 2, Width: n, Height: 1}
}

// Memset32 sets n 32-bit words at dst to v.
func Memset32(dst DevicePtr, v uint32, n int) MemsetParams {
	return MemsetParams{Dst: dst, Value: v, ElementSize: 4, Width: n, Height: 1}
}

// HostParams describe a host function run in stream order (cudaLaunchHostFunc
// or a host node). Fn must not call gpugraph: like CUDA's host functions, it
// runs on the device's own workers, and waiting there on device work can
// deadlock.
type HostParams struct {
	Fn func()
}

// seqForeignFree in an opFree's seq marks the free of another graph's
// allocation.
const seqForeignFree = 1

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
	opCall  // internal bookkeeping run in stream order (frees, uploads)
	opAlloc // a graph allocation's lifetime starts
	opFree  // a graph allocation's lifetime ends
	opCond  // a conditional node: runs its bodies
	opExtSemSignal
	opExtSemWait
)

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
	galloc *graphAlloc // opAlloc, opFree
	off    bool        // a disabled graph node (Exec.SetEnabled): runs as empty
	cond   *condOp     // opCond
	xs     *extSemOp   // opExtSemSignal, opExtSemWait
}

type memsetOp struct {
	value         uint32
	elem, width   int
	height, pitch int
}

// run executes the op. A panic (a bad host function, a fault on device
// memory) becomes the error CUDA would report.
func (o *op) run(d *Device) (err *Error) {
	defer func() {
		if p := recover(); p != nil {
			err = d.panicError(o.what(), p)
		}
	}()
	switch o.kind {
	case opKernel:
		return o.kern.run(d)
	case opHost:
		o.host()
	case opMemcpy:
		copy(o.dst, o.src)
	case opMemset:
		o.set.run(o.dst)
	case opRecord:
		o.ev.complete(o.seq)
	case opWait:
		o.ev.wait(o.seq)
	case opGraph:
		return o.launch.run()
	case opCall:
		o.host()
	case opAlloc:
		d.host.GraphMemIfAny().Allocated(o.galloc)
	case opFree:
		d.host.GraphMemIfAny().Freed(o.galloc, o.seq == seqForeignFree)
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
		return "kernel " + o.kern.k.Name
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

// prepareMemcpy checks a copy and resolves its device addresses.
func (d *Device) prepareMemcpy(p *MemcpyParams) (op, *Code, string) {
	dst, src, msg := memcpySides(p, d.deviceBytes)
	if msg != "" {
		return op{}, ErrInvalidValue, msg
	}
	return op{kind: opMemcpy, dst: dst, src: src}, nil, ""
}

// memcpySides checks a copy for every backend: the size, and each side
// either a host slice long enough or device memory that device accepts
// (device resolves [ptr, ptr+n) to bytes on the host backend, or only
// checks it on cuda). It returns the two sides, or what is wrong.
func memcpySides(p *MemcpyParams, device func(DevicePtr, int) ([]byte, error)) (dst, src []byte, msg string) {
	if p.Size < 0 {
		return nil, nil, fmt.Sprintf("negative size %d", p.Size)
	}
	side := func(name string, dev DevicePtr, host []byte) ([]byte, string) {
		if host != nil {
			if dev != 0 {
				return nil, name + ": both a device pointer and a host slice given"
			}
			if len(host) < p.Size {
				return nil, fmt.Sprintf("%s: host slice of %d bytes is shorter than the copy (%d)", name, len(host), p.Size)
			}
			return host[:p.Size], ""
		}
		if p.Size == 0 {
			return nil, ""
		}
		b, err := device(dev, p.Size)
		if err != nil {
			return nil, name + ": " + err.Error()
		}
		return b, ""
	}
	if dst, msg = side("destination", p.Dst, p.DstHost); msg != "" {
		return nil, nil, msg
	}
	src, msg = side("source", p.Src, p.SrcHost)
	return dst, src, msg
}

// prepareMemset checks a memset and resolves its device range.
func (d *Device) prepareMemset(p *MemsetParams) (op, *Code, string) {
	sh, code, msg := d.memsetShape(p)
	if code != nil {
		return op{}, code, msg
	}
	var dst []byte
	if sh.total > 0 {
		b, err := d.deviceBytes(p.Dst, sh.total)
		if err != nil {
			return op{}, ErrInvalidValue, err.Error()
		}
		dst = b
	}
	return op{kind: opMemset, dst: dst, set: memsetOp{p.Value, p.ElementSize, p.Width, p.Height, sh.pitch}}, nil, ""
}

// memsetShape is what a memset touches: rows pitch bytes apart, total bytes
// from the first to the end of the last row.
type memsetShape struct{ pitch, total int }

// memsetShape checks a memset's parameters, for every backend.
func (d *Device) memsetShape(p *MemsetParams) (memsetShape, *Code, string) {
	switch p.ElementSize {
	case 1, 2, 4:
	default:
		return memsetShape{}, ErrInvalidValue, fmt.Sprintf("element size %d is not 1, 2 or 4", p.ElementSize)
	}
	if p.ElementSize < 4 && p.Value>>(8*p.ElementSize) != 0 {
		return memsetShape{}, ErrInvalidValue, fmt.Sprintf("value %#x does not fit in %d bytes", p.Value, p.ElementSize)
	}
	if p.Width < 0 || p.Height < 1 {
		return memsetShape{}, ErrInvalidValue, fmt.Sprintf("width %d, height %d", p.Width, p.Height)
	}
	rowBytes := p.Width * p.ElementSize
	pitch := p.Pitch
	if p.Height == 1 {
		pitch = rowBytes
	} else if pitch < rowBytes {
		return memsetShape{}, ErrInvalidValue, fmt.Sprintf("pitch %d is less than a row (%d bytes)", pitch, rowBytes)
	}
	return memsetShape{pitch, pitch*(p.Height-1) + rowBytes}, nil, ""
}
