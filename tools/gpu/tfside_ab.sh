#!/usr/bin/env bash
# tfside_ab.sh: builds of gpugraph's host engine side by side with Taskflow
# and with each other, on the machine it runs on: tfside.sh's harness with
# several Go programs (each a tfside-go built from some commit), the order of
# all programs rotating every repetition. What decided the scheduler's
# changes in docs/performance.md:
#   PERF=1 VERIFY=1 tools/gpu/build.sh          (.gpu/tfside-go, Taskflow's side)
#   (build another commit's tfside-go into .gpu/tfside-base the same way)
#   VARIANTS="base:.gpu/tfside-base new:.gpu/tfside-go" THREADS="16 4 2" REPS=5 OUT=$OUT tools/gpu/tfside_ab.sh
# The summary gives each program's time per node over Taskflow's, medians, and
# with a work body each side's speedup over the body run serially.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
D=${D:-.gpu} # taskflow/ and tfside.cpp (PERF=1 tools/gpu/build.sh), the Go builds
OUT=${OUT:-/tmp/exp}; mkdir -p "$OUT"
THREADS=${THREADS:-"16 4"}; REPS=${REPS:-5}; TIME=${TIME:-0.3}; WARMUP=${WARMUP:-0.1}
BODIES=${BODIES:-"work:1000 work:5000 atomic"}
VARIANTS=${VARIANTS:-"new:$D/tfside-go"}
g++ -std=c++20 -O2 -pthread -I$D/taskflow $D/tfside.cpp -o /tmp/tfside-cpp
declare -A ITERS
for b in $BODIES; do case $b in work:*) ns=${b#work:}; ITERS[$ns]=$(/tmp/tfside-cpp -calibrate -work "$ns" | sed -n 's/.*work_iters=\([0-9]*\).*/\1/p');; esac; done
{ date -u; nproc; lscpu | grep -E "Model name|Thread|Core|Socket"; for ns in "${!ITERS[@]}"; do echo "work $ns ns = ${ITERS[$ns]} iters"; done; echo "variants: $VARIANTS"; echo "threads: $THREADS; reps $REPS; ${WARMUP}s warm-up + ${TIME}s timed"; } > "$OUT/machine.txt"
RAW=$OUT/raw.txt; : > "$RAW"
for rep in $(seq 1 "$REPS"); do
  for t in $THREADS; do
    for b in $BODIES; do
      body=${b%%:*}; ns=1000; it=0
      if [ "$body" = work ]; then ns=${b#work:}; it=${ITERS[$ns]}; fi
      common=(-mode graph -threads "$t" -body "$body" -firstrep "$rep" -time "$TIME" -warmup "$WARMUP" -batch 100 -work "$ns" -iters "$it")
      progs=("cpp" $VARIANTS); n=${#progs[@]}
      for k in $(seq 0 $((n-1))); do
        p=${progs[$(( (k + rep) % n ))]}
        if [ "$p" = cpp ]; then /tmp/tfside-cpp "${common[@]}" >> "$RAW"
        else name=${p%%:*}; bin=${p#*:}
          env GOMAXPROCS="$t" "$bin" "${common[@]}" | sed "s/impl=gpugraph/impl=$name/" >> "$RAW"
        fi
      done
    done
  done
  echo "rep $rep done $(date -u +%T)" >&2
done
python3 - "$RAW" <<'PY' | tee "$OUT/summary.txt"
import sys, statistics as st
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1]) if l.startswith("impl=")]
bad = [r for r in rows if r["check"] not in ("ok", "n/a")]
print(f"{len(rows)} samples; {len(bad)} failed checks")
g = {}
for r in rows:
    body = r["body"] + (f"{int(r['work_ns'])/1000:g}us" if r["body"] == "work" else "")
    g.setdefault((int(r["threads"]), body, r["shape"], r["impl"]), []).append((float(r["ns_per_node"]), float(r.get("serial_ns_per_node", "nan"))))
impls = sorted({k[3] for k in g} - {"taskflow"})
print("time per node / taskflow's (speedups gg vs tf); medians")
for k in sorted({k[:3] for k in g}, key=lambda k: (-k[0], k[1], k[2])):
    tf = g.get(k + ("taskflow",))
    if not tf: continue
    tb = st.median(x[0] for x in tf); tx = st.median(x[1] for x in tf) / tb
    line = f"{k[0]:>3} {k[1]:8} {k[2]:15} tf {tb:8.1f}ns"
    if k[1].startswith("work"): line += f" {tx:5.2f}x"
    for i in impls:
        a = g.get(k + (i,))
        if not a: continue
        ga = st.median(x[0] for x in a)
        line += f" | {i} {ga/tb:5.2f}"
        if k[1].startswith("work"): line += f" {st.median(x[1] for x in a)/ga:5.2f}x"
    print(line)
PY
