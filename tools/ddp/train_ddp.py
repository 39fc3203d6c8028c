#!/usr/bin/env python3
"""PyTorch DistributedDataParallel on gpugraph's training model, for side
by side comparison with `gpugraph train --devices N` and
`gpugraph launch --nproc N train` (issue 15).

The model, data and optimizer are internal/train's (config.go, data.go,
model.go): an MLP In -> Hidden (x Layers, each followed by ReLU) ->
Classes, weights Kaiming-uniform U(+-sqrt(6/in)), biases zero, mean softmax
cross-entropy, plain SGD (w -= lr*g), fp32 (TF32 off), a synthetic data set
of 32 batches drawn from a mixture of Gaussians (class centroids N(0, 0.25^2),
unit noise). The global batch is split across the ranks as gpugraph does:
rank r takes rows [r*B/N, (r+1)*B/N) of every global batch. The random
streams are torch's, not Go's, so values are not bit-for-bit gpugraph's;
shapes and arithmetic are.

Modes, each from the same initial parameters on the same batches:
  eager  DDP op by op.
  graph  the whole step (forward, backward with DDP's all-reduces,
         optimizer) captured once with torch.cuda.graph and replayed, as the
         PyTorch docs (CUDA semantics, "Whole-network capture", "Usage with
         DistributedDataParallel") ask: TORCH_NCCL_ASYNC_ERROR_HANDLING=0,
         DDP constructed in a side-stream context, at least 11 DDP-enabled
         eager warm-up iterations on that side stream before the capture.
Both copy each step's batch shard from pinned host memory into static
input tensors first (static_input.copy_()), as gpugraph loads it.

Per mode it reports the median step time (CUDA events between consecutive
step starts, and wall time of chunks of --every steps to a synchronize, the
way gpugraph times), torch.cuda.max_memory_reserved/allocated per rank, the
final loss, and the largest relative difference of the data-parallel loss
(the ranks' losses averaged) from a single-device model trained by rank 0
on the full global batches. Then an all-reduce bandwidth sweep
(torch.distributed.all_reduce, float32 sum, in place, CUDA events, medians):
algbw = bytes/time and busbw = algbw*2(n-1)/n, on the reference model's
gradient messages and powers of two from 4 KiB to 256 MiB.

  torchrun --standalone --nproc_per_node N tools/ddp/train_ddp.py --model reference --steps 300

Rank 0 prints the tables, and lines starting "DDP " and "BW " for scripts.
"""

import argparse
import math
import os
import statistics
import sys
import time

# Before torch initialises NCCL: no NVLink SHARP (the machines' setting), and
# DDP's async error handling off, which whole-backward capture needs (the
# variable has both names across torch versions).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

# internal/train/config.go: Small() and Reference().
MODELS = {
    "small": dict(In=64, Hidden=256, Layers=2, Classes=10, Batch=128, LR=0.05),
    "reference": dict(In=256, Hidden=1024, Layers=4, Classes=10, Batch=512, LR=0.02),
}
SPREAD = 0.25  # internal/train/data.go: the centroids' standard deviation
DDP_WARMUP = 11  # the PyTorch docs' minimum before capturing DDP


def dims(cfg):
    return [cfg["In"]] + [cfg["Hidden"]] * cfg["Layers"] + [cfg["Classes"]]


def build_model(cfg, seed):
    """The MLP, initialised on the CPU from seed (the same on every rank)."""
    g = torch.Generator().manual_seed(seed)
    d = dims(cfg)
    layers = []
    for i in range(len(d) - 1):
        lin = nn.Linear(d[i], d[i + 1])
        bound = math.sqrt(6.0 / d[i])
        with torch.no_grad():
            lin.weight.uniform_(-bound, bound, generator=g)
            lin.bias.zero_()
        layers.append(lin)
        if i < len(d) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def make_dataset(cfg, batches, seed):
    """batches global batches: x (batches, Batch, In) float32, y (batches, Batch) int64."""
    g = torch.Generator().manual_seed(seed + 0xDA7A)
    mu = torch.randn(cfg["Classes"], cfg["In"], generator=g) * SPREAD
    n = batches * cfg["Batch"]
    y = torch.randint(0, cfg["Classes"], (n,), generator=g)
    x = mu[y] + torch.randn(n, cfg["In"], generator=g)
    return x.view(batches, cfg["Batch"], cfg["In"]).contiguous(), y.view(batches, cfg["Batch"]).contiguous()


def grad_sizes(cfg):
    """Bytes of each linear layer's gradient (W and b, as gpugraph's
    train.Model all-reduces one per layer), then all of them in one buffer."""
    d = dims(cfg)
    per = [4 * (d[i + 1] * d[i] + d[i + 1]) for i in range(len(d) - 1)]
    return per + [sum(per)]


def sweep_sizes(cfg, max_bytes):
    sizes = [(b, "grad-layer%d" % i) for i, b in enumerate(grad_sizes(cfg)[:-1])]
    sizes.append((grad_sizes(cfg)[-1], "grad-all"))
    s = 4 << 10
    while s <= max_bytes:
        sizes.append((s, "%dMiB" % (s >> 20) if s >= 1 << 20 else "%dKiB" % (s >> 10)))
        s *= 2
    return sizes


def eager_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def mib(b):
    return b / (1 << 20)


class Timer:
    """Marks on the current CUDA stream (events), or wall time on the CPU."""

    def __init__(self, cuda):
        self.cuda = cuda

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def ms(self, a, b):
        """Milliseconds from mark a to mark b; synchronize first."""
        if self.cuda:
            return a.elapsed_time(b)
        return (b - a) * 1e3


def sync(cuda):
    if cuda:
        torch.cuda.synchronize()


def report_steps(warmup, steps, every):
    """The steps after which gpugraph reports (chunks of every steps from
    the warm-up on): the loss then is the last step's."""
    out, step = [], warmup
    while step < steps:
        step += min(every - step % every, steps - step)
        out.append(step)
    return out


def reference_losses(cfg, args, dev, xg, yg, reports):
    """Rank 0's single-device model on the full global batches: the loss
    after each report step."""
    model = build_model(cfg, args.seed).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=cfg["LR"])
    x = torch.empty(cfg["Batch"], cfg["In"], device=dev)
    y = torch.empty(cfg["Batch"], dtype=torch.long, device=dev)
    want, out = set(reports), {}
    nb = xg.shape[0]
    for step in range(args.steps):
        x.copy_(xg[step % nb], non_blocking=True)
        y.copy_(yg[step % nb], non_blocking=True)
        loss = eager_step(model, opt, x, y)
        if step + 1 in want:
            out[step + 1] = loss.item()
    del model, opt
    return out


def train_mode(mode, cfg, args, dev, rank, world, xs, ys, ref, reports):
    """Trains a fresh DDP replica in one mode; returns this rank's results
    (rank 0's with the losses)."""
    cuda = dev.type == "cuda"
    b = cfg["Batch"] // world
    nb = xs.shape[0]
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    model = build_model(cfg, args.seed).to(dev)
    x_static = torch.empty(b, cfg["In"], device=dev)
    y_static = torch.empty(b, dtype=torch.long, device=dev)

    def load(i):
        x_static.copy_(xs[i % nb], non_blocking=True)
        y_static.copy_(ys[i % nb], non_blocking=True)

    kw = {}
    if cuda:
        kw.update(device_ids=[dev.index], output_device=dev.index)
    if args.bucket_cap_mb is not None:
        kw["bucket_cap_mb"] = args.bucket_cap_mb
    if args.grad_as_bucket_view:
        kw["gradient_as_bucket_view"] = True
    warmup = args.warmup
    graph = None
    if mode == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            ddp = DDP(model, **kw)  # in the side-stream context, as capture needs
            opt = torch.optim.SGD(ddp.parameters(), lr=cfg["LR"])
            for i in range(warmup):
                load(i)
                eager_step(ddp, opt, x_static, y_static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        gkw = {} if args.capture_mode == "global" else {"capture_error_mode": args.capture_mode}
        with torch.cuda.graph(graph, **gkw):
            static_loss = F.cross_entropy(ddp(x_static), y_static)
            static_loss.backward()
            opt.step()

        def run(i):
            load(i)
            graph.replay()
            return static_loss
    else:
        ddp = DDP(model, **kw)
        opt = torch.optim.SGD(ddp.parameters(), lr=cfg["LR"])
        for i in range(warmup):
            load(i)
            eager_step(ddp, opt, x_static, y_static)

        def run(i):
            load(i)
            return eager_step(ddp, opt, x_static, y_static)

    sync(cuda)
    timer = Timer(cuda)
    ev_steps, chunk_steps, losses = [], [], {}
    step = warmup
    while step < args.steps:
        n = min(args.every - step % args.every, args.steps - step)
        t0 = time.perf_counter()
        marks = []
        loss = None
        for _ in range(n):
            marks.append(timer.mark())
            loss = run(step)
            step += 1
        marks.append(timer.mark())
        sync(cuda)
        chunk_steps.append((time.perf_counter() - t0) * 1e3 / n)
        ev_steps += [timer.ms(marks[k], marks[k + 1]) for k in range(n)]
        # The data-parallel loss: the ranks' losses averaged (outside the timing).
        avg = loss.detach().clone().reshape(1)
        dist.all_reduce(avg)
        losses[step] = avg.item() / world
    res = dict(
        mode=mode,
        rank=rank,
        step_ms_events=statistics.median(ev_steps),
        step_ms_chunks=statistics.median(chunk_steps),
        final_loss=losses[step],
        losses=losses,
        reserved=torch.cuda.max_memory_reserved(dev) if cuda else 0,
        allocated=torch.cuda.max_memory_allocated(dev) if cuda else 0,
    )
    if ref is not None:
        res["maxrel"] = max(abs(losses[s] - ref[s]) / max(abs(ref[s]), 1e-12) for s in reports if s in ref and s in losses)
    del graph, ddp, opt, model
    sync(cuda)
    if cuda:
        torch.cuda.empty_cache()
    return res


def allreduce_sweep(sizes, dev, world, iters, warmup):
    """Median time of in-place float32 sum all-reduces per size, the
    slowest rank's; returns (bytes, name, us, algbw GB/s, busbw GB/s) rows."""
    cuda = dev.type == "cuda"
    timer = Timer(cuda)
    rows = []
    for nbytes, name in sizes:
        t = torch.zeros(nbytes // 4, dtype=torch.float32, device=dev)
        for _ in range(warmup):
            dist.all_reduce(t)
        sync(cuda)
        dist.barrier()
        marks = []
        for _ in range(iters):
            a = timer.mark()
            dist.all_reduce(t)
            marks.append((a, timer.mark()))
        sync(cuda)
        med = statistics.median(timer.ms(a, b) for a, b in marks)
        m = torch.tensor([med], dtype=torch.float64, device=dev)
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        us = m.item() * 1e3
        alg = nbytes / (us * 1e-6) / 1e9
        rows.append((nbytes, name, us, alg, alg * 2 * (world - 1) / world))
        del t
    if cuda:
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="reference", choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=300, help="training steps per mode, warm-up included")
    ap.add_argument("--every", type=int, default=50, help="report (and time a chunk) every N steps")
    ap.add_argument("--warmup", type=int, default=DDP_WARMUP, help="eager DDP steps before timing (graph mode: before the capture)")
    ap.add_argument("--batches", type=int, default=32, help="distinct global batches in the data set")
    ap.add_argument("--batch", type=int, default=0, help="global batch (default: the model's); weak scaling: 512 per rank")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP bucket size (default: DDP's)")
    ap.add_argument("--grad-as-bucket-view", action="store_true")
    ap.add_argument("--capture-mode", default="global", choices=["global", "thread_local", "relaxed"])
    ap.add_argument("--no-reference", action="store_true", help="skip rank 0's single-device model")
    ap.add_argument("--sweep", default="on", choices=["on", "off", "only"], help="the all-reduce bandwidth sweep")
    ap.add_argument("--sweep-max", type=int, default=256 << 20, help="largest power of two in the sweep, bytes")
    ap.add_argument("--sweep-iters", type=int, default=20)
    ap.add_argument("--sweep-warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: gloo, eager only (a smoke test)")
    args = ap.parse_args()

    cfg = dict(MODELS[args.model])
    if args.batch > 0:
        cfg["Batch"] = args.batch
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in ("eager", "graph"):
            sys.exit("unknown mode %r (eager, graph)" % m)
    if args.steps <= args.warmup or args.every < 1:
        sys.exit("need --steps > --warmup and --every >= 1")

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = args.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            sys.exit("no CUDA device (use --device cpu for a smoke test)")
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    else:
        dev = torch.device("cpu")
        modes = [m for m in modes if m != "graph"]
    if "MASTER_ADDR" not in os.environ:  # run without torchrun: a job of one
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29511", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    dist.init_process_group("nccl" if cuda else "gloo")
    if cfg["Batch"] % world:
        sys.exit("%d ranks do not divide the global batch of %d" % (world, cfg["Batch"]))
    say = print if rank == 0 else (lambda *a, **k: None)

    d = dims(cfg)
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if cuda else "-"
    gpu = torch.cuda.get_device_name(dev) if cuda else "cpu"
    say("PyTorch DDP: %s MLP %s, batch %d (%d per rank), SGD lr %g, fp32; %d rank(s) on %s; torch %s, NCCL %s, NCCL_NVLS_ENABLE=%s"
        % (args.model, "->".join(map(str, d)), cfg["Batch"], cfg["Batch"] // world, cfg["LR"], world, gpu,
           torch.__version__, nccl, os.environ.get("NCCL_NVLS_ENABLE")))

    if "graph" in modes and args.warmup < DDP_WARMUP:
        say("warning: --warmup %d: the PyTorch docs ask for at least %d DDP eager steps before capturing DDP" % (args.warmup, DDP_WARMUP))
    if args.sweep != "only":
        xg, yg = make_dataset(cfg, args.batches, args.seed)
        b = cfg["Batch"] // world
        xs = xg[:, rank * b:(rank + 1) * b].contiguous()
        ys = yg[:, rank * b:(rank + 1) * b].contiguous()
        if cuda:
            xs, ys, xg, yg = xs.pin_memory(), ys.pin_memory(), xg.pin_memory(), yg.pin_memory()
        reports = report_steps(args.warmup, args.steps, args.every)
        ref = None
        if rank == 0 and not args.no_reference:
            ref = reference_losses(cfg, args, dev, xg, yg, reports)
        say("%d steps per mode: %d eager DDP warm-up steps, then timed (graph: captured after the warm-up, replayed); "
            "reports after steps %s" % (args.steps, args.warmup, ",".join(map(str, reports))))
        results = []
        for m in modes:
            r = train_mode(m, cfg, args, dev, rank, world, xs, ys, ref, reports)
            everyone = [None] * world
            dist.all_gather_object(everyone, r)
            results.append(everyone)
        if rank == 0:
            print("\n%-6s %7s %12s %12s %11s %11s  %-24s %-24s" % (
                "mode", "ranks", "step(events)", "step(chunks)", "final loss", "vs 1 GPU", "max reserved MiB/rank",
                "max allocated MiB/rank"))
            for everyone in results:
                r0 = everyone[0]
                rel = "%.2e" % r0["maxrel"] if "maxrel" in r0 else "-"
                resv = "/".join("%.1f" % mib(r["reserved"]) for r in everyone)
                allo = "/".join("%.1f" % mib(r["allocated"]) for r in everyone)
                print("%-6s %7d %9.3f ms %9.3f ms %11.6f %11s  %-24s %-24s" % (
                    r0["mode"], world, r0["step_ms_events"], r0["step_ms_chunks"], r0["final_loss"], rel, resv, allo))
            print("\nloss after step (data-parallel, ranks averaged; one device: rank 0's model on the global batch)")
            print("%6s" % "step" + "".join(" %12s" % ("ddp-" + e[0]["mode"]) for e in results) + " %12s" % "one device")
            for s in reports:
                print("%6d" % s + "".join(" %12.6f" % e[0]["losses"][s] for e in results)
                      + " %12s" % ("%.6f" % ref[s] if ref and s in ref else "-"))
            print()
            for everyone in results:
                r0 = everyone[0]
                print("DDP %s world=%d step_ms_events=%.4f step_ms_chunks=%.4f final_loss=%.6f maxrel=%s reserved_mib=%s allocated_mib=%s" % (
                    r0["mode"], world, r0["step_ms_events"], r0["step_ms_chunks"], r0["final_loss"],
                    "%.3e" % r0["maxrel"] if "maxrel" in r0 else "-",
                    ",".join("%.1f" % mib(r["reserved"]) for r in everyone),
                    ",".join("%.1f" % mib(r["allocated"]) for r in everyone)))

    if args.sweep != "off":
        rows = allreduce_sweep(sweep_sizes(cfg, args.sweep_max), dev, world, args.sweep_iters, args.sweep_warmup)
        if rank == 0:
            print("\nall_reduce: torch.distributed (%s), float32 sum in place, %d rank(s), median of %d after %d warm-up; slowest rank"
                  % ("NCCL " + nccl if cuda else "gloo", world, args.sweep_iters, args.sweep_warmup))
            print("%12s %-12s %12s %12s %12s" % ("bytes", "", "time us", "algbw GB/s", "busbw GB/s"))
            for nbytes, name, us, alg, bus in rows:
                print("%12d %-12s %12.2f %12.3f %12.3f" % (nbytes, name, us, alg, bus))
            print()
            for nbytes, name, us, alg, bus in rows:
                print("BW torch %d %s %.3f %.4f %.4f" % (nbytes, name, us, alg, bus))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
