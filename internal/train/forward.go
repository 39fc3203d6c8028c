package train

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
)

// Forward issues the forward pass (inference) over rows samples at x
// (rows×In float32) on s and returns the logits, rows×Classes float32 in a
// buffer allocated with s.MallocAsync that the caller frees (s.FreeAsync).
// It only enqueues work: nothing waits.
//
// Each hidden activation is allocated with s.MallocAsync and freed right
// after the next layer has read it, so under stream capture the
// activations become graph memory that the graph frees itself, and the
// logits are the one allocation the graph leaves live: its output. Row i of
// the logits depends on row i of x only; with KernelGEMM it is computed the
// same way at every rows (its sums run in the same order whatever the
// number of rows), so a padded batch gives every real row the logits it
// gets alone. cuBLAS and cuBLASLt may pick another algorithm for another
// number of rows: the logits then agree to rounding, not bit for bit.
//
// Forward computes in FP32 from the float32 master weights whatever the
// model's Precision: the same logits for a checkpoint however it was
// trained.
func (m *Model) Forward(s *gg.Stream, x gg.DevicePtr, rows int) (gg.DevicePtr, error) {
	const op = "train.Model.Forward"
	if m.params == 0 {
		return 0, &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "destroyed model"}
	}
	if s == nil || x == 0 {
		return 0, &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "nil stream or input"}
	}
	w := max(m.cfg.In, m.cfg.Hidden, m.cfg.Classes)
	if rows < 1 || int64(rows)*int64(w) > maxElems {
		return 0, &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: fmt.Sprintf("%d rows: want 1 to %d", rows, maxElems/w)}
	}
	layer := m.ForwardGEMM
	if layer == nil {
		gemm := m.GEMM
		if gemm == nil {
			gemm = KernelGEMM
		}
		layer = epilogueOf(gemm)
	}
	n := len(m.in)
	a := x // the current layer's input
	for l := range n {
		in, out := m.in[l], m.out[l]
		h, err := s.MallocAsync(4 * rows * out)
		if err == nil {
			err = layer(s, GEMMArgs{TransB: true, M: rows, N: out, K: in, Alpha: 1, A: a, LDA: in, B: m.params + gg.DevicePtr(4*m.off[l]), LDB: in, C: h, LDC: out},
				m.bias(l), l < n-1)
		}
		if a != x {
			if ferr := s.FreeAsync(a); err == nil {
				err = ferr
			}
		}
		if err != nil {
			if h != 0 {
				s.FreeAsync(h)
			}
			return 0, err
		}
		a = h
	}
	return a, nil
}

// ForwardBytes is the peak of the bytes one Forward over rows samples holds
// in its own allocations (two activations at once, the logits included).
func (c Config) ForwardBytes(rows int) int {
	_, out := c.dims()
	peak, prev := 0, 0
	for _, o := range out {
		peak = max(peak, prev+4*rows*o)
		prev = 4 * rows * o
	}
	return peak
}
