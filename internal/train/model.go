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
// and bₗ follows it. Every layer's parameters lie in one allocation, layer
// after layer (ReadParams' layout), so that one kernel updates them all;
// Adam's moments and, in BF16 precision, the weights' bfloat16 copy (the
// shadow the GEMMs read) are laid out the same way, each one allocation.
//
// A Model is used from one goroutine at a time.
type Model struct {
	// GEMM computes the step's matrix products; nil means KernelGEMM. Set
	// it before the first Step (or before capturing one).
	GEMM GEMM

	// ForwardGEMM, if not nil, computes each layer of Forward (inference)
	// in one call, bias and ReLU included (CuBLASLt); nil means GEMM
	// followed by the package's bias+ReLU kernel. Step does not use it.
	ForwardGEMM EpilogueGEMM

	// Fused, if not nil, computes the step's forward GEMMs with the bias
	// and ReLU, the top layer's dW GEMM with its bias gradient, and each
	// dA GEMM with the ReLU gradient and bias gradient of the layer below
	// (CuBLASLtStep, EmulatedFused); GEMM computes the other dW GEMMs. In
	// BF16 every dW GEMM sums its layer's bias gradient and the dA GEMMs
	// write the bfloat16 gradient of the layer below without one (GEMM
	// computes only the top layer's dW, when its bias gradient is summed
	// apart: Config.topBiasApart). Step then issues Config.FusedStepOps' kernels. It takes
	// every precision, without GradSync: Step refuses that
	// (ErrNotSupported).
	Fused FusedGEMM

	// GradSync, if not nil, is called with the gradients (floats float32s
	// at g) before the optimizer uses them: data-parallel training
	// all-reduces them there (averaging over the ranks). SyncMode says
	// whether it gets each layer's as soon as the backward pass has it (a
	// bucket per layer overlapping the rest of the backward pass, as
	// PyTorch DDP's buckets do) or all of them at once.
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
	off     []int        // each layer's first parameter (its W) in the flat layout
	params  gg.DevicePtr // every layer's W then b: NumParams float32
	shadow  gg.DevicePtr // BF16: params as bfloat16 (2 bytes each); 0 otherwise
	mom     gg.DevicePtr // Adam: first moments then second moments, 2·NumParams float32
	state   gg.DevicePtr // stateWords counters and partial sums (kernels.go)
	biasTab gg.DevicePtr // sgdBias's table: per layer its first parameter, first bias, bias count, first bias gradient (int32s)
	dbOff   []int        // each layer's first bias gradient in a step's bias gradients (SGD in the GEMMs)
	acts    []gg.DevicePtr
	grads   []gg.DevicePtr // scratch for Step: per-layer gradients (SyncInline, SyncOverlap)
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
	// Shadow is W as bfloat16 (Out×In uint16s), what the GEMMs of a BF16
	// model read; 0 in the other precisions.
	Shadow gg.DevicePtr
}

// NewModel allocates the parameters with Device.Malloc (long-lived state:
// the stream-ordered pool, and graph memory once a step is captured, hold
// only what a step allocates) and initializes them from cfg.Seed: weights
// Kaiming-uniform for ReLU (U(±sqrt(6/In))), biases zero; Adam's moments
// and step count start at zero; a BF16 model's shadow is written from the
// weights. The uploads and that kernel are ordered in s.
func NewModel(s *gg.Stream, cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, &gg.Error{Op: "train.NewModel", Code: gg.ErrInvalidValue, Detail: "nil stream"}
	}
	m := &Model{cfg: cfg, dev: s.Device()}
	m.in, m.out = cfg.dims()
	P := 0
	for l := range m.in {
		m.off = append(m.off, P)
		P += m.layerSize(l)
	}
	fail := func(err error) (*Model, error) {
		m.Destroy()
		return nil, err
	}
	zeroed := func(bytes int) (gg.DevicePtr, error) {
		p, err := m.dev.Malloc(bytes)
		if err == nil {
			err = s.Memset(gg.Memset8(p, 0, bytes))
		}
		return p, err
	}
	var err error
	if m.params, err = m.dev.Malloc(4 * P); err != nil {
		return fail(err)
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x1417))
	h := make([]float32, P)
	for l := range m.in {
		bound := math.Sqrt(6 / float64(m.in[l]))
		w := h[m.off[l]:][:m.out[l]*m.in[l]]
		for i := range w {
			w[i] = float32((r.Float64()*2 - 1) * bound)
		}
	}
	if err := s.Memcpy(gg.HtoD(m.params, gg.Bytes(h))); err != nil {
		return fail(err)
	}
	if cfg.bf16() {
		if m.shadow, err = m.dev.Malloc(2 * P); err != nil {
			return fail(err)
		}
		if err := launchCastBF16(s, m.params, m.shadow, P); err != nil {
			return fail(err)
		}
	}
	if cfg.adam() {
		if m.mom, err = zeroed(8 * P); err != nil {
			return fail(err)
		}
	}
	if m.state, err = zeroed(4 * stateWords); err != nil {
		return fail(err)
	}
	tab, nb := make([]int32, 0, 4*len(m.in)), 0
	for l := range m.in {
		m.dbOff = append(m.dbOff, nb)
		tab = append(tab, int32(m.off[l]), int32(m.off[l]+m.out[l]*m.in[l]), int32(m.out[l]), int32(nb))
		nb += m.out[l]
	}
	if m.biasTab, err = m.dev.Malloc(4 * len(tab)); err != nil {
		return fail(err)
	}
	if err := s.Memcpy(gg.HtoD(m.biasTab, gg.Bytes(tab))); err != nil {
		return fail(err)
	}
	return m, nil
}

// layerSize is the number of parameters of layer l: W and b.
func (m *Model) layerSize(l int) int { return m.out[l]*m.in[l] + m.out[l] }

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Layers describes the parameters, first layer first.
func (m *Model) Layers() []Layer {
	if m.params == 0 {
		return nil
	}
	ls := make([]Layer, len(m.in))
	for l := range ls {
		w := m.params + gg.DevicePtr(4*m.off[l])
		ls[l] = Layer{In: m.in[l], Out: m.out[l], W: w, B: w + gg.DevicePtr(4*m.out[l]*m.in[l])}
		if m.shadow != 0 {
			ls[l].Shadow = m.shadow + gg.DevicePtr(2*m.off[l])
		}
	}
	return ls
}

// NumParams is the number of parameters: every layer's W and b.
func (m *Model) NumParams() int { return m.cfg.NumParams() }

// ReadParams waits for s and returns every parameter, layer by layer, each
// layer's W (row-major) then b: the float32 master copy.
func (m *Model) ReadParams(s *gg.Stream) ([]float32, error) {
	if m.params == 0 {
		return nil, &gg.Error{Op: "train.Model.ReadParams", Code: gg.ErrInvalidValue, Detail: "destroyed model"}
	}
	h := make([]float32, m.NumParams())
	if err := s.Memcpy(gg.DtoH(gg.Bytes(h), m.params)); err != nil {
		return nil, err
	}
	if err := s.Synchronize(); err != nil {
		return nil, err
	}
	return h, nil
}

// WriteParams copies params, in ReadParams' layout, into the model (and,
// in BF16 precision, rounds them into the shadow), in stream order; params
// must stay unchanged until s has run the copy.
func (m *Model) WriteParams(s *gg.Stream, params []float32) error {
	const op = "train.Model.WriteParams"
	if m.params == 0 {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue, Detail: "destroyed model"}
	}
	if len(params) != m.NumParams() {
		return &gg.Error{Op: op, Code: gg.ErrInvalidValue,
			Detail: fmt.Sprintf("%d values for %d parameters", len(params), m.NumParams())}
	}
	if err := s.Memcpy(gg.HtoD(m.params, gg.Bytes(params))); err != nil {
		return err
	}
	if m.shadow != 0 {
		return launchCastBF16(s, m.params, m.shadow, len(params))
	}
	return nil
}

// Destroy frees the parameters and optimizer state (Device.Free: it waits
// for the device). The Model is unusable afterwards.
func (m *Model) Destroy() error {
	var first error
	for _, p := range []*gg.DevicePtr{&m.params, &m.shadow, &m.mom, &m.state, &m.biasTab} {
		if *p == 0 {
			continue
		}
		if err := m.dev.Free(*p); err != nil && first == nil {
			first = err
		}
		*p = 0
	}
	if m.syncEv != nil {
		if err := m.syncEv.Destroy(); err != nil && first == nil {
			first = err
		}
		m.syncEv = nil
	}
	return first
}

// weights is what the step's GEMMs read as layer l's W: the float32
// master, or in BF16 precision its bfloat16 shadow.
func (m *Model) weights(l int) gg.DevicePtr {
	if m.shadow != 0 {
		return m.shadow + gg.DevicePtr(2*m.off[l])
	}
	return m.params + gg.DevicePtr(4*m.off[l])
}

// bias is layer l's b.
func (m *Model) bias(l int) gg.DevicePtr {
	return m.params + gg.DevicePtr(4*(m.off[l]+m.out[l]*m.in[l]))
}

// biasShadow is layer l's b as bfloat16, in the shadow (BF16 precision):
// the bias the BF16 fused step's hidden layers add.
func (m *Model) biasShadow(l int) gg.DevicePtr {
	return m.shadow + gg.DevicePtr(2*(m.off[l]+m.out[l]*m.in[l]))
}

// Step issues one training step on s: forward pass over the batch at x
// (Batch×In float32) with labels at y (Batch int32), the mean cross-entropy
// written to lossOut (one float32), the backward pass, and the optimizer's
// update of every parameter. It only enqueues work: nothing waits.
//
// Every activation and gradient is allocated with s.MallocAsync when first
// written and freed with s.FreeAsync right after its last use, in this
// order (layers l = L..0, L the output layer, aₗ the input of layer l,
// a₀ = x, hₗ the output of layer l's GEMM):
//
//	forward   for each l: alloc hₗ; hₗ = aₗ·Wₗᵀ; aₗ₊₁ = act(hₗ + bₗ), in place
//	loss      dZ = softmax-xent gradient, in place of the logits a_{L+1}
//	backward  alloc G, every layer's gradient; db_L = Σ rows of dZ
//	          for each l from L down: dWₗ = dZᵀ·aₗ
//	          if l > 0: alloc dA; dA = dZ·Wₗ
//	          free dZ
//	          if l > 0: dA = dA·(aₗ > 0) in place, db_{l-1} = Σ rows of dA; free aₗ; dZ = dA
//	update    every parameter from G (one kernel); free G
//
// G holds every gradient until the update, as PyTorch's .grad tensors do:
// one kernel for the whole update costs the memory of all the gradients
// at once (StepBytes counts it).
//
// With plain SGD and no GradSync (sgdInGEMM) no weight gradient is
// written: each layer's dW GEMM runs after its dA GEMM and computes
// Wₗ −= lr·dZᵀ·aₗ in place (alpha −lr, beta 1), G holds only the bias
// gradients, and the update kernel applies those (and rewrites the BF16
// shadow).
//
// In BF16 precision the GEMMs read bfloat16 and write float32, so a few
// buffers come in pairs: x is first rounded into a step-local bfloat16
// copy (freed after the first layer's dW); hₗ is float32 and aₗ₊₁ a
// separate bfloat16 buffer (hₗ freed once read), but the logits stay
// float32; the loss kernel writes dZ as a new bfloat16 buffer (the logits
// freed); the ReLU kernel reads the float32 dA and writes the bfloat16 dZ
// below it (dA freed). The weights the GEMMs read are the shadow, which
// the update rewrites. TF32 is FP32 with the GEMMs' math set to TF32.
//
// With GradSync set, SyncMode changes the backward pass: SyncAfter syncs G
// with one call before the update; SyncInline and SyncOverlap allocate
// each layer's gradient on its own (allocated when the layer above
// computes its bias gradient), sync it once the layer's dW exists and
// apply it with an update of that layer alone, on the step's stream or,
// for SyncOverlap, on SyncStream (which frees it there).
//
// Under stream capture each allocation becomes an alloc node and each
// free a free node; the captured graph replays the whole step, reading x
// and y and writing lossOut, so those must be the same (static) buffers at
// every replay. On error, buffers the step allocated are freed.
func (m *Model) Step(s *gg.Stream, x, y, lossOut gg.DevicePtr) (err error) {
	if m.params == 0 {
		return &gg.Error{Op: "train.Model.Step", Code: gg.ErrInvalidValue, Detail: "destroyed model"}
	}
	if s == nil || x == 0 || y == 0 || lossOut == 0 {
		return &gg.Error{Op: "train.Model.Step", Code: gg.ErrInvalidValue, Detail: "nil stream or buffer"}
	}
	if m.Fused != nil && m.GradSync != nil {
		return &gg.Error{Op: "train.Model.Step", Code: gg.ErrNotSupported, Detail: "Fused with GradSync: the fused step does not sync gradients (data-parallel training takes the unfused step)"}
	}
	gemm := m.GEMM
	if gemm == nil {
		gemm = KernelGEMM
	}
	side := m.SyncStream
	perLayer := m.GradSync != nil && (m.SyncMode == SyncInline || m.SyncMode == SyncOverlap)
	overlap := m.GradSync != nil && m.SyncMode == SyncOverlap
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
	n, P := len(m.in), m.NumParams()
	bf := cfg.bf16()
	ty, mth := Float32, MathFP32 // the GEMMs' operands and math
	if bf {
		ty = BFloat16
	}
	if cfg.Precision == TF32 {
		mth = MathTF32
	}
	m.live = m.live[:0]
	defer func() {
		if err != nil {
			for _, p := range m.live {
				s.FreeAsync(p)
			}
		}
		m.live = m.live[:0]
	}()
	alloc := func(bytes int) (gg.DevicePtr, error) {
		p, err := s.MallocAsync(bytes)
		if err == nil {
			m.live = append(m.live, p)
		}
		return p, err
	}
	forget := func(p gg.DevicePtr) {
		if i := slices.Index(m.live, p); i >= 0 {
			m.live = slices.Delete(m.live, i, i+1)
		}
	}
	free := func(p gg.DevicePtr) error {
		forget(p)
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
	if m.Fused != nil {
		return m.stepFused(s, gemm, x, y, lossOut, alloc, free, mark)
	}

	// Forward.
	a0, err := m.stepInput(s, x, alloc, mark)
	if err != nil {
		return err
	}
	acts := append(m.acts[:0], a0)
	for l := range n {
		in, out, last := m.in[l], m.out[l], l == n-1
		h, err := alloc(4 * B * out)
		if err != nil {
			return err
		}
		if err := gemm(s, GEMMArgs{TransB: true, M: B, N: out, K: in, Alpha: 1, A: acts[l], LDA: in, B: m.weights(l), LDB: in,
			C: h, LDC: out, AType: ty, BType: ty, Math: mth}); err != nil {
			return err
		}
		if err := mark(s, "fwd GEMM L%d", l); err != nil {
			return err
		}
		a := h // the layer's output, in place of h but for a bfloat16 hidden layer
		if bf && !last {
			if a, err = alloc(2 * B * out); err != nil {
				return err
			}
		}
		if err := launchBiasAct(s, h, a, m.bias(l), false, B, out, !last, a != h); err != nil {
			return err
		}
		if a != h {
			if err := free(h); err != nil {
				return err
			}
		}
		if err := mark(s, "fwd bias+ReLU L%d", l); err != nil {
			return err
		}
		acts = append(acts, a)
	}
	m.acts = acts

	// Loss: the logits' gradient, in their place or (bf16) beside them.
	dZ := acts[n]
	if bf {
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

	// Backward. grad(l) is layer l's gradient: in G, or (per layer)
	// allocated when first asked for. With SGD in the GEMMs, G holds only
	// the bias gradients, and dbias(l) is layer l's.
	inGEMM := m.sgdInGEMM()
	var flat gg.DevicePtr
	if !perLayer {
		size := P
		if inGEMM {
			size = cfg.numBiases()
		}
		if flat, err = alloc(4 * size); err != nil {
			return err
		}
	}
	m.grads = slices.Grow(m.grads[:0], n)[:n]
	clear(m.grads)
	grad := func(l int) (gg.DevicePtr, error) {
		if !perLayer {
			return flat + gg.DevicePtr(4*m.off[l]), nil
		}
		if m.grads[l] == 0 {
			var err error
			m.grads[l], err = alloc(4 * m.layerSize(l))
			return m.grads[l], err
		}
		return m.grads[l], nil
	}
	dbias := func(l int) (gg.DevicePtr, error) {
		if inGEMM {
			return flat + gg.DevicePtr(4*m.dbOff[l]), nil
		}
		g, err := grad(l)
		return g + gg.DevicePtr(4*m.out[l]*m.in[l]), err
	}
	dbTop, err := dbias(n - 1)
	if err != nil {
		return err
	}
	if err := launchColSum(s, dZ, bf, dbTop, B, cfg.Classes); err != nil {
		return err
	}
	if err := mark(s, "bwd db L%d", n-1); err != nil {
		return err
	}
	for l := n - 1; l >= 0; l-- {
		in, out := m.in[l], m.out[l]
		// dW: into G, or with SGD in the GEMMs W −= lr·dZᵀ·aₗ, after the
		// dA GEMM has read W.
		dW := GEMMArgs{TransA: true, M: out, N: in, K: B, Alpha: 1, A: dZ, LDA: out, B: acts[l], LDB: in,
			LDC: in, AType: ty, BType: ty, Math: mth}
		var g gg.DevicePtr
		if inGEMM {
			dW.C, dW.Alpha, dW.Beta = m.params+gg.DevicePtr(4*m.off[l]), -cfg.LR, 1
		} else {
			if g, err = grad(l); err != nil {
				return err
			}
			dW.C = g
		}
		weightGrad := func() error {
			if err := gemm(s, dW); err != nil {
				return err
			}
			what := "bwd dW GEMM L%d"
			if inGEMM {
				what = "bwd dW GEMM+SGD L%d"
			}
			return mark(s, what, l)
		}
		if !inGEMM {
			if err := weightGrad(); err != nil {
				return err
			}
		}
		var dA gg.DevicePtr
		if l > 0 {
			if dA, err = alloc(4 * B * in); err != nil {
				return err
			}
			if err := gemm(s, GEMMArgs{M: B, N: in, K: out, Alpha: 1, A: dZ, LDA: out, B: m.weights(l), LDB: in,
				C: dA, LDC: in, AType: ty, BType: ty, Math: mth}); err != nil {
				return err
			}
			if err := mark(s, "bwd dA GEMM L%d", l); err != nil {
				return err
			}
		}
		if inGEMM {
			if err := weightGrad(); err != nil {
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
		if perLayer {
			if err := m.syncLayer(s, l, g, l == n-1, forget, mark); err != nil {
				return err
			}
		}
		if l > 0 {
			// The layer below's dZ, and its bias gradient.
			gb, err := dbias(l - 1)
			if err != nil {
				return err
			}
			dz := dA
			if bf {
				if dz, err = alloc(2 * B * in); err != nil {
					return err
				}
			}
			if err := launchReluBwdDB(s, dA, acts[l], bf, dz, bf, gb, B, in); err != nil {
				return err
			}
			if err := mark(s, "bwd ReLU'+db L%d", l-1); err != nil {
				return err
			}
			if dz != dA {
				if err := free(dA); err != nil {
					return err
				}
			}
			if err := free(acts[l]); err != nil {
				return err
			}
			dZ = dz
		}
	}
	if !perLayer {
		if m.GradSync != nil { // SyncAfter
			if err := m.GradSync(s, flat, P); err != nil {
				return err
			}
			if err := mark(s, "all-reduce all"); err != nil {
				return err
			}
		}
		if inGEMM {
			if err := m.updateBiases(s, flat); err != nil {
				return err
			}
		} else if err := m.update(s, 0, P, flat, true); err != nil {
			return err
		}
		if err := mark(s, "update"); err != nil {
			return err
		}
		return free(flat)
	}
	if overlap {
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

// syncLayer syncs layer l's gradient g and applies it (SyncInline,
// SyncOverlap), then frees it: on s, or on the sync stream once s has
// reached this point. first says whether this is the step's first update
// (it advances Adam's step count). forget drops g from the buffers Step
// frees on error once another stream owns it.
func (m *Model) syncLayer(s *gg.Stream, l int, g gg.DevicePtr, first bool, forget func(gg.DevicePtr), mark func(*gg.Stream, string, ...any) error) error {
	on := s
	if m.SyncMode == SyncOverlap {
		on = m.SyncStream
		if err := s.Record(m.syncEv); err != nil {
			return err
		}
		if err := on.Wait(m.syncEv); err != nil {
			return err
		}
		if err := mark(on, "wait for dW L%d", l); err != nil {
			return err
		}
	}
	if err := m.GradSync(on, g, m.layerSize(l)); err != nil {
		return err
	}
	if err := mark(on, "all-reduce L%d", l); err != nil {
		return err
	}
	if err := m.update(on, m.off[l], m.layerSize(l), g, first); err != nil {
		return err
	}
	if err := mark(on, "update L%d", l); err != nil {
		return err
	}
	forget(g)
	return on.FreeAsync(g)
}

// update applies the optimizer to the count parameters from lo (in the
// flat layout), from the gradient at g, writing the shadow too in BF16
// precision; tick advances Adam's step count (the step's first update).
func (m *Model) update(s *gg.Stream, lo, count int, g gg.DevicePtr, tick bool) error {
	w := m.params + gg.DevicePtr(4*lo)
	var sh gg.DevicePtr
	if m.shadow != 0 {
		sh = m.shadow + gg.DevicePtr(2*lo)
	}
	if !m.cfg.adam() {
		return s.Launch(sgdUpdate, elemGrid(count), gg.Dim1(threads), w, g, sh, count, m.cfg.LR)
	}
	P := m.NumParams()
	mo, v := m.mom+gg.DevicePtr(4*lo), m.mom+gg.DevicePtr(4*(P+lo))
	return s.Launch(adamUpdate, elemGrid(count), gg.Dim1(threads), w, g, mo, v, m.state+4*stateAdamStep, sh,
		count, m.cfg.LR, float32(AdamBeta1), float32(AdamBeta2), float32(AdamEpsilon), b2i(tick))
}

// sgdInGEMM reports whether Step applies plain SGD to the weights in the
// dW GEMMs (W ← W − lr·dZᵀ·aₗ: alpha −lr, beta 1, W as C), so that no
// weight gradient is written, read back by an update or held until one:
// SGD without GradSync (a gradient to sync must exist) and without Fused.
// The bias gradients are still summed into a small buffer, which
// updateBiases applies. Per weight, the arithmetic is the update kernel's
// (w − lr·g, where g is the same GEMM's float32 sum).
func (m *Model) sgdInGEMM() bool { return !m.cfg.adam() && m.GradSync == nil && m.Fused == nil }

// updateBiases applies SGD to every bias from the bias gradients at db
// (the layers' one after another, dbOff) and, in BF16, rewrites the whole
// shadow from the updated parameters: one kernel.
func (m *Model) updateBiases(s *gg.Stream, db gg.DevicePtr) error {
	n := m.cfg.numBiases()
	if m.shadow != 0 {
		n = m.NumParams()
	}
	return s.Launch(sgdBias, elemGrid(n), gg.Dim1(threads), m.params, m.shadow, db, m.biasTab, len(m.in), n, m.cfg.LR)
}

// StepOps returns what one Step issues without GradSync (or with
// SyncAfter): kernels (GEMMs counted as one launch each, as KernelGEMM
// makes them), and MallocAsync calls (each matched by a FreeAsync).
// Captured, a step is a graph of kernels+2·allocs nodes. With n linear
// layers: per layer a forward GEMM and bias+ReLU; the loss; the output
// layer's bias gradient; per layer a dW GEMM; per layer but the first a dA
// GEMM, the ReLU and the bias gradient of the layer below; one update:
// 6n kernels, and in BF16 one more, the batch's cast. SyncInline and
// SyncOverlap update each layer on its own: n-1 more.
func (c Config) StepOps() (kernels, allocs int) {
	n := c.Layers + 1
	kernels = 2*n + 1 + 1 + n + 3*(n-1) + 1
	allocs = n + 1 + (n - 1) // GEMM outputs, the gradients, dA
	if c.bf16() {
		kernels++
		// x, the hidden layers' outputs, the loss gradient and the dZs
		// below it as bfloat16
		allocs += 1 + (n - 1) + 1 + (n - 1)
	}
	return kernels, allocs
}

// StepBytes returns the peak of the bytes a Step without GradSync holds
// in its own allocations (the sizes asked of
// MallocAsync, before any rounding), and the total it allocates over the
// step. It follows Step's allocations and frees one by one.
func (c Config) StepBytes() (peak, total int) {
	in, out := c.dims()
	n, B, bf := len(in), c.Batch, c.bf16()
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
	for l := range n {
		h := alloc(4 * B * out[l])
		acts[l+1] = h
		if bf && l < n-1 {
			acts[l+1] = alloc(2 * B * out[l])
			free(h)
		}
	}
	dZ := acts[n]
	if bf {
		dZ = alloc(2 * B * c.Classes)
		free(acts[n])
	}
	g := c.NumParams() // every gradient, or with SGD (in the GEMMs) the biases'
	if !c.adam() {
		g = c.numBiases()
	}
	grads := alloc(4 * g)
	for l := n - 1; l >= 0; l-- {
		dA := 0
		if l > 0 {
			dA = alloc(4 * B * in[l])
		}
		free(dZ)
		if l == 0 {
			free(acts[0])
		}
		if l > 0 {
			dz := dA
			if bf {
				dz = alloc(2 * B * in[l])
				free(dA)
			}
			free(acts[l])
			dZ = dz
		}
	}
	free(grads)
	return peak, total
}

func (m *Model) String() string { return fmt.Sprintf("MLP %v, %d parameters", m.cfg, m.NumParams()) }

// stepInput is what a step's first GEMM reads of the batch x: x itself, or
// in BF16 a step-local bfloat16 copy, cast by one kernel.
func (m *Model) stepInput(s *gg.Stream, x gg.DevicePtr, alloc func(int) (gg.DevicePtr, error), mark func(*gg.Stream, string, ...any) error) (gg.DevicePtr, error) {
	if !m.cfg.bf16() {
		return x, nil
	}
	a0, err := alloc(2 * m.cfg.Batch * m.cfg.In)
	if err != nil {
		return 0, err
	}
	if err := launchCastBF16(s, x, a0, m.cfg.Batch*m.cfg.In); err != nil {
		return 0, err
	}
	return a0, mark(s, "cast x to bf16")
}
