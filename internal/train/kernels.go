package train

import (
	"math"

	gg "github.com/gpugraph/gpugraph"
)

// The step's kernels other than GEMM. Elementwise kernels use grid-stride
// loops, so any grid covers any size; their Go bodies walk the block's
// share of the loop in contiguous runs of blockDim elements.

const (
	threads  = 256  // block size of the elementwise kernels
	maxGrid  = 4096 // cap on their grids (grid-stride loops cover the rest)
	colBlock = 32   // columns per block of colSum
)

// elemGrid is the grid of an elementwise kernel over n elements.
func elemGrid(n int) gg.Dim3 { return gg.Dim1(max(1, min((n+threads-1)/threads, maxGrid))) }

// stride calls f(lo, hi) for the ranges of [0, n) that block b of a
// grid-stride loop covers.
func stride(b gg.Block, n int, f func(lo, hi int)) {
	step := b.GridDim.X * b.Dim.X
	for lo := b.Idx.X * b.Dim.X; lo < n; lo += step {
		f(lo, min(lo+b.Dim.X, n))
	}
}

// biasAct adds bias[c] to every row of y (rows×cols) and, if relu is
// nonzero, clamps at zero: y = max(y + b, 0). One block per row (grid-stride
// over rows), threads across the columns.
var biasAct = &gg.Kernel{
	Name:   "train_bias_act",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		rows, cols, relu := a.Int(2), a.Int(3), a.Int32(4) != 0
		y := gg.Slice[float32](a.Ptr(0), rows*cols)
		bias := gg.Slice[float32](a.Ptr(1), cols)
		for r := b.Idx.X; r < rows; r += b.GridDim.X {
			row := y[r*cols:][:len(bias)]
			for c, bv := range bias {
				v := row[c] + bv
				if relu && v < 0 {
					v = 0
				}
				row[c] = v
			}
		}
	},
	CUDA: `extern "C" __global__ void train_bias_act(float* y, const float* bias, int rows, int cols, int relu) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float* row = y + (size_t)r * cols;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = row[c] + bias[c];
            row[c] = relu ? fmaxf(v, 0.0f) : v;
        }
    }
}`,
}

func launchBiasAct(s *gg.Stream, y, bias gg.DevicePtr, rows, cols int, relu bool) error {
	return s.Launch(biasAct, gg.Dim1(min(rows, maxGrid)), gg.Dim1(threads), y, bias, rows, cols, b2i(relu))
}

// reluBwd masks a gradient with the ReLU's derivative, from the ReLU's
// output: dy[i] = y[i] > 0 ? dy[i] : 0.
var reluBwd = &gg.Kernel{
	Name:   "train_relu_bwd",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		dy, y := gg.Slice[float32](a.Ptr(0), n), gg.Slice[float32](a.Ptr(1), n)
		stride(b, n, func(lo, hi int) {
			d, v := dy[lo:hi], y[lo:hi]
			for i := range d {
				if !(v[i] > 0) {
					d[i] = 0
				}
			}
		})
	},
	CUDA: `extern "C" __global__ void train_relu_bwd(float* dy, const float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (!(y[i] > 0.0f)) dy[i] = 0.0f;
}`,
}

func launchReluBwd(s *gg.Stream, dy, y gg.DevicePtr, n int) error {
	return s.Launch(reluBwd, elemGrid(n), gg.Dim1(threads), dy, y, n)
}

// colSum writes out[c] = Σ_r x[r][c] for x of rows×cols: the bias gradient.
// A block covers 32 columns with 32×8 threads: thread (tx, ty) sums rows
// ty, ty+8, ... of its column, then the eight partial sums are added in
// order, so the result is deterministic.
var colSum = &gg.Kernel{
	Name:   "train_col_sum",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		rows, cols := a.Int(2), a.Int(3)
		x, out := gg.Slice[float32](a.Ptr(0), rows*cols), gg.Slice[float32](a.Ptr(1), cols)
		c0 := b.Idx.X * colBlock
		if c0 >= cols {
			return
		}
		var acc [colBlock]float32
		sums := acc[:min(colBlock, cols-c0)]
		for r := range rows {
			row := x[r*cols+c0:][:len(sums)]
			for c, v := range row {
				sums[c] += v
			}
		}
		copy(out[c0:], sums)
	},
	CUDA: `extern "C" __global__ void train_col_sum(const float* x, float* out, int rows, int cols) {
    __shared__ float part[8][32];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int c = blockIdx.x * 32 + tx;
    float s = 0.0f;
    if (c < cols)
        for (int r = ty; r < rows; r += 8) s += x[(size_t)r * cols + c];
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < cols) {
        float t = part[0][tx];
        for (int k = 1; k < 8; k++) t += part[k][tx];
        out[c] = t;
    }
}`,
}

func launchColSum(s *gg.Stream, x, out gg.DevicePtr, rows, cols int) error {
	return s.Launch(colSum, gg.Dim1((cols+colBlock-1)/colBlock), gg.Dim1(colBlock*8), x, out, rows, cols)
}

// softmaxXent turns logits (rows×cols) into the gradient of the mean
// cross-entropy, in place — z[r][c] = (softmax(z[r])[c] - [c == y[r]]) /
// rows — and writes that mean to loss[0]. One block of 256 threads: thread
// t handles rows t, t+256, ..., and a tree in shared memory adds the
// per-thread losses in a fixed order. A label outside [0, cols) makes the
// loss NaN.
var softmaxXent = &gg.Kernel{
	Name:   "train_softmax_xent",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		rows, cols := a.Int(3), a.Int(4)
		z := gg.Slice[float32](a.Ptr(0), rows*cols)
		y := gg.Slice[int32](a.Ptr(1), rows)
		inv := 1 / float32(rows)
		var part [threads]float32
		for t := range part {
			for r := t; r < rows; r += threads {
				row := z[r*cols:][:cols]
				mx := row[0]
				for _, v := range row {
					mx = max(mx, v)
				}
				label := int(y[r])
				var l float32
				if label >= 0 && label < cols {
					l = mx - row[label] // -log softmax[label] = log(sum) + mx - z[label]
				} else {
					l = float32(math.NaN())
				}
				var sum float32
				for c, v := range row {
					e := float32(math.Exp(float64(v - mx)))
					row[c] = e
					sum += e
				}
				part[t] += l + float32(math.Log(float64(sum)))
				for c := range row {
					g := row[c] / sum
					if c == label {
						g--
					}
					row[c] = g * inv
				}
			}
		}
		for h := threads / 2; h > 0; h /= 2 {
			for t := range h {
				part[t] += part[t+h]
			}
		}
		gg.Slice[float32](a.Ptr(2), 1)[0] = part[0] * inv
	},
	CUDA: `extern "C" __global__ void train_softmax_xent(float* z, const int* y, float* loss, int rows, int cols) {
    __shared__ float part[256]; // blockDim.x: 256
    const int t = threadIdx.x;
    const float inv = 1.0f / (float)rows;
    float acc = 0.0f;
    for (int r = t; r < rows; r += blockDim.x) {
        float* row = z + (size_t)r * cols;
        float mx = row[0];
        for (int c = 1; c < cols; c++) mx = fmaxf(mx, row[c]);
        const int label = y[r];
        // -log softmax[label] = log(sum) + mx - z[label]
        float l = (label >= 0 && label < cols) ? mx - row[label] : __int_as_float(0x7fffffff); // NaN
        float sum = 0.0f;
        for (int c = 0; c < cols; c++) { float e = expf(row[c] - mx); row[c] = e; sum += e; }
        acc += l + logf(sum);
        for (int c = 0; c < cols; c++) {
            float g = row[c] / sum;
            if (c == label) g -= 1.0f;
            row[c] = g * inv;
        }
    }
    part[t] = acc;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) part[t] += part[t + h];
        __syncthreads();
    }
    if (t == 0) loss[0] = part[0] * inv;
}`,
}

func launchSoftmaxXent(s *gg.Stream, z, y, loss gg.DevicePtr, rows, cols int) error {
	return s.Launch(softmaxXent, gg.Dim1(1), gg.Dim1(threads), z, y, loss, rows, cols)
}

// sgdUpdate applies w[i] -= lr·g[i].
var sgdUpdate = &gg.Kernel{
	Name:   "train_sgd",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Float32},
	Go: func(b gg.Block, a gg.Args) {
		n, lr := a.Int(2), a.Float32(3)
		w, g := gg.Slice[float32](a.Ptr(0), n), gg.Slice[float32](a.Ptr(1), n)
		stride(b, n, func(lo, hi int) {
			wr, gr := w[lo:hi], g[lo:hi]
			for i := range wr {
				wr[i] -= lr * gr[i]
			}
		})
	},
	CUDA: `extern "C" __global__ void train_sgd(float* w, const float* g, int n, float lr) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        w[i] -= lr * g[i];
}`,
}

// adamTick increments Adam's step count, an int32 in device memory. It runs
// once per step before the updates, so a captured step counts on replay.
var adamTick = &gg.Kernel{
	Name:   "train_adam_tick",
	Params: []gg.ParamType{gg.Pointer},
	Go:     func(b gg.Block, a gg.Args) { gg.Slice[int32](a.Ptr(0), 1)[0]++ },
	CUDA: `extern "C" __global__ void train_adam_tick(int* t) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *t += 1;
}`,
}

// adamUpdate applies one Adam step with bias correction (PyTorch's form):
//
//	m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
//	w -= (lr / (1-β1^t)) · m / (sqrt(v) / sqrt(1-β2^t) + ε)
//
// with t read from device memory (adamTick's counter).
var adamUpdate = &gg.Kernel{
	Name: "train_adam",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Pointer, gg.Pointer,
		gg.Int32, gg.Float32, gg.Float32, gg.Float32, gg.Float32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(5)
		w, g := gg.Slice[float32](a.Ptr(0), n), gg.Slice[float32](a.Ptr(1), n)
		m, v := gg.Slice[float32](a.Ptr(2), n), gg.Slice[float32](a.Ptr(3), n)
		t := float64(gg.Slice[int32](a.Ptr(4), 1)[0])
		lr, b1, b2, eps := a.Float32(6), a.Float32(7), a.Float32(8), a.Float32(9)
		stepSize := lr / float32(1-math.Pow(float64(b1), t))
		bc2 := float32(math.Sqrt(1 - math.Pow(float64(b2), t)))
		stride(b, n, func(lo, hi int) {
			wr, gr, mr, vr := w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
			for i := range wr {
				gi := gr[i]
				mi := b1*mr[i] + (1-b1)*gi
				vi := b2*vr[i] + (1-b2)*gi*gi
				mr[i], vr[i] = mi, vi
				wr[i] -= stepSize * mi / (float32(math.Sqrt(float64(vi)))/bc2 + eps)
			}
		})
	},
	CUDA: `extern "C" __global__ void train_adam(float* w, const float* g, float* m, float* v, const int* step,
                                  int n, float lr, float b1, float b2, float eps) {
    const float t = (float)*step;
    const float stepSize = lr / (1.0f - powf(b1, t));
    const float bc2 = sqrtf(1.0f - powf(b2, t));
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float gi = g[i];
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] -= stepSize * mi / (sqrtf(vi) / bc2 + eps);
    }
}`,
}
