#!/usr/bin/env python3
"""Summarizes tools/gpu/launchpath_ab.sh's lp.txt: per side, each variant's
median ns per launch, and the paired ratios (each sample over the sample of
the same round in the same process), overall and per process."""
import collections
import re
import statistics
import sys

rows = collections.defaultdict(list)  # (side, variant) -> [(process, ns per launch)]
for line in open(sys.argv[1] if len(sys.argv) > 1 else "lp.txt"):
    f = line.split()
    m = re.search(r"CUDALaunchPath/([a-z-]+)-\d+$", f[2])
    if not m or "ns/launch" not in f:
        continue
    rows[(f[0], m.group(1))].append((int(f[1]), float(f[f.index("ns/launch") - 1])))

variants = ["api-current", "raw-current", "c-loop", "graph-api", "graph-c-loop"]
pairs = [("api-current", "raw-current"), ("raw-current", "c-loop"), ("api-current", "c-loop"), ("graph-api", "graph-c-loop")]
for side in ["base", "new"]:
    print(side)
    for v in variants:
        xs = [x for _, x in rows[(side, v)]]
        if xs:
            print(f"  {v:14s} median {statistics.median(xs):7.1f} ns/launch  ({len(xs)} samples)")
    for a, b in pairs:
        A, B = rows[(side, a)], rows[(side, b)]
        if not A or not B:
            continue
        rs = [x[1] / y[1] for x, y in zip(A, B)]
        procs = sorted({p for p, _ in A})
        per = [round(statistics.median([x[1] / y[1] for x, y in zip(A, B) if x[0] == p]), 3) for p in procs]
        print(f"  {a} / {b}: paired median {statistics.median(rs):.3f}, per process {per}")
