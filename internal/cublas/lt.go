package cublas

// The portable half of the cuBLASLt binding (lt_linux.go binds the library;
// its opening comment says what it is for and how the row-major problem
// maps onto cuBLASLt's column-major one): the types, in CUDA's names and
// values, the validation, and the mapping, as pure functions.
//
// Every enum value below is the one of the CUDA 13 headers: cublasLt.h
// (cuBLAS 13.4), cublas_api.h (cublasComputeType_t, cublasOperation_t) and
// library_types.h (cudaDataType_t).

import (
	"fmt"
	"path/filepath"
)

// cublasLtMatmulDescAttributes_t (cublasLt.h).
const (
	ltDescTransA       = 3  // CUBLASLT_MATMUL_DESC_TRANSA, int32_t (cublasOperation_t)
	ltDescTransB       = 4  // CUBLASLT_MATMUL_DESC_TRANSB, int32_t
	ltDescEpilogue     = 7  // CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t
	ltDescBiasPointer  = 8  // CUBLASLT_MATMUL_DESC_BIAS_POINTER, void*
	ltDescAuxPointer   = 11 // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, void*
	ltDescAuxLD        = 12 // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t
	ltDescBiasDataType = 26 // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t (cudaDataType)
)

// cublasLtMatmulPreferenceAttributes_t (cublasLt.h).
const ltPrefMaxWorkspaceBytes = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t

// cublasLtMatmulHeuristicResult_t (cublasLt.h): cublasLtMatmulAlgo_t algo
// (uint64_t data[8]), size_t workspaceSize, cublasStatus_t state, float
// wavesCount, int reserved[4].
const (
	ltAlgoSize        = 64
	ltHeurWorkspace   = 64
	ltHeurState       = 72
	ltHeurWaves       = 76
	ltHeurResultBytes = 96
)

// DataType and ComputeType (gemmex.go) are shared with GemmEx; LtMatmul
// takes the types ltSize gives a size, and Compute32F or
// Compute32FFastTF32.

// ltSize returns the size in bytes of an element of a type LtMatmul takes
// (float32, bfloat16), or 0.
func ltSize(t DataType) int {
	switch t {
	case R32F:
		return 4
	case R16BF:
		return 2
	}
	return 0
}

// Epilogue is a cublasLtEpilogue_t (cublasLt.h): what cuBLASLt does to the
// product before it stores D. The values, and the meaning, are cuBLASLt's,
// for its column-major problem; for the row-major LtMatmul, rows and
// columns of cuBLASLt's D are the columns and rows of the row-major D, and
// cuBLASLt's A and B are the row-major B and A (see lt_linux.go and
// LtMatmul.BiasLen).
type Epilogue uint32

// The cublasLtEpilogue_t values LtMatmul takes.
const (
	EpilogueDefault     Epilogue = 1   // CUBLASLT_EPILOGUE_DEFAULT: D = alpha·op(A)·op(B) + beta·C
	EpilogueRelu        Epilogue = 2   // CUBLASLT_EPILOGUE_RELU: D = max(…, 0)
	EpilogueReluAux     Epilogue = 130 // CUBLASLT_EPILOGUE_RELU_AUX = RELU | 128: and writes the ReLU bitmask to aux
	EpilogueBias        Epilogue = 4   // CUBLASLT_EPILOGUE_BIAS: adds the bias vector
	EpilogueReluBias    Epilogue = 6   // CUBLASLT_EPILOGUE_RELU_BIAS = RELU | BIAS: bias, then ReLU
	EpilogueReluAuxBias Epilogue = 134 // CUBLASLT_EPILOGUE_RELU_AUX_BIAS = RELU_AUX | BIAS: bias, ReLU, bitmask to aux
	EpilogueDRelu       Epilogue = 136 // CUBLASLT_EPILOGUE_DRELU = 8 | 128: D = product ⊙ (aux bit), the ReLU gradient; K ≥ 2 only
	EpilogueDReluBGrad  Epilogue = 152 // CUBLASLT_EPILOGUE_DRELU_BGRAD = DRELU | 16: and the bias gradient of D to bias; K ≥ 2 only
	EpilogueBGradA      Epilogue = 256 // CUBLASLT_EPILOGUE_BGRADA: bias gradient of cuBLASLt's A (the row-major B); TransB false only
	EpilogueBGradB      Epilogue = 512 // CUBLASLT_EPILOGUE_BGRADB: bias gradient of cuBLASLt's B (the row-major A); TransA true only
)

var epilogueNames = map[Epilogue]string{
	EpilogueDefault:     "CUBLASLT_EPILOGUE_DEFAULT",
	EpilogueRelu:        "CUBLASLT_EPILOGUE_RELU",
	EpilogueReluAux:     "CUBLASLT_EPILOGUE_RELU_AUX",
	EpilogueBias:        "CUBLASLT_EPILOGUE_BIAS",
	EpilogueReluBias:    "CUBLASLT_EPILOGUE_RELU_BIAS",
	EpilogueReluAuxBias: "CUBLASLT_EPILOGUE_RELU_AUX_BIAS",
	EpilogueDRelu:       "CUBLASLT_EPILOGUE_DRELU",
	EpilogueDReluBGrad:  "CUBLASLT_EPILOGUE_DRELU_BGRAD",
	EpilogueBGradA:      "CUBLASLT_EPILOGUE_BGRADA",
	EpilogueBGradB:      "CUBLASLT_EPILOGUE_BGRADB",
}

func (e Epilogue) String() string {
	if n, ok := epilogueNames[e]; ok {
		return n
	}
	return fmt.Sprintf("cublasLtEpilogue(%d)", uint32(e))
}

// UsesBias reports whether the epilogue reads a bias vector (BIAS,
// RELU_BIAS, RELU_AUX_BIAS) or writes a bias gradient (DRELU_BGRAD,
// BGRADA, BGRADB) at LtArgs.Bias.
func (e Epilogue) UsesBias() bool {
	switch e {
	case EpilogueBias, EpilogueReluBias, EpilogueReluAuxBias, EpilogueDReluBGrad, EpilogueBGradA, EpilogueBGradB:
		return true
	}
	return false
}

// UsesAux reports whether the epilogue writes the ReLU bitmask (RELU_AUX,
// RELU_AUX_BIAS) or reads it (DRELU, DRELU_BGRAD) at LtArgs.Aux.
func (e Epilogue) UsesAux() bool {
	switch e {
	case EpilogueReluAux, EpilogueReluAuxBias, EpilogueDRelu, EpilogueDReluBGrad:
		return true
	}
	return false
}

// LtMatmul describes one row-major cuBLASLt matmul,
//
//	D = epilogue(alpha·op(A)·op(B) + beta·C),
//
// in the terms of SgemmRowMajor: op(A) is M×K, op(B) K×N, C and D M×N, all
// row-major, and LDA, LDB, LDC are row strides in elements (LDA ≥ K for A
// untransposed, stored M×K; LDA ≥ M for A transposed, stored K×M; likewise
// B; LDC ≥ N). C and D share LDC and CDType (cuBLASLt wants one layout for
// both); D may be C. It is comparable: LtHandle keys its plans by it.
type LtMatmul struct {
	TransA, TransB bool
	M, N, K        int
	LDA, LDB, LDC  int

	ABType  DataType    // A and B: R32F or R16BF
	CDType  DataType    // C and D: R32F or R16BF
	Compute ComputeType // Compute32F, or Compute32FFastTF32 (float32 A and B only)

	Epilogue Epilogue // the zero value is taken as EpilogueDefault
	// BiasType is the type of the bias vector or bias gradient when
	// Epilogue.UsesBias: CDType's (cublasLtMatmul's table of supported
	// types has no other for these types), so R16BF must be named for
	// bfloat16 outputs; left zero (R32F) for other epilogues.
	BiasType DataType
	// AuxLD is the row stride of the ReLU bitmask in bits (elements), when
	// Epilogue.UsesAux: the mask has M rows of N bits, so AuxLD ≥ N, and
	// cuBLASLt wants a multiple of 128 (LtAuxLD(N) is the smallest). It
	// must be 0 for an epilogue without aux. The buffer is AuxBytes() long.
	AuxLD int

	// MaxWorkspace is the most workspace, in bytes, the calls will pass:
	// the heuristic picks only algorithms that need no more
	// (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES). 0 allows only algorithms
	// without workspace.
	MaxWorkspace int
}

// LtAuxLD returns the smallest valid AuxLD for n columns: n rounded up to
// a multiple of 128 bits.
func LtAuxLD(n int) int { return (n + 127) / 128 * 128 }

// AuxBytes returns the size in bytes of the ReLU bitmask (M rows of AuxLD
// bits), 0 for an epilogue without aux.
func (m LtMatmul) AuxBytes() int {
	if !m.epilogue().UsesAux() {
		return 0
	}
	return m.AuxLD / 8 * m.M
}

// BiasLen returns the number of elements of the bias vector or bias
// gradient at LtArgs.Bias (0 for an epilogue without one). cuBLASLt's
// vector has one element per row of its column-major D, which is one per
// column of the row-major D: N, for BIAS, RELU_BIAS, RELU_AUX_BIAS,
// DRELU_BGRAD and BGRADA. BGRADB has one per column of cuBLASLt's D, one
// per row of the row-major D: M.
func (m LtMatmul) BiasLen() int {
	switch e := m.epilogue(); {
	case !e.UsesBias():
		return 0
	case e == EpilogueBGradB:
		return m.M
	}
	return m.N
}

// String describes m in the row-major terms it has.
func (m LtMatmul) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	s := fmt.Sprintf("row-major %s%s M=%d N=%d K=%d lda=%d ldb=%d ldc=%d A,B %v C,D %v %v %v",
		t(m.TransA), t(m.TransB), m.M, m.N, m.K, m.LDA, m.LDB, m.LDC, m.ABType, m.CDType, m.Compute, m.epilogue())
	if m.epilogue().UsesBias() {
		s += fmt.Sprintf(" bias %v", m.BiasType)
	}
	if m.epilogue().UsesAux() {
		s += fmt.Sprintf(" auxld=%d", m.AuxLD)
	}
	return s + fmt.Sprintf(" workspace<=%d", m.MaxWorkspace)
}

func (m LtMatmul) epilogue() Epilogue {
	if m.Epilogue == 0 {
		return EpilogueDefault
	}
	return m.Epilogue
}

// ltInvalid is the error of a check of ours: CUBLAS_STATUS_INVALID_VALUE.
func ltInvalid(format string, args ...any) error {
	return &Error{Call: "cublasLtMatmul", Status: StatusInvalidValue, Detail: fmt.Sprintf(format, args...)}
}

// validate checks m before any cuBLASLt call: what cuBLASLt would reject,
// or silently misread, is CUBLAS_STATUS_INVALID_VALUE here, with the reason.
func (m LtMatmul) validate() error {
	if m.M <= 0 || m.N <= 0 || m.K <= 0 {
		return ltInvalid("M, N, K = %d, %d, %d: each must be positive", m.M, m.N, m.K)
	}
	aCols, bCols := m.K, m.N // row-major widths of A and B as stored
	if m.TransA {
		aCols = m.M
	}
	if m.TransB {
		bCols = m.K
	}
	switch {
	case m.LDA < aCols:
		return ltInvalid("LDA %d < %d, the row length of A as stored (TransA %v)", m.LDA, aCols, m.TransA)
	case m.LDB < bCols:
		return ltInvalid("LDB %d < %d, the row length of B as stored (TransB %v)", m.LDB, bCols, m.TransB)
	case m.LDC < m.N:
		return ltInvalid("LDC %d < N = %d", m.LDC, m.N)
	}
	for _, t := range []struct {
		name string
		t    DataType
	}{{"ABType", m.ABType}, {"CDType", m.CDType}, {"BiasType", m.BiasType}} {
		if ltSize(t.t) == 0 {
			return ltInvalid("%s %v: want CUDA_R_32F or CUDA_R_16BF", t.name, t.t)
		}
	}
	switch m.Compute {
	case Compute32F:
	case Compute32FFastTF32:
		if m.ABType != R32F {
			return ltInvalid("%v takes float32 A and B, not %v", m.Compute, m.ABType)
		}
	default:
		return ltInvalid("compute type %v: want CUBLAS_COMPUTE_32F or CUBLAS_COMPUTE_32F_FAST_TF32", m.Compute)
	}
	e := m.epilogue()
	if _, ok := epilogueNames[e]; !ok {
		return ltInvalid("epilogue %v is not one LtMatmul takes", e)
	}
	switch {
	case e.UsesBias() && m.BiasType != m.CDType:
		// cublasLtMatmul's table of supported types: for these types the
		// bias is of C's type (other bias types are for IMMA and FP8).
		return ltInvalid("BiasType %v differs from CDType %v: cuBLASLt takes a bias of D's type", m.BiasType, m.CDType)
	case !e.UsesBias() && m.BiasType != R32F:
		return ltInvalid("BiasType %v set, but %v takes no bias", m.BiasType, e)
	}
	switch {
	case e.UsesAux() && m.AuxLD < m.N:
		return ltInvalid("AuxLD %d < N = %d: %v needs the ReLU bitmask, M rows of at least N bits", m.AuxLD, m.N, e)
	case e.UsesAux() && m.AuxLD%128 != 0:
		return ltInvalid("AuxLD %d is not a multiple of 128 bits, as cuBLASLt wants (LtAuxLD(%d) = %d)", m.AuxLD, m.N, LtAuxLD(m.N))
	case !e.UsesAux() && m.AuxLD != 0:
		return ltInvalid("AuxLD %d set, but %v takes no aux", m.AuxLD, e)
	}
	if m.MaxWorkspace < 0 {
		return ltInvalid("MaxWorkspace %d is negative", m.MaxWorkspace)
	}
	return nil
}

// LtUnsupportedError is Plan's refusal, before cuBLASLt is asked, of an
// LtMatmul that is well formed but that cuBLASLt does not run: an epilogue
// with transposes it has no kernel for, or a size it fails on (see
// CheckSupported). errors.Is(err, StatusNotSupported) holds, as it does for
// the heuristic's own CUBLAS_STATUS_NOT_SUPPORTED.
type LtUnsupportedError struct {
	Matmul LtMatmul
	// Layouts are the row-major transposes the epilogue takes, each
	// "NN", "NT", "TN" or "TT" (TransA's letter, then TransB's), when the
	// refusal is of the transposes; nil for a refusal of another kind.
	Layouts []string
	// Reason says what cuBLASLt does not do, in row-major terms.
	Reason string
}

func (e *LtUnsupportedError) Error() string {
	return fmt.Sprintf("cublas: LtHandle.Plan: %v (%d): %s: %v", StatusNotSupported, int32(StatusNotSupported), e.Reason, e.Matmul)
}

// Is makes errors.Is(err, cublas.StatusNotSupported) hold.
func (e *LtUnsupportedError) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == StatusNotSupported
}

// ltLayoutName is the row-major layout's name: TransA's letter, then
// TransB's.
func ltLayoutName(transA, transB bool) string {
	l := func(t bool) string {
		if t {
			return "T"
		}
		return "N"
	}
	return l(transA) + l(transB)
}

// ltBGradKMinVersion is the first cuBLASLt that takes K = 1 with BGRADA and
// BGRADB (nvmath-python's epilog_protocol.py refuses it below 12.3.4).
const ltBGradKMinVersion = 120304

// CheckSupported reports, without a GPU, whether cuBLASLt runs m's
// epilogue with m's transposes and sizes, for cuBLASLt version (LtLib's
// Version; 0, unknown, applies every rule): nil, or an
// *LtUnsupportedError saying what the epilogue takes. Plan calls it
// before the heuristic. It assumes m is valid (Plan validates first).
//
// The rules, in row-major terms (lt_linux.go's comment: cuBLASLt's A is the
// row-major B with TransB, its B the row-major A with TransA):
//
//   - BGRADA takes only TransB false (layouts NN, TN), BGRADB only TransA
//     true (TN, TT): in cuBLASLt's terms BGRADA wants transa = CUBLAS_OP_N
//     and BGRADB transb = CUBLAS_OP_T, so that the operand reduced over k
//     is stored with k along its columns (column-major), which in row-major
//     terms is: the reduced operand (op(B) for BGRADA, op(A) for BGRADB) is
//     stored with K rows, and the bias gradient sums those rows, as a
//     layer's db = Σ_batch dY does. Sources: a GPU run
//     (docs/gpu-runs/2026-11-26-cublaslt: cuBLASLt 130100, driver 580,
//     H200; TestGPULtEpilogues, every type combination) had
//     cublasLtMatmulAlgoGetHeuristic answer
//     CUBLAS_STATUS_NOT_SUPPORTED for BGRADA in NT and TT and for BGRADB in
//     NN and NT, and computed the other four correctly; NVIDIA's
//     nvmath-python (nvmath/linalg/advanced/matmulmod.py) transposes B
//     itself for BGRADB "since this epilog requires B to be transposed"
//     (transb = OP_T), and its tests give BGRADA a column-major A with
//     transa = OP_N. cublasLt.h's text of the two epilogues says only that
//     the bias has one element per row (BGRADA) or column (BGRADB) of D and
//     that the reduction is over k; no transpose rule was found in the
//     cuBLAS documentation searched, which is why the heuristic was asked
//     until now. A later cuBLASLt that lifts the rule is seen by
//     TestGPULtEpilogues, which asks the heuristic past this check.
//   - DRELU and DRELU_BGRAD take only K ≥ 2: nvmath-python refuses K = 1
//     for them in every version ("K=1 is not supported by cuBLAS",
//     nvmath/linalg/_internal/epilog_protocol.py), and the heuristic does
//     not: it gave an algorithm for ExampleLtHandle_Plan's K = 1 DRELU_BGRAD,
//     whose capture then failed with CUBLAS_STATUS_EXECUTION_FAILED on the
//     same GPU run (not yet shown to be the K = 1 call: TestGPULtTinyLayer
//     runs it past this check, captured and not, next to K = 2).
//   - BGRADA and BGRADB take K = 1 only from cuBLASLt 12.3.4 (120304),
//     below which nvmath-python refuses it.
func (m LtMatmul) CheckSupported(version int) error {
	e := m.epilogue()
	refuse := func(layouts []string, format string, args ...any) error {
		return &LtUnsupportedError{Matmul: m, Layouts: layouts, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case e == EpilogueBGradA && m.TransB:
		return refuse([]string{"NN", "TN"}, "%v takes the row-major layouts NN and TN only (TransB false: op(B) stored K×N, summed over its K rows; cuBLASLt's transa = CUBLAS_OP_N), not %s",
			e, ltLayoutName(m.TransA, m.TransB))
	case e == EpilogueBGradB && !m.TransA:
		return refuse([]string{"TN", "TT"}, "%v takes the row-major layouts TN and TT only (TransA true: op(A) stored K×M, summed over its K rows; cuBLASLt's transb = CUBLAS_OP_T), not %s",
			e, ltLayoutName(m.TransA, m.TransB))
	case (e == EpilogueDRelu || e == EpilogueDReluBGrad) && m.K < 2:
		return refuse(nil, "%v takes K ≥ 2 only (nvmath-python: \"K=1 is not supported by cuBLAS\"), not K = %d", e, m.K)
	case (e == EpilogueBGradA || e == EpilogueBGradB) && m.K < 2 && version < ltBGradKMinVersion:
		return refuse(nil, "%v takes K = 1 only from cuBLASLt %d, and this is %d", e, ltBGradKMinVersion, version)
	}
	return nil
}

// ltLayout is a cublasLtMatrixLayoutCreate: a column-major rows×cols
// matrix with leading dimension ld.
type ltLayout struct {
	rows, cols, ld int
}

// ltColMajor is the column-major problem cuBLASLt is given for a row-major
// LtMatmul: D' = epilogue(alpha·op(A')·op(B') + beta·C'), op(A') m×k,
// op(B') k×n, D' m×n.
type ltColMajor struct {
	transA, transB bool // CUBLASLT_MATMUL_DESC_TRANSA/B
	m, n, k        int
	a, b, c        ltLayout // A', B', and C' = D'
	// swap is true: A' is the row-major B's memory and B' the row-major
	// A's; the call passes them so.
	swap bool
}

// colMajor maps the row-major problem onto cuBLASLt's (the row-major
// matrix with leading dimension ld is, read column-major with the same ld,
// its transpose): D(M×N) = op(A)·op(B) is D'ᵀ where D' = op(B)ᵀ·op(A)ᵀ
// (N×M). So A' is the memory of B with B's transpose flag, B' the memory
// of A with A's, m = N, n = M, k = K, and each layout is the stored
// matrix's columns × rows with its row stride as ld.
func (m LtMatmul) colMajor() ltColMajor {
	aRows, aCols := m.M, m.K // A as stored, row-major
	if m.TransA {
		aRows, aCols = m.K, m.M
	}
	bRows, bCols := m.K, m.N
	if m.TransB {
		bRows, bCols = m.N, m.K
	}
	return ltColMajor{
		transA: m.TransB, transB: m.TransA,
		m: m.N, n: m.M, k: m.K,
		a:    ltLayout{rows: bCols, cols: bRows, ld: m.LDB},
		b:    ltLayout{rows: aCols, cols: aRows, ld: m.LDA},
		c:    ltLayout{rows: m.N, cols: m.M, ld: m.LDC},
		swap: true,
	}
}

// LtArgs are the pointers and scalars of one call of a plan. Pointers are
// device addresses (a gpugraph DevicePtr converted to uintptr), of
// row-major matrices as the plan's LtMatmul describes them.
type LtArgs struct {
	// Alpha and Beta are read at the call (host pointer mode); a call
	// captured into a graph keeps the values it was given.
	Alpha, Beta float32
	A, B        uintptr
	// C is read when Beta ≠ 0; 0 with Beta = 0 means "no C" (D is passed
	// in its place, and not read).
	C uintptr
	D uintptr
	// Bias is the bias vector (BIAS, RELU_BIAS, RELU_AUX_BIAS) or the
	// bias gradient written (DRELU_BGRAD, BGRADA, BGRADB), of BiasLen()
	// elements of BiasType; 0 for other epilogues.
	Bias uintptr
	// Aux is the ReLU bitmask (AuxBytes() bytes) written by RELU_AUX and
	// RELU_AUX_BIAS and read by DRELU and DRELU_BGRAD; 0 for other
	// epilogues.
	Aux uintptr
}

// checkArgs checks one call's arguments against the plan's description
// and the workspace the algorithm needs.
func (m LtMatmul) checkArgs(a LtArgs, workspace uintptr, workspaceBytes, need int) error {
	e := m.epilogue()
	switch {
	case a.A == 0 || a.B == 0 || a.D == 0:
		return ltInvalid("nil device pointer (A %#x, B %#x, D %#x)", a.A, a.B, a.D)
	case a.C == 0 && a.Beta != 0:
		return ltInvalid("C is nil but beta is %v", a.Beta)
	case e.UsesBias() && a.Bias == 0:
		return ltInvalid("%v needs a bias vector (%d elements of %v), and Bias is nil", e, m.BiasLen(), m.BiasType)
	case !e.UsesBias() && a.Bias != 0:
		return ltInvalid("Bias %#x set, but %v takes no bias", a.Bias, e)
	case e.UsesAux() && a.Aux == 0:
		return ltInvalid("%v needs the ReLU bitmask (%d bytes), and Aux is nil", e, m.AuxBytes())
	case !e.UsesAux() && a.Aux != 0:
		return ltInvalid("Aux %#x set, but %v takes no aux", a.Aux, e)
	case workspaceBytes < 0:
		return ltInvalid("negative workspace size %d", workspaceBytes)
	case workspaceBytes < need:
		return ltInvalid("workspace of %d bytes, the plan's algorithm needs %d", workspaceBytes, need)
	case workspaceBytes > 0 && workspace == 0:
		return ltInvalid("workspace of %d bytes at a nil pointer", workspaceBytes)
	case workspace%256 != 0:
		return ltInvalid("workspace at %#x: cublasLtMatmul wants it 256-byte aligned", workspace)
	}
	return nil
}

// ltLibNames are the libcublasLt sonames tried, newest first.
var ltLibNames = []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}

// ltCandidates lists what LoadLt tries, in order, as candidates does for
// libcublas: the bare names, then under $CUDA_HOME/lib64 and
// /usr/local/cuda/lib64.
func ltCandidates(cudaHome string) []string {
	c := append([]string(nil), ltLibNames...)
	dirs := []string{"/usr/local/cuda/lib64"}
	if cudaHome != "" && filepath.Clean(filepath.Join(cudaHome, "lib64")) != dirs[0] {
		dirs = append([]string{filepath.Join(cudaHome, "lib64")}, dirs...)
	}
	for _, d := range dirs {
		for _, n := range ltLibNames {
			c = append(c, filepath.Join(d, n))
		}
	}
	return c
}
