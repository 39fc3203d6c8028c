//go:build linux

// cuBLASLt (libcublasLt): matmuls with fused epilogues.
//
// What it is for: a training step of a dense layer is three GEMMs plus
// elementwise kernels around them (bias add, ReLU, the ReLU gradient, the
// bias gradient's reduction over the batch). cuBLASLt does those in the
// GEMMs' epilogues, so a step launches fewer kernels and reads and writes
// the activations fewer times (issue 31, item 2: bias, activation and
// their gradients in GEMM epilogues). A plan (the matmul descriptor, the
// matrix layouts, and the algorithm cuBLASLt's heuristic picks, which is
// slow to ask for) is made once per LtMatmul and cached in the LtHandle;
// a call then allocates nothing, and takes a stream and a workspace, so it
// can be captured into a CUDA graph.
//
// # Row-major mapping
//
// LtMatmul is row-major, like SgemmRowMajor; cuBLASLt is column-major. A
// row-major R×C matrix with row stride ld is, read column-major with
// leading dimension ld, its C×R transpose. So the row-major
//
//	D = op(A)·op(B)               D M×N, op(A) M×K, op(B) K×N
//
// is the column-major Dᵀ = op(B)ᵀ·op(A)ᵀ (N×M), which is what cuBLASLt is
// asked for: its A is the row-major B (with TransB), its B the row-major A
// (with TransA), m = N, n = M, k = K, with the same leading dimensions
// (LtMatmul.colMajor). (cuBLASLt's own CUBLASLT_ORDER_ROW layouts are not
// an alternative: its documentation of cublasLtMatmul says the epilogues
// that combine ReLU or its gradient with a bias are not supported with a
// row-major D.) What cuBLASLt calls rows of D are the columns of
// the row-major D, and its A and B are swapped, so the epilogues read, in
// row-major terms (act is ReLU or nothing):
//
//	BIAS, RELU_BIAS, RELU_AUX_BIAS:  D[i][j] = act(alpha·(op(A)·op(B))[i][j] + beta·C[i][j] + bias[j])
//	                                 bias has N elements, one per column of D (per output feature)
//	RELU_AUX, RELU_AUX_BIAS:         also write mask[i][j] = (the value before ReLU > 0)
//	DRELU:                           D[i][j] = (alpha·(op(A)·op(B))[i][j] + beta·C[i][j]) · mask[i][j]
//	DRELU_BGRAD:                     DRELU, and bias[j] = Σ_i D[i][j] (N elements: summed over the rows)
//	BGRADA (cuBLASLt's A = our B):   bias[j] = Σ_k op(B)[k][j]   N elements; TransB false only
//	BGRADB (cuBLASLt's B = our A):   bias[i] = Σ_k op(A)[i][k]   M elements; TransA true only
//
// The last two reduce an operand stored with K rows: cuBLASLt has no
// kernel for them otherwise, and DRELU and DRELU_BGRAD fail with K = 1
// (LtMatmul.CheckSupported says where each rule is from; Plan refuses
// these up front).
//
// The ReLU bitmask (aux) is cuBLASLt's N×M column-major bit matrix with
// leading dimension AuxLD bits, so in row-major terms M rows of AuxLD
// bits (AuxLD ≥ N, a multiple of 128: cublasLt.h,
// CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD), AuxBytes() = M·AuxLD/8 bytes. A
// forward pass and the backward pass that reads its mask use the same M,
// N and AuxLD. Treat the mask as opaque: its bit order is cuBLASLt's.
//
// # A training step
//
// A layer Y[B×out] = relu(X[B×in]·W[out×in]ᵀ + b[out]), then a layer
// Y2[B×out2] = Y·W2[out2×out]ᵀ + b2 after it; backward has dY2. Each
// LtMatmul below also names ABType, CDType (= BiasType), Compute and
// MaxWorkspace; each call passes Alpha 1, the stream and the workspace.
//
//	forward    Y = relu(X·Wᵀ + b), mask
//	           LtMatmul{TransB: true, M: B, N: out, K: in, LDA: in, LDB: in, LDC: out,
//	                    Epilogue: EpilogueReluAuxBias, AuxLD: LtAuxLD(out)}
//	           LtArgs{A: X, B: W, D: Y, Bias: b, Aux: mask}
//	backward   dZ = (dY2·W2) ⊙ mask and db = Σ_rows dZ, fused into the GEMM
//	           that makes dY = dY2·W2 (the later layer's data gradient):
//	           LtMatmul{M: B, N: out, K: out2, LDA: out2, LDB: out, LDC: out,
//	                    Epilogue: EpilogueDReluBGrad, AuxLD: LtAuxLD(out)}
//	           LtArgs{A: dY2, B: W2, D: dZ, Bias: db, Aux: mask}
//	           then dW = dZᵀ·X and dX = dZ·W with EpilogueDefault.
//	last layer db2 = Σ_rows dY2 (no ReLU): the reduction over k = B of
//	           dY2ᵀ, the row-major A of dW2 = dY2ᵀ·Y, which is cuBLASLt's B:
//	           LtMatmul{TransA: true, M: out2, N: out, K: B, LDA: out2, LDB: out, LDC: out,
//	                    Epilogue: EpilogueBGradB}                (BiasLen() = M = out2)
//	           LtArgs{A: dY2, B: Y, D: dW2, Bias: db2}
//	           (EpilogueBGradA gives it for the transposed dW2ᵀ = Yᵀ·dY2, whose
//	           row-major B is dY2.)
//
// Entry points and enum values are those of cublasLt.h of cuBLAS 13.4
// (the header's text, read from a public copy of the CUDA 13 headers).
// LoadLt also takes libcublasLt.so.12, whose header was not compared.
package cublas

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// The handle's scalar page (see LtHandle.page).
const (
	ltOffAlpha = 0   // float32
	ltOffBeta  = 4   // float32
	ltOffVal   = 8   // uint64: an attribute's value
	ltOffOut   = 16  // uintptr: a created object
	ltOffCount = 24  // int32: the heuristic's returnAlgoCount
	ltOffAlgo  = 64  // cublasLtMatmulAlgo_t of the call
	ltOffHeur  = 128 // one cublasLtMatmulHeuristicResult_t
)

// LtLib is a loaded libcublasLt.
type LtLib struct {
	// Path is the name or path that loaded.
	Path string

	lib                                  uintptr
	create, destroy, getVersion          uintptr
	descCreate, descDestroy, descSetAttr uintptr
	layoutCreate, layoutDestroy          uintptr
	prefCreate, prefDestroy, prefSetAttr uintptr
	heuristic, matmul                    uintptr
}

var (
	ltLoadOnce sync.Once
	ltLoaded   *LtLib
	ltLoadErr  error
)

// LoadLt loads libcublasLt once per process (libcublasLt.so.13, then .12,
// as Load does for libcublas; see ltCandidates) and looks up its entry
// points. It does not touch the GPU. A missing library is ErrNoCUBLAS.
func LoadLt() (*LtLib, error) {
	ltLoadOnce.Do(func() { ltLoaded, ltLoadErr = loadLt(ltCandidates(os.Getenv("CUDA_HOME"))) })
	return ltLoaded, ltLoadErr
}

func loadLt(names []string) (*LtLib, error) {
	var tried []string
	for _, name := range names {
		if strings.ContainsRune(name, '/') {
			if _, err := os.Stat(name); err != nil {
				continue
			}
		}
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		l := &LtLib{Path: name, lib: h}
		for _, s := range []struct {
			p    *uintptr
			name string
		}{
			{&l.create, "cublasLtCreate"}, {&l.destroy, "cublasLtDestroy"}, {&l.getVersion, "cublasLtGetVersion"},
			{&l.descCreate, "cublasLtMatmulDescCreate"}, {&l.descDestroy, "cublasLtMatmulDescDestroy"},
			{&l.descSetAttr, "cublasLtMatmulDescSetAttribute"},
			{&l.layoutCreate, "cublasLtMatrixLayoutCreate"}, {&l.layoutDestroy, "cublasLtMatrixLayoutDestroy"},
			{&l.prefCreate, "cublasLtMatmulPreferenceCreate"}, {&l.prefDestroy, "cublasLtMatmulPreferenceDestroy"},
			{&l.prefSetAttr, "cublasLtMatmulPreferenceSetAttribute"},
			{&l.heuristic, "cublasLtMatmulAlgoGetHeuristic"}, {&l.matmul, "cublasLtMatmul"},
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
	return nil, fmt.Errorf("%w: no libcublasLt (tried %s)", ErrNoCUBLAS, strings.Join(tried, "; "))
}

// Version returns cuBLASLt's version (cublasLtGetVersion), e.g. 130400
// for 13.4.0; 0 for a nil LtLib.
func (l *LtLib) Version() int {
	if l == nil {
		return 0
	}
	r, _, _ := purego.SyscallN(l.getVersion)
	return int(r)
}

// LtHandle is a cublasLtHandle_t with its cache of plans. Its methods and
// its plans' may be called from several goroutines: they serialise on the
// handle.
//
// Like Handle, it is bound to the device current when it is created, and
// plans must be made, and calls made, with that device's context current
// on the calling thread (cuCtxSetCurrent on Device.NativeContext, on a
// locked OS thread, as the package comment says).
type LtHandle struct {
	lib *LtLib
	h   uintptr

	mu sync.Mutex
	// page is one mmap'ed page outside the Go heap holding what cuBLASLt
	// reads or writes through pointers: alpha and beta (host pointer
	// mode: read before cublasLtMatmul returns, and baked into a captured
	// call), attribute values, the algorithm of the call, the heuristic's
	// result. As Handle's, it costs no allocation per call and stays put.
	page  []byte
	plans map[LtMatmul]*LtPlan
}

// LtPlan is one LtMatmul made ready: descriptor, layouts and algorithm.
// It lives as long as its handle.
type LtPlan struct {
	h  *LtHandle
	m  LtMatmul
	cm ltColMajor

	desc, a, b, c uintptr // cublasLtMatmulDesc_t and the layouts of A', B', C' = D'
	algo          [ltAlgoSize]byte
	workspace     int
	waves         float32
}

// Create creates a cuBLASLt handle (cublasLtCreate) on the current device.
func (l *LtLib) Create() (*LtHandle, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: Create on a nil LtLib", ErrNoCUBLAS)
	}
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("cublas: mmap of the scalar page: %w", err)
	}
	h := &LtHandle{lib: l, page: page}
	r, _, _ := purego.SyscallN(l.create, h.addr(ltOffOut))
	if err := check("cublasLtCreate", r); err != nil {
		unix.Munmap(page)
		return nil, err
	}
	h.h = h.out()
	h.plans = map[LtMatmul]*LtPlan{}
	return h, nil
}

func (h *LtHandle) addr(off int) uintptr { return uintptr(unsafe.Pointer(&h.page[off])) }
func (h *LtHandle) out() uintptr         { return *(*uintptr)(unsafe.Pointer(&h.page[ltOffOut])) }

func (h *LtHandle) lock() {
	if h != nil {
		h.mu.Lock()
	}
}

func (h *LtHandle) unlock() {
	if h != nil {
		h.mu.Unlock()
	}
}

func (h *LtHandle) live(call string) error {
	if h == nil || h.h == 0 {
		return &Error{Call: call, Status: StatusNotInitialized, Detail: "no live cuBLASLt handle (nil or destroyed)"}
	}
	return nil
}

// Destroy releases every plan of the handle (their descriptors and
// layouts) and destroys the handle (cublasLtDestroy). Graphs that captured
// calls keep working: they hold the kernels' parameters, not the plans. A
// second Destroy returns CUBLAS_STATUS_NOT_INITIALIZED.
func (h *LtHandle) Destroy() error {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasLtDestroy"); err != nil {
		return err
	}
	var first error
	for _, p := range h.plans {
		if err := p.release(); err != nil && first == nil {
			first = err
		}
	}
	h.plans = nil
	r, _, _ := purego.SyscallN(h.lib.destroy, h.h)
	h.h = 0
	unix.Munmap(h.page)
	h.page = nil
	if err := check("cublasLtDestroy", r); err != nil {
		return err
	}
	return first
}

// Plan returns the plan of m, making it on first use: it validates m
// (CUBLAS_STATUS_INVALID_VALUE with the reason), refuses what cuBLASLt is
// known not to run (an *LtUnsupportedError from m.CheckSupported, before
// any cuBLASLt call: BGRADA takes only TransB false, BGRADB only TransA
// true, DRELU and DRELU_BGRAD only K ≥ 2), creates the descriptor and
// layouts of the column-major problem (see the file comment), and asks
// cuBLASLt's heuristic for the best algorithm that fits m.MaxWorkspace
// (CUBLAS_STATUS_NOT_SUPPORTED if there is none for this combination of
// types, epilogue and device). Both refusals satisfy
// errors.Is(err, StatusNotSupported); errors.As with an
// *LtUnsupportedError tells ours, which names the layouts the epilogue
// takes. Later calls with an equal LtMatmul return the same plan without
// calling cuBLASLt. A failure caches nothing.
//
// The algorithm is chosen for device pointers aligned as cudaMalloc
// aligns them (256 bytes); bias and aux pointers are not known yet and
// count as aligned too.
func (h *LtHandle) Plan(m LtMatmul) (*LtPlan, error) {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasLtMatmulAlgoGetHeuristic"); err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	m.Epilogue = m.epilogue() // one key for 0 and EpilogueDefault
	if p, ok := h.plans[m]; ok {
		return p, nil
	}
	if err := m.CheckSupported(h.lib.Version()); err != nil {
		return nil, err
	}
	p, err := h.build(m)
	if err != nil {
		return nil, err
	}
	h.plans[m] = p
	return p, nil
}

// Matmul is Plan(m) then the plan's Matmul.
func (h *LtHandle) Matmul(m LtMatmul, args LtArgs, stream, workspace uintptr, workspaceBytes int) error {
	p, err := h.Plan(m)
	if err != nil {
		return err
	}
	return p.Matmul(args, stream, workspace, workspaceBytes)
}

// setDesc sets one attribute of a matmul descriptor, its value of size
// bytes (4 or 8) passed through the page (little-endian: the low bytes of
// the uint64).
func (h *LtHandle) setDesc(desc uintptr, attr int, v uint64, size int) error {
	*(*uint64)(unsafe.Pointer(&h.page[ltOffVal])) = v
	r, _, _ := purego.SyscallN(h.lib.descSetAttr, desc, uintptr(attr), h.addr(ltOffVal), uintptr(size))
	if err := check("cublasLtMatmulDescSetAttribute", r); err != nil {
		err.(*Error).Detail = fmt.Sprintf("attribute %d = %d", attr, v)
		return err
	}
	return nil
}

func (h *LtHandle) layout(t DataType, l ltLayout) (uintptr, error) {
	r, _, _ := purego.SyscallN(h.lib.layoutCreate, h.addr(ltOffOut), uintptr(t), uintptr(l.rows), uintptr(l.cols), uintptr(l.ld))
	if err := check("cublasLtMatrixLayoutCreate", r); err != nil {
		return 0, err
	}
	return h.out(), nil
}

// build makes the plan of a validated m; on failure it leaves nothing
// behind.
func (h *LtHandle) build(m LtMatmul) (_ *LtPlan, err error) {
	cm := m.colMajor()
	p := &LtPlan{h: h, m: m, cm: cm}
	defer func() {
		if err != nil {
			p.release()
		}
	}()
	lib := h.lib
	r, _, _ := purego.SyscallN(lib.descCreate, h.addr(ltOffOut), uintptr(m.Compute), uintptr(R32F))
	if err := check("cublasLtMatmulDescCreate", r); err != nil {
		return nil, err
	}
	p.desc = h.out()
	if err := h.setDesc(p.desc, ltDescTransA, uint64(op(cm.transA)), 4); err != nil {
		return nil, err
	}
	if err := h.setDesc(p.desc, ltDescTransB, uint64(op(cm.transB)), 4); err != nil {
		return nil, err
	}
	if err := h.setDesc(p.desc, ltDescEpilogue, uint64(m.Epilogue), 4); err != nil {
		return nil, err
	}
	if m.Epilogue.UsesBias() {
		if err := h.setDesc(p.desc, ltDescBiasDataType, uint64(m.BiasType), 4); err != nil {
			return nil, err
		}
	}
	if m.Epilogue.UsesAux() {
		if err := h.setDesc(p.desc, ltDescAuxLD, uint64(m.AuxLD), 8); err != nil {
			return nil, err
		}
	}
	if p.a, err = h.layout(m.ABType, cm.a); err != nil {
		return nil, err
	}
	if p.b, err = h.layout(m.ABType, cm.b); err != nil {
		return nil, err
	}
	if p.c, err = h.layout(m.CDType, cm.c); err != nil {
		return nil, err
	}

	r, _, _ = purego.SyscallN(lib.prefCreate, h.addr(ltOffOut))
	if err := check("cublasLtMatmulPreferenceCreate", r); err != nil {
		return nil, err
	}
	pref := h.out()
	defer purego.SyscallN(lib.prefDestroy, pref)
	*(*uint64)(unsafe.Pointer(&h.page[ltOffVal])) = uint64(m.MaxWorkspace)
	r, _, _ = purego.SyscallN(lib.prefSetAttr, pref, ltPrefMaxWorkspaceBytes, h.addr(ltOffVal), 8)
	if err := check("cublasLtMatmulPreferenceSetAttribute", r); err != nil {
		return nil, err
	}
	*(*int32)(unsafe.Pointer(&h.page[ltOffCount])) = 0
	r, _, _ = purego.SyscallN(lib.heuristic, h.h, p.desc, p.a, p.b, p.c, p.c, pref,
		1, h.addr(ltOffHeur), h.addr(ltOffCount))
	if err := check("cublasLtMatmulAlgoGetHeuristic", r); err != nil {
		err.(*Error).Detail = m.String()
		return nil, err
	}
	if n := *(*int32)(unsafe.Pointer(&h.page[ltOffCount])); n < 1 {
		return nil, &Error{Call: "cublasLtMatmulAlgoGetHeuristic", Status: StatusNotSupported,
			Detail: "no algorithm for " + m.String()}
	}
	res := h.page[ltOffHeur : ltOffHeur+ltHeurResultBytes]
	if s := Status(*(*int32)(unsafe.Pointer(&res[ltHeurState]))); s != StatusSuccess {
		return nil, &Error{Call: "cublasLtMatmulAlgoGetHeuristic", Status: s, Detail: "the result's state, for " + m.String()}
	}
	copy(p.algo[:], res[:ltAlgoSize])
	p.workspace = int(*(*uint64)(unsafe.Pointer(&res[ltHeurWorkspace])))
	p.waves = *(*float32)(unsafe.Pointer(&res[ltHeurWaves]))
	return p, nil
}

// release destroys the plan's descriptor and layouts; the plan is dead
// after it.
func (p *LtPlan) release() error {
	var first error
	lib := p.h.lib
	for _, l := range []*uintptr{&p.a, &p.b, &p.c} {
		if *l != 0 {
			r, _, _ := purego.SyscallN(lib.layoutDestroy, *l)
			if err := check("cublasLtMatrixLayoutDestroy", r); err != nil && first == nil {
				first = err
			}
			*l = 0
		}
	}
	if p.desc != 0 {
		r, _, _ := purego.SyscallN(lib.descDestroy, p.desc)
		if err := check("cublasLtMatmulDescDestroy", r); err != nil && first == nil {
			first = err
		}
		p.desc = 0
	}
	return first
}

// Desc returns the LtMatmul the plan was made for (Epilogue 0 reads
// EpilogueDefault).
func (p *LtPlan) Desc() LtMatmul { return p.m }

// Workspace returns the bytes of workspace the plan's algorithm needs: a
// call must pass at least that much.
func (p *LtPlan) Workspace() int { return p.workspace }

// Matmul runs the plan on stream (a CUstream, Stream.NativeStream; 0 for
// the legacy default stream) with workspace bytes of device memory at
// workspace (at least Workspace(), 256-byte aligned as cublasLtMatmul
// wants; it may be 0 when Workspace() is 0). It
// allocates nothing, host or device, so it can be captured into a graph;
// the workspace must then outlive the graph, and must not be used by two
// streams at once. The call is asynchronous; argument errors of ours are
// CUBLAS_STATUS_INVALID_VALUE with the reason, before cuBLASLt is called,
// and leave the plan as it was.
func (p *LtPlan) Matmul(args LtArgs, stream, workspace uintptr, workspaceBytes int) error {
	const call = "cublasLtMatmul"
	if p == nil {
		return &Error{Call: call, Status: StatusNotInitialized, Detail: "nil plan"}
	}
	h := p.h
	h.lock()
	defer h.unlock()
	if err := h.live(call); err != nil {
		return err
	}
	if p.desc == 0 {
		return &Error{Call: call, Status: StatusNotInitialized, Detail: "released plan"}
	}
	if err := p.m.checkArgs(args, workspace, workspaceBytes, p.workspace); err != nil {
		return err
	}
	e := p.m.Epilogue
	if e.UsesBias() {
		if err := h.setDesc(p.desc, ltDescBiasPointer, uint64(args.Bias), 8); err != nil {
			return err
		}
	}
	if e.UsesAux() {
		if err := h.setDesc(p.desc, ltDescAuxPointer, uint64(args.Aux), 8); err != nil {
			return err
		}
	}
	*(*float32)(unsafe.Pointer(&h.page[ltOffAlpha])) = args.Alpha
	*(*float32)(unsafe.Pointer(&h.page[ltOffBeta])) = args.Beta
	copy(h.page[ltOffAlgo:ltOffAlgo+ltAlgoSize], p.algo[:])
	c := args.C
	if c == 0 { // Beta is 0: C is not read
		c = args.D
	}
	// cuBLASLt's A is the row-major B and its B the row-major A (colMajor).
	r, _, _ := purego.SyscallN(h.lib.matmul, h.h, p.desc,
		h.addr(ltOffAlpha), args.B, p.a, args.A, p.b,
		h.addr(ltOffBeta), c, p.c, args.D, p.c,
		h.addr(ltOffAlgo), workspace, uintptr(workspaceBytes), stream)
	return check(call, r)
}
