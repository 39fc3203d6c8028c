//go:build linux

package cublas

// PlanUnchecked is Plan without CheckSupported's refusals and outside the
// plan cache (validate still runs): for the GPU tests that ask cuBLASLt
// itself about what Plan refuses. release destroys the plan's descriptor
// and layouts; call it before the handle's Destroy.
func (h *LtHandle) PlanUnchecked(m LtMatmul) (p *LtPlan, release func(), err error) {
	h.lock()
	defer h.unlock()
	if err := h.live("cublasLtMatmulAlgoGetHeuristic"); err != nil {
		return nil, nil, err
	}
	if err := m.validate(); err != nil {
		return nil, nil, err
	}
	m.Epilogue = m.epilogue()
	if p, err = h.build(m); err != nil {
		return nil, nil, err
	}
	return p, func() {
		h.lock()
		defer h.unlock()
		if h.h != 0 {
			p.release()
		}
	}, nil
}
