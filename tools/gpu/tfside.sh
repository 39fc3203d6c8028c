#!/usr/bin/env bash
# Side by side on the GPU machine's CPUs: gpugraph's host backend against
# Taskflow, the loop and summary of ../shared/bench/taskflow/side/run.sh
# without a Go toolchain. Needs what `PERF=1 tools/gpu/build.sh` puts in
# .gpu/: tfside-go (the Go harness, built here), tfside.cpp and taskflow/
# (the C++ harness and Taskflow's headers, compiled there with g++).
#
# One command runs every table of the Taskflow sections of docs/performance.md and docs/performance-log.md:
# worker counts THREADS (default "16 4 2") × bodies BODIES (default "atomic
# work:1000 work:5000": one shared atomic increment, or about 1 µs / 5 µs of
# the xorshift loop, the iteration count calibrated once by the C++ side and
# given to both) × every shape, in mode graph (one launch and wait per run),
# plus mode batch with the atomic body; REPS (default 5) repetitions, the
# order of the two programs alternating between repetitions.
#   tools/gpu/tfside.sh                       (logs and summary in $OUT/tfside/)
#   THREADS="16 2" BODIES=work:1000 REPS=3 tools/gpu/tfside.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}/${TAG:-tfside}; mkdir -p "$OUT"
GOSIDE=${GOSIDE:-.gpu/tfside-go}; THREADS=${THREADS:-"16 4 2"}; REPS=${REPS:-5}; TIME=${TIME:-0.3}; WARMUP=${WARMUP:-0.1}; BATCH=${BATCH:-100}
BODIES=${BODIES:-"atomic work:1000 work:5000"}
g++ -std=c++20 -O2 -pthread -I.gpu/taskflow .gpu/tfside.cpp -o /tmp/tfside-cpp
# body specs: "atomic" or "work:NS" -> (body, ns, iterations)
declare -A ITERS
for b in $BODIES; do
  case $b in
    atomic) ;;
    work:*) ns=${b#work:}
            ITERS[$ns]=$(/tmp/tfside-cpp -calibrate -work "$ns" | sed -n 's/.*work_iters=\([0-9]*\).*/\1/p')
            [ -n "${ITERS[$ns]}" ] || { echo "tfside-cpp -calibrate -work $ns gave no work_iters" >&2; exit 1; } ;;
    *) echo "BODIES: $b is neither atomic nor work:NS" >&2; exit 2 ;;
  esac
done
{ echo "date: $(date -u '+%F %T UTC')"; echo "cpu: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "taskflow: $(/tmp/tfside-cpp -info)"; echo "go: $(GOMAXPROCS=1 "$GOSIDE" -threads 1 -info)"
  echo "runs: $REPS reps, threads {$THREADS}, bodies {$BODIES}, ${WARMUP}s warm-up + ${TIME}s timed, batch $BATCH"
  for ns in "${!ITERS[@]}"; do echo "work body: ${ns} ns = ${ITERS[$ns]} iterations (calibrated by tfside-cpp)"; done; } | tee "$OUT/machine.txt"
RAW=$OUT/raw.txt; : > "$RAW"
# cpp mode, go mode, body spec
CONFIGS=()
for b in $BODIES; do CONFIGS+=("graph graph $b"); done
case " $BODIES " in *" atomic "*) CONFIGS+=("batch batch atomic") ;; esac
for rep in $(seq 1 "$REPS"); do
  for t in $THREADS; do
    for cfg in "${CONFIGS[@]}"; do
      set -- $cfg
      body=${3%%:*}; ns=1000; it=0
      if [ "$body" = work ]; then ns=${3#work:}; it=${ITERS[$ns]}; fi
      common=(-threads "$t" -body "$body" -firstrep "$rep" -time "$TIME" -warmup "$WARMUP" -batch "$BATCH" -work "$ns" -iters "$it")
      cpp=(/tmp/tfside-cpp -mode "$1" "${common[@]}")
      gosd=(env GOMAXPROCS="$t" "$GOSIDE" -mode "$2" "${common[@]}")
      if [ $((rep % 2)) -eq 1 ]; then "${cpp[@]}" >> "$RAW"; "${gosd[@]}" >> "$RAW"
      else "${gosd[@]}" >> "$RAW"; "${cpp[@]}" >> "$RAW"; fi
    done
  done
  echo "rep $rep/$REPS done" >&2
done
python3 - "$RAW" <<'PY' | tee "$OUT/summary.txt"
import sys, statistics as st
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1]) if l.startswith("impl=")]
bad = [r for r in rows if r["check"] not in ("ok", "n/a")]
print(f"{len(rows)} samples; checks: {sum(r['check']=='ok' for r in rows)} ok, {len(bad)} failed")
for r in bad: print("FAILED:", r)
g = {}
for r in rows:
    body = r["body"] + (f"{int(r['work_ns'])/1000:g}us" if r["body"] == "work" else "")
    g.setdefault((int(r["threads"]), body, r["mode"], r["shape"], r["impl"]), []).append(
        (float(r["ns_per_node"]), float(r.get("serial_ns_per_node", "nan"))))
order = ["chain1000", "wavefront32x32", "fanout1x1000x1", "tree10", "chain10"]
# the shape's work over its critical path (nodes on the longest path)
par = {"chain1000": 1, "wavefront32x32": 1024 / 63, "fanout1x1000x1": 1002 / 3, "tree10": 1023 / 10, "chain10": 1}
print("speedup: the body's serial time / time per node (medians); ideal: min(threads, nodes / critical path)")
print(f"{'threads':>7} {'body':9} {'mode':6} {'shape':15} | {'gg ns/node':>10} {'tf ns/node':>10} | {'gg/tf':>5} | {'gg x':>5} {'tf x':>5} {'ideal':>5} {'gg/ideal':>8}")
for k in sorted({k[:4] for k in g}, key=lambda k: (-k[0], k[1], k[2], order.index(k[3]))):
    a, b = g.get(k + ("gpugraph",)), g.get(k + ("taskflow",))
    if not (a and b):
        continue
    ga, tb = st.median(x[0] for x in a), st.median(x[0] for x in b)
    line = f"{k[0]:>7} {k[1]:9} {k[2]:6} {k[3]:15} | {ga:10.1f} {tb:10.1f} | {ga/tb:5.2f}"
    if k[1].startswith("work"):
        gx, tx = st.median(x[1] for x in a) / ga, st.median(x[1] for x in b) / tb
        ideal = min(k[0], par[k[3]])
        line += f" | {gx:5.2f} {tx:5.2f} {ideal:5.1f} {gx/ideal:8.2f}"
    print(line)
PY
echo "raw: $RAW; summary: $OUT/summary.txt; machine: $OUT/machine.txt"
