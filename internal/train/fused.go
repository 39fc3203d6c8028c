package train

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
)

// FusedGEMM is a GEMM library that fuses a layer's bias and ReLU, and
// their gradients, into the GEMMs of a training step (cuBLASLt's
// epilogues: CuBLASLtStep). With Model.Fused set, Step issues 3n+1
// kernels for n linear layers instead of 6n (Config.FusedStepOps).
//
// The ReLU mask is the library's own: Forward writes it, BackwardReLU
// reads it with the same rows and columns, and AuxBytes says how large it
// is; the caller only allocates it.
type FusedGEMM interface {
	// Forward computes C = act(op(A)·op(B) + bias), bias (N float32)
	// added to every row; with relu, act is ReLU and the mask of C (which
	// elements passed) is written to aux, else act is the identity and
	// aux is not used (cuBLASLt's RELU_AUX_BIAS and BIAS epilogues).
	Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error
	// BackwardReLU computes C = op(A)·op(B) masked by aux, the mask
	// Forward wrote for an M×N output (the ReLU of the layer below), and
	// dbias[c] = Σ_r C[r][c] (N float32): DRELU_BGRAD.
	BackwardReLU(s *gg.Stream, g GEMMArgs, aux, dbias gg.DevicePtr) error
	// WeightGradBias computes C = op(A)·op(B) with TransA (a layer's
	// dW = dZᵀ·X), and dbias[i] = Σ_k op(A)[i][k], the sum over the K rows
	// of A as stored (M float32): the layer's bias gradient, BGRADB.
	WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error
	// AuxBytes is the size of the mask of a rows×cols layer output.
	AuxBytes(rows, cols int) int
}

// EmulatedFused returns a FusedGEMM made of gemm (nil: KernelGEMM) and
// the package's kernels, so that the fused Step runs on any backend and
// computes what the unfused Step computes, bit for bit with the same gemm:
//
//	Forward         gemm; the bias+ReLU kernel in place; with relu, a copy
//	                of the output into aux (a device-to-device memcpy)
//	BackwardReLU    gemm; the ReLU-gradient kernel reading that copy, in
//	                place; the column-sum kernel for dbias
//	WeightGradBias  the column-sum kernel over A's rows for dbias; gemm
//
// Its mask is a float32 copy of the layer's output (AuxBytes is
// 4·rows·cols), which the unfused step's ReLU-gradient kernel reads as
// the activation it tests (> 0). C and A must be packed (LDC = N; A of
// WeightGradBias LDA = M), as the step's are. It issues as many kernels as
// the unfused step, and n-1 memcpys more: it is for tests and the host
// backend, not for speed.
func EmulatedFused(gemm GEMM) FusedGEMM {
	if gemm == nil {
		gemm = KernelGEMM
	}
	return emulated{gemm}
}

type emulated struct{ gemm GEMM }

func (e emulated) packed(op string, g GEMMArgs) error {
	if err := CheckGEMM(g); err != nil {
		return err
	}
	if g.LDC != g.N {
		return &gg.Error{Op: op, Code: gg.ErrNotSupported, Detail: fmt.Sprintf("ldc %d for %d columns: the emulation's kernels take packed rows", g.LDC, g.N)}
	}
	return nil
}

func (e emulated) Forward(s *gg.Stream, g GEMMArgs, bias, aux gg.DevicePtr, relu bool) error {
	const op = "train.EmulatedFused.Forward"
	if err := e.packed(op, g); err != nil {
		return err
	}
	if bias == 0 || relu && aux == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil bias or mask"}
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
	if err := e.packed(op, g); err != nil {
		return err
	}
	if aux == 0 || dbias == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil mask or bias gradient"}
	}
	if err := e.gemm(s, g); err != nil {
		return err
	}
	if g.M == 0 || g.N == 0 {
		return nil
	}
	return launchReluBwdDB(s, g.C, aux, false, g.C, false, dbias, g.M, g.N)
}

func (e emulated) WeightGradBias(s *gg.Stream, g GEMMArgs, dbias gg.DevicePtr) error {
	const op = "train.EmulatedFused.WeightGradBias"
	if err := e.packed(op, g); err != nil {
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
func (m *Model) stepFused(s *gg.Stream, gemm GEMM, x, y, lossOut gg.DevicePtr,
	alloc func(int) (gg.DevicePtr, error), free func(gg.DevicePtr) error, mark func(*gg.Stream, string, ...any) error) error {
	f := m.Fused
	cfg, B := m.cfg, m.cfg.Batch
	n, P := len(m.in), m.NumParams()
	mth := MathFP32
	if cfg.Precision == TF32 {
		mth = MathTF32
	}

	// Forward.
	acts := append(m.acts[:0], x)
	aux := make([]gg.DevicePtr, n-1)
	for l := range n {
		in, out, last := m.in[l], m.out[l], l == n-1
		h, err := alloc(4 * B * out)
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
			C: h, LDC: out, Math: mth}, m.bias(l), a, !last); err != nil {
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

	// Loss: the logits' gradient, in their place.
	dZ := acts[n]
	if err := launchSoftmaxXent(s, acts[n], y, dZ, false, lossOut, m.state, B, cfg.Classes); err != nil {
		return err
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
			C: grad(l), LDC: in, Math: mth}
		if l == n-1 {
			if err := f.WeightGradBias(s, dW, dbias(l)); err != nil {
				return err
			}
			if err := mark(s, "bwd dW GEMM+db L%d", l); err != nil {
				return err
			}
		} else {
			if err := gemm(s, dW); err != nil {
				return err
			}
			if err := mark(s, "bwd dW GEMM L%d", l); err != nil {
				return err
			}
		}
		var dA gg.DevicePtr
		if l > 0 {
			if dA, err = alloc(4 * B * in); err != nil {
				return err
			}
			if err := f.BackwardReLU(s, GEMMArgs{M: B, N: in, K: out, Alpha: 1, A: dZ, LDA: out, B: m.weights(l), LDB: in,
				C: dA, LDC: in, Math: mth}, aux[l-1], dbias(l-1)); err != nil {
				return err
			}
			if err := mark(s, "bwd dA GEMM+ReLU'+db L%d", l); err != nil {
				return err
			}
		}
		if err := free(dZ); err != nil {
			return err
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
// n-1 dA GEMMs, one update: 3n+1 kernels; allocations: the n layer
// outputs, the n-1 masks, the gradients and the n-1 dAs.
func (c Config) FusedStepOps() (kernels, allocs int) {
	n := c.Layers + 1
	return 3*n + 1, 3*n - 1
}

// FusedStepBytes is StepBytes for a Step with Model.Fused, whose masks
// take auxBytes(rows, cols) bytes each (the FusedGEMM's AuxBytes).
func (c Config) FusedStepBytes(auxBytes func(rows, cols int) int) (peak, total int) {
	in, out := c.dims()
	n, B := len(in), c.Batch
	cur := 0
	alloc := func(bytes int) int {
		cur += bytes
		total += bytes
		peak = max(peak, cur)
		return bytes
	}
	free := func(bytes int) { cur -= bytes }
	acts := make([]int, n+1)
	aux := make([]int, n)
	for l := range n {
		acts[l+1] = alloc(4 * B * out[l])
		if l < n-1 {
			aux[l] = alloc(auxBytes(B, out[l]))
		}
	}
	dZ := acts[n]
	grads := alloc(4 * c.NumParams())
	for l := n - 1; l >= 0; l-- {
		dA := 0
		if l > 0 {
			dA = alloc(4 * B * in[l])
		}
		free(dZ)
		if l > 0 {
			free(acts[l])
			free(aux[l-1])
			dZ = dA
		}
	}
	free(grads)
	return peak, total
}
