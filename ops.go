package gpugraph

import (
	"fmt"

	"github.com/gpugraph/gpugraph/internal/backend"
)

// MemcpyParams describe a copy of Size bytes. Each side is either device
// memory (Dst, Src) or a host slice (DstHost, SrcHost), never both; the
// direction (cudaMemcpyKind) follows from which are set. Build them with
// HtoD, DtoH, DtoD or HtoH. A host slice is pinned memory (MallocHost,
// HostRegister) or pageable memory (any other): a memcpy node reads a
// pinned source when it runs, a pageable one when its graph is launched.
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
func (p MemcpyParams) Kind() string { return backend.CopyKind(p.DstHost != nil, p.SrcHost != nil) }

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
