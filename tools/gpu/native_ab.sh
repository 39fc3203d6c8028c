#!/bin/bash
# native_ab.sh: on the GPU machine, gpugraph bench --vs native of the
# command in .gpu/base/ (BASE=<commit> tools/gpu/build.sh) and of this
# tree's .gpu/gpugraph, alternated ROUNDS times in one command, after the
# cuda tests of this tree; then Go CPU profiles of Instantiate and Update
# at 10 nodes (BenchmarkInstantiate, API only; analyse them here with the
# same .gpu/gpugraph.test) and, where perf is installed, where the update's
# time goes by shared object. Everything lands in $OUT:
#   tests.txt       driver, internal/cuda and the root's cuda tests
#   ab.txt          the bench tables, each headed base or new
#   inst10.pprof, update10.pprof, perf.txt
#
#	ROUNDS=2 REPS=7 TIME=0.15 bash tools/gpu/native_ab.sh
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/native-ab}
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2} REPS=${REPS:-7} TIME=${TIME:-0.15}
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "$(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  sha256sum .gpu/gpugraph .gpu/base/gpugraph .gpu/gpugraph.test
  echo "perf: $(command -v perf || echo none)"
} | tee "$OUT/tests.txt"
{
  echo "== driver"; timeout 120 .gpu/driver.test 2>&1 | tail -3
  echo "== internal/cuda"; timeout 120 .gpu/cuda.test 2>&1 | tail -3
  echo "== root: cuda conformance, launch allocations, cuda tests"
  timeout 300 .gpu/gpugraph.test -test.run 'CUDA|LaunchAllocs' -test.v > "$OUT/root.log" 2>&1
  echo "exit $?"
  grep -E '^(--- FAIL|FAIL|ok|PASS)|    --- FAIL|allocations per' "$OUT/root.log" | head -30
  echo "cuda scenarios passed: $(grep -c -- '--- PASS: TestConformanceCUDA/' "$OUT/root.log")"
} >> "$OUT/tests.txt" 2>&1
tail -8 "$OUT/tests.txt"
# Odd rounds run base first, even rounds new first: neither side always
# runs on the machine as the first (or the second) of the pair.
for i in $(seq "$ROUNDS"); do
  order="base new"; [ $((i % 2)) = 0 ] && order="new base"
  for v in $order; do
    b=.gpu/gpugraph; [ $v = base ] && b=.gpu/base/gpugraph
    echo "=== $v, round $i" >> "$OUT/ab.txt"
    timeout 200 $b bench --backend cuda --vs native --reps "$REPS" --time "$TIME" >> "$OUT/ab.txt" 2>&1 || echo "$v round $i: exit $?" | tee -a "$OUT/ab.txt"
  done
done
grep -E '^===|Stream.Launch|Exec.Launch|bare|own path| n=' "$OUT/ab.txt"
for w in instantiate update; do
  f=inst10; [ $w = update ] && f=update10
  timeout 100 .gpu/gpugraph.test -test.run '^$' -test.bench "Instantiate/cuda/$w/n=10\$/api" -test.benchtime 3s -test.cpuprofile "$OUT/$f.pprof" 2>&1 | grep -E '^Bench'
done
if command -v perf >/dev/null; then
  timeout 100 perf record -F 4999 -g -o /tmp/perf.data .gpu/gpugraph.test -test.run '^$' -test.bench 'Instantiate/cuda/update/n=10$/api' -test.benchtime 3s > /dev/null 2>&1
  { perf report -i /tmp/perf.data --no-children --sort dso --stdio 2>/dev/null | head -30
    perf report -i /tmp/perf.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v '^$' | head -60; } > "$OUT/perf.txt"
  head -20 "$OUT/perf.txt"
fi
