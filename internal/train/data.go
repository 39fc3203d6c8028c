package train

import (
	"fmt"
	"math"
	"math/rand/v2"

	gg "github.com/gpugraph/gpugraph"
)

// Dataset is a synthetic classification data set held in host memory: a
// mixture of Gaussians, one per class. Class c has a centroid μ_c with
// coordinates drawn from N(0, Spread²); a sample of class c is μ_c plus
// N(0, 1) noise in every coordinate. Classes overlap a little in any one
// coordinate but are separable in many, so an MLP learns them steadily: the
// loss starts near log(Classes) and falls over a few hundred steps. The
// same Config.Seed always gives the same data.
type Dataset struct {
	In, Classes, Batch int
	X                  []float32 // samples × In, row-major
	Y                  []int32   // labels in [0, Classes)
}

// Spread is the standard deviation of the class centroids' coordinates
// (the noise has standard deviation 1).
const Spread = 0.25

// NewDataset generates batches batches of cfg.Batch samples.
func NewDataset(cfg Config, batches int) (*Dataset, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if batches < 1 || int64(batches)*int64(cfg.Batch)*int64(cfg.In) > maxElems {
		return nil, &gg.Error{Op: "train.NewDataset", Code: gg.ErrInvalidValue, Detail: fmt.Sprintf("%d batches", batches)}
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0xda7a))
	mu := make([]float32, cfg.Classes*cfg.In)
	for i := range mu {
		mu[i] = float32(r.NormFloat64() * Spread)
	}
	n := batches * cfg.Batch
	d := &Dataset{In: cfg.In, Classes: cfg.Classes, Batch: cfg.Batch, X: make([]float32, n*cfg.In), Y: make([]int32, n)}
	for i := range n {
		c := r.IntN(cfg.Classes)
		d.Y[i] = int32(c)
		x, m := d.X[i*cfg.In:][:cfg.In], mu[c*cfg.In:][:cfg.In]
		for j := range x {
			x[j] = m[j] + float32(r.NormFloat64())
		}
	}
	return d, nil
}

// Batches is the number of batches.
func (d *Dataset) Batches() int { return len(d.Y) / d.Batch }

// At returns batch i modulo Batches(): views of X and Y.
func (d *Dataset) At(i int) (x []float32, y []int32) {
	i %= d.Batches()
	if i < 0 {
		i += d.Batches()
	}
	return d.X[i*d.Batch*d.In:][:d.Batch*d.In], d.Y[i*d.Batch:][:d.Batch]
}

// Static holds the step's fixed device buffers, PyTorch's static_input,
// static_target and static_loss: a captured step reads its batch from X and
// Y and writes its loss to Loss, and the host refills X and Y before each
// replay. They are allocated with Device.Malloc, like the parameters.
type Static struct {
	X    gg.DevicePtr // Batch×In float32
	Y    gg.DevicePtr // Batch int32 labels
	Loss gg.DevicePtr // one float32
	cfg  Config
}

// NewStatic allocates the static buffers for cfg on s.
func NewStatic(s *gg.Stream, cfg Config) (*Static, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st := &Static{cfg: cfg}
	d := s.Device()
	var err error
	if st.X, err = d.Malloc(4 * cfg.Batch * cfg.In); err != nil {
		return nil, err
	}
	if st.Y, err = d.Malloc(4 * cfg.Batch); err != nil {
		d.Free(st.X)
		return nil, err
	}
	if st.Loss, err = d.Malloc(4); err != nil {
		d.Free(st.X)
		d.Free(st.Y)
		return nil, err
	}
	return st, nil
}

// Load copies batch i of d into X and Y, in stream order (the
// static_input.copy_() before a replay).
func (st *Static) Load(s *gg.Stream, d *Dataset, i int) error {
	if d.In != st.cfg.In || d.Batch != st.cfg.Batch {
		return &gg.Error{Op: "train.Static.Load", Code: gg.ErrInvalidValue,
			Detail: fmt.Sprintf("data set of %d×%d batches, buffers for %d×%d", d.Batch, d.In, st.cfg.Batch, st.cfg.In)}
	}
	x, y := d.At(i)
	if err := s.Memcpy(gg.HtoD(st.X, gg.Bytes(x))); err != nil {
		return err
	}
	return s.Memcpy(gg.HtoD(st.Y, gg.Bytes(y)))
}

// ReadLoss waits for s and returns the loss last written to Loss.
func (st *Static) ReadLoss(s *gg.Stream) (float32, error) {
	return readLoss(s, st.Loss)
}

// LoadShard copies rank's share of batch i of d, a data set of batches
// ranks times st's: rows [rank·Batch, (rank+1)·Batch) of the global batch,
// for data-parallel training.
func (st *Static) LoadShard(s *gg.Stream, d *Dataset, i, rank, ranks int) error {
	b := st.cfg.Batch
	if d.In != st.cfg.In || d.Batch != b*ranks || rank < 0 || rank >= ranks {
		return &gg.Error{Op: "train.Static.LoadShard", Code: gg.ErrInvalidValue,
			Detail: fmt.Sprintf("rank %d of %d: data set of %d×%d batches, buffers for %d×%d", rank, ranks, d.Batch, d.In, b, st.cfg.In)}
	}
	x, y := d.At(i)
	x, y = x[rank*b*d.In:(rank+1)*b*d.In], y[rank*b:(rank+1)*b]
	if err := s.Memcpy(gg.HtoD(st.X, gg.Bytes(x))); err != nil {
		return err
	}
	return s.Memcpy(gg.HtoD(st.Y, gg.Bytes(y)))
}

// readLoss synchronizes s and reads one float32 at p.
func readLoss(s *gg.Stream, p gg.DevicePtr) (float32, error) {
	var v [1]float32
	if err := s.Memcpy(gg.DtoH(gg.Bytes(v[:]), p)); err != nil {
		return float32(math.NaN()), err
	}
	if err := s.Synchronize(); err != nil {
		return float32(math.NaN()), err
	}
	return v[0], nil
}

// Free frees the buffers (Device.Free: after the work queued on the device).
func (st *Static) Free(s *gg.Stream) error {
	var first error
	for _, p := range []*gg.DevicePtr{&st.X, &st.Y, &st.Loss} {
		if *p != 0 {
			if err := s.Device().Free(*p); err != nil && first == nil {
				first = err
			}
			*p = 0
		}
	}
	return first
}
