#!/usr/bin/env python3
"""Compact summaries of the sections of tools/gpu/perf.sh.

  perf_summary.py launchpath FILE       BenchmarkCUDALaunchPath output
  perf_summary.py instantiate FILE      BenchmarkInstantiate output
  perf_summary.py train FILE...         gpugraph train outputs and torch_step.py lines
  perf_summary.py taskflow FILE         tfside raw samples (impl=... lines)

Repeats of a benchmark variant named NAME#01, NAME#02, ... (the interleaved
rounds of launchRounds) count as samples of NAME.
"""
import re
import statistics as st
import sys


def fmt_runs(xs, scale=1.0, digits=2):
    return " ".join(f"{x * scale:.{digits}f}" for x in sorted(xs))


# --- (a) BenchmarkCUDALaunchPath

BENCH = r"(\S+?)(?:#\d+)?(?:-\d+)?\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) ns/(launch|node)"


def launchpath(path):
    rx = re.compile(r"^BenchmarkCUDALaunchPath/" + BENCH)
    runs = {}
    fails = []
    for line in open(path, errors="replace"):
        m = rx.match(line)
        if m:
            runs.setdefault(m.group(1), []).append(float(m.group(2)))
        elif "FAIL" in line or "CUDA_ERROR" in line:
            fails.append(line.rstrip())
    order = ["api", "api-current", "raw", "raw-current", "c-loop", "graph-api", "graph-c-loop"]
    names = [n for n in order if n in runs] + sorted(n for n in runs if n not in order)
    what = {
        "api": "Stream.Launch (the API)",
        "api-current": "Stream.Launch, context current, locked thread",
        "raw": "driver binding alone",
        "raw-current": "binding, context current, locked thread",
        "c-loop": "C loop, cuLaunchKernel (native)",
        "graph-api": "Exec.Launch, 1-node graph (the API)",
        "graph-c-loop": "C loop, cuGraphLaunch (native)",
    }
    print("launch path: µs per launch (1000 launches + synchronize per op), runs sorted, median, / native C loop")
    print(f"  {'variant':14} {'what':46} {'n':>2}  {'median':>7} {'/ C':>5}  runs")
    for n in names:
        xs = runs[n]
        ref = runs.get("graph-c-loop" if n.startswith("graph") else "c-loop")
        ratio = f"{st.median(xs) / st.median(ref):5.2f}" if ref else f"{'-':>5}"
        print(f"  {n:14} {what.get(n, ''):46} {len(xs):>2}  {st.median(xs) / 1000:7.2f} {ratio}  {fmt_runs(xs, 1e-3)}")
    if "graph-api" in runs and "api" in runs:
        print(f"  graph launch / kernel launch through the API: {st.median(runs['graph-api']) / st.median(runs['api']):.2f}")
    for f in fails:
        print("  " + f)


# --- (b) BenchmarkInstantiate

def instantiate(path):
    rx = re.compile(r"^BenchmarkInstantiate/cuda/(instantiate|update)/n=(\d+)/" + BENCH)
    runs = {}
    fails, errs = [], []
    for line in open(path, errors="replace"):
        m = rx.match(line)
        if m:
            runs.setdefault((m.group(1), int(m.group(2)), m.group(3)), []).append(float(m.group(4)))
        elif line.startswith("--- FAIL") or "--- FAIL" in line:
            fails.append(line.strip())
        elif re.search(r"CUDA_ERROR|CUresult|_test\.go:\d+:", line):
            errs.append(line.rstrip())
    print("instantiate/update, cuda: ns per node, median of the runs (min-max), API / native C loop")
    print(f"  {'op':12} {'n':>6} {'runs':>5} | {'api':>8} {'(min-max)':>17} | {'c-loop':>8} {'(min-max)':>17} | {'api/C':>5}")
    for op in ("instantiate", "update"):
        for n in sorted({k[1] for k in runs if k[0] == op}):
            a, c = runs.get((op, n, "api")), runs.get((op, n, "c-loop"))

            def col(xs):
                if not xs:
                    return f"{'-':>8} {'':>17}"
                return f"{st.median(xs):8.1f} {f'({min(xs):.1f}-{max(xs):.1f})':>17}"
            ratio = f"{st.median(a) / st.median(c):5.2f}" if a and c else f"{'-':>5}"
            print(f"  {op:12} {n:>6} {f'{len(a or [])}/{len(c or [])}':>5} | {col(a)} | {col(c)} | {ratio}")
    print(f"  failures: {len(fails)}")
    for f in fails + errs[:20]:
        print("  " + f)


# --- (c) gpugraph train against torch_step.py

def dur_us(v, unit):
    return float(v) * (1000.0 if unit == "ms" else 1.0)


def train(paths):
    gg = {"op by op": [], "graph": [], "graph device": [], "op by op device": []}
    torch, torch_tf32 = [], []
    for path in paths:
        mode = None
        for line in open(path, errors="replace"):
            if line.startswith("== op by op"):
                mode = "op by op"
            elif line.startswith("== captured graph"):
                mode = "graph"
            m = re.search(r"^trained .*, ([\d.]+) (µs|ms) per step", line)
            if m and mode:
                gg[mode].append(dur_us(*m.groups()))
            m = re.search(r"^\s+device time ([\d.]+) (µs|ms) per step", line)
            if m and mode:
                gg[mode + " device"].append(dur_us(*m.groups()))
            if line.startswith("torch_step ") and "check=" not in line:
                kv = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
                (torch_tf32 if kv.get("tf32") == "1" else torch).append(kv)
    med = lambda xs: st.median(xs) if xs else float("nan")
    print("training step, reference model (256→1024×4→10, batch 512, SGD), µs per step, median of the runs [runs]")
    for k in ("op by op", "graph"):
        if gg[k]:
            print(f"  gpugraph {k:9} wall   {med(gg[k]):7.1f}  [{fmt_runs(gg[k], 1, 0)}]")
        if gg[k + " device"]:
            print(f"  gpugraph {k:9} device {med(gg[k + ' device']):7.1f}  [{fmt_runs(gg[k + ' device'], 1, 0)}]  (events around the timed chunks)")
    tw = [float(r["wall_us"]) for r in torch]
    tc = [float(r["gpu_chunk_us"]) for r in torch]
    tr = [float(r["gpu_replay_us"]) for r in torch]
    if torch:
        r0 = torch[0]
        print(f"  PyTorch  graph     wall   {med(tw):7.1f}  [{fmt_runs(tw, 1, 0)}]  (torch {r0.get('torch', '?')}, CUDA {r0.get('cuda', '?')}, FP32 without TF32)")
        print(f"  PyTorch  graph     GPU    {med(tc):7.1f}  [{fmt_runs(tc, 1, 0)}]  (events around the timed chunks)")
        print(f"  PyTorch  graph     GPU    {med(tr):7.1f}  [{fmt_runs(tr, 1, 0)}]  (replays back to back: the step alone)")
    if gg["graph"] and tw:
        line = f"  graph step, gpugraph / PyTorch: wall {med(gg['graph']) / med(tw):.2f}"
        if gg["graph device"]:
            line += f", device {med(gg['graph device']) / med(tc):.2f}"
        print(line)
    if torch:
        fl = float(torch[0]["flops"])
        peak = float(torch[0]["fp32_peak_us"])
        print(f"  FLOPs per step {fl:.3g} (forward 2·B·Σin·out, backward twice that): {peak:.1f} µs at the FP32 peak (67 TFLOP/s);"
              f" PyTorch's step alone at {peak / med(tr) * 100:.0f}% of it", end="")
        if gg["graph device"]:
            print(f", gpugraph's chunk device time at {peak / med(gg['graph device']) * 100:.0f}%", end="")
        print()
    for r in torch_tf32:
        print(f"  (information) PyTorch with TF32: wall {r['wall_us']}, GPU alone {r['gpu_replay_us']} µs; TF32 peak (495 TFLOP/s dense) {r.get('tf32_peak_us', '?')} µs")
    if not torch:
        print("  no torch_step line: see the torch logs")


# --- (d) Taskflow side by side (the summary of shared/bench/taskflow/side/run.sh)

def taskflow(path):
    rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(path) if l.startswith("impl=")]
    bad = [r for r in rows if r["check"] not in ("ok", "n/a")]
    print(f"{len(rows)} samples; counter checks: {sum(r['check']=='ok' for r in rows)} ok, {len(bad)} failed")
    for r in bad:
        print("FAILED:", r)
    mode_pair = {"graph": "graph", "batch": "batch", "stream": "op-by-op", "async": "op-by-op"}
    groups = {}
    for r in rows:
        k = (int(r["threads"]), r["body"], mode_pair[r["mode"]], r["shape"], r["impl"])
        groups.setdefault(k, []).append((float(r["ns_per_run"]), float(r["ns_per_node"])))
    order = ["chain1000", "wavefront32x32", "fanout1x1000x1", "tree10", "chain10"]
    keys = sorted({k[:4] for k in groups}, key=lambda k: (-k[0], k[1], ["graph", "batch", "op-by-op"].index(k[2]), order.index(k[3])))
    print(f"{'threads':>7} {'body':6} {'mode':8} {'shape':15} {'n':>3} | {'gpugraph ns/run':>15} {'ns/node':>8} {'(min-max)':>15} | {'taskflow ns/run':>15} {'ns/node':>8} {'(min-max)':>15} | {'gg/tf':>6}")
    for k in keys:
        g, t = groups.get(k + ("gpugraph",)), groups.get(k + ("taskflow",))

        def cols(s):
            if not s:
                return f"{'-':>15} {'-':>8} {'':>15}"
            nodes = [x[1] for x in s]
            return f"{st.median(x[0] for x in s):15.0f} {st.median(nodes):8.1f} {f'({min(nodes):.1f}-{max(nodes):.1f})':>15}"
        ratio = f"{st.median(x[1] for x in g) / st.median(x[1] for x in t):6.2f}" if g and t else f"{'-':>6}"
        print(f"{k[0]:>7} {k[1]:6} {k[2]:8} {k[3]:15} {len((g or t)):>3} | {cols(g)} | {cols(t)} | {ratio}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    what, files = sys.argv[1], sys.argv[2:]
    if what == "launchpath":
        launchpath(files[0])
    elif what == "instantiate":
        instantiate(files[0])
    elif what == "train":
        train(files)
    elif what == "taskflow":
        taskflow(files[0])
    else:
        sys.exit(__doc__)
