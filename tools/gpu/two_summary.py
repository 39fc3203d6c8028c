#!/usr/bin/env python3
"""Summary of tools/gpu/two.sh's logs: python3 two_summary.py OUT.

Reads whatever logs OUT holds (a step that did not run is said to be
missing) and prints: the steps' status; the conformance and collective
tests; the peer-pipeline example; the driver probe's differences from
docs/driver-peer.txt; training on one and two GPUs, gpugraph and PyTorch DDP
side by side (step time, loss against one device, memory per GPU); scaling
from one GPU to two; and the all-reduce bandwidth of gpugraph's coll against
NCCL's (nccl_allreduce.cu) and torch.distributed's, size by size.
"""

import csv
import os
import re
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/two-out"


def read(name):
    p = os.path.join(OUT, name)
    if not os.path.exists(p):
        return None
    with open(p, errors="replace") as f:
        return f.read()


def lines(name):
    t = read(name)
    if t is None:
        return None
    # gpugraph launch prefixes every line with its rank.
    return [re.sub(r"^\[rank \d+\] ", "", l) for l in t.splitlines()]


def section(title):
    print("\n== %s ==" % title)


def guarded(f):
    def g():
        try:
            f()
        except Exception as e:  # a log of an unexpected shape: say so, go on
            print("  (could not read: %s: %s)" % (type(e).__name__, e))
    return g


def dur_ms(v, unit):
    return float(v) / 1000 if unit in ("µs", "us") else float(v)


@guarded
def steps():
    section("steps")
    t = read("status.txt")
    print(t.rstrip() if t else "  (no status.txt)")
    for m in re.finditer(r"^(\S+)\s+(?:FAILED|TIMEOUT).*\(log (\S+)\)", t or "", re.M):
        tail = [l for l in (lines(m.group(2)) or []) if l.strip() and not l.startswith("#")][-4:]
        print("  %s, last lines of %s:" % (m.group(1), m.group(2)))
        for l in tail:
            print("    | " + l.rstrip()[:160])
    info = lines("info.txt")
    if info:
        for l in info:
            if re.search(r"NCCL \d|^python .* torch|driver_version|^\d+, ", l):
                print("  " + l.strip())


@guarded
def tests():
    section("1. backend conformance (several devices) and collectives on cuda")
    for log, prefixes in (("conformance.txt", ("TestDevicesCUDA", "TestConformanceCUDA")), ("coll.txt", None), ("kill.txt", None)):
        ls = lines(log)
        if ls is None:
            print("  %s: missing" % log)
            continue
        counts, fails, skips = {}, [], []
        for l in ls:
            m = re.match(r"\s*--- (PASS|FAIL|SKIP): (\S+)", l)
            if not m or (prefixes and not m.group(2).startswith(prefixes)):
                continue
            top = m.group(2).split("/")[0]
            counts.setdefault(top, {"PASS": 0, "FAIL": 0, "SKIP": 0})[m.group(1)] += 1
            if m.group(1) == "FAIL":
                fails.append(m.group(2))
            if m.group(1) == "SKIP":
                skips.append(m.group(2))
        for top, c in counts.items():
            print("  %-32s %3d pass, %d fail, %d skip (counting subtests)" % (top, c["PASS"], c["FAIL"], c["SKIP"]))
        for f in fails:
            print("    FAIL " + f)
        for s in skips[:12]:
            print("    skip " + s)
        if len(skips) > 12:
            print("    ... %d more skips" % (len(skips) - 12))
        if log == "coll.txt":
            inside = False
            for l in ls:
                if l.startswith("=== RUN   TestCollectiveInConditionalCUDA"):
                    inside = True
                elif inside and re.match(r"\s*--- ", l):
                    print("  conditional body: " + l.strip())
                    inside = False
                elif inside and "coll_test.go" in l:
                    print("    " + l.strip())
    ls = lines("peer-pipeline.txt")
    if ls is None:
        print("  peer-pipeline: missing")
    else:
        body = [l for l in ls if l and not l.startswith("#")]
        print("  peer-pipeline -backend cuda: %s" % ("OK: " + " / ".join(body[:2]) if body and body[-1] == "OK" else (body[-1] if body else "no output")))
    ls = lines("driver-peer.txt")
    if ls is None:
        print("  driver probe: missing")
    else:
        summ = [l for l in ls if l.startswith("summary")]
        print("  driver probe (tools/probe/peer.cu -> driver-peer.txt): %s" % (summ[-1].split(None, 1)[1] if summ else (ls[-1] if ls else "empty")))
        prev = ""
        for l in ls:
            if "driver-peer.txt says" in l:
                name = l[:49].strip() or prev.strip()
                print("    differs: %s -> %s" % (name, l[49:].strip()))
            prev = l


def mem_peaks(name):
    """Peak memory.used per GPU over a run's nvidia-smi samples, and the first
    sample (before the run's contexts)."""
    t = read("mem-%s.csv" % name)
    if not t:
        return None
    peak, first = {}, {}
    for row in csv.reader(t.splitlines()):
        if len(row) < 2:
            continue
        try:
            i, v = int(row[0]), float(row[1])
        except ValueError:
            continue
        first.setdefault(i, v)
        peak[i] = max(peak.get(i, 0), v)
    return " ".join("gpu%d %.0f MiB (from %.0f)" % (i, peak[i], first[i]) for i in sorted(peak))


SYNC_WORDS = {"on the step's stream": "inline", "on a second stream": "overlap", "all in one call": "after"}


def gpugraph_dp(name):
    """Per sync mode: step time (ms), verdict, memory lines."""
    ls = lines(name + ".txt")
    if ls is None:
        return None
    runs, cur = [], None
    for l in ls:
        m = re.search(r"--sync (\w+):", l)
        if m or "gradients all-reduced (average)" in l:
            mode = m.group(1) if m else next((m for w, m in SYNC_WORDS.items() if w in l), "?")
            cur = {"mode": mode, "mem": [], "verdict": "", "step": None}
            runs.append(cur)
        elif cur is None:
            continue
        m = re.search(r"data-parallel step time .*: ([\d.]+) (ms|µs)", l)
        if m:
            cur["step"] = dur_ms(m.group(1), m.group(2))
        m = re.match(r"device (\d+) \(rank (\d+)\): allocated ([\d.]+) MB \(peak ([\d.]+) MB\), reserved ([\d.]+) MB \(peak ([\d.]+) MB\)", l)
        if m:
            cur["mem"].append("dev%s %s/%s MB" % (m.group(1), m.group(4), m.group(6)))
        if l.startswith("verdict:"):
            cur["verdict"] = l
    errs = [l for l in ls if re.search(r"(?i)\berror\b|FAIL|differs from one device", l) and not l.startswith("#")]
    return runs, errs


@guarded
def training():
    section("2. data-parallel training, reference model (256->1024x4->10, batch 512, SGD, fp32)")
    ls = lines("train-1gpu.txt")
    if ls is None:
        print("  gpugraph train, one GPU: missing")
    else:
        print("  gpugraph train --backend cuda --model reference (one GPU, no data parallelism):")
        for l in ls:
            if l.startswith("== ") or l.startswith("trained") or l.startswith("verdict"):
                print("    " + l.strip())
        p = mem_peaks("train-1gpu")
        if p:
            print("    nvidia-smi peak: " + p)
    for name, what in (("dp-launch-1", "gpugraph launch --nproc 1 train (1 GPU)"),
                       ("dp-devices-2", "gpugraph train --devices 2 (one process, 2 GPUs)"),
                       ("dp-launch-2", "gpugraph launch --nproc 2 train (a process per GPU)")):
        r = gpugraph_dp(name)
        if r is None:
            print("  %s: missing" % what)
            continue
        runs, errs = r
        print("  %s:" % what)
        for run in runs:
            v = run["verdict"].replace("verdict: ", "") if run["verdict"] else "no verdict (see the log)"
            print("    --sync %-8s step %s; mem alloc/reserved peak %s" % (
                run["mode"], "%.3f ms" % run["step"] if run["step"] else "?", ", ".join(run["mem"]) or "?"))
            print("      " + v)
        for e in errs[:5]:
            print("    ! " + e.strip())
        p = mem_peaks(name)
        if p:
            print("    nvidia-smi peak: " + p)
    for n in (1, 2):
        ls = lines("ddp-%d.txt" % n)
        if ls is None:
            print("  PyTorch DDP, %d GPU(s): missing" % n)
            continue
        print("  PyTorch DDP, %d GPU(s) (tools/ddp/train_ddp.py):" % n)
        show = False
        for l in ls:
            if l.startswith("PyTorch DDP:"):
                print("    " + l.strip())
            if l.startswith("mode "):
                show = True
            if show:
                if not l.strip():
                    show = False
                    continue
                print("    " + l.rstrip())
        errs = [l for l in ls if re.search(r"Error|Traceback|failed", l)]
        for e in errs[:5]:
            print("    ! " + e.strip())
        p = mem_peaks("ddp-%d" % n)
        if p:
            print("    nvidia-smi peak: " + p)
    drift()


def drift():
    """gpugraph's loss drift from one device against PyTorch DDP's, on the
    same GPUs in the same run: the data-parallel check's yardstick."""
    ddp = ddp_lines(2)
    ref = [float(v["maxrel"]) for v in ddp.values() if v.get("maxrel", "-") != "-"]
    if not ref:
        print("  drift: no PyTorch DDP figure on 2 GPUs to compare with")
        return
    worst_ddp = max(ref)
    for name in ("dp-devices-2", "dp-launch-2"):
        r = gpugraph_dp(name)
        if not r:
            continue
        for run in r[0]:
            m = re.search(r"losses within ([\d.e+-]+)", run["verdict"])
            if not m:
                print("  drift %s --sync %s: no verdict" % (name, run["mode"]))
                continue
            g = float(m.group(1))
            print("  drift %s --sync %-8s %.2e against PyTorch DDP's %.2e (largest of its modes): %s" % (
                name, run["mode"], g, worst_ddp, "within" if g <= worst_ddp else "MORE than DDP's"))


def ddp_lines(n, log=None):
    out = {}
    for l in lines(log or "ddp-%d.txt" % n) or []:
        if l.startswith("DDP "):
            f = l.split()
            kv = dict(x.split("=", 1) for x in f[2:] if "=" in x)
            out[f[1]] = kv
    return out


@guarded
def scaling():
    section("3. scaling: step time on 1 and 2 GPUs (same global batch of 512: strong scaling)")
    print("  %-44s %12s %12s %9s" % ("", "1 GPU", "2 GPUs", "1/2"))
    one = gpugraph_dp("dp-launch-1")
    for name, what in (("dp-launch-2", "gpugraph launch --nproc N"), ("dp-devices-2", "gpugraph train --devices N")):
        two = gpugraph_dp(name)
        if not one or not two:
            print("  %-44s %12s" % (what, "missing"))
            continue
        base = {r["mode"]: r["step"] for r in one[0]}
        for r in two[0]:
            t1, t2 = base.get(r["mode"]), r["step"]
            print("  %-44s %12s %12s %9s" % (what + ", --sync " + r["mode"], "%.3f ms" % t1 if t1 else "?",
                                             "%.3f ms" % t2 if t2 else "?", "%.2fx" % (t1 / t2) if t1 and t2 else "-"))
    d1, d2 = ddp_lines(1), ddp_lines(2)
    for mode in ("eager", "graph"):
        for key, what in (("step_ms_chunks", "chunks, as gpugraph times"), ("step_ms_events", "CUDA events")):
            a, b = d1.get(mode, {}).get(key), d2.get(mode, {}).get(key)
            a = float(a) if a else None
            b = float(b) if b else None
            print("  %-44s %12s %12s %9s" % ("PyTorch DDP %s (%s)" % (mode, what), "%.3f ms" % a if a else "missing",
                                             "%.3f ms" % b if b else "missing", "%.2fx" % (a / b) if a and b else "-"))


@guarded
def bandwidth():
    section("3. all-reduce bandwidth: float32 sum in place, busbw GB/s = algbw*2(n-1)/n")
    rows = {}
    ranks = None
    for l in lines("coll-bench.txt") or []:
        m = re.match(r"BenchmarkAllReduce/cuda/ranks=(\d+)/bytes=(\d+)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) algGB/s\s+([\d.]+) busGB/s", l)
        if m:
            ranks = int(m.group(1))
            b = int(m.group(2))
            rows.setdefault(b, {"name": m.group(3)})["gg"] = (float(m.group(4)) / 1e3, float(m.group(6)))
    for src, log in (("nccl", "nccl-bench.txt"), ("torch", "ddp-2.txt" if os.path.exists(os.path.join(OUT, "ddp-2.txt")) else "ddp-1.txt")):
        for l in lines(log) or []:
            m = re.match(r"BW (\w+) (\d+) (\S+) ([\d.]+) ([\d.]+) ([\d.]+)", l)
            if m and m.group(1) == src:
                b = int(m.group(2))
                rows.setdefault(b, {"name": m.group(3)})[src] = (float(m.group(4)), float(m.group(6)))
    if not rows:
        print("  no figures (coll-bench.txt, nccl-bench.txt, ddp-N.txt missing)")
        return
    print("  gpugraph: coll.AllReduce (%s rank(s), one group per iteration, wall time of b.N to synchronize);" % (ranks or "?"))
    print("  NCCL: nccl_allreduce.cu (same library as gpugraph's where nccl.h is the system's); torch: train_ddp.py's sweep")
    print("  %11s %-12s %11s %9s %11s %9s %11s %9s %9s" % ("bytes", "", "gpugraph us", "busbw", "NCCL us", "busbw", "torch us", "busbw", "gg/NCCL"))
    for b in sorted(rows):
        r = rows[b]
        cell = lambda k: ("%11.2f %9.2f" % r[k]) if k in r else "%11s %9s" % ("-", "-")
        ratio = "-"
        ref = r.get("nccl") or r.get("torch")
        if "gg" in r and ref and ref[0] > 0:
            ratio = "%.2f" % (ref[0] / r["gg"][0])  # time ratio = bandwidth ratio
        print("  %11d %-12s %s %s %s %9s" % (b, r["name"], cell("gg"), cell("nccl"), cell("torch"), ratio))
    print("  (gg/NCCL: gpugraph's bandwidth over NCCL's C++ program's, else torch's; 1.00 = the same)")


@guarded
def scale():
    if read("scale-gg-1-512.txt") is None:
        return
    section("4. scaling beside PyTorch DDP (two.sh scale): step time, speed-up, memory per GPU")
    plain = None
    for l in lines("scale-plain.txt") or []:
        m = re.search(r"trained .* ([\d.]+) (µs|ms) per step", l)
        if m:
            plain = dur_ms(m.group(1), m.group(2))
    gg = {}
    for n, b in ((1, 512), (2, 512), (2, 1024)):
        r = gpugraph_dp("scale-gg-%d-%d" % (n, b))
        if r:
            for run in r[0]:
                gg[(run["mode"], n, b)] = run
    ddp = {(n, b): ddp_lines(n, "scale-ddp-%d-%d.txt" % (n, b)) for n, b in ((1, 512), (2, 512), (2, 1024))}
    print("  %-40s %10s %10s %8s %10s %8s" % ("", "1 GPU 512", "2 GPUs 512", "strong", "2 GPUs 1024", "weak"))
    rows = []
    for mode in ("overlap", "after"):
        t = [gg.get((mode, n, b), {}).get("step") for n, b in ((1, 512), (2, 512), (2, 1024))]
        rows.append(("gpugraph --sync " + mode, t))
    for mode in ("graph", "eager"):
        t = [ddp[k].get(mode, {}).get("step_ms_chunks") for k in ((1, 512), (2, 512), (2, 1024))]
        rows.append(("PyTorch DDP " + mode, [float(x) if x else None for x in t]))
    for what, (t1, t2, tw) in rows:
        f = lambda x: "%.3f ms" % x if x else "-"
        print("  %-40s %10s %10s %8s %10s %8s" % (what, f(t1), f(t2), "%.2fx" % (t1 / t2) if t1 and t2 else "-",
                                                  f(tw), "%.2fx" % (2 * t1 / tw) if t1 and tw else "-"))
    r = gpugraph_dp("scale-gg-1-256")
    if r:
        half = {run["mode"]: run["step"] for run in r[0]}
        for mode in ("overlap", "after"):
            h, t2 = half.get(mode), gg.get((mode, 2, 512), {}).get("step")
            if h and t2:
                print("  --sync %-8s 1 GPU at batch 256 (one rank's compute of the 2-GPU step): %.3f ms; the 2-GPU step %.3f ms: %.3f ms more (all-reduces and the waits they cause)" % (
                    mode, h, t2, t2 - h))
    if plain:
        one = gg.get(("overlap", 1, 512), {}).get("step")
        print("  plain captured step (train --modes graph, 1 GPU): %.3f ms; the 1-GPU data-parallel step: %s" % (
            plain, "%.3f ms (%.2fx)" % (one, one / plain) if one else "?"))
    print("  memory per GPU (nvidia-smi peak over the run, all modes):")
    for name in ["scale-gg-%d-%d" % k for k in ((1, 512), (2, 512), (2, 1024))] + ["scale-ddp-%d-%d" % k for k in ((1, 512), (2, 512), (2, 1024))]:
        p = mem_peaks(name)
        if p:
            print("    %-22s %s" % (name, p))
    for k, d in ddp.items():
        for mode, kv in d.items():
            print("    DDP %s %d GPU(s) batch %d: torch reserved %s MiB, allocated %s MiB per rank" % (
                mode, k[0], k[1], kv.get("reserved_mib", "?"), kv.get("allocated_mib", "?")))
    r = gpugraph_dp("scale-2nodes")
    if r:
        print("  two machines simulated (a launch per GPU, NCCL over loopback sockets):")
        for run in r[0]:
            print("    --sync %-8s step %s; %s" % (run["mode"], "%.3f ms" % run["step"] if run["step"] else "?",
                                                  run["verdict"].replace("verdict: ", "") or "no verdict"))
        for e in r[1][:3]:
            print("    ! " + e.strip())
    for l in lines("scale-sockets-bw.txt") or []:
        m = re.match(r"BenchmarkAllReduce/cuda/ranks=(\d+)/bytes=(\d+)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) algGB/s\s+([\d.]+) busGB/s", l)
        if m and int(m.group(2)) in (1 << 20, 13688872, 1 << 26, 1 << 28):
            print("    all-reduce over sockets, %s: %.1f µs, busbw %s GB/s" % (m.group(3), float(m.group(4)) / 1e3, m.group(6)))
    for n in (1, 2):
        t = read("scale-timeline-%d.txt" % n)
        if t:
            print("  where the time goes, %d GPU(s) (nsys; scale-timeline-%d.txt):" % (n, n))
            for l in t.splitlines():
                if l.startswith("device") or re.match(r"  (GEMM|NCCL|elementwise|copy|memset|overlap|idle)", l):
                    print("    " + l.strip())


if __name__ == "__main__":
    print("two GPUs (tools/gpu/two.sh), logs in %s" % OUT)
    steps()
    tests()
    training()
    scaling()
    bandwidth()
    scale()
