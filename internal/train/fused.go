package train

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
)

// FusedGEMM is a GEMM library that fuses a layer's bias and ReLU, and
// their gradients, into the GEMMs of a training step (cuBLASLt's
// epilogues: CuBLASLtStep). With Model.Fused set, Step issues 3n+1
// kernels for n linear layers instead of 6n, in BF16 3n+2 instead of 6n+1
// (Config.FusedStepOps).
//
// The ReLU mask is the library's own: Forward writes it, BackwardReLU
// reads it with the same rows and columns, and AuxBytes says how large it
// is; the caller only allocates it.
//
// A and B are of one element type. C is float32 or, where g.CType says
// BFloat16 (from bfloat16 operands only), bfloat16: the value the call
// computes in float32 (the products summed in float32, then the bias, the
// ReLU or its gradient), rounded once to nearest, ties to even. A bias is
// of C's element type, as cuBLASLt takes it (its table of cublasLtMatmul's
// types, CUBLAS_COMPUTE_32F with bfloat16 A and B: a bfloat16 D takes a
// bfloat16 bias, a float32 D a float32 one); so is a bias gradient, which
// is why the calls that sum one take a float32 C only.
type FusedGEMM interface {
	// Forward computes C = act(op(A)·op(B) + bias), bias (N elements of
	// C's type) added to every row; with relu, act is ReLU and the mask of C
	// (which elements passed) is written to aux, else act is the identity and
	// aux is not used (cuBLASLt's RELU_AUX_BIAS and BIAS epilogues).
	Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error
	// BackwardReLU computes C = op(A)·op(B) masked by aux, the mask
	// Forward wrote for an M×N output (the ReLU of the layer below), and,
	// unless dbias is 0, dbias[c] = Σ_r C[r][c] (N float32; C float32):
	// DRELU_BGRAD, or DRELU without dbias.
	BackwardReLU(s *gg.Stream, g GEMMArgs, aux, dbias gg.DevicePtr) error
	// WeightGradBias computes C = op(A)·op(B) (float32) with TransA (a
	// layer's dW = dZᵀ·X), and dbias[i] = Σ_k op(A)[i][k], the sum over
	// the K rows of A as stored (M float32, summed in float32 whatever A's
	// type): the layer's bias gradient, BGRADB.
	WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error
	// AuxBytes is the size of the mask of a rows×cols layer output.
	AuxBytes(rows, cols int) int
}

// checkFused validates g for a FusedGEMM call by the rules CuBLASLtStep
// and EmulatedFused share: CheckGEMM's; A and B of one element type
// (cuBLASLt has one type for both); a bfloat16 C from bfloat16 operands
// only (its table has no float32 product written as bfloat16), and not
// where the call sums a bias gradient (sums, set: the gradient would be
// bfloat16 too). Types it refuses are ErrNotSupported.
func checkFused(op string, g GEMMArgs, sums bool) error {
	if err := CheckGEMM(g); err != nil {
		return err
	}
	refuse := func(format string, args ...any) error {
		return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case g.AType != g.BType:
		return refuse("%v × %v operands: A and B of one element type", g.AType, g.BType)
	case g.CType == BFloat16 && g.AType != BFloat16:
		return refuse("%v operands with a %v C: a bfloat16 C comes from bfloat16 operands", g.AType, g.CType)
	case g.CType == BFloat16 && sums:
		return refuse("a %v C with a bias gradient, which would be %v too (a bias gradient is of C's type): the gradients are float32", g.CType, g.CType)
	}
	return nil
}

// EmulatedFused returns a FusedGEMM made of gemm (nil: KernelGEMM) and
// the package's kernels, so that the fused Step runs on any backend and
// computes what the unfused Step computes, bit for bit with the same gemm
// (in BF16: but for the bias of the hidden layers, which it adds rounded
// to bfloat16, as cuBLASLt does):
//
//	Forward         gemm; the bias+ReLU kernel in place; with relu, a copy
//	                of the output into aux (a device-to-device memcpy)
//	BackwardReLU    gemm; the ReLU-gradient kernel reading that copy, in
//	                place; with dbias, the column-sum kernel
//	WeightGradBias  the column-sum kernel over A's rows for dbias; gemm
//
// Its mask is a float32 copy of the layer's output (AuxBytes is
// 4·rows·cols), which the unfused step's ReLU-gradient kernel reads as
// the activation it tests (> 0). A bfloat16 C (relu only; Beta 0) goes
// through the mask's room, which the float32 product fills before the
// epilogue's kernel rounds it into C:
//
//	Forward         gemm into aux; the bias+ReLU kernel from aux into C
//	                (bfloat16 bias, bfloat16 C); C copied into aux: the
//	                mask is the bfloat16 output, as the unfused step's
//	BackwardReLU    the mask copied into C; gemm into aux; the
//	                ReLU-gradient kernel from aux into C, over the mask
//
// so a mask is read once. C and A must be packed (LDC = N; A of
// WeightGradBias LDA = M), as the step's are. It issues as many kernels as
// the unfused step, and a memcpy per mask more (BF16: two): it is for
// tests and the host backend, not for speed.
func EmulatedFused(gemm GEMM) FusedGEMM {
	if gemm == nil {
		gemm = KernelGEMM
	}
	return emulated{gemm}
}

type emulated struct{ gemm GEMM }

func (e emulated) packed(op string, g GEMMArgs, sums bool) error {
	if err := checkFused(op, g, sums); err != nil {
		return err
	}
	if g.LDC != g.N {
		return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: fmt.Sprintf("ldc %d for %d columns: the emulation's kernels take packed rows", g.LDC, g.N)}
	}
	if g.CType == BFloat16 && g.Beta != 0 {
		return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: fmt.Sprintf("beta %v with a bfloat16 C: the emulation does not read C", g.Beta)}
	}
	return nil
}

// inAux is g writing its float32 product into aux instead of C.
func inAux(g GEMMArgs, aux gg.DevicePtr) GEMMArgs {
	g.C, g.CType = aux, Float32
	return g
}

func (e emulated) Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error {
	const op = "train.EmulatedFused.Forward"
	if err := e.packed(op, g, false); err != nil {
		return err
	}
	if bias == 0 || relu && aux == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil bias or mask"}
	}
	if g.CType == BFloat16 {
		if !relu {
			return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: "a bfloat16 C without relu: the emulation computes it in the mask's room"}
		}
		if g.M == 0 || g.N == 0 {
			return nil
		}
		if err := e.gemm(s, inAux(g, aux)); err != nil {
			return err
		}
		if err := launchBiasAct(s, aux, g.C, bias, true, g.M, g.N, true, true); err != nil {
			return err
		}
		return s.Memcpy(gg.DtoD(aux, g.C, 2*g.M*g.N))
	}
	if err := e.gemm(s, g); err != nil {
		return err
	}
	if g.M == 0 || g.N == 0 {
		return nil
	}
	if err := launchBiasAct(s, g.C, g.C, bias, false, g.M, g.N, relu, false); err != nil {
		return err
	}
	if !relu {
		return nil
	}
	return s.Memcpy(gg.DtoD(aux, g.C, e.AuxBytes(g.M, g.N)))
}

func (e emulated) BackwardReLU(s *gg.Stream, g GEMMArgs, aux, dbias gg.DevicePtr) error {
	const op = "train.EmulatedFused.BackwardReLU"
	if err := e.packed(op, g, dbias != 0); err != nil {
		return err
	}
	if aux == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil mask"}
	}
	if g.CType == BFloat16 {
		if g.M == 0 || g.N == 0 {
			return nil
		}
		if err := s.Memcpy(gg.DtoD(g.C, aux, 2*g.M*g.N)); err != nil {
			return err
		}
		if err := e.gemm(s, inAux(g, aux)); err != nil {
			return err
		}
		return launchReluBwd(s, aux, g.C, true, g.C, true, g.M*g.N)
	}
	if err := e.gemm(s, g); err != nil {
		return err
	}
	if g.M == 0 || g.N == 0 {
		return nil
	}
	if dbias == 0 {
		return launchReluBwd(s, g.C, aux, false, g.C, false, g.M*g.N)
	}
	return launchReluBwdDB(s, g.C, aux, false, g.C, false, dbias, g.M, g.N)
}

func (e emulated) WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error {
	const op = "train.EmulatedFused.WeightGradBias"
	if err := e.packed(op, g, true); err != nil {
		return err
	}
	switch {
	case !g.TransA:
		return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: "the bias gradient sums the K rows of A as stored: TransA only"}
	case g.LDA != g.M:
		return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: fmt.Sprintf("lda %d for %d columns: the emulation's kernels take packed rows", g.LDA, g.M)}
	case dbias == 0:
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil bias gradient"}
	}
	// The unfused step's order: the bias gradient, then dW.
	if g.M > 0 {
		if err := launchColSum(s, g.A, g.AType == BFloat16, dbias, g.K, g.M); err != nil {
			return err
		}
	}
	return e.gemm(s, g)
}

func (emulated) AuxBytes(rows, cols int) int { return 4 * rows * cols }

// stepFused is Step with m.Fused: the forward GEMMs add the bias and
// apply the ReLU, writing its mask; the top layer's dW GEMM also sums its
// bias gradient; the dA GEMM of each layer above the first applies the
// ReLU gradient of the layer below and sums that layer's bias gradient.
// Per layer l (aₗ its input, auxₗ the mask of its output):
//
//	forward   for each l: alloc hₗ; if l < L: alloc auxₗ
//	          aₗ₊₁ = act(aₗ·Wₗᵀ + bₗ) into hₗ (Forward), mask to auxₗ
//	loss      dZ = softmax-xent gradient, in place of the logits
//	backward  alloc G; dW_L = dZᵀ·a_L and db_L (WeightGradBias)
//	          for each l from L down:
//	          if l < L: dWₗ = dZᵀ·aₗ (plain gemm; dbₗ came from above)
//	          if l > 0: alloc dA; dA = (dZ·Wₗ) ⊙ aux_{l-1}, db_{l-1} (BackwardReLU)
//	          free dZ; if l > 0: free aₗ and aux_{l-1}; dZ = dA
//	update    every parameter from G (one kernel); free G
//
// gemm is the plain GEMM of the lower layers' dW.
//
// # BF16
//
// Every GEMM reads bfloat16 A and B (the activations, their gradients and
// the weights' shadow) and sums in float32 (cuBLASLt's
// CUBLAS_COMPUTE_32F); what each writes:
//
//   - a hidden layer's Forward: the next layer's bfloat16 activation,
//     straight from the epilogue (RELU_AUX_BIAS with a bfloat16 D), so its
//     bias is bfloat16 too: the bias's copy in the shadow, which the
//     optimizer's kernel already rewrites with the weights';
//   - the output layer's Forward: the float32 logits (BIAS, float32 D and
//     the float32 master bias), for the loss as in the unfused step;
//   - every layer's dW GEMM: dW in float32 and, summed over the bfloat16 dZ
//     it reads, the layer's float32 bias gradient (WeightGradBias, BGRADB
//     with a float32 D), into G; but for the top layer when its few
//     classes make BGRADB slow (topBiasApart): the column-sum kernel sums
//     its bias gradient and gemm computes its dW;
//   - each dA GEMM: the bfloat16 dZ of the layer below, the ReLU gradient
//     applied in the epilogue (BackwardReLU without a bias gradient:
//     DRELU with a bfloat16 D).
//
// DRELU_BGRAD is not used in BF16: with a bfloat16 D it would write the
// bias gradient in bfloat16 (a bias gradient is of D's type). Summed by
// the dW GEMM instead, every bias gradient is float32, of the bfloat16 dZ
// the unfused step's column-sum kernel sums, and G and the update are as in
// FP32. The master weights and biases, Adam's moments and the loss stay
// float32. Against the unfused BF16 step the one rounding added is the
// hidden layers' bias to bfloat16 in the forward pass; the mask is of the
// float32 value before it is rounded (the unfused step tests the rounded
// activation, which differs only for values under half bfloat16's smallest
// denormal). Per layer:
//
//	forward   alloc x16; x16 = bf16(x) (the cast kernel)
//	          for each l < L: alloc aₗ₊₁ (bf16) and auxₗ
//	          aₗ₊₁ = bf16(relu(aₗ·Wₗᵀ + bf16(bₗ))), mask to auxₗ (Forward)
//	          alloc z (f32); z = a_L·W_Lᵀ + b_L (Forward)
//	loss      alloc dZ (bf16); dZ = bf16(softmax-xent gradient of z); free z
//	backward  alloc G; for each l from L down:
//	          dWₗ = dZᵀ·aₗ and dbₗ (WeightGradBias)
//	          if l > 0: alloc dz (bf16); dz = bf16((dZ·Wₗ) ⊙ aux_{l-1}) (BackwardReLU)
//	          free dZ; if l = 0: free x16; if l > 0: free aₗ and aux_{l-1}; dZ = dz
//	update    every parameter from G, and the shadow (one kernel); free G
//
// In BF16 gemm computes only the top layer's dW, and only with
// topBiasApart.
func (m *Model) stepFused(s *gg.Stream, gemm GEMM, x, y, lossOut gg.DevicePtr,
	alloc func(int) (gg.DevicePtr, error), free func(gg.DevicePtr) error, mark func(*gg.Stream, string, ...any) error) error {
	f := m.Fused
	cfg, B := m.cfg, m.cfg.Batch
	n, P := len(m.in), m.NumParams()
	bf := cfg.bf16()
	ty, mth := Float32, MathFP32 // the operands, and the math
	if bf {
		ty = BFloat16
	}
	if cfg.Precision == TF32 {
		mth = MathTF32
	}

	// Forward.
	a0, err := m.stepInput(s, x, alloc, mark)
	if err != nil {
		return err
	}
	acts := append(m.acts[:0], a0)
	aux := make([]gg.DevicePtr, n-1)
	for l := range n {
		in, out, last := m.in[l], m.out[l], l == n-1
		cty, bias := Float32, m.bias(l) // the output's type, and the bias of that type
		if !last && bf {
			cty, bias = BFloat16, m.biasShadow(l)
		}
		h, err := alloc(cty.Size() * B * out)
		if err != nil {
			return err
		}
		if !last {
			if aux[l], err = alloc(f.AuxBytes(B, out)); err != nil {
				return err
			}
		}
		var a gg.DevicePtr
		if !last {
			a = aux[l]
		}
		if err := f.Forward(s, GEMMArgs{TransB: true, M: B, N: out, K: in, Alpha: 1, A: acts[l], LDA: in, B: m.weights(l), LDB: in,
			C: h, LDC: out, AType: ty, BType: ty, CType: cty, Math: mth}, bias, a, !last); err != nil {
			return err
		}
		what := "fwd GEMM+bias+ReLU L%d"
		if last {
			what = "fwd GEMM+bias L%d"
		}
		if err := mark(s, what, l); err != nil {
			return err
		}
		acts = append(acts, h)
	}
	m.acts = acts

	// Loss: the logits' gradient, in their place or (bf16) beside them.
	dZ := acts[n]
	if bf {
		var err error
		if dZ, err = alloc(2 * B * cfg.Classes); err != nil {
			return err
		}
	}
	if err := launchSoftmaxXent(s, acts[n], y, dZ, bf, lossOut, m.state, B, cfg.Classes); err != nil {
		return err
	}
	if dZ != acts[n] {
		if err := free(acts[n]); err != nil {
			return err
		}
	}
	if err := mark(s, "loss"); err != nil {
		return err
	}

	// Backward.
	flat, err := alloc(4 * P)
	if err != nil {
		return err
	}
	grad := func(l int) gg.DevicePtr { return flat + gg.DevicePtr(4*m.off[l]) }
	dbias := func(l int) gg.DevicePtr { return grad(l) + gg.DevicePtr(4*m.out[l]*m.in[l]) }
	for l := n - 1; l >= 0; l-- {
		in, out := m.in[l], m.out[l]
		dW := GEMMArgs{TransA: true, M: out, N: in, K: B, Alpha: 1, A: dZ, LDA: out, B: acts[l], LDB: in,
			C: grad(l), LDC: in, AType: ty, BType: ty, Math: mth}
		switch {
		case l == n-1 && cfg.topBiasApart():
			// The top layer's few, unaligned bfloat16 gradient columns
			// make cuBLASLt's BGRADB a slow kernel (an H100: 24.6 µs for
			// the reference model's 10 classes, against 3.7 µs for the
			// column sum and 7.8 µs for the plain GEMM): sum apart.
			if err := launchColSum(s, dZ, bf, dbias(l), B, out); err != nil {
				return err
			}
			if err := mark(s, "bwd db L%d", l); err != nil {
				return err
			}
			if err := gemm(s, dW); err != nil {
				return err
			}
			if err := mark(s, "bwd dW GEMM L%d", l); err != nil {
				return err
			}
		case l == n-1 || bf:
			if err := f.WeightGradBias(s, dW, dbias(l)); err != nil {
				return err
			}
			if err := mark(s, "bwd dW GEMM+db L%d", l); err != nil {
				return err
			}
		default:
			if err := gemm(s, dW); err != nil {
				return err
			}
			if err := mark(s, "bwd dW GEMM L%d", l); err != nil {
				return err
			}
		}
		var dA gg.DevicePtr
		if l > 0 {
			if dA, err = alloc(ty.Size() * B * in); err != nil {
				return err
			}
			db, what := dbias(l-1), "bwd dA GEMM+ReLU'+db L%d"
			if bf { // the layer below's bias gradient comes with its dW
				db, what = 0, "bwd dA GEMM+ReLU' L%d"
			}
			if err := f.BackwardReLU(s, GEMMArgs{M: B, N: in, K: out, Alpha: 1, A: dZ, LDA: out, B: m.weights(l), LDB: in,
				C: dA, LDC: in, AType: ty, BType: ty, CType: ty, Math: mth}, aux[l-1], db); err != nil {
				return err
			}
			if err := mark(s, what, l); err != nil {
				return err
			}
		}
		if err := free(dZ); err != nil {
			return err
		}
		if l == 0 && bf {
			if err := free(acts[0]); err != nil { // x as bfloat16
				return err
			}
		}
		if l > 0 {
			if err := free(acts[l]); err != nil {
				return err
			}
			if err := free(aux[l-1]); err != nil {
				return err
			}
			dZ = dA
		}
	}
	if err := m.update(s, 0, P, flat, true); err != nil {
		return err
	}
	if err := mark(s, "update"); err != nil {
		return err
	}
	return free(flat)
}

// FusedStepOps is StepOps for a Step with Model.Fused: kernels (each
// FusedGEMM call counted as one, as cuBLASLt makes it) and MallocAsync
// calls. With n linear layers: n forward GEMMs, the loss, n dW GEMMs,
// n-1 dA GEMMs, one update: 3n+1 kernels (one more where the top
// layer's bias gradient is summed apart: topBiasApart); allocations: the n layer
// outputs, the n-1 masks, the gradients and the n-1 dAs. BF16 adds the
// batch's cast (3n+2 kernels) and two allocations, the batch's bfloat16
// copy and the loss gradient beside the logits (3n+1).
func (c Config) FusedStepOps() (kernels, allocs int) {
	n := c.Layers + 1
	kernels, allocs = 3*n+1, 3*n-1
	if c.bf16() {
		kernels++
		allocs += 2
	}
	if c.topBiasApart() {
		kernels++ // the top layer's bias gradient, summed apart
	}
	return kernels, allocs
}

// topBiasApart reports whether the fused step sums the top layer's bias
// gradient with its own kernel rather than in the dW GEMM's BGRADB
// epilogue: in BF16, when a row of the loss gradient (Classes bfloat16s)
// is not a multiple of 16 bytes, cuBLASLt's kernel for it is slow. (In
// FP32 the same split saved nothing measurable on an H100, and the run
// parted from the unfused step's by rounding where BGRADB's had kept to
// it, so FP32 and TF32 keep BGRADB.)
func (c Config) topBiasApart() bool { return c.bf16() && c.Classes*2%16 != 0 }

// FusedStepBytes is StepBytes for a Step with Model.Fused, whose masks
// take auxBytes(rows, cols) bytes each (the FusedGEMM's AuxBytes).
func (c Config) FusedStepBytes(auxBytes func(rows, cols int) int) (peak, total int) {
	in, out := c.dims()
	n, B, bf := len(in), c.Batch, c.bf16()
	act := 4 // bytes of a hidden layer's output and of a dA
	if bf {
		act = 2
	}
	cur := 0
	alloc := func(bytes int) int {
		cur += bytes
		total += bytes
		peak = max(peak, cur)
		return bytes
	}
	free := func(bytes int) { cur -= bytes }
	acts := make([]int, n+1)
	if bf {
		acts[0] = alloc(2 * B * c.In)
	}
	aux := make([]int, n)
	for l := range n {
		if l < n-1 {
			acts[l+1] = alloc(act * B * out[l])
			aux[l] = alloc(auxBytes(B, out[l]))
		} else {
			acts[l+1] = alloc(4 * B * out[l])
		}
	}
	dZ := acts[n]
	if bf {
		dZ = alloc(2 * B * c.Classes)
		free(acts[n])
	}
	grads := alloc(4 * c.NumParams())
	for l := n - 1; l >= 0; l-- {
		dA := 0
		if l > 0 {
			dA = alloc(act * B * in[l])
		}
		free(dZ)
		if l == 0 && bf {
			free(acts[0])
		}
		if l > 0 {
			free(acts[l])
			free(aux[l-1])
			dZ = dA
		}
	}
	free(grads)
	return peak, total
}
