package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"
)

// GraphInstantiateParams is CUDA_GRAPH_INSTANTIATE_PARAMS (32 bytes).
type GraphInstantiateParams struct {
	Flags        uint64
	UploadStream uintptr // CUstream, for CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
	ErrNode      uintptr // out: CUgraphNode
	Result       int32   // out: CUgraphInstantiateResult
	_            int32
}

// InstantiateWithParams is cuGraphInstantiateWithParams. p is Go memory
// holding no Go pointers, written by the driver during the call only.
func (d *Driver) InstantiateWithParams(g uintptr, p *GraphInstantiateParams) (uintptr, error) {
	var e uintptr
	err := d.call("cuGraphInstantiateWithParams", uintptr(unsafe.Pointer(&e)), g, uintptr(unsafe.Pointer(p)))
	return e, err
}

// The driver linker's input types (CUjitInputType) and options (CUjit_option).
const (
	jitInputPTX              = 1
	jitInputLibrary          = 4
	jitErrorLogBuffer        = 5
	jitErrorLogBufferSizeKey = 6
)

// LinkDevRT links PTX compiled with -rdc=true with the CUDA device runtime
// library lib (libcudadevrt.a) and returns the cubin, with the driver's
// linker (cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete). The
// calling thread must have the context current; the code is built for its
// device.
func (d *Driver) LinkDevRT(ptx []byte, name, lib string) ([]byte, error) {
	const logSize = 16 << 10
	m, err := NewCMem(len(ptx) + len(name) + len(lib) + logSize + 4096)
	if err != nil {
		return nil, err
	}
	defer unmapCMem(m)
	m.Lock()
	defer m.Unlock()
	// Everything the linker reads or writes after a call returns (the log
	// buffer, the PTX until cuLinkComplete) lives outside the Go heap.
	logBuf := (*byte)(m.Alloc(logSize))
	opts := unsafe.Slice((*int32)(m.Alloc(8)), 2)
	opts[0], opts[1] = jitErrorLogBuffer, jitErrorLogBufferSizeKey
	vals := unsafe.Slice((*uintptr)(m.Alloc(16)), 2)
	vals[0], vals[1] = uintptr(unsafe.Pointer(logBuf)), logSize
	data := unsafe.Slice((*byte)(m.Alloc(len(ptx))), len(ptx))
	copy(data, ptx)
	withLog := func(err error) error {
		if msg := strings.TrimSpace(GoString(logBuf)); msg != "" {
			return fmt.Errorf("%w\n%s", err, msg)
		}
		return err
	}
	var state uintptr
	if err := d.call("cuLinkCreate_v2", 2, uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])), uintptr(unsafe.Pointer(&state))); err != nil {
		return nil, err
	}
	defer d.call("cuLinkDestroy", state)
	if err := d.call("cuLinkAddData_v2", state, jitInputPTX, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(m.String(name))), 0, 0, 0); err != nil {
		return nil, withLog(err)
	}
	if err := d.call("cuLinkAddFile_v2", state, jitInputLibrary, uintptr(unsafe.Pointer(m.String(lib))), 0, 0, 0); err != nil {
		return nil, withLog(fmt.Errorf("%w (%s)", err, lib))
	}
	var cubin, size uintptr // cubin: a C pointer, owned by the link state
	if err := d.call("cuLinkComplete", state, uintptr(unsafe.Pointer(&cubin)), uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, withLog(err)
	}
	out := make([]byte, size)
	copy(out, unsafe.Slice(*(**byte)(unsafe.Pointer(&cubin)), size))
	return out, nil
}

// DevRTLibrary finds libcudadevrt.a, the CUDA device runtime that kernels
// launching graphs from the device are linked with: under $CUDA_HOME (or
// $CUDA_PATH), then the usual toolkit places.
func DevRTLibrary() (string, error) {
	target, multiarch := "x86_64-linux", "x86_64-linux-gnu"
	if runtime.GOARCH == "arm64" {
		target, multiarch = "sbsa-linux", "aarch64-linux-gnu"
	}
	var roots []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if r := os.Getenv(v); r != "" {
			roots = append(roots, r)
		}
	}
	roots = append(roots, "/usr/local/cuda")
	var tried []string
	for _, r := range roots {
		tried = append(tried, filepath.Join(r, "lib64"), filepath.Join(r, "targets", target, "lib"), filepath.Join(r, "lib"))
	}
	tried = append(tried, "/usr/lib/"+multiarch, "/usr/lib/cuda/lib64")
	for _, dir := range tried {
		p := filepath.Join(dir, "libcudadevrt.a")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("libcudadevrt.a (the CUDA device runtime) not found in %s; set CUDA_HOME to the CUDA toolkit", strings.Join(tried, ", "))
}
