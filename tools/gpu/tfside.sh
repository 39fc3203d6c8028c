#!/usr/bin/env bash
# Side by side on the GPU machine's CPUs: gpugraph's host backend against
# Taskflow, the loop and summary of ../shared/bench/taskflow/side/run.sh
# without a Go toolchain. Needs what `PERF=1 tools/gpu/build.sh` puts in
# .gpu/: tfside-go (the Go harness, built here), tfside.cpp and taskflow/
# (the C++ harness and Taskflow's headers, compiled there with g++).
#   THREADS="16 2 1" REPS=5 TIME=0.5 tools/gpu/tfside.sh   (logs in $OUT/tfside/)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}/${TAG:-tfside}; mkdir -p "$OUT"
GOSIDE=${GOSIDE:-.gpu/tfside-go}; THREADS=${THREADS:-"$(nproc)"}; REPS=${REPS:-5}; TIME=${TIME:-0.5}; WARMUP=${WARMUP:-0.2}; BATCH=${BATCH:-100}
g++ -std=c++20 -O2 -pthread -I.gpu/taskflow .gpu/tfside.cpp -o /tmp/tfside-cpp
{ echo "date: $(date -u '+%F %T UTC')"; echo "cpu: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "taskflow: $(/tmp/tfside-cpp -info)"; echo "go: $(GOMAXPROCS=1 .gpu/tfside-go -threads 1 -info)"
  echo "runs: $REPS reps, threads {$THREADS}, ${WARMUP}s warm-up + ${TIME}s timed, batch $BATCH"; } | tee "$OUT/machine.txt"
RAW=$OUT/raw.txt; : > "$RAW"
CONFIGS=("graph graph atomic" "batch batch atomic")
for rep in $(seq 1 "$REPS"); do
  for t in $THREADS; do
    for cfg in "${CONFIGS[@]}"; do
      set -- $cfg
      common=(-threads "$t" -body "$3" -firstrep "$rep" -time "$TIME" -warmup "$WARMUP" -batch "$BATCH")
      cpp=(/tmp/tfside-cpp -mode "$1" "${common[@]}")
      gosd=(env GOMAXPROCS="$t" "$GOSIDE" -mode "$2" "${common[@]}")
      if [ $((rep % 2)) -eq 1 ]; then "${cpp[@]}" >> "$RAW"; "${gosd[@]}" >> "$RAW"
      else "${gosd[@]}" >> "$RAW"; "${cpp[@]}" >> "$RAW"; fi
    done
  done
done
python3 - "$RAW" <<'PY' | tee "$OUT/summary.txt"
import sys, statistics as st
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1]) if l.startswith("impl=")]
bad = [r for r in rows if r["check"] not in ("ok", "n/a")]
print(f"{len(rows)} samples; counter checks: {sum(r['check']=='ok' for r in rows)} ok, {len(bad)} failed")
g = {}
for r in rows:
    g.setdefault((int(r["threads"]), r["mode"], r["shape"], r["impl"]), []).append(float(r["ns_per_node"]))
order = ["chain1000", "wavefront32x32", "fanout1x1000x1", "tree10", "chain10"]
print(f"{'threads':>7} {'mode':6} {'shape':15} | {'gpugraph ns/node':>16} {'taskflow ns/node':>16} | gg/tf")
for k in sorted({k[:3] for k in g}, key=lambda k: (-k[0], k[1], order.index(k[2]))):
    a, b = g.get(k + ("gpugraph",)), g.get(k + ("taskflow",))
    if a and b:
        print(f"{k[0]:>7} {k[1]:6} {k[2]:15} | {st.median(a):16.1f} {st.median(b):16.1f} | {st.median(a)/st.median(b):5.2f}")
PY
