#!/usr/bin/env python3
"""Where a training step's time goes, per GPU, from an nsys trace.

    python3 timeline.py TRACE.csv [STEPS]

TRACE.csv is `nsys stats -r cuda_gpu_trace -f csv` of a run of gpugraph
train: every kernel, copy and memset with its start, duration, device and
stream. A step ends at the next train_softmax_xent kernel (one per step).
For each device, over the last STEPS complete steps (default 20) of the
stream with the most steps, it prints the median step, its busy time by
kind (GEMM, NCCL, elementwise, copies), the time two streams overlap, and
the idle time; then the operations of the median step, in order, with
their offsets: the timeline of one step.
"""

import csv
import re
import statistics
import sys


def col(row, *names):
    for n in names:
        for k in row:
            if k and k.strip().lower().startswith(n):
                return row[k]
    return None


def kind(name):
    n = name.lower()
    if "nccl" in n:
        return "NCCL"
    if "gemm" in n or "cutlass" in n or "cublas" in n or n.startswith("sm90_") or "xmma" in n:
        return "GEMM"
    if "memcpy" in n:
        return "copy"
    if "memset" in n:
        return "memset"
    return "elementwise"


def union(intervals):
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def main():
    path = sys.argv[1]
    last = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ops = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                start, dur = int(col(row, "start")), int(col(row, "duration"))
            except (TypeError, ValueError):
                continue
            dev = col(row, "device") or "?"
            m = re.search(r"\((\d+)\)", dev)
            ops.append({"start": start, "end": start + dur, "dev": m.group(1) if m else dev,
                        "strm": col(row, "strm") or "?", "name": col(row, "name") or "?"})
    if not ops:
        sys.exit("no operations in %s" % path)
    for dev in sorted({o["dev"] for o in ops}):
        mine = sorted((o for o in ops if o["dev"] == dev), key=lambda o: o["start"])
        marks = {}
        for o in mine:
            if "softmax_xent" in o["name"]:
                marks.setdefault(o["strm"], []).append(o["start"])
        if not marks:
            print("device %s: no train_softmax_xent kernel: no steps to cut" % dev)
            continue
        strm = max(marks, key=lambda s: len(marks[s]))
        cuts = marks[strm][-(last + 1):]
        if len(cuts) < 2:
            print("device %s: fewer than 2 steps" % dev)
            continue
        steps = []
        for a, b in zip(cuts, cuts[1:]):
            inside = [o for o in mine if a <= o["start"] < b]
            by = {}
            for o in inside:
                by[kind(o["name"])] = by.get(kind(o["name"]), 0) + (min(o["end"], b) - o["start"])
            busy = union([(o["start"], min(o["end"], b)) for o in inside])
            steps.append({"a": a, "b": b, "ops": inside, "by": by, "busy": busy,
                          "sum": sum(by.values()), "len": b - a})
        med = sorted(steps, key=lambda s: s["len"])[len(steps) // 2]
        us = lambda ns: ns / 1e3
        print("device %s (stream %s): %d steps, median %.1f µs (range %.1f-%.1f)" % (
            dev, strm, len(steps), us(med["len"]), us(min(s["len"] for s in steps)), us(max(s["len"] for s in steps))))
        for k in ("GEMM", "NCCL", "elementwise", "copy", "memset"):
            v = statistics.median(s["by"].get(k, 0) for s in steps)
            print("  %-12s %8.1f µs  %5.1f %%  (%d ops in the median step)" % (
                k, us(v), 100 * v / med["len"], sum(1 for o in med["ops"] if kind(o["name"]) == k)))
        over = statistics.median(s["sum"] - s["busy"] for s in steps)
        idle = statistics.median(s["len"] - s["busy"] for s in steps)
        print("  %-12s %8.1f µs  (work on two streams at once, counted twice above)" % ("overlap", us(over)))
        print("  %-12s %8.1f µs  %5.1f %%  (no operation running on the device)" % ("idle", us(idle), 100 * idle / med["len"]))
        print("  the median step, operation by operation (offset from its start, duration, stream):")
        for o in med["ops"]:
            print("    %8.1f %7.1f  s%-4s %-12s %s" % (us(o["start"] - med["a"]), us(o["end"] - o["start"]), o["strm"],
                                                    kind(o["name"]), o["name"][:70]))
        print()


if __name__ == "__main__":
    main()
