#!/usr/bin/env python3
"""PyTorch capturing the reference MLP's inference for vLLM's 51 batch
sizes, for side by side comparison with gpugraph's GraphSet
(`go test -bench GraphSetCapture ./internal/train` and examples/serve).

The model is internal/train's reference MLP: 256 -> 1024 (x4, each followed
by ReLU) -> 10, nn.Linear layers, fp32 (TF32 off), weights Kaiming-uniform
U(+-sqrt(6/in)), biases zero. Batch sizes are vLLM's default capture sizes
up to 512: 1, 2, 4, then multiples of 8 below 256, then multiples of 16 up
to 512 (51 sizes). As vLLM does, graphs are captured largest first into one
shared memory pool (torch.cuda.graph_pool_handle()), each after one eager
warm-up of its size, from a static input of 512 rows that each graph reads
a prefix of.

It reports:
  capture   the whole set's capture time (torch.cuda.graph per size,
            warm-ups excluded), cold (the first set in the process: cuBLAS
            and allocator start-up) and warm (median of --repeat more
            sets), and per graph (median, max);
  memory    torch.cuda.memory_reserved() after capturing the set with one
            shared pool, against a private pool per graph (the default
            when no pool is given), each from an emptied cache;
  replay    per batch size: static_input[:n].copy_(x) from pinned host
            memory; g.replay(); then the output copied to pinned host
            memory, against the same done eagerly, host time to a
            synchronize, median over --iters.

  /opt/torch/.venv/bin/python tools/serve/torch_graphset.py [--repeat 5] [--iters 200]

Lines starting "CAPTURE ", "MEM " and "REPLAY " are for scripts.
"""

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn


def serve_keys(max_batch):
    """vLLM's default CUDA graph batch sizes up to max_batch."""
    keys = [b for b in (1, 2, 4) if b <= max_batch]
    keys += list(range(8, min(256, max_batch + 1), 8))
    keys += list(range(256, max_batch + 1, 16))
    return keys


def make_model(inp, hidden, layers, classes, device):
    dims = [inp] + [hidden] * layers + [classes]
    mods = []
    for i in range(len(dims) - 1):
        lin = nn.Linear(dims[i], dims[i + 1])
        bound = math.sqrt(6.0 / dims[i])
        with torch.no_grad():
            lin.weight.uniform_(-bound, bound)
            lin.bias.zero_()
        mods.append(lin)
        if i < len(dims) - 2:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods).to(device).eval()


def capture_set(model, static_in, keys, pool):
    """Captures one graph per key, largest first; returns the graphs, their
    outputs and the capture time of each (warm-ups excluded)."""
    graphs, outs, times = {}, {}, {}
    side = torch.cuda.Stream()
    for n in sorted(keys, reverse=True):
        x = static_in[:n]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            model(x)  # one warm-up per size, as vLLM
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        with torch.cuda.graph(g, pool=pool), torch.no_grad():
            outs[n] = model(x)
        torch.cuda.synchronize()
        times[n] = time.perf_counter() - t0
        graphs[n] = g
    return graphs, outs, times


def reserved_after(model, static_in, keys, shared):
    """memory_reserved after capturing the set, from an emptied cache."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle() if shared else None
    graphs, outs, _ = capture_set(model, static_in, keys, pool)
    torch.cuda.synchronize()
    res = torch.cuda.memory_reserved() - base
    del graphs, outs
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return res


def median_time(fn, iters):
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-batch", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5, help="warm sets captured after the cold one")
    ap.add_argument("--iters", type=int, default=200, help="replays per batch size")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_graphset.py: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(1)
    model = make_model(256, 1024, 4, 10, dev)
    keys = serve_keys(args.max_batch)
    static_in = torch.randn(args.max_batch, 256, device=dev)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, reference MLP 256->1024x4->10 fp32, "
          f"{len(keys)} batch sizes up to {args.max_batch}, largest first, one shared pool")

    # Capture time: the first set in the process (cold), then warm sets.
    sets = []
    for r in range(1 + args.repeat):
        pool = torch.cuda.graph_pool_handle()
        t0 = time.perf_counter()
        graphs, outs, times = capture_set(model, static_in, keys, pool)
        total = sum(times.values())
        sets.append((total, time.perf_counter() - t0, times))
        del graphs, outs
    cold, warm = sets[0], sets[1:]
    per_graph = [t for s in warm for t in s[2].values()] or list(cold[2].values())
    warm_total = statistics.median([s[0] for s in warm]) if warm else cold[0]
    print(f"capture: set {cold[0] * 1e3:.1f} ms cold, {warm_total * 1e3:.1f} ms warm (median of {len(warm)}); "
          f"per graph median {statistics.median(per_graph) * 1e3:.3f} ms, max {max(per_graph) * 1e3:.3f} ms; "
          f"with warm-ups {cold[1] * 1e3:.1f} ms cold")
    print(f"CAPTURE cold_ms={cold[0] * 1e3:.2f} warm_ms={warm_total * 1e3:.2f} "
          f"graph_median_ms={statistics.median(per_graph) * 1e3:.4f} graph_max_ms={max(per_graph) * 1e3:.4f}")

    # Memory: one shared pool against a private pool per graph.
    shared = reserved_after(model, static_in, keys, True)
    private = reserved_after(model, static_in, keys, False)
    mib = 1 << 20
    print(f"memory: reserved {shared / mib:.1f} MiB with one shared pool, {private / mib:.1f} MiB with a pool per graph")
    print(f"MEM shared_mib={shared / mib:.1f} private_mib={private / mib:.1f}")

    # Replay against eager, per batch size.
    pool = torch.cuda.graph_pool_handle()
    graphs, outs, _ = capture_set(model, static_in, keys, pool)
    host = torch.empty(args.max_batch, 10, pin_memory=True)
    # The input comes from pinned host memory, as a server's does (and as
    # BenchmarkCUDAGraphSetReplay's): before 2026-11-26 it was on the
    # device already, so PyTorch's "input in" was a device-to-device copy.
    x = torch.randn(args.max_batch, 256).pin_memory()
    print(f"{'batch':>5} {'graph us':>9} {'eager us':>9} {'ratio':>6}")
    for n in keys:
        def replay():
            static_in[:n].copy_(x[:n], non_blocking=True)
            graphs[n].replay()
            host[:n].copy_(outs[n], non_blocking=True)

        def eager():
            with torch.no_grad():
                y = model(x[:n].to(dev, non_blocking=True))
            host[:n].copy_(y, non_blocking=True)

        replay()
        eager()
        torch.cuda.synchronize()
        if not torch.equal(outs[n].cpu(), model(x[:n].to(dev)).detach().cpu()):
            print(f"note: batch {n}: replay and eager outputs differ in the last bits (cuBLAS picks per shape)")
        g_t = median_time(replay, args.iters)
        e_t = median_time(eager, args.iters)
        print(f"{n:5d} {g_t * 1e6:9.1f} {e_t * 1e6:9.1f} {e_t / g_t:6.2f}")
        print(f"REPLAY batch={n} graph_us={g_t * 1e6:.1f} eager_us={e_t * 1e6:.1f}")


if __name__ == "__main__":
    main()
