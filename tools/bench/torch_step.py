#!/usr/bin/env python3
"""torch_step.py: PyTorch's side of `gpugraph train --backend cuda --model reference`.

The same training step as internal/train's reference model, captured once with
torch.cuda.graphs and replayed, timed as cmd/gpugraph/train.go times its
graph mode, so the two step times compare:

  model      MLP 256 -> 1024 x4 (each + ReLU) -> 10, batch 512, fp32
             (train.Reference: In 256, Hidden 1024, Layers 4, Classes 10);
             weights Kaiming-uniform U(+-sqrt(6/in)), biases zero (NewModel)
  loss       mean softmax cross-entropy (F.cross_entropy)
  optimizer  plain SGD, lr 0.02, no momentum, no weight decay
  precision  FP32 GEMMs without TF32: gpugraph's cuBLAS handle keeps
             CUBLAS_DEFAULT_MATH (cmd/gpugraph/traingemm.go never sets a math
             mode; its banner says "FP32"), so here allow_tf32 is False and the
             float32 matmul precision "highest". --tf32 turns TF32 on, to see
             what it would buy (then the TF32 tensor peak is printed as well).
  data       a Gaussian mixture like train.NewDataset (class centroids
             N(0, 0.25^2) per coordinate, samples centroid + N(0, 1)), 32
             distinct batches cycled, kept in pageable host memory; before
             every step the batch is copied into the static input and target
             with non_blocking=True (cudaMemcpyAsync from pageable memory, as
             Static.Load's cuMemcpyHtoDAsync from Go memory). Targets are
             int64 here (F.cross_entropy's), int32 in Go: 4 KB against 2 KB.
  capture    as PyTorch's docs show for whole-network capture: --warmup (3)
             real training steps on a side stream, then one step captured
             with torch.cuda.graph, replayed for every later step.
  timing     as gpugraph train: the steps after the warm-up, up to --steps
             (300) in all, run in chunks that end at multiples of --every (50):
             the clock is read before a chunk's first batch copy and after
             the loss is read back (loss.item(): a copy and a synchronize, as
             Static.ReadLoss); the step time is the per-step time of the
             chunks, sorted, element len/2 (train.go's median). GPU time:
             CUDA events recorded on the step stream around each chunk's
             steps (copies and replays; median per step likewise), and around
             --gpu-steps (200) replays queued back to back without copies or
             reads, where the GPU never waits for the host (GPU time of the
             step alone).
  FLOPs      forward 2*B*sum(in*out) over the five linear layers, backward
             twice that (dW and dX; strictly, layer 0's dX is not computed, in
             either implementation: flops_exact); the time that needs at the
             H100 SXM peaks: 67 TFLOP/s FP32 (non-tensor), and with --tf32
             495 TFLOP/s TF32 tensor (dense).

One parseable line, first word "torch_step", then key=value pairs:

  torch_step model=reference ... wall_us=... gpu_chunk_us=... gpu_replay_us=... flops=... fp32_peak_us=...

--check runs two eager steps on the CPU instead (no CUDA needed): a smoke
test of the model, the data and the FLOP count.
"""
import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F

IN, HIDDEN, LAYERS, CLASSES, BATCH, LR, SPREAD = 256, 1024, 4, 10, 512, 0.02, 0.25
FP32_PEAK = 67e12  # H100 SXM, FP32 non-tensor, FLOP/s
TF32_PEAK = 495e12  # H100 SXM, TF32 tensor core, dense, FLOP/s


def dims():
    ins = [IN] + [HIDDEN] * LAYERS
    outs = [HIDDEN] * LAYERS + [CLASSES]
    return list(zip(ins, outs))


def flops():
    fwd = 2 * BATCH * sum(i * o for i, o in dims())
    exact = fwd + 2 * fwd - 2 * BATCH * IN * HIDDEN  # no dX for the input
    return 3 * fwd, exact


def make_model(device, gen):
    layers = []
    for l, (i, o) in enumerate(dims()):
        lin = torch.nn.Linear(i, o, device=device, dtype=torch.float32)
        with torch.no_grad():
            bound = math.sqrt(6.0 / i)
            w = (torch.rand(o, i, generator=gen, dtype=torch.float32) * 2 - 1) * bound
            lin.weight.copy_(w)
            lin.bias.zero_()
        layers.append(lin)
        if l < LAYERS:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def make_data(batches, gen):
    mu = torch.randn(CLASSES, IN, generator=gen) * SPREAD
    y = torch.randint(0, CLASSES, (batches * BATCH,), generator=gen, dtype=torch.int64)
    x = mu[y] + torch.randn(batches * BATCH, IN, generator=gen)
    return x.view(batches, BATCH, IN).contiguous(), y.view(batches, BATCH).contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300, help="training steps in all, warm-up included (train --steps)")
    ap.add_argument("--every", type=int, default=50, help="timed chunks end at multiples of this (train --every)")
    ap.add_argument("--warmup", type=int, default=3, help="eager steps on a side stream before the capture (train --warmup)")
    ap.add_argument("--batches", type=int, default=32, help="distinct batches, cycled (train --batches)")
    ap.add_argument("--gpu-steps", type=int, default=200, help="replays queued back to back for the GPU time")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in the GEMMs (gpugraph's cuBLAS path does not)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="two eager steps on the CPU: a smoke test without CUDA")
    a = ap.parse_args()
    if a.steps < 1 or a.every < 1 or a.warmup < 1 or a.warmup >= a.steps or a.batches < 1 or a.gpu_steps < 1:
        sys.exit("torch_step: need steps >= 1, every >= 1, 1 <= warmup < steps, batches >= 1, gpu-steps >= 1")

    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.set_float32_matmul_precision("high" if a.tf32 else "highest")
    gen = torch.Generator().manual_seed(a.seed)
    fl, fl_exact = flops()

    xs, ys = make_data(a.batches, gen)
    if a.check:
        model = make_model("cpu", gen)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        losses = []
        for i in range(2):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xs[i]), ys[i])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"torch_step check=cpu torch={torch.__version__} losses={','.join(f'{l:.4f}' for l in losses)} "
              f"params={sum(p.numel() for p in model.parameters())} flops={fl:.4g} flops_exact={fl_exact:.4g} "
              f"fp32_peak_us={fl / FP32_PEAK * 1e6:.1f}")
        return

    if not torch.cuda.is_available():
        sys.exit("torch_step: no CUDA device (--check runs on the CPU)")
    dev = torch.device("cuda")
    model = make_model(dev, gen)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    static_x = torch.empty(BATCH, IN, device=dev)
    static_y = torch.empty(BATCH, dtype=torch.int64, device=dev)

    def load(i):
        static_x.copy_(xs[i % a.batches], non_blocking=True)
        static_y.copy_(ys[i % a.batches], non_blocking=True)

    # The step's stream, created like gpugraph's (PyTorch's pool streams are
    # non-blocking); the warm-up on it, as the docs' side stream.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    step = 0
    with torch.cuda.stream(s):
        for _ in range(a.warmup):  # real training steps, as gpugraph's warm-up
            load(step)
            step += 1
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(static_x), static_y)
            loss.backward()
            opt.step()
        first_loss = loss.item()
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g, stream=s):
            static_loss = F.cross_entropy(model(static_x), static_y)
            static_loss.backward()
            opt.step()
        s.synchronize()

        per_step, gpu_chunk = [], []
        t_start, t_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        while step < a.steps:
            n = min(a.every - step % a.every, a.steps - step)
            t0 = time.perf_counter()
            t_start.record(s)
            for _ in range(n):
                load(step)
                step += 1
                g.replay()
            t_end.record(s)
            last_loss = static_loss.item()  # a copy and a synchronize
            per_step.append((time.perf_counter() - t0) / n)
            gpu_chunk.append(t_start.elapsed_time(t_end) * 1e-3 / n)
        if math.isnan(last_loss):
            sys.exit("torch_step: the loss is NaN")

        # The step alone on the GPU: replays queued back to back.
        t_start.record(s)
        for _ in range(a.gpu_steps):
            g.replay()
        t_end.record(s)
        t_end.synchronize()
        gpu_replay = t_start.elapsed_time(t_end) * 1e-3 / a.gpu_steps

    per_step.sort()
    gpu_chunk.sort()
    wall = per_step[len(per_step) // 2]  # train.go: perStep[len(perStep)/2]
    gpu = gpu_chunk[len(gpu_chunk) // 2]
    name = torch.cuda.get_device_name(0).replace(" ", "_")
    fields = [
        "model=reference", "mode=graph", f"tf32={int(a.tf32)}", f"torch={torch.__version__}",
        f"cuda={torch.version.cuda}", f"device={name}", f"steps={a.steps}", f"chunks={len(per_step)}",
        f"loss={first_loss:.4f}->{last_loss:.4f}",
        f"wall_us={wall * 1e6:.1f}", f"wall_us_chunks={','.join(f'{t * 1e6:.1f}' for t in per_step)}",
        f"gpu_chunk_us={gpu * 1e6:.1f}", f"gpu_replay_us={gpu_replay * 1e6:.1f}",
        f"flops={fl:.4g}", f"flops_exact={fl_exact:.4g}",
        f"fp32_peak_us={fl / FP32_PEAK * 1e6:.1f}",
    ]
    if a.tf32:
        fields.append(f"tf32_peak_us={fl / TF32_PEAK * 1e6:.1f}")
    fields.append(f"tflops_replay={fl / gpu_replay / 1e12:.1f}")
    print("torch_step " + " ".join(fields), flush=True)


if __name__ == "__main__":
    main()
