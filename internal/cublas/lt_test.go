package cublas

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestLtEnumValues pins every value sent to cuBLASLt to the CUDA 13
// headers (cublasLt.h of cuBLAS 13.4, cublas_api.h, library_types.h), and
// the compositions cublasLt.h spells out.
func TestLtEnumValues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"CUDA_R_32F", int64(R32F), 0},
		{"CUDA_R_16BF", int64(R16BF), 14},
		{"CUBLAS_COMPUTE_32F", int64(Compute32F), 68},
		{"CUBLAS_COMPUTE_32F_FAST_TF32", int64(Compute32FFastTF32), 77},
		{"CUBLASLT_EPILOGUE_DEFAULT", int64(EpilogueDefault), 1},
		{"CUBLASLT_EPILOGUE_RELU", int64(EpilogueRelu), 2},
		{"CUBLASLT_EPILOGUE_RELU_AUX", int64(EpilogueReluAux), 130},
		{"CUBLASLT_EPILOGUE_BIAS", int64(EpilogueBias), 4},
		{"CUBLASLT_EPILOGUE_RELU_BIAS", int64(EpilogueReluBias), 6},
		{"CUBLASLT_EPILOGUE_RELU_AUX_BIAS", int64(EpilogueReluAuxBias), 134},
		{"CUBLASLT_EPILOGUE_DRELU", int64(EpilogueDRelu), 136},
		{"CUBLASLT_EPILOGUE_DRELU_BGRAD", int64(EpilogueDReluBGrad), 152},
		{"CUBLASLT_EPILOGUE_BGRADA", int64(EpilogueBGradA), 256},
		{"CUBLASLT_EPILOGUE_BGRADB", int64(EpilogueBGradB), 512},
		// cublasLt.h's definitions in terms of each other.
		{"RELU_AUX = RELU | 128", int64(EpilogueReluAux), int64(EpilogueRelu | 128)},
		{"RELU_BIAS = RELU | BIAS", int64(EpilogueReluBias), int64(EpilogueRelu | EpilogueBias)},
		{"RELU_AUX_BIAS = RELU_AUX | BIAS", int64(EpilogueReluAuxBias), int64(EpilogueReluAux | EpilogueBias)},
		{"DRELU = 8 | 128", int64(EpilogueDRelu), 8 | 128},
		{"DRELU_BGRAD = DRELU | 16", int64(EpilogueDReluBGrad), int64(EpilogueDRelu | 16)},
		{"CUBLASLT_MATMUL_DESC_TRANSA", ltDescTransA, 3},
		{"CUBLASLT_MATMUL_DESC_TRANSB", ltDescTransB, 4},
		{"CUBLASLT_MATMUL_DESC_EPILOGUE", ltDescEpilogue, 7},
		{"CUBLASLT_MATMUL_DESC_BIAS_POINTER", ltDescBiasPointer, 8},
		{"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", ltDescAuxPointer, 11},
		{"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD", ltDescAuxLD, 12},
		{"CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE", ltDescBiasDataType, 26},
		{"CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES", ltPrefMaxWorkspaceBytes, 1},
		// cublasLtMatmulHeuristicResult_t: algo (8 uint64), size_t, status, float, int[4].
		{"sizeof(cublasLtMatmulAlgo_t)", ltAlgoSize, 8 * 8},
		{"offsetof(workspaceSize)", ltHeurWorkspace, 64},
		{"offsetof(state)", ltHeurState, 64 + 8},
		{"offsetof(wavesCount)", ltHeurWaves, 64 + 8 + 4},
		{"sizeof(cublasLtMatmulHeuristicResult_t)", ltHeurResultBytes, 64 + 8 + 4 + 4 + 4*4},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	for e, n := range epilogueNames {
		if e.String() != n {
			t.Errorf("%d: String %q, want %q", uint32(e), e.String(), n)
		}
	}
	if got := Epilogue(3).String(); got != "cublasLtEpilogue(3)" {
		t.Errorf("unknown epilogue: %q", got)
	}
}

func TestLtEpilogueOperands(t *testing.T) {
	for _, tc := range []struct {
		e         Epilogue
		bias, aux bool
	}{
		{EpilogueDefault, false, false},
		{EpilogueRelu, false, false},
		{EpilogueReluAux, false, true},
		{EpilogueBias, true, false},
		{EpilogueReluBias, true, false},
		{EpilogueReluAuxBias, true, true},
		{EpilogueDRelu, false, true},
		{EpilogueDReluBGrad, true, true},
		{EpilogueBGradA, true, false},
		{EpilogueBGradB, true, false},
	} {
		if tc.e.UsesBias() != tc.bias || tc.e.UsesAux() != tc.aux {
			t.Errorf("%v: UsesBias %v UsesAux %v, want %v %v", tc.e, tc.e.UsesBias(), tc.e.UsesAux(), tc.bias, tc.aux)
		}
	}
}

func TestLtAuxLD(t *testing.T) {
	for n, want := range map[int]int{1: 128, 127: 128, 128: 128, 129: 256, 300: 384, 1024: 1024} {
		if got := LtAuxLD(n); got != want {
			t.Errorf("LtAuxLD(%d) = %d, want %d", n, got, want)
		}
	}
}

// ltValid is a valid description: the forward step of a layer with 64
// inputs and 96 outputs on a batch of 32.
func ltValid() LtMatmul {
	return LtMatmul{TransB: true, M: 32, N: 96, K: 64, LDA: 64, LDB: 64, LDC: 96,
		ABType: R32F, CDType: R32F, Compute: Compute32F,
		Epilogue: EpilogueReluAuxBias, AuxLD: 128, MaxWorkspace: 1 << 20}
}

func TestLtValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*LtMatmul)
		want string // "" for valid; else a part of the detail
	}{
		{"valid", func(*LtMatmul) {}, ""},
		{"epilogue 0 is DEFAULT", func(m *LtMatmul) { m.Epilogue, m.AuxLD = 0, 0 }, ""},
		{"bf16", func(m *LtMatmul) { m.ABType, m.CDType, m.BiasType = R16BF, R16BF, R16BF }, ""},
		{"tf32", func(m *LtMatmul) { m.Compute = Compute32FFastTF32 }, ""},
		{"wide aux", func(m *LtMatmul) { m.AuxLD = 1024 }, ""},
		{"transposed A", func(m *LtMatmul) { m.TransA, m.LDA = true, 32 }, ""},
		{"no workspace", func(m *LtMatmul) { m.MaxWorkspace = 0 }, ""},
		{"M 0", func(m *LtMatmul) { m.M = 0 }, "must be positive"},
		{"K negative", func(m *LtMatmul) { m.K = -1 }, "must be positive"},
		{"LDA short", func(m *LtMatmul) { m.LDA = 63 }, "LDA 63 < 64"},
		{"LDA short, A transposed", func(m *LtMatmul) { m.TransA, m.LDA = true, 31 }, "LDA 31 < 32"},
		{"LDB short, B transposed", func(m *LtMatmul) { m.LDB = 63 }, "LDB 63 < 64"},
		{"LDB short", func(m *LtMatmul) { m.TransB, m.LDB = false, 95 }, "LDB 95 < 96"},
		{"LDC short", func(m *LtMatmul) { m.LDC = 95 }, "LDC 95 < N"},
		{"fp16 A", func(m *LtMatmul) { m.ABType = 2 }, "ABType CUDA_R_16F"},
		{"fp64 D", func(m *LtMatmul) { m.CDType = 1 }, "CDType"},
		{"int8 bias", func(m *LtMatmul) { m.BiasType = 3 }, "BiasType"},
		{"fp32 bias of bf16 D", func(m *LtMatmul) { m.ABType, m.CDType = R16BF, R16BF }, "BiasType CUDA_R_32F differs from CDType CUDA_R_16BF"},
		{"bf16 bias of fp32 D", func(m *LtMatmul) { m.BiasType = R16BF }, "differs from CDType"},
		{"bf16 in, fp32 out and bias", func(m *LtMatmul) { m.ABType = R16BF }, ""},
		{"compute 16F", func(m *LtMatmul) { m.Compute = 64 }, "compute type"},
		{"tf32 with bf16", func(m *LtMatmul) { m.Compute, m.ABType = Compute32FFastTF32, R16BF }, "takes float32"},
		{"GELU", func(m *LtMatmul) { m.Epilogue, m.AuxLD = 32, 0 }, "not one LtMatmul takes"},
		{"bias type without bias", func(m *LtMatmul) { m.Epilogue, m.AuxLD, m.BiasType = EpilogueRelu, 0, R16BF }, "takes no bias"},
		{"aux missing", func(m *LtMatmul) { m.AuxLD = 0 }, "AuxLD 0 < N"},
		{"aux narrow", func(m *LtMatmul) { m.N, m.LDC, m.AuxLD = 200, 200, 128 }, "AuxLD 128 < N = 200"},
		{"aux not 128-bit", func(m *LtMatmul) { m.AuxLD = 96 + 32 + 8 }, "multiple of 128"},
		{"aux for DRELU_BGRAD", func(m *LtMatmul) { m.Epilogue, m.AuxLD = EpilogueDReluBGrad, 64 }, "AuxLD 64 < N"},
		{"aux ld without aux", func(m *LtMatmul) { m.Epilogue = EpilogueBias }, "takes no aux"},
		{"negative workspace", func(m *LtMatmul) { m.MaxWorkspace = -1 }, "negative"},
	} {
		m := ltValid()
		tc.edit(&m)
		err := m.validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var e *Error
		if !errors.Is(err, StatusInvalidValue) || !errors.As(err, &e) || e.Call != "cublasLtMatmul" || !strings.Contains(e.Detail, tc.want) {
			t.Errorf("%s: got %v, want CUBLAS_STATUS_INVALID_VALUE saying %q", tc.name, err, tc.want)
		}
	}
}

// TestLtCheckSupported: BGRADA takes the row-major layouts NN and TN,
// BGRADB TN and TT (what the H200 run of docs/gpu-runs/2026-11-26-cublaslt
// found), DRELU and DRELU_BGRAD K ≥ 2, BGRADA and BGRADB K = 1 from
// cuBLASLt 12.3.4; every other epilogue takes every layout and size; the
// refusal is an *LtUnsupportedError that errors.Is StatusNotSupported and
// names the layouts the epilogue takes.
func TestLtCheckSupported(t *testing.T) {
	const version = 130100
	takes := map[Epilogue][]string{EpilogueBGradA: {"NN", "TN"}, EpilogueBGradB: {"TN", "TT"}}
	for _, e := range []Epilogue{EpilogueDefault, EpilogueRelu, EpilogueReluAux, EpilogueBias, EpilogueReluBias,
		EpilogueReluAuxBias, EpilogueDRelu, EpilogueDReluBGrad, EpilogueBGradA, EpilogueBGradB} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			m := LtMatmul{TransA: tr[0], TransB: tr[1], M: 64, N: 96, K: 80, Epilogue: e}
			layout := ltLayoutName(tr[0], tr[1])
			err := m.CheckSupported(version)
			want, restricted := takes[e]
			if !restricted || slices.Contains(want, layout) {
				if err != nil {
					t.Errorf("%v %s: %v", e, layout, err)
				}
				continue
			}
			var ue *LtUnsupportedError
			if !errors.As(err, &ue) || !errors.Is(err, StatusNotSupported) || errors.Is(err, StatusInvalidValue) {
				t.Errorf("%v %s: got %v, want an *LtUnsupportedError", e, layout, err)
				continue
			}
			if !slices.Equal(ue.Layouts, want) || ue.Matmul != m {
				t.Errorf("%v %s: Layouts %q Matmul %v, want %q and the LtMatmul", e, layout, ue.Layouts, ue.Matmul, want)
			}
			msg := err.Error()
			for _, part := range []string{e.String(), "CUBLAS_STATUS_NOT_SUPPORTED", want[0] + " and " + want[1] + " only", "not " + layout, "row-major " + layout} {
				if !strings.Contains(msg, part) {
					t.Errorf("%v %s: %q does not say %q", e, layout, msg, part)
				}
			}
		}
	}
	for _, tc := range []struct {
		name    string
		m       LtMatmul
		version int
		refused bool
	}{
		{"DRELU K=1", LtMatmul{M: 2, N: 2, K: 1, Epilogue: EpilogueDRelu}, version, true},
		{"DRELU_BGRAD K=1 (the first example's backward)", LtMatmul{M: 2, N: 2, K: 1, Epilogue: EpilogueDReluBGrad}, version, true},
		{"DRELU_BGRAD K=2", LtMatmul{M: 2, N: 2, K: 2, Epilogue: EpilogueDReluBGrad}, version, false},
		{"RELU_AUX_BIAS K=1", LtMatmul{M: 2, N: 2, K: 1, Epilogue: EpilogueReluAuxBias}, version, false},
		{"DEFAULT K=1", LtMatmul{M: 2, N: 2, K: 1}, version, false},
		{"BGRADA K=1", LtMatmul{M: 2, N: 2, K: 1, Epilogue: EpilogueBGradA}, version, false},
		{"BGRADB K=1", LtMatmul{TransA: true, M: 2, N: 2, K: 1, Epilogue: EpilogueBGradB}, 120304, false},
		{"BGRADB K=1 before 12.3.4", LtMatmul{TransA: true, M: 2, N: 2, K: 1, Epilogue: EpilogueBGradB}, 120303, true},
		{"BGRADA K=1, version unknown", LtMatmul{M: 2, N: 2, K: 1, Epilogue: EpilogueBGradA}, 0, true},
		{"BGRADA K=2, version unknown", LtMatmul{M: 2, N: 2, K: 2, Epilogue: EpilogueBGradA}, 0, false},
	} {
		err := tc.m.CheckSupported(tc.version)
		var ue *LtUnsupportedError
		switch {
		case !tc.refused && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.refused && (!errors.As(err, &ue) || ue.Layouts != nil || !strings.Contains(err.Error(), "K")):
			t.Errorf("%s: got %v, want an *LtUnsupportedError about K", tc.name, err)
		}
	}
	// The training step of lt_linux.go's comment (B = 32, in = 64, out = 96,
	// out2 = 10) is supported, each call in the layout the comment gives.
	for _, m := range []LtMatmul{
		{TransB: true, M: 32, N: 96, K: 64, Epilogue: EpilogueReluAuxBias},
		{M: 32, N: 96, K: 10, Epilogue: EpilogueDReluBGrad},
		{TransA: true, M: 10, N: 96, K: 32, Epilogue: EpilogueBGradB}, // dW2 = dY2ᵀ·Y, db2
		{TransA: true, M: 96, N: 10, K: 32, Epilogue: EpilogueBGradA}, // dW2ᵀ = Yᵀ·dY2, db2
	} {
		if err := m.CheckSupported(0); err != nil {
			t.Errorf("the training step: %v", err)
		}
	}
}

func TestLtCheckArgs(t *testing.T) {
	const ws = 0x7000
	ok := LtArgs{Alpha: 1, A: 0x1000, B: 0x2000, D: 0x3000, Bias: 0x4000, Aux: 0x5000}
	for _, tc := range []struct {
		name    string
		e       Epilogue
		edit    func(*LtArgs)
		wsBytes int
		want    string
	}{
		{"valid", EpilogueReluAuxBias, func(*LtArgs) {}, 256, ""},
		{"beta with C", EpilogueReluAuxBias, func(a *LtArgs) { a.Beta, a.C = 1, 0x6000 }, 256, ""},
		{"more workspace", EpilogueReluAuxBias, func(*LtArgs) {}, 1 << 20, ""},
		{"no bias for DEFAULT", EpilogueDefault, func(a *LtArgs) { a.Bias, a.Aux = 0, 0 }, 256, ""},
		{"DRELU", EpilogueDRelu, func(a *LtArgs) { a.Bias = 0 }, 256, ""},
		{"BGRADB", EpilogueBGradB, func(a *LtArgs) { a.Aux = 0 }, 256, ""},
		{"nil A", EpilogueReluAuxBias, func(a *LtArgs) { a.A = 0 }, 256, "nil device pointer"},
		{"nil B", EpilogueReluAuxBias, func(a *LtArgs) { a.B = 0 }, 256, "nil device pointer"},
		{"nil D", EpilogueReluAuxBias, func(a *LtArgs) { a.D = 0 }, 256, "nil device pointer"},
		{"beta without C", EpilogueReluAuxBias, func(a *LtArgs) { a.Beta = 0.5 }, 256, "C is nil but beta"},
		{"bias missing", EpilogueReluAuxBias, func(a *LtArgs) { a.Bias = 0 }, 256, "needs a bias vector (96 elements"},
		{"bias gradient missing", EpilogueDReluBGrad, func(a *LtArgs) { a.Bias = 0 }, 256, "needs a bias vector"},
		{"bias unused", EpilogueRelu, func(a *LtArgs) { a.Aux = 0 }, 256, "takes no bias"},
		{"aux missing", EpilogueReluAuxBias, func(a *LtArgs) { a.Aux = 0 }, 256, "needs the ReLU bitmask (512 bytes)"},
		{"aux missing for DRELU", EpilogueDRelu, func(a *LtArgs) { a.Bias, a.Aux = 0, 0 }, 256, "needs the ReLU bitmask"},
		{"aux unused", EpilogueBias, func(*LtArgs) {}, 256, "takes no aux"},
		{"workspace short", EpilogueReluAuxBias, func(*LtArgs) {}, 255, "needs 256"},
		{"workspace negative", EpilogueReluAuxBias, func(*LtArgs) {}, -1, "negative workspace"},
	} {
		m := ltValid()
		m.Epilogue = tc.e
		if !tc.e.UsesAux() {
			m.AuxLD = 0
		}
		a := ok
		tc.edit(&a)
		err := m.checkArgs(a, ws, tc.wsBytes, 256)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, StatusInvalidValue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want CUBLAS_STATUS_INVALID_VALUE saying %q", tc.name, err, tc.want)
		}
	}
	m := ltValid()
	if err := m.checkArgs(ok, 0, 256, 0); !errors.Is(err, StatusInvalidValue) || !strings.Contains(err.Error(), "nil pointer") {
		t.Errorf("workspace bytes at nil: %v", err)
	}
	if err := m.checkArgs(ok, 0, 0, 0); err != nil {
		t.Errorf("no workspace for an algorithm that needs none: %v", err)
	}
	if err := m.checkArgs(ok, ws+128, 256, 256); !errors.Is(err, StatusInvalidValue) || !strings.Contains(err.Error(), "256-byte aligned") {
		t.Errorf("misaligned workspace: %v", err)
	}
}

func TestLtBiasLenAuxBytes(t *testing.T) {
	m := LtMatmul{M: 32, N: 96, K: 64, AuxLD: 128}
	for _, tc := range []struct {
		e             Epilogue
		bias, auxSize int
	}{
		{EpilogueDefault, 0, 0},
		{EpilogueRelu, 0, 0},
		{EpilogueReluAux, 0, 32 * 128 / 8},
		{EpilogueBias, 96, 0},
		{EpilogueReluBias, 96, 0},
		{EpilogueReluAuxBias, 96, 32 * 16},
		{EpilogueDRelu, 0, 32 * 16},
		{EpilogueDReluBGrad, 96, 32 * 16},
		{EpilogueBGradA, 96, 0}, // cuBLASLt's A is the row-major B: one per column of D
		{EpilogueBGradB, 32, 0}, // cuBLASLt's B is the row-major A: one per row of D
	} {
		m.Epilogue = tc.e
		if got := m.BiasLen(); got != tc.bias {
			t.Errorf("%v: BiasLen %d, want %d", tc.e, got, tc.bias)
		}
		if got := m.AuxBytes(); got != tc.auxSize {
			t.Errorf("%v: AuxBytes %d, want %d", tc.e, got, tc.auxSize)
		}
	}
}

func TestLtColMajorTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    LtMatmul
		want ltColMajor
	}{
		{"NN", LtMatmul{M: 2, N: 3, K: 4, LDA: 5, LDB: 6, LDC: 7},
			ltColMajor{false, false, 3, 2, 4, ltLayout{3, 4, 6}, ltLayout{4, 2, 5}, ltLayout{3, 2, 7}, true}},
		{"TN", LtMatmul{TransA: true, M: 2, N: 3, K: 4, LDA: 5, LDB: 6, LDC: 7},
			ltColMajor{false, true, 3, 2, 4, ltLayout{3, 4, 6}, ltLayout{2, 4, 5}, ltLayout{3, 2, 7}, true}},
		{"NT", LtMatmul{TransB: true, M: 2, N: 3, K: 4, LDA: 5, LDB: 6, LDC: 7},
			ltColMajor{true, false, 3, 2, 4, ltLayout{4, 3, 6}, ltLayout{4, 2, 5}, ltLayout{3, 2, 7}, true}},
		{"TT", LtMatmul{TransA: true, TransB: true, M: 2, N: 3, K: 4, LDA: 5, LDB: 6, LDC: 7},
			ltColMajor{true, true, 3, 2, 4, ltLayout{4, 3, 6}, ltLayout{2, 4, 5}, ltLayout{3, 2, 7}, true}},
		// The training step of lt_linux.go's comment, B = 32, in = 64, out = 96, out2 = 10.
		{"forward Y = X·Wᵀ", LtMatmul{TransB: true, M: 32, N: 96, K: 64, LDA: 64, LDB: 64, LDC: 96},
			// cuBLASLt: Yᵀ(96×32) = op(W: 64×96 stored, T)·(Xᵀ: 64×32 stored)
			ltColMajor{true, false, 96, 32, 64, ltLayout{64, 96, 64}, ltLayout{64, 32, 64}, ltLayout{96, 32, 96}, true}},
		{"backward dY = dY2·W2", LtMatmul{M: 32, N: 96, K: 10, LDA: 10, LDB: 96, LDC: 96},
			ltColMajor{false, false, 96, 32, 10, ltLayout{96, 10, 96}, ltLayout{10, 32, 10}, ltLayout{96, 32, 96}, true}},
		{"weight gradient dW2 = dY2ᵀ·Y", LtMatmul{TransA: true, M: 10, N: 96, K: 32, LDA: 10, LDB: 96, LDC: 96},
			// cuBLASLt's B is dY2 (10×32 stored column-major), transposed: k = 32 = the batch, n = 10.
			ltColMajor{false, true, 96, 10, 32, ltLayout{96, 32, 96}, ltLayout{10, 32, 10}, ltLayout{96, 10, 96}, true}},
	} {
		got := tc.m.colMajor()
		if got != tc.want {
			t.Errorf("%s: colMajor = %+v\nwant %+v", tc.name, got, tc.want)
		}
		// cuBLASLt's rule, ld ≥ rows of each stored column-major matrix,
		// holds exactly when validate's row-major rule does.
		for _, l := range []ltLayout{got.a, got.b, got.c} {
			if l.ld < l.rows {
				t.Errorf("%s: layout %+v has ld < rows", tc.name, l)
			}
		}
		// op(A') is m×k and op(B') k×n.
		ar, ac := got.a.rows, got.a.cols
		if got.transA {
			ar, ac = ac, ar
		}
		br, bc := got.b.rows, got.b.cols
		if got.transB {
			br, bc = bc, br
		}
		if ar != got.m || ac != got.k || br != got.k || bc != got.n || got.c.rows != got.m || got.c.cols != got.n {
			t.Errorf("%s: shapes op(A') %d×%d op(B') %d×%d C' %d×%d for m, n, k = %d, %d, %d",
				tc.name, ar, ac, br, bc, got.c.rows, got.c.cols, got.m, got.n, got.k)
		}
	}
}

// ltModel is cuBLASLt's matmul with epilogue as cublasLt.h describes it,
// column-major: D' = epilogue(alpha·op(A')·op(B') + beta·C'), bias one per
// row of D' (BIAS, DRELU_BGRAD: over D's columns; BGRADA: op(A') summed
// over k; BGRADB: op(B') summed over k, one per column of D'), the ReLU
// bitmask bit i + j·auxLD for D' element (i, j).
func ltModel(cm ltColMajor, e Epilogue, alpha, beta float64, a, b, c []float64, bias []float64, mask []bool, auxLD int) (d, biasOut []float64, maskOut []bool) {
	at := func(x []float64, l ltLayout, trans bool, i, j int) float64 {
		if trans {
			i, j = j, i
		}
		return x[i+j*l.ld]
	}
	d = slices.Clone(c)
	maskOut = slices.Clone(mask)
	for j := 0; j < cm.n; j++ {
		for i := 0; i < cm.m; i++ {
			var s float64
			for l := 0; l < cm.k; l++ {
				s += at(a, cm.a, cm.transA, i, l) * at(b, cm.b, cm.transB, l, j)
			}
			v := alpha*s + beta*c[i+j*cm.c.ld]
			switch e {
			case EpilogueBias, EpilogueReluBias, EpilogueReluAuxBias:
				v += bias[i]
			}
			switch e {
			case EpilogueRelu, EpilogueReluAux, EpilogueReluBias, EpilogueReluAuxBias:
				if e.UsesAux() {
					maskOut[i+j*auxLD] = v > 0
				}
				v = max(v, 0)
			case EpilogueDRelu, EpilogueDReluBGrad:
				if !mask[i+j*auxLD] {
					v = 0
				}
			}
			d[i+j*cm.c.ld] = v
		}
	}
	switch e {
	case EpilogueDReluBGrad:
		biasOut = make([]float64, cm.m)
		for i := range cm.m {
			for j := range cm.n {
				biasOut[i] += d[i+j*cm.c.ld]
			}
		}
	case EpilogueBGradA:
		biasOut = make([]float64, cm.m)
		for i := range cm.m {
			for l := range cm.k {
				biasOut[i] += at(a, cm.a, cm.transA, i, l)
			}
		}
	case EpilogueBGradB:
		biasOut = make([]float64, cm.n)
		for j := range cm.n {
			for l := range cm.k {
				biasOut[j] += at(b, cm.b, cm.transB, l, j)
			}
		}
	}
	return d, biasOut, maskOut
}

// ltRowMajorRef is the row-major meaning lt_linux.go's comment gives each
// epilogue, computed directly: act(alpha·op(A)·op(B) + beta·C + bias[j]),
// mask bit j + i·AuxLD for D[i][j], DRELU_BGRAD's bias[j] = Σ_i D[i][j],
// BGRADA's bias[j] = Σ_k op(B)[k][j], BGRADB's bias[i] = Σ_k op(A)[i][k].
func ltRowMajorRef(m LtMatmul, alpha, beta float64, a, b, c []float64, bias []float64, mask []bool) (d, biasOut []float64, maskOut []bool) {
	opA := func(i, k int) float64 {
		if m.TransA {
			return a[k*m.LDA+i]
		}
		return a[i*m.LDA+k]
	}
	opB := func(k, j int) float64 {
		if m.TransB {
			return b[j*m.LDB+k]
		}
		return b[k*m.LDB+j]
	}
	e := m.epilogue()
	d = slices.Clone(c)
	maskOut = slices.Clone(mask)
	for i := range m.M {
		for j := range m.N {
			var s float64
			for k := range m.K {
				s += opA(i, k) * opB(k, j)
			}
			v := alpha*s + beta*c[i*m.LDC+j]
			if e == EpilogueBias || e == EpilogueReluBias || e == EpilogueReluAuxBias {
				v += bias[j]
			}
			bit := j + i*m.AuxLD
			switch e {
			case EpilogueRelu, EpilogueReluBias:
				v = max(v, 0)
			case EpilogueReluAux, EpilogueReluAuxBias:
				maskOut[bit] = v > 0
				v = max(v, 0)
			case EpilogueDRelu, EpilogueDReluBGrad:
				if !mask[bit] {
					v = 0
				}
			}
			d[i*m.LDC+j] = v
		}
	}
	switch e {
	case EpilogueDReluBGrad:
		biasOut = make([]float64, m.N)
		for j := range m.N {
			for i := range m.M {
				biasOut[j] += d[i*m.LDC+j]
			}
		}
	case EpilogueBGradA:
		biasOut = make([]float64, m.N)
		for j := range m.N {
			for k := range m.K {
				biasOut[j] += opB(k, j)
			}
		}
	case EpilogueBGradB:
		biasOut = make([]float64, m.M)
		for i := range m.M {
			for k := range m.K {
				biasOut[i] += opA(i, k)
			}
		}
	}
	return d, biasOut, maskOut
}

// TestLtColMajorModel checks the mapping and the row-major meanings of the
// epilogues together: the column-major problem colMajor gives, run on the
// same memory (with A and B swapped, as Matmul passes them) through a
// model of cuBLASLt's documented column-major epilogues, computes what
// the row-major formulas of lt_linux.go's comment say, for every
// epilogue, transpose and padding, and BiasLen is the length of the
// vector either way.
func TestLtColMajorModel(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(r.IntN(9) - 4) // small integers: sums are exact
		}
		return x
	}
	for _, e := range []Epilogue{EpilogueDefault, EpilogueRelu, EpilogueReluAux, EpilogueBias, EpilogueReluBias,
		EpilogueReluAuxBias, EpilogueDRelu, EpilogueDReluBGrad, EpilogueBGradA, EpilogueBGradB} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				m := LtMatmul{TransA: ta, TransB: tb, M: 5, N: 7, K: 3, Epilogue: e}
				ar, ac := m.M, m.K
				if ta {
					ar, ac = m.K, m.M
				}
				br, bc := m.K, m.N
				if tb {
					br, bc = m.N, m.K
				}
				m.LDA, m.LDB, m.LDC = ac+1, bc+2, m.N+3
				if e.UsesAux() {
					m.AuxLD = LtAuxLD(m.N)
				}
				m.ABType, m.CDType, m.Compute = R32F, R32F, Compute32F
				if err := m.validate(); err != nil {
					t.Fatal(err)
				}
				a, b, c := fill(ar*m.LDA), fill(br*m.LDB), fill(m.M*m.LDC)
				var bias []float64
				if e.UsesBias() {
					bias = fill(m.BiasLen())
				}
				mask := make([]bool, m.M*m.AuxLD)
				for i := range mask {
					mask[i] = r.IntN(2) == 1
				}
				const alpha, beta = 2, -1
				cm := m.colMajor()
				// Matmul passes the row-major B as cuBLASLt's A, A as its B.
				gd, gb, gm := ltModel(cm, e, alpha, beta, b, a, c, bias, mask, m.AuxLD)
				wd, wb, wm := ltRowMajorRef(m, alpha, beta, a, b, c, bias, mask)
				name := e.String() + map[[2]bool]string{{false, false}: " NN", {true, false}: " TN", {false, true}: " NT", {true, true}: " TT"}[[2]bool{ta, tb}]
				if !slices.Equal(gd, wd) {
					t.Errorf("%s: D\n got %v\nwant %v", name, gd, wd)
				}
				if !slices.Equal(gb, wb) {
					t.Errorf("%s: bias gradient\n got %v\nwant %v", name, gb, wb)
				}
				if e.UsesBias() && e != EpilogueBias && e != EpilogueReluBias && e != EpilogueReluAuxBias && len(gb) != m.BiasLen() {
					t.Errorf("%s: bias gradient of %d elements, BiasLen %d", name, len(gb), m.BiasLen())
				}
				if !slices.Equal(gm, wm) {
					t.Errorf("%s: mask differs", name)
				}
			}
		}
	}
}

func TestLtCandidates(t *testing.T) {
	got := ltCandidates("/opt/cuda")
	want := []string{
		"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
		"/opt/cuda/lib64/libcublasLt.so.13", "/opt/cuda/lib64/libcublasLt.so.12", "/opt/cuda/lib64/libcublasLt.so",
		"/usr/local/cuda/lib64/libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so.12", "/usr/local/cuda/lib64/libcublasLt.so",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ltCandidates = %q\nwant %q", got, want)
	}
	for _, home := range []string{"/usr/local/cuda", "/usr/local/cuda/", ""} {
		if got := ltCandidates(home); len(got) != 6 {
			t.Fatalf("CUDA_HOME=%q: %q", home, got)
		}
	}
}

// TestLtNoHandle: a nil or zero handle, and a nil plan, are
// CUBLAS_STATUS_NOT_INITIALIZED, never a panic (outside Linux every call
// is).
func TestLtNoHandle(t *testing.T) {
	var h *LtHandle
	_, err := h.Plan(ltValid())
	errs := []error{err, h.Destroy(), (&LtHandle{}).Destroy(),
		h.Matmul(ltValid(), LtArgs{}, 0, 0, 0), (&LtHandle{}).Matmul(ltValid(), LtArgs{}, 0, 0, 0)}
	_, err = (&LtHandle{}).Plan(ltValid())
	var p *LtPlan
	errs = append(errs, err, p.Matmul(LtArgs{A: 1, B: 1, D: 1}, 0, 0, 0))
	for i, err := range errs {
		if !errors.Is(err, StatusNotInitialized) {
			t.Errorf("%d: got %v, want CUBLAS_STATUS_NOT_INITIALIZED", i, err)
		}
	}
}
