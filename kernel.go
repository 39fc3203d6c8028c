package gpugraph

import (
	"fmt"
	"math"

	"github.com/gpugraph/gpugraph/internal/backend"
	"github.com/gpugraph/gpugraph/internal/host"
)

// Dim3 is a grid or block size. Every component must be at least 1; use Dim1
// and Dim2 for fewer dimensions.
type Dim3 struct{ X, Y, Z int }

// Dim1 is Dim3{x, 1, 1}.
func Dim1(x int) Dim3 { return Dim3{x, 1, 1} }

// Dim2 is Dim3{x, y, 1}.
func Dim2(x, y int) Dim3 { return Dim3{x, y, 1} }

// Count is X*Y*Z.
func (d Dim3) Count() int { return d.X * d.Y * d.Z }

func (d Dim3) String() string { return fmt.Sprintf("(%d,%d,%d)", d.X, d.Y, d.Z) }

// ParamType is the type of one kernel parameter, as the CUDA body declares it.
type ParamType uint8

// Kernel parameter types and the Go values a launch accepts for them.
const (
	Pointer ParamType = iota + 1 // DevicePtr
	Int32                        // int32, or int in range
	Uint32                       // uint32, or int in range
	Int64                        // int64 or int
	Uint64                       // uint64, ConditionalHandle, or int >= 0
	Float32                      // float32
	Float64                      // float64
)

var paramNames = [...]string{"", "pointer", "int32", "uint32", "int64", "uint64", "float32", "float64"}

func (t ParamType) String() string {
	if int(t) < len(paramNames) && t != 0 {
		return paramNames[t]
	}
	return fmt.Sprintf("ParamType(%d)", uint8(t))
}

// Kernel is a GPU function, defined once for every backend: a Go body that
// the host backend runs block by block, and CUDA code for the cuda backend.
// A Kernel must not be modified after its first launch.
type Kernel struct {
	Name   string
	Params []ParamType
	// Go is the body on the host backend, called once per thread block;
	// it loops over the block's threads itself. Blocks run in parallel.
	Go func(b Block, args Args)
	// CUDA is the body on the cuda backend: CUDA C++ source (an extern "C"
	// __global__ function named Name, compiled with NVRTC), PTX text, or a
	// cubin image.
	CUDA string
	// DeviceRuntime marks a kernel that launches graphs from the device
	// (Block.LaunchGraph; cudaGraphLaunch in its CUDA body). The cuda
	// backend compiles it with -rdc=true and links it with libcudadevrt.a;
	// like the GPU, both backends refuse to launch it into a stream: it
	// runs only as a kernel node of a graph.
	DeviceRuntime bool
}

// Block is what a Go kernel body gets: which block of the grid it is, and the
// shapes of the block and grid.
type Block struct {
	Idx     Dim3 // blockIdx
	Dim     Dim3 // blockDim
	GridDim Dim3 // gridDim
	// Shared is the block's dynamic shared memory (KernelParams.SharedMem
	// bytes), private to this block for its duration.
	Shared []byte

	rt host.Runtime // the graph launch running the kernel (zero in a stream)
}

// Block, Args and Dim3 are laid out as host.Block, host.Args and
// host.Dim3, so the host backend calls Kernel.Go directly (goBody).

// Args holds a launch's arguments, already checked against Kernel.Params.
type Args struct{ w []uint64 }

// Len is the number of arguments.
func (a Args) Len() int { return len(a.w) }

// Ptr returns argument i, a Pointer.
func (a Args) Ptr(i int) DevicePtr { return DevicePtr(a.w[i]) }

// Int returns argument i, an Int32 or Int64, as an int.
func (a Args) Int(i int) int { return int(int64(a.w[i])) }

// Int32 returns argument i, an Int32.
func (a Args) Int32(i int) int32 { return int32(a.w[i]) }

// Uint32 returns argument i, a Uint32.
func (a Args) Uint32(i int) uint32 { return uint32(a.w[i]) }

// Int64 returns argument i, an Int64.
func (a Args) Int64(i int) int64 { return int64(a.w[i]) }

// Uint64 returns argument i, a Uint64.
func (a Args) Uint64(i int) uint64 { return a.w[i] }

// Float32 returns argument i, a Float32.
func (a Args) Float32(i int) float32 { return math.Float32frombits(uint32(a.w[i])) }

// Float64 returns argument i, a Float64.
func (a Args) Float64(i int) float64 { return math.Float64frombits(a.w[i]) }

// KernelParams describe a kernel launch, in a stream or as a graph node.
type KernelParams struct {
	Kernel    *Kernel
	Grid      Dim3
	Block     Dim3
	SharedMem int   // bytes of dynamic shared memory per block
	Args      []any // one Go value per Kernel.Params entry
}

// lowerLaunchInto checks a launch against the kernel and the device
// limits, marshals its arguments and lowers it into l. The argument words
// go to *words if it has room (a stream's buffer, reused launch after
// launch), else to a new slice. A Kernel does not change after its first
// launch, so l keeps its lowering when it launches the same kernel again.
func (d *Device) lowerLaunchInto(l *backend.Launch, p *KernelParams, words *[]uint64) (*Code, string) {
	if code, msg := d.checkLaunch(p); code != nil {
		return code, msg
	}
	w, code, msg := marshalArgs(p, words)
	if code != nil {
		return code, msg
	}
	k := p.Kernel
	if l.Kernel.Key != any(k) {
		l.Kernel = lowerKernel(k)
	}
	l.Grid, l.Block, l.Shared, l.Args = dims(p.Grid), dims(p.Block), uint32(p.SharedMem), w
	return nil, ""
}

// checkLaunch checks p's kernel and configuration against the device:
// everything about a launch but its arguments, so that a
// stream launching the same kernel in the same configuration again need
// not check it again (Stream.launchKernel).
func (d *Device) checkLaunch(p *KernelParams) (*Code, string) {
	k := p.Kernel
	if k == nil {
		return ErrInvalidDeviceFunction, "nil kernel"
	}
	if d.goRun && k.Go == nil {
		return ErrInvalidDeviceFunction, fmt.Sprintf("kernel %q has no Go body for the host backend", k.Name)
	}
	if !d.goRun && k.CUDA == "" {
		return ErrInvalidDeviceFunction, fmt.Sprintf("kernel %q has no CUDA body for the cuda backend", k.Name)
	}
	pr := &d.props
	if !dimIn(p.Grid, pr.MaxGridDim) {
		return ErrInvalidConfiguration, fmt.Sprintf("grid %v outside [1, %v]", p.Grid, pr.MaxGridDim)
	}
	if !dimIn(p.Block, pr.MaxBlockDim) || p.Block.Count() > pr.MaxThreadsPerBlock {
		return ErrInvalidConfiguration, fmt.Sprintf("block %v outside [1, %v] or over %d threads", p.Block, pr.MaxBlockDim, pr.MaxThreadsPerBlock)
	}
	if p.SharedMem < 0 || p.SharedMem > pr.SharedMemPerBlock {
		return ErrInvalidValue, fmt.Sprintf("shared memory %d outside [0, %d]", p.SharedMem, pr.SharedMemPerBlock)
	}
	return nil, ""
}

// marshalArgs checks p's arguments, one per p.Kernel.Params entry, and
// converts them into the words the kernel reads: in *words if it has room,
// else in a new slice.
func marshalArgs(p *KernelParams, words *[]uint64) ([]uint64, *Code, string) {
	k := p.Kernel
	if len(p.Args) != len(k.Params) {
		return nil, ErrInvalidValue, fmt.Sprintf("kernel %q takes %d arguments, got %d", k.Name, len(k.Params), len(p.Args))
	}
	var w []uint64
	if words != nil && cap(*words)-len(*words) >= len(p.Args) {
		n := len(*words)
		*words = (*words)[:n+len(p.Args)]
		w = (*words)[n : n+len(p.Args) : n+len(p.Args)]
	} else {
		w = make([]uint64, len(p.Args))
	}
	for i, t := range k.Params {
		v, ok := marshalArg(t, p.Args[i])
		if !ok {
			return nil, ErrInvalidValue, fmt.Sprintf("kernel %q argument %d: want %v, got %s", k.Name, i, t, goTypeName(p.Args[i]))
		}
		w[i] = v
	}
	return w, nil, ""
}

func dimIn(d, max Dim3) bool {
	return d.X >= 1 && d.Y >= 1 && d.Z >= 1 && d.X <= max.X && d.Y <= max.Y && d.Z <= max.Z
}

// marshalArg converts one Go value into the 64-bit word the kernel reads.
// It must not let v escape, so that launches with small arguments do not
// allocate.
func marshalArg(t ParamType, v any) (uint64, bool) {
	switch t {
	case Pointer:
		if p, ok := v.(DevicePtr); ok {
			return uint64(p), true
		}
	case Int32:
		switch x := v.(type) {
		case int32:
			return uint64(int64(x)), true
		case int:
			if x >= math.MinInt32 && x <= math.MaxInt32 {
				return uint64(int64(x)), true
			}
		}
	case Uint32:
		switch x := v.(type) {
		case uint32:
			return uint64(x), true
		case int:
			if x >= 0 && x <= math.MaxUint32 {
				return uint64(x), true
			}
		}
	case Int64:
		switch x := v.(type) {
		case int64:
			return uint64(x), true
		case int:
			return uint64(int64(x)), true
		}
	case Uint64:
		switch x := v.(type) {
		case uint64:
			return x, true
		case ConditionalHandle:
			return uint64(x), true
		case int:
			if x >= 0 {
				return uint64(x), true
			}
		}
	case Float32:
		if x, ok := v.(float32); ok {
			return uint64(math.Float32bits(x)), true
		}
	case Float64:
		if x, ok := v.(float64); ok {
			return math.Float64bits(x), true
		}
	}
	return 0, false
}

// goTypeName names the dynamic type of v without letting v escape.
func goTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case DevicePtr:
		return "DevicePtr"
	case int:
		return "int (or out of range)"
	case int32:
		return "int32"
	case uint32:
		return "uint32"
	case int64:
		return "int64"
	case uint64:
		return "uint64"
	case ConditionalHandle:
		return "ConditionalHandle"
	case float32:
		return "float32"
	case float64:
		return "float64"
	case uintptr:
		return "uintptr"
	}
	return "an unsupported type"
}
