#!/usr/bin/env python3
"""torch_step.py: PyTorch's side of `gpugraph train --backend cuda --modes graph`.

The same training step as internal/train's models, captured once with
torch.cuda.graphs and replayed, timed as cmd/gpugraph/train.go times its
graph mode, so the two step times compare:

  model      --model reference: MLP 256 -> 1024 x4 (each + ReLU) -> 10, batch
             512 (train.Reference: In 256, Hidden 1024, Layers 4, Classes 10);
             --model large: 1024 -> 4096 x4 -> 1000, batch 2048 (train.Large:
             In 1024, Hidden 4096, Layers 4, Classes 1000); weights
             Kaiming-uniform U(+-sqrt(6/in)), biases zero (NewModel)
  loss       mean softmax cross-entropy (F.cross_entropy)
  optimizer  --optimizer sgd (default): plain SGD, lr 0.02, no momentum, no
             weight decay; adam: Adam, lr 0.02, betas (0.9, 0.999), eps 1e-8
             (train.Adam*), capturable
  precision  --precision fp32 (default): FP32 GEMMs without TF32, as
             gpugraph's default cuBLAS math (allow_tf32 False, float32 matmul
             precision "highest"); tf32: allow_tf32 True and matmul precision
             "high"; bf16: torch.autocast("cuda", dtype=torch.bfloat16,
             cache_enabled=False) around forward and loss, FP32 master
             weights, gradients and optimizer (no GradScaler: bf16 has FP32's
             range). --tf32 is --precision tf32.
  best       --best: PyTorch at its best. The forward and loss are
             torch.compile'd (default mode, Inductor), the optimizer is fused
             (SGD(fused=True), Adam(fused=True, capturable=True)), and the
             whole step (forward, backward, optimizer.step) is captured in one
             torch.cuda.graph, as the docs' whole-network capture: compile
             and warm up (--warmup, at least 5 with --best, so that the
             forward and backward are compiled and the optimizer's state
             exists) on a side stream, then capture. Without --best the same
             step runs eagerly and is captured the same way (the plain CUDA
             graph step).
  data       a Gaussian mixture like train.NewDataset (class centroids
             N(0, 0.25^2) per coordinate, samples centroid + N(0, 1)), 32
             distinct batches cycled, kept in pageable host memory; before
             every step the batch is copied into the static input and target
             with non_blocking=True (cudaMemcpyAsync from pageable memory, as
             Static.Load's cuMemcpyHtoDAsync from Go memory). Targets are
             int64 here (F.cross_entropy's), int32 in Go.
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
  memory     after the run: torch.cuda.memory_reserved() (reserved_mib) and
             torch.cuda.max_memory_reserved() (max_reserved_mib), MiB: the
             caching allocator's, the graph's private pool included.
  kernels    kernels per step: torch.profiler over --profile-replays (3)
             replays after everything else, the CUDA kernels it records
             (memcpy and memset excluded) divided by the replays; left out
             if the profiler fails or the count does not divide. With
             --kernel-times, each kernel's device time per replay from the
             same profile, and the totals by kind (gemm, optimizer,
             elementwise: everything else), on lines "torch_step: kernel".
  FLOPs      forward 2*B*sum(in*out) over the linear layers, backward twice
             that (dW and dX; strictly, layer 0's dX is not computed, in
             either implementation: flops_exact); the time that needs at the
             H100 SXM peaks: 67 TFLOP/s FP32 (non-tensor), 495 TFLOP/s TF32
             and 989 TFLOP/s BF16 tensor (dense); peak_us is the precision's.

One parseable line, first word "torch_step", then key=value pairs:

  torch_step model=reference precision=fp32 best=0 ... wall_us=... gpu_chunk_us=... gpu_replay_us=... reserved_mib=... max_reserved_mib=... kernels=... flops=... peak_us=...

--check runs two eager steps on the CPU instead (no CUDA needed): a smoke
test of the model, the data, the precision's autocast and the optimizer, and
the FLOP count (the large model's steps on 128 samples of each batch). With --best it says that it skips the compile and the capture
(CUDA only) and runs the step eagerly with the fused optimizer where the CPU
has one.
"""
import argparse
import contextlib
import math
import sys
import time

import torch
import torch.nn.functional as F

# The models of internal/train/config.go: In, Hidden, Layers, Classes, Batch, LR.
MODELS = {
    "reference": dict(IN=256, HIDDEN=1024, LAYERS=4, CLASSES=10, BATCH=512, LR=0.02),
    "large": dict(IN=1024, HIDDEN=4096, LAYERS=4, CLASSES=1000, BATCH=2048, LR=0.02),
}
SPREAD = 0.25
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8
PEAKS = {"fp32": 67e12, "tf32": 495e12, "bf16": 989e12}  # H100 SXM, dense, FLOP/s


def dims(m):
    ins = [m["IN"]] + [m["HIDDEN"]] * m["LAYERS"]
    outs = [m["HIDDEN"]] * m["LAYERS"] + [m["CLASSES"]]
    return list(zip(ins, outs))


def flops(m):
    fwd = 2 * m["BATCH"] * sum(i * o for i, o in dims(m))
    exact = fwd + 2 * fwd - 2 * m["BATCH"] * m["IN"] * m["HIDDEN"]  # no dX for the input
    return 3 * fwd, exact


def make_model(m, device, gen):
    layers = []
    for l, (i, o) in enumerate(dims(m)):
        lin = torch.nn.Linear(i, o, device=device, dtype=torch.float32)
        with torch.no_grad():
            bound = math.sqrt(6.0 / i)
            w = (torch.rand(o, i, generator=gen, dtype=torch.float32) * 2 - 1) * bound
            lin.weight.copy_(w)
            lin.bias.zero_()
        layers.append(lin)
        if l < m["LAYERS"]:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def make_data(m, batches, gen):
    b, n_in = m["BATCH"], m["IN"]
    mu = torch.randn(m["CLASSES"], n_in, generator=gen) * SPREAD
    y = torch.randint(0, m["CLASSES"], (batches * b,), generator=gen, dtype=torch.int64)
    x = mu[y] + torch.randn(batches * b, n_in, generator=gen)
    return x.view(batches, b, n_in).contiguous(), y.view(batches, b).contiguous()


def make_optimizer(a, m, params, device_type):
    """The optimizer, fused with --best (where the device has a fused one:
    on the CPU, --check falls back to the default implementation with a
    note). Returns (optimizer, fused)."""
    kw = dict(lr=m["LR"])
    if a.optimizer == "adam":
        kw.update(betas=ADAM_BETAS, eps=ADAM_EPS)
        if device_type == "cuda":
            kw["capturable"] = True  # the step count on the GPU, for the graph
    cls = torch.optim.Adam if a.optimizer == "adam" else torch.optim.SGD
    if a.best:
        try:
            return cls(params, fused=True, **kw), True
        except (RuntimeError, TypeError, ValueError) as e:
            if device_type == "cuda":
                raise
            print(f"torch_step: note: no fused {a.optimizer} on the CPU ({e}); the check uses the default one", flush=True)
    return cls(params, **kw), False


def precision_context(precision, device_type):
    """Forward and loss run under this: autocast to bf16 for bf16."""
    if precision == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16, cache_enabled=False)
    return contextlib.nullcontext()


def set_matmul_precision(precision):
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def kernel_kind(name):
    """The kind of a kernel, for --kernel-times: gemm, optimizer, or
    elementwise (everything else: Triton's fused kernels, reductions,
    casts)."""
    n = name.lower()
    if any(k in n for k in ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "sm80_", "cublas", "splitk")):
        return "gemm"
    if "multi_tensor" in n or "sgd" in n:  # the fused optimizer (Triton's fused kernels are "triton_..._fused_...")
        return "optimizer"
    return "elementwise"


def count_kernels(g, s, replays, times=False):
    """Kernels per replay of g on s, from torch.profiler; None if the
    profiler fails or the count does not divide by the replays. With
    times, it also prints each kernel's device time per replay and the
    totals by kind (lines starting "torch_step: kernel")."""
    try:
        from torch.profiler import ProfilerActivity, profile

        s.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                g.replay()
            s.synchronize()
        n = 0
        per_name, per_kind = {}, {}
        for e in prof.events():
            if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
                continue
            name = e.name.lower()
            if name.startswith("memcpy") or name.startswith("memset"):
                continue
            n += 1
            us = e.time_range.elapsed_us() / replays
            per_name[e.name] = per_name.get(e.name, 0.0) + us
            kind = kernel_kind(e.name)
            per_kind[kind] = per_kind.get(kind, 0.0) + us
        if times:
            total = sum(per_kind.values())
            print("torch_step: kernel times per replay (torch.profiler, µs): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per_kind.items())) + f", all {total:.1f}", flush=True)
            for name, us in sorted(per_name.items(), key=lambda kv: -kv[1]):
                print(f"torch_step: kernel {us:9.1f} µs  {kernel_kind(name):11s} {name[:110]}", flush=True)
        if n == 0 or n % replays:
            return None
        return n // replays
    except Exception as e:  # the profiler is optional: say why, carry on
        print(f"torch_step: note: no kernel count ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="reference", help="train.Reference or train.Large")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default=None, help="GEMM precision (default fp32)")
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--best", action="store_true", help="torch.compile, a fused optimizer, the whole step in one CUDA graph")
    ap.add_argument("--steps", type=int, default=300, help="training steps in all, warm-up included (train --steps)")
    ap.add_argument("--every", type=int, default=50, help="timed chunks end at multiples of this (train --every)")
    ap.add_argument("--warmup", type=int, default=None, help="eager steps on a side stream before the capture (default 3, with --best 5)")
    ap.add_argument("--batches", type=int, default=32, help="distinct batches, cycled (train --batches)")
    ap.add_argument("--gpu-steps", type=int, default=200, help="replays queued back to back for the GPU time")
    ap.add_argument("--profile-replays", type=int, default=3, help="replays profiled for the kernel count (0: no count)")
    ap.add_argument("--kernel-times", action="store_true", help="also print each kernel's device time per replay, and by kind")
    ap.add_argument("--tf32", action="store_true", help="--precision tf32")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="two eager steps on the CPU: a smoke test without CUDA")
    a = ap.parse_args()
    if a.tf32:
        if a.precision not in (None, "tf32"):
            sys.exit("torch_step: --tf32 is --precision tf32, not " + a.precision)
        a.precision = "tf32"
    a.precision = a.precision or "fp32"
    if a.warmup is None:
        a.warmup = 5 if a.best else 3
    if (a.steps < 1 or a.every < 1 or a.warmup < 1 or a.warmup >= a.steps or a.batches < 1 or a.gpu_steps < 1
            or a.profile_replays < 0):
        sys.exit("torch_step: need steps >= 1, every >= 1, 1 <= warmup < steps, batches >= 1, gpu-steps >= 1, profile-replays >= 0")

    m = MODELS[a.model]
    set_matmul_precision(a.precision)
    gen = torch.Generator().manual_seed(a.seed)
    fl, fl_exact = flops(m)
    xs, ys = make_data(m, a.batches, gen)
    fields = [f"model={a.model}", f"precision={a.precision}", f"best={int(a.best)}", f"optimizer={a.optimizer}"]

    if a.check:
        if a.best:
            print("torch_step: note: --check skips torch.compile and the CUDA graph (CUDA only): "
                  "it runs the step eagerly, with the fused optimizer where the CPU has one", flush=True)
        model = make_model(m, "cpu", gen)
        opt, fused = make_optimizer(a, m, list(model.parameters()), "cpu")
        losses = []
        rows = 128 if a.model == "large" else m["BATCH"]  # the large batch takes minutes on a CPU
        for i in range(2):
            opt.zero_grad(set_to_none=True)
            with precision_context(a.precision, "cpu"):
                loss = F.cross_entropy(model(xs[i][:rows]), ys[i][:rows])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if not all(math.isfinite(l) for l in losses):
            sys.exit(f"torch_step: check: the loss is not finite: {losses}")
        print("torch_step check=cpu " + " ".join(fields) + f" fused={int(fused)} torch={torch.__version__} "
              f"losses={','.join(f'{l:.4f}' for l in losses)} params={sum(p.numel() for p in model.parameters())} "
              f"flops={fl:.4g} flops_exact={fl_exact:.4g} fp32_peak_us={fl / PEAKS['fp32'] * 1e6:.1f} "
              f"peak_us={fl / PEAKS[a.precision] * 1e6:.1f}", flush=True)
        return

    if not torch.cuda.is_available():
        sys.exit("torch_step: no CUDA device (--check runs on the CPU)")
    dev = torch.device("cuda")
    model = make_model(m, dev, gen)
    opt, fused = make_optimizer(a, m, list(model.parameters()), "cuda")
    batch, n_in = m["BATCH"], m["IN"]
    static_x = torch.empty(batch, n_in, device=dev)
    static_y = torch.empty(batch, dtype=torch.int64, device=dev)

    def forward_loss(x, y):
        with precision_context(a.precision, "cuda"):
            return F.cross_entropy(model(x), y)

    if a.best:
        forward_loss = torch.compile(forward_loss)  # default mode: Inductor, no CUDA graphs of its own

    def train_step():
        loss = forward_loss(static_x, static_y)
        loss.backward()
        opt.step()
        return loss

    def load(i):
        static_x.copy_(xs[i % a.batches], non_blocking=True)
        static_y.copy_(ys[i % a.batches], non_blocking=True)

    # The step's stream, created like gpugraph's (PyTorch's pool streams are
    # non-blocking); the warm-up on it, as the docs' side stream.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    step = 0
    t_compile = time.perf_counter()
    with torch.cuda.stream(s):
        for _ in range(a.warmup):  # real training steps, as gpugraph's warm-up
            load(step)
            step += 1
            opt.zero_grad(set_to_none=True)
            loss = train_step()
        first_loss = loss.item()
        warmup_s = time.perf_counter() - t_compile
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)  # the gradients: the graph's pool's
        with torch.cuda.graph(g, stream=s):
            static_loss = train_step()
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
        if not math.isfinite(last_loss):
            sys.exit(f"torch_step: the loss is {last_loss}")

        # The step alone on the GPU: replays queued back to back.
        t_start.record(s)
        for _ in range(a.gpu_steps):
            g.replay()
        t_end.record(s)
        t_end.synchronize()
        gpu_replay = t_start.elapsed_time(t_end) * 1e-3 / a.gpu_steps
        torch.cuda.synchronize()
        reserved, max_reserved = torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved()
        kernels = count_kernels(g, s, a.profile_replays, a.kernel_times) if a.profile_replays else None

    per_step.sort()
    gpu_chunk.sort()
    wall = per_step[len(per_step) // 2]  # train.go: perStep[len(perStep)/2]
    gpu = gpu_chunk[len(gpu_chunk) // 2]
    name = torch.cuda.get_device_name(0).replace(" ", "_")
    fields += [
        "mode=graph", f"compile={'default' if a.best else 'none'}", f"fused={int(fused)}",
        f"tf32={int(a.precision == 'tf32')}", f"torch={torch.__version__}",
        f"cuda={torch.version.cuda}", f"device={name}", f"steps={a.steps}", f"warmup={a.warmup}",
        f"warmup_s={warmup_s:.1f}", f"chunks={len(per_step)}",
        f"loss={first_loss:.4f}->{last_loss:.4f}",
        f"wall_us={wall * 1e6:.1f}", f"wall_us_chunks={','.join(f'{t * 1e6:.1f}' for t in per_step)}",
        f"gpu_chunk_us={gpu * 1e6:.1f}", f"gpu_replay_us={gpu_replay * 1e6:.1f}",
        f"reserved_mib={reserved / 2**20:.1f}", f"max_reserved_mib={max_reserved / 2**20:.1f}",
    ]
    if kernels is not None:
        fields.append(f"kernels={kernels}")
    fields += [
        f"flops={fl:.4g}", f"flops_exact={fl_exact:.4g}",
        f"fp32_peak_us={fl / PEAKS['fp32'] * 1e6:.1f}", f"peak_us={fl / PEAKS[a.precision] * 1e6:.1f}",
        f"tflops_replay={fl / gpu_replay / 1e12:.1f}",
    ]
    if a.precision == "tf32":
        fields.append(f"tf32_peak_us={fl / PEAKS['tf32'] * 1e6:.1f}")
    print("torch_step " + " ".join(fields), flush=True)


if __name__ == "__main__":
    main()
