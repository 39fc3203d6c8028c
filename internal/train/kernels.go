package train

import (
	"math"
	"sync/atomic"

	gg "github.com/gpugraph/gpugraph"
)

// The step's kernels other than GEMM. Elementwise kernels use grid-stride
// loops, so any grid covers any size; their Go bodies walk the block's
// share of the loop in contiguous runs of blockDim elements. Where a
// kernel sums across threads, the Go body sums in the CUDA body's order,
// so that the two agree to the rounding of their exp and log.
//
// bfloat16 buffers are arrays of uint16 (bf16_t on CUDA); a kernel that
// reads or writes either float32 or bfloat16 takes a flag per buffer.

const (
	threads       = 256  // block size of the elementwise kernels
	maxGrid       = 4096 // cap on their grids (grid-stride loops cover the rest)
	colBlock      = 32   // columns per block of colSum and reluBwdDB
	rowsPerBlock  = 8    // softmaxXent: a warp per row, 8 warps a block
	maxLossBlocks = 1024 // softmaxXent's grid cap (its partial sums' room)
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

// biasAct writes out = y + b (b added to every row of y, rows×cols
// float32) and, if relu is nonzero, clamps at zero: out = max(y + b, 0).
// out is float32 (it may be y itself) or, with outBF16, bfloat16: the
// layer's output as the next GEMM reads it. b is float32 or, with
// biasBF16, bfloat16, widened exactly before the float32 add (the bias
// cuBLASLt's epilogue adds to a bfloat16 output is bfloat16:
// EmulatedFused). One block per row (grid-stride over rows), threads
// across the columns.
var biasAct = &gg.Kernel{
	Name:   "train_bias_act",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32, gg.Int32, gg.Int32, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		rows, cols, relu, bf := a.Int(3), a.Int(4), a.Int32(5) != 0, a.Int32(6) != 0
		y := gg.Slice[float32](a.Ptr(0), rows*cols)
		bias := tensor(a, 2, a.Int32(7) != 0, cols)
		var of []float32
		var oh []uint16
		if bf {
			oh = gg.Slice[uint16](a.Ptr(1), rows*cols)
		} else {
			of = gg.Slice[float32](a.Ptr(1), rows*cols)
		}
		for r := b.Idx.X; r < rows; r += b.GridDim.X {
			row := y[r*cols:][:cols]
			for c := range row {
				v := row[c] + bias.at(c)
				if relu && v < 0 {
					v = 0
				}
				if bf {
					oh[r*cols+c] = toBF16(v)
				} else {
					of[r*cols+c] = v
				}
			}
		}
	},
	CUDA: precCUDA + `extern "C" __global__ void train_bias_act(const float* y, void* out, const void* bias, int rows, int cols, int relu, int outBF16,
                                      int biasBF16) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const size_t base = (size_t)r * cols;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            const float b = biasBF16 ? bf16_to_f32(((const bf16_t*)bias)[c]) : ((const float*)bias)[c];
            float v = y[base + c] + b;
            if (relu) v = fmaxf(v, 0.0f);
            if (outBF16) ((bf16_t*)out)[base + c] = f32_to_bf16(v);
            else ((float*)out)[base + c] = v;
        }
    }
}`,
}

func launchBiasAct(s *gg.Stream, y, out, bias gg.DevicePtr, biasBF16 bool, rows, cols int, relu, outBF16 bool) error {
	return s.Launch(biasAct, gg.Dim1(min(rows, maxGrid)), gg.Dim1(threads), y, out, bias, rows, cols, b2i(relu), b2i(outBF16), b2i(biasBF16))
}

// castBF16 rounds n float32 values to bfloat16: out[i] = bf16(x[i]). It
// makes a batch's bfloat16 copy, and the weights' shadow when they are
// written from the host.
var castBF16 = &gg.Kernel{
	Name:   "train_cast_bf16",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		x, out := gg.Slice[float32](a.Ptr(0), n), gg.Slice[uint16](a.Ptr(1), n)
		stride(b, n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				out[i] = toBF16(x[i])
			}
		})
	},
	CUDA: precCUDA + `extern "C" __global__ void train_cast_bf16(const float* x, bf16_t* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = f32_to_bf16(x[i]);
}`,
}

func launchCastBF16(s *gg.Stream, x, out gg.DevicePtr, n int) error {
	return s.Launch(castBF16, elemGrid(n), gg.Dim1(threads), x, out, n)
}

// colSum writes out[c] = Σ_r x[r][c] for x of rows×cols, float32 or (with
// xBF16) bfloat16, summed in float32: the output layer's bias gradient. A
// block covers 32 columns with 32×8 threads: thread (tx, ty) sums rows ty,
// ty+8, ... of its column, then the eight partial sums are added in order,
// so the result is deterministic.
var colSum = &gg.Kernel{
	Name:   "train_col_sum",
	Params: []gg.ParamType{gg.Pointer, gg.Int32, gg.Pointer, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		rows, cols := a.Int(3), a.Int(4)
		x := tensor(a, 0, a.Int32(1) != 0, rows*cols)
		out := gg.Slice[float32](a.Ptr(2), cols)
		c0 := b.Idx.X * colBlock
		if c0 >= cols {
			return
		}
		nc := min(colBlock, cols-c0)
		var part [rowsPerBlock][colBlock]float32
		for r := range rows {
			p := &part[r%rowsPerBlock]
			for c := range nc {
				p[c] += x.at(r*cols + c0 + c)
			}
		}
		sumParts(out[c0:c0+nc], &part)
	},
	CUDA: precCUDA + `extern "C" __global__ void train_col_sum(const void* x, int xBF16, float* out, int rows, int cols) {
    __shared__ float part[8][32];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int c = blockIdx.x * 32 + tx;
    float s = 0.0f;
    if (c < cols)
        for (int r = ty; r < rows; r += 8) {
            const size_t i = (size_t)r * cols + c;
            s += xBF16 ? bf16_to_f32(((const bf16_t*)x)[i]) : ((const float*)x)[i];
        }
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < cols) {
        float t = part[0][tx];
        for (int k = 1; k < 8; k++) t += part[k][tx];
        out[c] = t;
    }
}`,
}

func launchColSum(s *gg.Stream, x gg.DevicePtr, xBF16 bool, out gg.DevicePtr, rows, cols int) error {
	return s.Launch(colSum, gg.Dim1((cols+colBlock-1)/colBlock), gg.Dim1(colBlock*rowsPerBlock), x, b2i(xBF16), out, rows, cols)
}

// sumParts writes out[c] = part[0][c] + part[1][c] + ... in that order, as
// thread (c, 0) of colSum and reluBwdDB does.
func sumParts(out []float32, part *[rowsPerBlock][colBlock]float32) {
	for c := range out {
		t := part[0][c]
		for k := 1; k < rowsPerBlock; k++ {
			t += part[k][c]
		}
		out[c] = t
	}
}

// tensor is a kernel's view of a float32 or bfloat16 buffer argument.
func tensor(a gg.Args, arg int, bf16 bool, n int) operand {
	if bf16 {
		return operand{h: gg.Slice[uint16](a.Ptr(arg), n)}
	}
	return operand{f: gg.Slice[float32](a.Ptr(arg), n)}
}

// reluBwd is the backward pass through a hidden layer's ReLU: from the
// gradient of the layer's output dA (n float32) and the layer's output act
// (float32 or bfloat16), it writes the gradient of the pre-activation
// dz = act > 0 ? dA : 0, as float32 (possibly over dA itself) or bfloat16
// (what the layer's GEMMs read; possibly over a bfloat16 act itself: each
// element is read before it is written). Elementwise over the whole grid; the bias
// gradient is colSum's, of dz as written (launchReluBwdDB). One kernel
// doing both, with colSum's grid of a block per 32 columns, made the
// reference model's FP32 step 25 % slower on an H100 (419 → 523 µs,
// 5 alternated runs, the fused kernel's share not measured apart): each of
// its 32 blocks walked 512 rows in turn, loading dA only once the layer's
// output had arrived, two memory latencies a row.
var reluBwd = &gg.Kernel{
	Name:   "train_relu_bwd",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32, gg.Pointer, gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(5)
		dA := gg.Slice[float32](a.Ptr(0), n)
		act := tensor(a, 1, a.Int32(2) != 0, n)
		dzBF := a.Int32(4) != 0
		dz := tensor(a, 3, dzBF, n)
		stride(b, n, func(lo, hi int) {
			if act.h == nil && !dzBF { // FP32 and TF32: the common case, kept tight
				ar, zr, dr := act.f[lo:hi], dz.f[lo:hi], dA[lo:hi]
				for i, y := range ar {
					var d float32
					if y > 0 {
						d = dr[i]
					}
					zr[i] = d
				}
				return
			}
			for i := lo; i < hi; i++ {
				var d float32
				if act.at(i) > 0 {
					d = dA[i]
				}
				if dzBF {
					dz.h[i] = toBF16(d)
				} else {
					dz.f[i] = d
				}
			}
		})
	},
	CUDA: precCUDA + `extern "C" __global__ void train_relu_bwd(const float* dA, const void* act, int actBF16, void* dz, int dzBF16, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float y = actBF16 ? bf16_to_f32(((const bf16_t*)act)[i]) : ((const float*)act)[i];
        const float g = dA[i]; // loaded whatever y is: not a load that waits for another
        const float d = y > 0.0f ? g : 0.0f;
        if (dzBF16) ((bf16_t*)dz)[i] = f32_to_bf16(d);
        else ((float*)dz)[i] = d;
    }
}`,
}

// launchReluBwdDB writes dz from dA through the ReLU (reluBwd) and the
// bias gradient db[c] = Σ_r dz[r][c] of dz as written (colSum): two
// kernels.
func launchReluBwdDB(s *gg.Stream, dA, act gg.DevicePtr, actBF16 bool, dz gg.DevicePtr, dzBF16 bool, db gg.DevicePtr, rows, cols int) error {
	if err := launchReluBwd(s, dA, act, actBF16, dz, dzBF16, rows*cols); err != nil {
		return err
	}
	return launchColSum(s, dz, dzBF16, db, rows, cols)
}

// launchReluBwd runs reluBwd alone over n elements.
func launchReluBwd(s *gg.Stream, dA, act gg.DevicePtr, actBF16 bool, dz gg.DevicePtr, dzBF16 bool, n int) error {
	return s.Launch(reluBwd, elemGrid(n), gg.Dim1(threads), dA, act, b2i(actBF16), dz, b2i(dzBF16), n)
}

// softmaxXent computes the mean cross-entropy of logits z (rows×cols
// float32) against labels y and its gradient, dz[r][c] =
// (softmax(z[r])[c] - [c == y[r]]) / rows, written as float32 (dz may be z
// itself) or, with dzBF16, bfloat16; the mean goes to loss[0]. A label
// outside [0, cols) makes the loss NaN.
//
// A warp per row, eight rows a block: lane j takes columns j, j+32, ...,
// the row's max and sum of exponentials are reduced across the warp by a
// butterfly of shuffles (every lane ends with the same bits). Each block
// writes the sum of its rows' losses (warps in order) to partial[block];
// the last block to finish, found by a counter at done that it resets for
// the next launch, adds the partials in a fixed order (256 strided sums,
// then a tree) and writes the mean. The result does not depend on which
// block finishes last: it is deterministic.
var softmaxXent = &gg.Kernel{
	Name: "train_softmax_xent",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32, gg.Pointer, gg.Pointer, gg.Pointer,
		gg.Int32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		rows, cols := a.Int(7), a.Int(8)
		z := gg.Slice[float32](a.Ptr(0), rows*cols)
		y := gg.Slice[int32](a.Ptr(1), rows)
		dz := tensor(a, 2, a.Int32(3) != 0, rows*cols)
		partial := gg.Slice[float32](a.Ptr(5), b.GridDim.X)
		done := &gg.Slice[uint32](a.Ptr(6), 1)[0]
		inv := 1 / float32(rows)
		var warps [rowsPerBlock]float32
		for w := range warps {
			for r := b.Idx.X*rowsPerBlock + w; r < rows; r += b.GridDim.X * rowsPerBlock {
				warps[w] += xentRow(z[r*cols:][:cols], int(y[r]), inv, &dz, r*cols)
			}
		}
		s := warps[0]
		for _, v := range warps[1:] {
			s += v
		}
		partial[b.Idx.X] = s
		if atomic.AddUint32(done, 1) != uint32(b.GridDim.X) {
			return
		}
		// The last block: 256 strided sums, then a tree.
		var red [threads]float32
		for t := range red {
			for i := t; i < len(partial); i += threads {
				red[t] += partial[i]
			}
		}
		for h := threads / 2; h > 0; h /= 2 {
			for t := range h {
				red[t] += red[t+h]
			}
		}
		gg.Slice[float32](a.Ptr(4), 1)[0] = red[0] * inv
		atomic.StoreUint32(done, 0)
	},
	CUDA: precCUDA + `
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
extern "C" __global__ void __launch_bounds__(256)
train_softmax_xent(const float* z, const int* y, void* dz, int dzBF16, float* loss, float* partial, unsigned* done,
                   int rows, int cols) {
    __shared__ float part[256];
    __shared__ int last;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float inv = 1.0f / (float)rows;
    float acc = 0.0f; // this warp's rows' losses, the same in every lane
    for (int r = blockIdx.x * 8 + warp; r < rows; r += gridDim.x * 8) {
        const float* row = z + (size_t)r * cols;
        const int label = y[r];
        const bool ok = label >= 0 && label < cols;
        const float zl = ok ? row[label] : 0.0f; // read before any lane writes (in place)
        float mx = __int_as_float(0xff800000); // -inf
        for (int c = lane; c < cols; c += 32) mx = fmaxf(mx, row[c]);
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int c = lane; c < cols; c += 32) sum += expf(row[c] - mx);
        sum = warp_sum(sum);
        // -log softmax[label] = log(sum) + mx - z[label]
        acc += ok ? logf(sum) + mx - zl : __int_as_float(0x7fffffff); // NaN
        __syncwarp();
        for (int c = lane; c < cols; c += 32) {
            float g = expf(row[c] - mx) / sum;
            if (c == label) g -= 1.0f;
            g *= inv;
            const size_t i = (size_t)r * cols + c;
            if (dzBF16) ((bf16_t*)dz)[i] = f32_to_bf16(g);
            else ((float*)dz)[i] = g;
        }
    }
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = part[0];
        for (int w = 1; w < 8; w++) s += part[w];
        partial[blockIdx.x] = s;
        __threadfence(); // the partial is visible before the count says so
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    // The last block: every partial is written. 256 strided sums, a tree.
    const volatile float* p = partial;
    float s = 0.0f;
    for (int i = threadIdx.x; i < (int)gridDim.x; i += 256) s += p[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if (threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        loss[0] = part[0] * inv;
        *done = 0; // ready for the next launch
    }
}`,
}

// xentRow is one row of softmaxXent as its warp computes it: it writes the
// row's gradient to dz at off and returns the row's loss.
func xentRow(row []float32, label int, inv float32, dz *operand, off int) float32 {
	const lanes = 32
	var lane [lanes]float32
	for j := range lane {
		lane[j] = float32(math.Inf(-1))
	}
	for c, v := range row {
		lane[c%lanes] = fmaxf(lane[c%lanes], v)
	}
	for o := lanes / 2; o > 0; o /= 2 {
		for j := range o {
			lane[j] = fmaxf(lane[j], lane[j+o])
		}
	}
	mx := lane[0]
	clear(lane[:])
	for c, v := range row {
		lane[c%lanes] += float32(math.Exp(float64(v - mx)))
	}
	for o := lanes / 2; o > 0; o /= 2 {
		for j := range o {
			lane[j] += lane[j+o]
		}
	}
	sum := lane[0]
	l := float32(math.NaN())
	if label >= 0 && label < len(row) {
		l = float32(math.Log(float64(sum))) + mx - row[label]
	}
	for c, v := range row {
		g := float32(math.Exp(float64(v-mx))) / sum
		if c == label {
			g--
		}
		g *= inv
		if dz.h != nil {
			dz.h[off+c] = toBF16(g)
		} else {
			dz.f[off+c] = g
		}
	}
	return l
}

// fmaxf is CUDA's fmaxf: the larger, or the one that is not NaN.
func fmaxf(a, b float32) float32 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	case b > a:
		return b
	}
	return a
}

// lossGrid is softmaxXent's grid for rows rows.
func lossGrid(rows int) int { return max(1, min((rows+rowsPerBlock-1)/rowsPerBlock, maxLossBlocks)) }

// launchSoftmaxXent runs softmaxXent with its partial sums and counter in
// the model's state (st).
func launchSoftmaxXent(s *gg.Stream, z, y, dz gg.DevicePtr, dzBF16 bool, loss, st gg.DevicePtr, rows, cols int) error {
	return s.Launch(softmaxXent, gg.Dim1(lossGrid(rows)), gg.Dim1(threads), z, y, dz, b2i(dzBF16), loss,
		st+4*statePartials, st+4*stateLossDone, rows, cols)
}

// The model's state words (Model.state, int32/uint32/float32 each): Adam's
// step count and its update's arrival counter, softmaxXent's counter, and
// its per-block partial sums.
const (
	stateAdamStep = 0
	stateAdamDone = 1
	stateLossDone = 2
	statePartials = 4
	stateWords    = statePartials + maxLossBlocks
)

// sgdUpdate applies w[i] -= lr·g[i] and, where shadow is not nil, writes
// the new weight's bfloat16 copy there (the next step's GEMMs read it).
var sgdUpdate = &gg.Kernel{
	Name:   "train_sgd",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32, gg.Float32},
	Go: func(b gg.Block, a gg.Args) {
		n, lr := a.Int(3), a.Float32(4)
		w, g := gg.Slice[float32](a.Ptr(0), n), gg.Slice[float32](a.Ptr(1), n)
		var sh []uint16
		if a.Ptr(2) != 0 {
			sh = gg.Slice[uint16](a.Ptr(2), n)
		}
		stride(b, n, func(lo, hi int) {
			wr, gr := w[lo:hi], g[lo:hi]
			for i := range wr {
				wr[i] -= lr * gr[i]
			}
			if sh != nil {
				for i, v := range wr {
					sh[lo+i] = toBF16(v)
				}
			}
		})
	},
	CUDA: precCUDA + `extern "C" __global__ void train_sgd(float* w, const float* g, bf16_t* shadow, int n, float lr) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float wi = w[i] - lr * g[i];
        w[i] = wi;
        if (shadow) shadow[i] = f32_to_bf16(wi);
    }
}`,
}

// sgdBias finishes a plain SGD step whose weight updates the dW GEMMs made
// (W ← W − lr·dZᵀ·a, alpha −lr and beta 1 on W): every bias b −= lr·db
// from the bias gradients at db (the layers' one after another) and, with
// a shadow, the bfloat16 copy of every parameter. tab holds, per layer, 4
// int32s: its first parameter, its first bias (both in the flat layout),
// its bias count and its first bias gradient in db. n is the bias
// gradients (no shadow) or the parameters (shadow) the kernel walks; the
// arithmetic of a bias is train_sgd's.
var sgdBias = &gg.Kernel{
	Name:   "train_sgd_bias",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Pointer, gg.Int32, gg.Int32, gg.Float32},
	Go: func(b gg.Block, a gg.Args) {
		layers, n, lr := a.Int(4), a.Int(5), a.Float32(6)
		tab := gg.Slice[int32](a.Ptr(3), 4*layers)
		var total int
		for l := range layers {
			total += int(tab[4*l+2])
		}
		db := gg.Slice[float32](a.Ptr(2), total)
		if a.Ptr(1) == 0 { // n bias gradients
			w := gg.Slice[float32](a.Ptr(0), int(tab[4*layers-3]+tab[4*layers-2]))
			stride(b, n, func(lo, hi int) {
				l := 0
				for i := lo; i < hi; i++ {
					for int(tab[4*l+3]+tab[4*l+2]) <= i {
						l++
					}
					w[int(tab[4*l+1])+i-int(tab[4*l+3])] -= lr * db[i]
				}
			})
			return
		}
		w, sh := gg.Slice[float32](a.Ptr(0), n), gg.Slice[uint16](a.Ptr(1), n)
		stride(b, n, func(lo, hi int) {
			l := 0
			for i := lo; i < hi; i++ {
				for l+1 < layers && int(tab[4*(l+1)]) <= i {
					l++
				}
				if j := i - int(tab[4*l+1]); j >= 0 {
					w[i] -= lr * db[int(tab[4*l+3])+j]
				}
				sh[i] = toBF16(w[i])
			}
		})
	},
	CUDA: precCUDA + `extern "C" __global__ void train_sgd_bias(float* w, bf16_t* shadow, const float* db, const int* tab, int layers, int n, float lr) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int l = 0;
        if (!shadow) {
            while (tab[4 * l + 3] + tab[4 * l + 2] <= i) l++;
            const int p = tab[4 * l + 1] + i - tab[4 * l + 3];
            w[p] = w[p] - lr * db[i];
        } else {
            while (l + 1 < layers && tab[4 * (l + 1)] <= i) l++;
            const int j = i - tab[4 * l + 1];
            float wi = w[i];
            if (j >= 0) {
                wi = wi - lr * db[tab[4 * l + 3] + j];
                w[i] = wi;
            }
            shadow[i] = f32_to_bf16(wi);
        }
    }
}`,
}

// adamUpdate applies one Adam step with bias correction (PyTorch's form):
//
//	m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
//	w -= (lr / (1-β1^t)) · m / (sqrt(v) / sqrt(1-β2^t) + ε)
//
// and, where shadow is not nil, writes the new weight's bfloat16 copy.
// The step count t lives in device memory, state[0], so a captured step
// counts on replay. A launch with tick set uses t = state[0]+1 and stores
// it once every block is done (the last block to arrive, by the counter
// state[1], writes it and resets the counter): the step's first update
// ticks, later ones of the same step (one per layer when data-parallel
// training applies each layer's gradient as it is synchronized) read the
// count it left.
var adamUpdate = &gg.Kernel{
	Name: "train_adam",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Pointer, gg.Pointer, gg.Pointer, gg.Pointer,
		gg.Int32, gg.Float32, gg.Float32, gg.Float32, gg.Float32, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(6)
		w, g := gg.Slice[float32](a.Ptr(0), n), gg.Slice[float32](a.Ptr(1), n)
		m, v := gg.Slice[float32](a.Ptr(2), n), gg.Slice[float32](a.Ptr(3), n)
		state := gg.Slice[int32](a.Ptr(4), 2)
		var sh []uint16
		if a.Ptr(5) != 0 {
			sh = gg.Slice[uint16](a.Ptr(5), n)
		}
		lr, b1, b2, eps, tick := a.Float32(7), a.Float32(8), a.Float32(9), a.Float32(10), a.Int32(11)
		step := state[0] + tick
		t := float64(step)
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
				if sh != nil {
					sh[lo+i] = toBF16(wr[i])
				}
			}
		})
		if tick != 0 && atomic.AddInt32(&state[1], 1) == int32(b.GridDim.X) {
			state[0] = step
			atomic.StoreInt32(&state[1], 0)
		}
	},
	CUDA: precCUDA + `extern "C" __global__ void train_adam(float* w, const float* g, float* m, float* v, int* state, bf16_t* shadow,
                                  int n, float lr, float b1, float b2, float eps, int tick) {
    const int step = state[0] + tick;
    const float t = (float)step;
    const float stepSize = lr / (1.0f - powf(b1, t));
    const float bc2 = sqrtf(1.0f - powf(b2, t));
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float gi = g[i];
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float wi = w[i] - stepSize * mi / (sqrtf(vi) / bc2 + eps);
        w[i] = wi;
        if (shadow) shadow[i] = f32_to_bf16(wi);
    }
    if (tick) {
        __syncthreads(); // every thread of the block has read state[0]
        if (threadIdx.x == 0 && atomicAdd(&state[1], 1) == (int)gridDim.x - 1) {
            state[0] = step; // every block has read the old count
            state[1] = 0;
        }
    }
}`,
}
