package train

import (
	"fmt"

	gg "github.com/gpugraph/gpugraph"
)

// The optimizers Config.Optimizer names.
const (
	SGD  = "sgd"
	Adam = "adam"
)

// Adam's hyperparameters other than the learning rate (PyTorch's defaults).
const (
	AdamBeta1   = 0.9
	AdamBeta2   = 0.999
	AdamEpsilon = 1e-8
)

// Config describes the model, the batch and the optimizer. The model is an
// MLP In → Hidden (×Layers, each followed by ReLU) → Classes, trained with
// mean softmax cross-entropy over batches of Batch samples.
type Config struct {
	In      int     // input features
	Hidden  int     // width of each hidden layer
	Layers  int     // hidden layers (linear layers: Layers+1)
	Classes int     // output classes
	Batch   int     // samples per step
	LR      float32 // learning rate
	// Optimizer is SGD (plain: w -= LR·g) or Adam (with bias correction,
	// betas AdamBeta1 and AdamBeta2, epsilon AdamEpsilon); "" means SGD.
	Optimizer string
	// Precision is FP32, TF32 or BF16: how the step's GEMMs read their
	// operands (see the constants); "" means FP32. Parameters, optimizer
	// state and the loss are float32 in every precision.
	Precision string `json:",omitempty"`
	Seed      uint64 // seeds the data set and the initial parameters
}

// Small is a configuration fast enough for the host backend: 64→256×2→10,
// batch 128, SGD.
func Small() Config {
	return Config{In: 64, Hidden: 256, Layers: 2, Classes: 10, Batch: 128, LR: 0.05, Optimizer: SGD, Seed: 1}
}

// Reference is the reference model: 256→1024×4→10, batch 512, SGD.
func Reference() Config {
	return Config{In: 256, Hidden: 1024, Layers: 4, Classes: 10, Batch: 512, LR: 0.02, Optimizer: SGD, Seed: 1}
}

// Large is a model whose step is GEMM-bound on a GPU:
// 1024→4096×4→1000, batch 2048, SGD; about 0.7 TFLOP a step (3 × 2 × batch
// × 58.6M weights, less the first layer's input gradient). On the host
// backend a step takes tens of seconds.
func Large() Config {
	return Config{In: 1024, Hidden: 4096, Layers: 4, Classes: 1000, Batch: 2048, LR: 0.02, Optimizer: SGD, Seed: 1}
}

// dims returns the input and output width of each linear layer.
func (c Config) dims() (in, out []int) {
	n := c.Layers + 1
	in, out = make([]int, n), make([]int, n)
	for l := range n {
		in[l], out[l] = c.Hidden, c.Hidden
	}
	in[0], out[n-1] = c.In, c.Classes
	return in, out
}

// maxElems bounds every matrix a step touches so that int32 kernel
// arguments and indices cannot overflow.
const maxElems = 1 << 30

// Validate checks the configuration; its error wraps gpugraph.ErrInvalidValue.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return &gg.Error{Op: "train.Config", Code: gg.ErrInvalidValue, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.In < 1 || c.Hidden < 1 || c.Classes < 1 || c.Batch < 1:
		return bad("sizes must be positive: In %d, Hidden %d, Classes %d, Batch %d", c.In, c.Hidden, c.Classes, c.Batch)
	case c.Layers < 0:
		return bad("negative Layers %d", c.Layers)
	case c.Classes < 2:
		return bad("Classes %d: a classifier needs two", c.Classes)
	case !(c.LR > 0) || c.LR > 1e3: // also refuses NaN
		return bad("learning rate %v outside (0, 1000]", c.LR)
	case c.Optimizer != "" && c.Optimizer != SGD && c.Optimizer != Adam:
		return bad("optimizer %q: want %q or %q", c.Optimizer, SGD, Adam)
	case c.Precision != "" && c.Precision != FP32 && c.Precision != TF32 && c.Precision != BF16:
		return bad("precision %q: want %q, %q or %q", c.Precision, FP32, TF32, BF16)
	}
	w := max(c.In, c.Hidden, c.Classes)
	if int64(c.Batch)*int64(w) > maxElems || int64(w)*int64(w) > maxElems {
		return bad("matrices over %d elements", maxElems)
	}
	return nil
}

func (c Config) adam() bool { return c.Optimizer == Adam }

func (c Config) String() string {
	opt := c.Optimizer
	if opt == "" {
		opt = SGD
	}
	prec := ""
	if c.precision() != FP32 {
		prec = " " + c.Precision
	}
	return fmt.Sprintf("%d→%d×%d→%d batch %d %s%s lr %g seed %d", c.In, c.Hidden, c.Layers, c.Classes, c.Batch, opt, prec, c.LR, c.Seed)
}
