//go:build linux

package cublas

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// Lib is a loaded libcublas.
type Lib struct {
	// Path is the name or path that loaded.
	Path string

	lib                                      uintptr
	create, destroy, setStream, setWorkspace uintptr
	setMathMode, getVersion, sgemm           uintptr
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// libNames are the sonames tried, newest first: cuBLAS 13 needs a CUDA 13
// driver, cuBLAS 12 runs on it too.
var libNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}

// candidates lists what Load tries, in order: the bare names (found through
// LD_LIBRARY_PATH and the ld.so cache), then the names under
// $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
func candidates(cudaHome string) []string {
	var c []string
	c = append(c, libNames...)
	dirs := []string{"/usr/local/cuda/lib64"}
	if cudaHome != "" && filepath.Clean(filepath.Join(cudaHome, "lib64")) != dirs[0] {
		dirs = append([]string{filepath.Join(cudaHome, "lib64")}, dirs...)
	}
	for _, d := range dirs {
		for _, n := range libNames {
			c = append(c, filepath.Join(d, n))
		}
	}
	return c
}

// Load loads libcublas once per process and looks up its entry points.
// It does not touch the GPU: a library with no device loads, and Create
// fails.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load(candidates(os.Getenv("CUDA_HOME"))) })
	return loaded, loadErr
}

func load(names []string) (*Lib, error) {
	var tried []string
	for _, name := range names {
		if strings.ContainsRune(name, '/') {
			if _, err := os.Stat(name); err != nil {
				continue
			}
			// libcublas needs libcublasLt of the same version; loading it
			// first from the same directory lets the dynamic linker match
			// the dependency by soname when the directory is not on the
			// search path.
			lt := strings.Replace(name, "libcublas.so", "libcublasLt.so", 1)
			purego.Dlopen(lt, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		}
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		l := &Lib{Path: name, lib: h}
		for _, s := range []struct {
			p    *uintptr
			name string
		}{
			{&l.create, "cublasCreate_v2"}, {&l.destroy, "cublasDestroy_v2"},
			{&l.setStream, "cublasSetStream_v2"}, {&l.setWorkspace, "cublasSetWorkspace_v2"},
			{&l.setMathMode, "cublasSetMathMode"}, {&l.getVersion, "cublasGetVersion_v2"},
			{&l.sgemm, "cublasSgemm_v2"},
		} {
			p, err := purego.Dlsym(h, s.name)
			if err != nil {
				return nil, fmt.Errorf("cublas: %s lacks %s: %v", name, s.name, err)
			}
			*s.p = p
		}
		return l, nil
	}
	if len(tried) == 0 {
		tried = []string{strings.Join(names, ", ")}
	}
	return nil, fmt.Errorf("%w (tried %s)", ErrNoCUBLAS, strings.Join(tried, "; "))
}

// Handle is a cublasHandle_t. Its methods may be called from several
// goroutines: they serialise on the handle (Sgemm shares its scalar page).
type Handle struct {
	lib *Lib
	h   uintptr

	mu sync.Mutex
	// page is one mmap'ed page outside the Go heap. Sgemm passes alpha
	// and beta by pointer (the default CUBLAS_POINTER_MODE_HOST, in which
	// cuBLAS reads them before it returns, and bakes them into the kernel
	// parameters when the call is captured). Pointers into the page stay
	// valid whatever the Go runtime does, which a Go stack variable does
	// not (stacks move), and it costs no allocation per call.
	page []byte
	// scal points into page: alpha at 0, beta at 1.
	scal *[2]float32
}

// Create creates a handle (cublasCreate_v2) on the current device.
func (l *Lib) Create() (*Handle, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: Create on a nil Lib", ErrNoCUBLAS)
	}
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("cublas: mmap of the scalar page: %w", err)
	}
	var h uintptr
	// purego.SyscallN is //go:uintptrescapes: &h is kept alive and in
	// place (moved to the heap) for the call.
	r, _, _ := purego.SyscallN(l.create, uintptr(unsafe.Pointer(&h)))
	if err := check("cublasCreate_v2", r); err != nil {
		unix.Munmap(page)
		return nil, err
	}
	return &Handle{lib: l, h: h, page: page, scal: (*[2]float32)(unsafe.Pointer(&page[0]))}, nil
}

// lock serialises the handle's calls with Destroy (and Sgemm's use of the
// scalar page); a nil handle is left to live to report.
func (h *Handle) lock() {
	if h != nil {
		h.mu.Lock()
	}
}

func (h *Handle) unlock() {
	if h != nil {
		h.mu.Unlock()
	}
}

func (h *Handle) live(call string) error {
	if h == nil || h.h == 0 {
		return &Error{Call: call, Status: StatusNotInitialized, Detail: "no live handle (nil or destroyed)"}
	}
	return nil
}

// Destroy destroys the handle (cublasDestroy_v2), which synchronises the
// device, and releases the scalar page. A second Destroy returns
// CUBLAS_STATUS_NOT_INITIALIZED.
func (h *Handle) Destroy() error {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasDestroy_v2"); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(h.lib.destroy, h.h)
	h.h = 0
	unix.Munmap(h.page)
	h.page, h.scal = nil, nil
	return check("cublasDestroy_v2", r)
}

// SetStream sets the stream the handle's work goes to (cublasSetStream_v2);
// stream is a CUstream (Stream.NativeStream), 0 for the legacy default
// stream.
func (h *Handle) SetStream(stream uintptr) error {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasSetStream_v2"); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(h.lib.setStream, h.h, stream)
	return check("cublasSetStream_v2", r)
}

// SetWorkspace gives the handle bytes of device memory at ptr as its
// workspace (cublasSetWorkspace_v2). With it cuBLAS never allocates inside
// a call, so calls can be captured into a graph; the memory must outlive
// every graph that captured a call using it, and must not be used by two
// streams at once. cuBLAS wants it 256-byte aligned. SetStream resets the
// workspace to cuBLAS's default pool: call SetWorkspace after SetStream.
func (h *Handle) SetWorkspace(ptr uintptr, bytes int) error {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasSetWorkspace_v2"); err != nil {
		return err
	}
	if bytes < 0 {
		return &Error{Call: "cublasSetWorkspace_v2", Status: StatusInvalidValue, Detail: fmt.Sprintf("negative size %d", bytes)}
	}
	r, _, _ := purego.SyscallN(h.lib.setWorkspace, h.h, ptr, uintptr(bytes))
	return check("cublasSetWorkspace_v2", r)
}

// SetMathMode sets the handle's math mode (cublasSetMathMode).
func (h *Handle) SetMathMode(mode Math) error {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasSetMathMode"); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(h.lib.setMathMode, h.h, uintptr(uint32(mode)))
	return check("cublasSetMathMode", r)
}

// Version returns cuBLAS's version number (cublasGetVersion_v2), e.g.
// 130000 for 13.0.0.
func (h *Handle) Version() (int, error) {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasGetVersion_v2"); err != nil {
		return 0, err
	}
	var v int32
	r, _, _ := purego.SyscallN(h.lib.getVersion, h.h, uintptr(unsafe.Pointer(&v)))
	return int(v), check("cublasGetVersion_v2", r)
}

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (cublasSgemm_v2) with
// cuBLAS's column-major meaning: op(A) is m×k, op(B) k×n, C m×n, and lda,
// ldb, ldc are the column strides in elements. a, b and c are device
// pointers. The call is asynchronous on the handle's stream; argument
// errors are cuBLAS's to report.
func (h *Handle) Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	return h.sgemm(gemm{transA, transB, m, n, k, a, lda, b, ldb}, alpha, beta, c, ldc)
}

// SgemmRowMajor computes C = alpha·op(A)·op(B) + beta·C for row-major
// matrices: op(A) is m×k, op(B) k×n, C m×n, and lda, ldb, ldc are the row
// strides in elements (lda ≥ k for A untransposed, stored m×k; lda ≥ m
// for A transposed, stored k×m; likewise B; ldc ≥ n). It is Sgemm on the
// transposed problem (see gemm.colMajor), at no extra cost.
func (h *Handle) SgemmRowMajor(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	return h.sgemm(gemm{transA, transB, m, n, k, a, lda, b, ldb}.colMajor(), alpha, beta, c, ldc)
}

func (h *Handle) sgemm(g gemm, alpha, beta float32, c uintptr, ldc int) error {
	const call = "cublasSgemm_v2"
	if err := fitInt32(call, "m, n, k, lda, ldb, ldc", g.m, g.n, g.k, g.lda, g.ldb, ldc); err != nil {
		return err
	}
	h.lock()
	defer h.unlock()
	if err := h.live(call); err != nil {
		return err
	}
	h.scal[0], h.scal[1] = alpha, beta
	// C int arguments: the callee reads the low 32 bits of each register.
	r, _, _ := purego.SyscallN(h.lib.sgemm, h.h, op(g.transA), op(g.transB),
		uintptr(g.m), uintptr(g.n), uintptr(g.k),
		uintptr(unsafe.Pointer(&h.scal[0])), g.a, uintptr(g.lda), g.b, uintptr(g.ldb),
		uintptr(unsafe.Pointer(&h.scal[1])), c, uintptr(ldc))
	return check(call, r)
}
