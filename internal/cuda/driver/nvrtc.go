package driver

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/gpugraph/gpugraph/internal/dl"
)

// NVRTC compiles CUDA C++ at run time.
type NVRTC struct {
	fn map[string]uintptr
}

var (
	nvrtcOnce sync.Once
	nvrtc     *NVRTC
	nvrtcErr  error
)

// nvrtcNames are where libnvrtc is looked for, newest first.
var nvrtcNames = []string{
	"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
	"/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so",
}

// LoadNVRTC loads libnvrtc once per process.
func LoadNVRTC() (*NVRTC, error) {
	nvrtcOnce.Do(func() {
		var lib uintptr
		var errs []string
		for _, name := range nvrtcNames {
			l, err := dl.Open(name)
			if err == nil {
				lib = l
				break
			}
			errs = append(errs, err.Error())
		}
		if lib == 0 {
			nvrtcErr = fmt.Errorf("cuda: libnvrtc not found (tried %s): %s", strings.Join(nvrtcNames, ", "), strings.Join(errs, "; "))
			return
		}
		n := &NVRTC{fn: map[string]uintptr{}}
		for _, s := range []string{"nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetPTXSize", "nvrtcGetPTX",
			"nvrtcGetProgramLogSize", "nvrtcGetProgramLog", "nvrtcDestroyProgram", "nvrtcGetErrorString"} {
			p, err := dl.Sym(lib, s)
			if err != nil {
				nvrtcErr = fmt.Errorf("cuda: libnvrtc lacks %s", s)
				return
			}
			n.fn[s] = p
		}
		nvrtc = n
	})
	return nvrtc, nvrtcErr
}

// call calls an NVRTC function; see Driver.Call for uintptrescapes.
//
//go:uintptrescapes
func (n *NVRTC) call(name string, args ...uintptr) error {
	r, _, _ := purego.SyscallN(n.fn[name], args...)
	if r == 0 {
		return nil
	}
	s, _, _ := purego.SyscallN(n.fn["nvrtcGetErrorString"], r)
	return fmt.Errorf("%s: %s", name, GoString(*(**byte)(unsafe.Pointer(&s)))) // s is a C pointer
}

// Compile compiles CUDA C++ source to PTX for the given compute capability,
// with extra options if any (such as -rdc=true).
func (n *NVRTC) Compile(src, name string, major, minor int, extra ...string) ([]byte, error) {
	m, err := NewCMem(1 << 20)
	if err != nil {
		return nil, err
	}
	defer unmapCMem(m)
	m.Lock()
	defer m.Unlock()
	var prog uintptr
	csrc, cname := m.String(src), m.String(name+".cu")
	if err := n.call("nvrtcCreateProgram", uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(csrc)),
		uintptr(unsafe.Pointer(cname)), 0, 0, 0); err != nil {
		return nil, err
	}
	defer n.call("nvrtcDestroyProgram", uintptr(unsafe.Pointer(&prog)))
	opts := append([]string{fmt.Sprintf("--gpu-architecture=compute_%d%d", major, minor), "--std=c++17"}, extra...)
	arr := unsafe.Slice((*uintptr)(m.Alloc(8*len(opts))), len(opts))
	for i, o := range opts {
		arr[i] = uintptr(unsafe.Pointer(m.String(o)))
	}
	cerr := n.call("nvrtcCompileProgram", prog, uintptr(len(opts)), uintptr(unsafe.Pointer(&arr[0])))
	if cerr != nil {
		var size uintptr
		n.call("nvrtcGetProgramLogSize", prog, uintptr(unsafe.Pointer(&size)))
		log := make([]byte, size+1)
		n.call("nvrtcGetProgramLog", prog, uintptr(unsafe.Pointer(&log[0])))
		return nil, fmt.Errorf("%v\n%s", cerr, GoString(&log[0]))
	}
	var size uintptr
	if err := n.call("nvrtcGetPTXSize", prog, uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, err
	}
	ptx := make([]byte, size+1)
	if err := n.call("nvrtcGetPTX", prog, uintptr(unsafe.Pointer(&ptx[0]))); err != nil {
		return nil, err
	}
	return ptx, nil
}
