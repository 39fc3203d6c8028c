package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	gg "github.com/gpugraph/gpugraph"
)

// Model is the MLP's parameters and optimizer state, in device memory
// allocated once from the default pool (so it shows in the pool's
// statistics). Layer l computes y = x·Wₗᵀ + bₗ, followed by ReLU on every
// layer but the last; Wₗ is Out×In row-major (PyTorch's nn.Linear layout)
// and bₗ follows it in the same allocation.
//
// A Model is used from one goroutine at a time.
type Model struct {
	// GEMM computes the step's matrix products; nil means KernelGEMM. Set
	// it before the first Step (or before capturing one).
	GEMM GEMM

	// GradSync, if not nil, is called with each layer's gradient (floats
	// float32s at g) as soon as the backward pass has it and before the
	// optimizer uses it: data-parallel training all-reduces it there
	// (averaging over the ranks), a bucket per layer overlapping the rest
	// of the backward pass as PyTorch DDP's buckets do.
	GradSync func(s *gg.Stream, g gg.DevicePtr, floats int) error

	// SyncMode says where GradSync runs and when the gradients are applied;
	// SyncOverlap needs SyncStream, a second stream of the model's device.
	SyncMode   SyncMode
	SyncStream *gg.Stream

	// Mark, if not nil, is called after each piece of the step with the
	// stream it ran on and what it was ("fwd GEMM L0", "all-reduce L3",
	// "wait for dW L3", ...), and once with "start" on the step's stream
	// before anything: a profiler records a timing event there, and the
	// time between two marks of a stream is what ran (or waited) between
	// them. The first mark of the sync stream counts from "start".
	Mark   func(s *gg.Stream, what string) error
	syncEv *gg.Event // SyncOverlap: the step's stream → SyncStream, and back

	cfg     Config
	dev     *gg.Device
	in, out []int
	params  []gg.DevicePtr // per layer: W then b
	mom     []gg.DevicePtr // Adam: per layer, first moments then second moments
	count   gg.DevicePtr   // Adam: the step count, an int32
	acts    []gg.DevicePtr // scratch for Step: activations
	live    []gg.DevicePtr // scratch for Step: step-local buffers not yet freed
}

// SyncMode is where data-parallel training synchronizes gradients.
type SyncMode uint8

// The gradient synchronization modes.
const (
	// SyncInline syncs each layer's gradient on the step's stream as soon
	// as the backward pass has it, then applies it: the backward pass
	// waits for every sync.
	SyncInline SyncMode = iota
	// SyncOverlap syncs each layer's gradient, and applies it, on
	// SyncStream while the step's stream goes on with the backward pass
	// of the layers below, as PyTorch DDP's buckets overlap it; the step's
	// stream waits for SyncStream at the end of the step.
	SyncOverlap
	// SyncAfter writes every layer's gradient into one buffer, syncs it
	// with one call after the backward pass, then applies it.
	SyncAfter
)

func (m SyncMode) String() string {
	switch m {
	case SyncInline:
		return "inline"
	case SyncOverlap:
		return "overlap"
	case SyncAfter:
		return "after"
	}
	return fmt.Sprintf("SyncMode(%d)", uint8(m))
}

// Layer describes one linear layer's parameters in device memory.
type Layer struct {
	In, Out int
	W       gg.DevicePtr // Out×In float32, row-major
	B       gg.DevicePtr // Out float32, right after W
}

// NewModel allocates the parameters with Device.Malloc (long-lived state:
// the stream-ordered pool, and graph memory once a step is captured, hold
// only what a step allocates) and initializes
// them from cfg.Seed: weights Kaiming-uniform for ReLU (U(±sqrt(6/In))),
// biases zero; Adam's moments and step count start at zero. The uploads
// are ordered in s.
func NewModel(s *gg.Stream, cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, &gg.Error{Op: "train.NewModel", Code: gg.ErrInvalidValue, Detail: "nil stream"}
	}
	m := &Model{cfg: cfg, dev: s.Device()}
	m.in, m.out = cfg.dims()
	n := len(m.in)
	r := rand.New(rand.NewPCG(cfg.Seed, 0x1417))
	fail := func(err error) (*Model, error) {
		for _, p := range slices.Concat(m.params, m.mom, []gg.DevicePtr{m.count}) {
			m.dev.Free(p)
		}
		return nil, err
	}
	for l := range n {
		size := m.layerSize(l)
		p, err := m.dev.Malloc(4 * size)
		if err != nil {
			return fail(err)
		}
		m.params = append(m.params, p)
		h := make([]float32, size)
		bound := math.Sqrt(6 / float64(m.in[l]))
		for i := range m.out[l] * m.in[l] {
			h[i] = float32((r.Float64()*2 - 1) * bound)
		}
		if err := s.Memcpy(gg.HtoD(p, gg.Bytes(h))); err != nil {
			return fail(err)
		}
	}
	if cfg.adam() {
		for l := range n {
			p, err := m.dev.Malloc(8 * m.layerSize(l))
			if err != nil {
				return fail(err)
			}
			m.mom = append(m.mom, p)
			if err := s.Memset(gg.Memset8(p, 0, 8*m.layerSize(l))); err != nil {
				return fail(err)
			}
		}
		var err error
		if m.count, err = m.dev.Malloc(4); err != nil {
			return fail(err)
		}
		if err := s.Memset(gg.Memset8(m.count, 0, 4)); err != nil {
			return fail(err)
		}
	}
	return m, nil
}

// layerSize is the number of parameters of layer l: W and b.
func (m *Model) layerSize(l int) int { return m.out[l]*m.in[l] + m.out[l] }

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Layers describes the parameters, first layer first.
func (m *Model) Layers() []Layer {
	ls := make([]Layer, len(m.params))
	for l, p := range m.params {
		ls[l] = Layer{In: m.in[l], Out: m.out[l], W: p, B: p + gg.DevicePtr(4*m.out[l]*m.in[l])}
	}
	return ls
}

// NumParams is the number of parameters: every layer's W and b.
func (m *Model) NumParams() int {
	n := 0
	for l := range m.params {
		n += m.layerSize(l)
	}
	return n
}

// ReadParams waits for s and returns every parameter, layer by layer, each
// layer's W (row-major) then b.
func (m *Model) ReadParams(s *gg.Stream) ([]float32, error) {
	h := make([]float32, m.NumParams())
	off := 0
	for l, p := range m.params {
		n := m.layerSize(l)
		if err := s.Memcpy(gg.DtoH(gg.Bytes(h[off:off+n]), p)); err != nil {
			return nil, err
		}
		off += n
	}
	if err := s.Synchronize(); err != nil {
		return nil, err
	}
	return h, nil
}

// WriteParams copies params, in ReadParams' layout, into the model, in
// stream order; params must stay unchanged until s has run the copies.
func (m *Model) WriteParams(s *gg.Stream, params []float32) error {
	if len(params) != m.NumParams() {
		return &gg.Error{Op: "train.Model.WriteParams", Code: gg.ErrInvalidValue,
			Detail: fmt.Sprintf("%d values for %d parameters", len(params), m.NumParams())}
	}
	off := 0
	for l, p := range m.params {
		n := m.layerSize(l)
		if err := s.Memcpy(gg.HtoD(p, gg.Bytes(params[off:off+n]))); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Destroy frees the parameters and optimizer state (Device.Free: it waits
// for the device). The Model is unusable afterwards.
func (m *Model) Destroy() error {
	var first error
	for _, p := range slices.Concat(m.params, m.mom, []gg.DevicePtr{m.count}) {
		if p == 0 {
			continue
		}
		if err := m.dev.Free(p); err != nil && first == nil {
			first = err
		}
	}
	m.params, m.mom, m.count = nil, nil, 0
	if m.syncEv != nil {
		if err := m.syncEv.Destroy(); err != nil && first == nil {
			first = err
		}
		m.syncEv = nil
	}
	return first
}

// Step issues one training step on s: forward pass over the batch at x
// (Batch×In float32) with labels at y (Batch int32), the mean cross-entropy
// written to lossOut (one float32), the backward pass, and the optimizer's
// update of every parameter. It only enqueues work: nothing waits.
//
// Every activation and gradient is allocated with s.MallocAsync when first
// written and freed with s.FreeAsync right after its last use, in this
// order (layers l = L..0, L the output layer, aₗ the input of layer l,
// a₀ = x):
//
//	forward   for each l: alloc aₗ₊₁; aₗ₊₁ = aₗ·Wₗᵀ; aₗ₊₁ = act(aₗ₊₁ + bₗ)
//	loss      dZ = softmax-xent gradient, in place of the logits aₗ₊₁
//	backward  for each l from L down: alloc gₗ; dWₗ = dZᵀ·aₗ; dbₗ = Σ rows of dZ
//	          if l > 0: alloc dA; dA = dZ·Wₗ
//	          free dZ; update Wₗ, bₗ from gₗ; free gₗ
//	          if l > 0: dA *= (aₗ > 0); free aₗ; dZ = dA
//
// Updating layer l as soon as its gradient exists (its weights are not
// read again) keeps one layer's gradient live at a time. With GradSync set,
// SyncMode moves the sync and the update: SyncOverlap onto SyncStream
// (the gradient is freed there), SyncAfter after the loop, from one
// gradient buffer of every layer.
//
// Under stream capture each allocation becomes an alloc node and each
// free a free node; the captured graph replays the whole step, reading x
// and y and writing lossOut, so those must be the same (static) buffers at
// every replay. On error, buffers the step allocated are freed.
func (m *Model) Step(s *gg.Stream, x, y, lossOut gg.DevicePtr) (err error) {
	if m.params == nil {
		return &gg.Error{Op: "train.Model.Step", Code: gg.ErrInvalidValue, Detail: "destroyed model"}
	}
	if s == nil || x == 0 || y == 0 || lossOut == 0 {
		return &gg.Error{Op: "train.Model.Step", Code: gg.ErrInvalidValue, Detail: "nil stream or buffer"}
	}
	gemm := m.GEMM
	if gemm == nil {
		gemm = KernelGEMM
	}
	side := m.SyncStream
	overlap := m.GradSync != nil && m.SyncMode == SyncOverlap
	after := m.GradSync != nil && m.SyncMode == SyncAfter
	if overlap {
		if side == nil || side.Device() != s.Device() || side == s {
			return &gg.Error{Op: "train.Model.Step", Code: gg.ErrInvalidValue, Detail: "SyncOverlap needs SyncStream, another stream of the model's device"}
		}
		if m.syncEv == nil {
			if m.syncEv, err = m.dev.NewEvent(gg.EventDisableTiming); err != nil {
				return err
			}
		}
	}
	cfg, B := m.cfg, m.cfg.Batch
	n := len(m.params)
	m.live = m.live[:0]
	defer func() {
		if err != nil {
			for _, p := range m.live {
				s.FreeAsync(p)
			}
		}
		m.live = m.live[:0]
	}()
	alloc := func(floats int) (gg.DevicePtr, error) {
		p, err := s.MallocAsync(4 * floats)
		if err == nil {
			m.live = append(m.live, p)
		}
		return p, err
	}
	free := func(p gg.DevicePtr) error {
		if i := slices.Index(m.live, p); i >= 0 {
			m.live = slices.Delete(m.live, i, i+1)
		}
		return s.FreeAsync(p)
	}

	mark := func(s *gg.Stream, format string, args ...any) error {
		if m.Mark == nil {
			return nil
		}
		return m.Mark(s, fmt.Sprintf(format, args...))
	}
	if err := mark(s, "start"); err != nil {
		return err
	}

	// Forward.
	acts := append(m.acts[:0], x)
	for l := range n {
		in, out := m.in[l], m.out[l]
		h, err := alloc(B * out)
		if err != nil {
			return err
		}
		acts = append(acts, h)
		if err := gemm(s, GEMMArgs{TransB: true, M: B, N: out, K: in, Alpha: 1, A: acts[l], LDA: in, B: m.params[l], LDB: in, C: h, LDC: out}); err != nil {
			return err
		}
		if err := mark(s, "fwd GEMM L%d", l); err != nil {
			return err
		}
		if err := launchBiasAct(s, h, m.params[l]+gg.DevicePtr(4*out*in), B, out, l < n-1); err != nil {
			return err
		}
		if err := mark(s, "fwd bias+ReLU L%d", l); err != nil {
			return err
		}
	}
	m.acts = acts

	// Loss: the logits become their gradient.
	dZ := acts[n]
	if err := launchSoftmaxXent(s, dZ, y, lossOut, B, cfg.Classes); err != nil {
		return err
	}
	if err := mark(s, "loss"); err != nil {
		return err
	}
	if cfg.adam() {
		if err := s.Launch(adamTick, gg.Dim1(1), gg.Dim1(1), m.count); err != nil {
			return err
		}
	}

	// Backward, updating each layer once its gradients exist (SyncAfter:
	// once all exist, in one buffer).
	var flat gg.DevicePtr
	var offs []int
	if after {
		total := 0
		for l := range n {
			offs = append(offs, total)
			total += m.layerSize(l)
		}
		if flat, err = alloc(total); err != nil {
			return err
		}
	}
	for l := n - 1; l >= 0; l-- {
		in, out := m.in[l], m.out[l]
		var g gg.DevicePtr
		if after {
			g = flat + gg.DevicePtr(4*offs[l])
		} else if g, err = alloc(m.layerSize(l)); err != nil {
			return err
		}
		if err := gemm(s, GEMMArgs{TransA: true, M: out, N: in, K: B, Alpha: 1, A: dZ, LDA: out, B: acts[l], LDB: in, C: g, LDC: in}); err != nil {
			return err
		}
		if err := mark(s, "bwd dW GEMM L%d", l); err != nil {
			return err
		}
		if err := launchColSum(s, dZ, g+gg.DevicePtr(4*out*in), B, out); err != nil {
			return err
		}
		if err := mark(s, "bwd db L%d", l); err != nil {
			return err
		}
		var dA gg.DevicePtr
		if l > 0 {
			if dA, err = alloc(B * in); err != nil {
				return err
			}
			if err := gemm(s, GEMMArgs{M: B, N: in, K: out, Alpha: 1, A: dZ, LDA: out, B: m.params[l], LDB: in, C: dA, LDC: in}); err != nil {
				return err
			}
			if err := mark(s, "bwd dA GEMM L%d", l); err != nil {
				return err
			}
		}
		if err := free(dZ); err != nil {
			return err
		}
		switch {
		case after:
		case overlap:
			// The gradient goes to the sync stream, which syncs it,
			// applies it and frees it.
			if err := s.Record(m.syncEv); err != nil {
				return err
			}
			if err := side.Wait(m.syncEv); err != nil {
				return err
			}
			if err := mark(side, "wait for dW L%d", l); err != nil {
				return err
			}
			if err := m.GradSync(side, g, m.layerSize(l)); err != nil {
				return err
			}
			if err := mark(side, "all-reduce L%d", l); err != nil {
				return err
			}
			if err := m.update(side, l, g); err != nil {
				return err
			}
			if err := mark(side, "update L%d", l); err != nil {
				return err
			}
			if i := slices.Index(m.live, g); i >= 0 {
				m.live = slices.Delete(m.live, i, i+1)
			}
			if err := side.FreeAsync(g); err != nil {
				return err
			}
		default:
			if m.GradSync != nil {
				if err := m.GradSync(s, g, m.layerSize(l)); err != nil {
					return err
				}
				if err := mark(s, "all-reduce L%d", l); err != nil {
					return err
				}
			}
			if err := m.update(s, l, g); err != nil {
				return err
			}
			if err := mark(s, "update L%d", l); err != nil {
				return err
			}
			if err := free(g); err != nil {
				return err
			}
		}
		if l > 0 {
			if err := launchReluBwd(s, dA, acts[l], B*in); err != nil {
				return err
			}
			if err := mark(s, "bwd ReLU' L%d", l-1); err != nil {
				return err
			}
			if err := free(acts[l]); err != nil {
				return err
			}
			dZ = dA
		}
	}
	switch {
	case after:
		total := offs[n-1] + m.layerSize(n-1)
		if err := m.GradSync(s, flat, total); err != nil {
			return err
		}
		if err := mark(s, "all-reduce all"); err != nil {
			return err
		}
		for l := range n {
			if err := m.update(s, l, flat+gg.DevicePtr(4*offs[l])); err != nil {
				return err
			}
			if err := mark(s, "update L%d", l); err != nil {
				return err
			}
		}
		return free(flat)
	case overlap:
		// The step ends when the sync stream has applied every layer.
		if err := side.Record(m.syncEv); err != nil {
			return err
		}
		if err := s.Wait(m.syncEv); err != nil {
			return err
		}
		return mark(s, "wait for sync stream")
	}
	return nil
}

// update applies the optimizer to layer l's parameters from gradient g.
func (m *Model) update(s *gg.Stream, l int, g gg.DevicePtr) error {
	n := m.layerSize(l)
	if !m.cfg.adam() {
		return s.Launch(sgdUpdate, elemGrid(n), gg.Dim1(threads), m.params[l], g, n, m.cfg.LR)
	}
	mo := m.mom[l]
	return s.Launch(adamUpdate, elemGrid(n), gg.Dim1(threads), m.params[l], g, mo, mo+gg.DevicePtr(4*n), m.count,
		n, m.cfg.LR, float32(AdamBeta1), float32(AdamBeta2), float32(AdamEpsilon))
}

// StepOps returns what one Step issues: kernels (GEMMs counted as one
// launch each, as KernelGEMM makes them), and MallocAsync calls (each
// matched by a FreeAsync). Captured, a step is a graph of
// kernels+2·allocs nodes.
func (c Config) StepOps() (kernels, allocs int) {
	n := c.Layers + 1
	// forward: GEMM and bias per layer; the loss; backward: dW, db and the
	// update per layer, dA and the ReLU mask per layer but the first.
	kernels = 2*n + 1 + 3*n + 2*(n-1)
	if c.adam() {
		kernels++
	}
	return kernels, n + n + (n - 1) // activations, gradients, dA
}

// StepBytes returns the peak of the bytes a Step holds in its own
// allocations (the sizes asked of MallocAsync, before any rounding), and
// the total it allocates over the step.
func (c Config) StepBytes() (peak, total int) {
	in, out := c.dims()
	n, B := len(in), c.Batch
	cur := 0
	alloc := func(floats int) int {
		cur += 4 * floats
		total += 4 * floats
		peak = max(peak, cur)
		return 4 * floats
	}
	acts := make([]int, n+1)
	for l := range n {
		acts[l+1] = alloc(B * out[l])
	}
	dZ := acts[n]
	for l := n - 1; l >= 0; l-- {
		g := alloc(out[l]*in[l] + out[l])
		dA := 0
		if l > 0 {
			dA = alloc(B * in[l])
		}
		cur -= dZ + g
		if l > 0 {
			cur -= acts[l]
			dZ = dA
		}
	}
	return peak, total
}

func (m *Model) String() string { return fmt.Sprintf("MLP %v, %d parameters", m.cfg, m.NumParams()) }
