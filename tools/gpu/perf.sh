#!/bin/bash
# perf.sh: the performance comparisons side by side, in one command on the
# GPU machine. Run from the repository root with .gpu/ built here by
# tools/gpu/build.sh (PERF=1 for section taskflow) and carried (device tool:
# carry [".gpu"]). Every log goes under $OUT (default /tmp/perf-out); each
# section prints a compact summary, all kept in $OUT/summary.txt. A failing
# step is reported and the next section still runs; each step has a time
# limit so that the whole stays under 10 minutes (about 6 as measured
# estimates go: launch 1, inst 1.5, train 1.5, taskflow 2.5).
#
#	bash tools/gpu/perf.sh                    # every section
#	bash tools/gpu/perf.sh launch train       # only some: launch inst train taskflow
#
# Sections and their logs:
#   launch    BenchmarkCUDALaunchPath, every variant, with the C loops of
#             tools/bench/native/launchloop.c (GG_LAUNCH_LOOP), -test.count 6
#             -test.benchtime 0.3s: the variants interleaved, round by round  launchpath.txt
#             then the API variants alone (api, graph-api) with a Go CPU
#             profile (go tool pprof is not there: analyse it here, with the
#             same .gpu/gpugraph.test; its sha256 is kept beside)         launchpath-api.cpu.pprof
#                                                                         launchpath-api.txt, launchpath-api.binary.txt
#   inst      BenchmarkInstantiate 'Instantiate/cuda' with the C loops of
#             tools/bench/native/instloop.c (GG_INST_LOOP), -test.count 5
#             -test.benchtime 0.2s, interleaved                          instantiate.txt
#   train     gpugraph train --backend cuda --model reference (300 steps,
#             chunks of 50: op by op, then the captured step replayed) and
#             tools/bench/torch_step.py (the same step in PyTorch, captured
#             with torch.cuda.graphs), alternated 3 times each, then one
#             torch_step.py --tf32 for information                      train-gg-N.txt train-torch-N.txt train-torch-tf32.txt
#   taskflow  where .gpu/taskflow/taskflow/taskflow.hpp and .gpu/tfside-go
#             exist (PERF=1 tools/gpu/build.sh): .gpu/tfside.cpp built with
#             g++ -std=c++20 -O2 -pthread, alternated with .gpu/tfside-go
#             as shared/bench/taskflow/side/run.sh does, THREADS=16,
#             TF_REPS=3 repetitions (run.sh's REPS), TF_TIME=1 s each     taskflow-raw.txt taskflow-machine.txt
#
# Environment: OUT, PY (the Python with PyTorch, default
# /opt/torch/.venv/bin/python), THREADS, TF_REPS, TF_TIME, CUDA (default
# /usr/local/cuda).
set -u
cd "$(dirname "$0")/../.."
CUDA=${CUDA:-/usr/local/cuda}
export LD_LIBRARY_PATH=$CUDA/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/perf-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d /tmp/perf.XXXXXX)
PY=${PY:-/opt/torch/.venv/bin/python}
SUMPY=$(command -v python3 || echo "$PY")
SECTIONS=${*:-launch inst train taskflow}
: > "$OUT/summary.txt"

say() { echo "$*" | tee -a "$OUT/summary.txt"; }
summary() { "$SUMPY" tools/gpu/perf_summary.py "$@" 2>&1 | tee -a "$OUT/summary.txt"; }
# run LIMIT LOG CMD...: runs CMD with its output in LOG, under a time limit;
# says so if it fails.
run() {
  local limit=$1 log=$2
  shift 2
  timeout "$limit" "$@" > "$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || say "  FAILED (exit $rc$([ $rc -eq 124 ] && echo ", over ${limit}s")): $* (log $(basename "$log"))"
  return $rc
}

{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  echo "$(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  echo "sections: $SECTIONS"
} | tee "$OUT/machine.txt" | tee -a "$OUT/summary.txt"

# cloop NAME: builds tools/bench/native/NAME.c, the native side of a benchmark,
# into a shared library and prints its path; prints nothing (and says so)
# if gcc fails, and the benchmark runs its API variants only.
cloop() {
  if gcc -O2 -shared -fPIC -I"$CUDA/include" -o "$WORK/lib$1.so" "tools/bench/native/$1.c" -L"$CUDA/lib64/stubs" -lcuda 2> "$OUT/$1-gcc.txt"; then
    echo "$WORK/lib$1.so"
  else
    say "  gcc failed ($1-gcc.txt): the API variants only" >&2
  fi
}

launch() {
  say ""
  say "== launch: BenchmarkCUDALaunchPath, C loops in the process (launchpath.txt)"
  local lib
  lib=$(cloop launchloop)
  GG_LAUNCH_LOOP=$lib run 300 "$OUT/launchpath.txt" \
    .gpu/gpugraph.test -test.run '^$' -test.bench 'CUDALaunchPath' -test.count 6 -test.benchtime 0.3s
  summary launchpath "$OUT/launchpath.txt"
  # The API variants alone, profiled (no C loop: its time would be the driver's).
  run 120 "$OUT/launchpath-api.txt" .gpu/gpugraph.test -test.run '^$' -test.bench 'CUDALaunchPath/(api|graph-api)$' \
    -test.count 1 -test.benchtime 3s -test.cpuprofile "$OUT/launchpath-api.cpu.pprof"
  {
    echo "profile: launchpath-api.cpu.pprof, of $PWD/.gpu/gpugraph.test -test.bench 'CUDALaunchPath/(api|graph-api)\$' -test.benchtime 3s"
    sha256sum .gpu/gpugraph.test
    echo "analyse with the same binary (the .gpu/gpugraph.test carried from the build machine):"
    echo "  go tool pprof -top .gpu/gpugraph.test launchpath-api.cpu.pprof"
  } > "$OUT/launchpath-api.binary.txt"
  say "  CPU profile of api and graph-api: launchpath-api.cpu.pprof ($(grep -c '^Benchmark' "$OUT/launchpath-api.txt") results; binary's sha256 in launchpath-api.binary.txt)"
}

inst() {
  say ""
  say "== inst: BenchmarkInstantiate Instantiate/cuda against C loops (instantiate.txt)"
  local lib
  lib=$(cloop instloop)
  GG_INST_LOOP=$lib run 300 "$OUT/instantiate.txt" \
    .gpu/gpugraph.test -test.run '^$' -test.bench 'Instantiate/cuda' -test.count 5 -test.benchtime 0.2s
  summary instantiate "$OUT/instantiate.txt"
}

train() {
  say ""
  say "== train: gpugraph train --model reference against PyTorch (torch_step.py), alternated"
  local gg=(.gpu/gpugraph train --backend cuda --model reference --steps 300 --every 50)
  local pt=("$PY" tools/bench/torch_step.py --steps 300 --every 50)
  for i in 1 2 3; do
    if [ $((i % 2)) -eq 1 ]; then
      run 150 "$OUT/train-gg-$i.txt" "${gg[@]}"; run 150 "$OUT/train-torch-$i.txt" "${pt[@]}"
    else
      run 150 "$OUT/train-torch-$i.txt" "${pt[@]}"; run 150 "$OUT/train-gg-$i.txt" "${gg[@]}"
    fi
  done
  run 150 "$OUT/train-torch-tf32.txt" "${pt[@]}" --tf32
  grep -h -E "^gpugraph train|GEMM|^verdict" "$OUT/train-gg-1.txt" | sed 's/^/  /' | tee -a "$OUT/summary.txt"
  summary train "$OUT"/train-gg-*.txt "$OUT"/train-torch-*.txt
}

taskflow() {
  say ""
  say "== taskflow: gpugraph's host backend against Taskflow, THREADS=${THREADS:-16} (taskflow-raw.txt)"
  if [ ! -f .gpu/taskflow/taskflow/taskflow.hpp ] || [ ! -x .gpu/tfside-go ] || [ ! -f .gpu/tfside.cpp ]; then
    say "  skipped: no .gpu/taskflow/taskflow/taskflow.hpp, .gpu/tfside.cpp or .gpu/tfside-go (build with PERF=1 tools/gpu/build.sh)"
    return
  fi
  if ! g++ -std=c++20 -O2 -pthread -I.gpu/taskflow .gpu/tfside.cpp -o "$WORK/tfside-cpp" 2> "$OUT/tfside-g++.txt"; then
    say "  g++ failed (tfside-g++.txt)"
    return
  fi
  local threads=${THREADS:-16} reps=${TF_REPS:-3} time=${TF_TIME:-1} warmup=0.2 batch=100
  {
    echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "cpu:      $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
    echo "taskflow: $("$WORK/tfside-cpp" -info)"
    echo "go:       $(GOMAXPROCS=1 .gpu/tfside-go -threads 1 -info | cut -d' ' -f2-3)"
    echo "flags:    g++ -std=c++20 -O2 -pthread; go build (CGO_ENABLED=0, tools/gpu/build.sh)"
    echo "runs:     $reps reps, threads {$threads}, ${warmup}s warm-up + ${time}s timed per shape per rep, batch $batch"
  } > "$OUT/taskflow-machine.txt"
  sed 's/^/  /' "$OUT/taskflow-machine.txt" | tee -a "$OUT/summary.txt"
  # As run.sh: in each rep, for each worker count and mode, both programs
  # run every shape once; which goes first alternates between reps.
  local raw=$OUT/taskflow-raw.txt cfg rep t
  : > "$raw"
  local configs=("graph graph atomic" "batch batch atomic" "async stream atomic" "graph graph empty")
  for rep in $(seq 1 "$reps"); do
    for t in $threads; do
      for cfg in "${configs[@]}"; do
        set -- $cfg
        local common=(-threads "$t" -body "$3" -firstrep "$rep" -time "$time" -warmup "$warmup" -batch "$batch")
        local cpp=(timeout 120 "$WORK/tfside-cpp" -mode "$1" "${common[@]}")
        local gosd=(timeout 120 env GOMAXPROCS="$t" .gpu/tfside-go -mode "$2" "${common[@]}")
        if [ $((rep % 2)) -eq 1 ]; then
          "${cpp[@]}" >> "$raw" 2>> "$OUT/taskflow-stderr.txt"; "${gosd[@]}" >> "$raw" 2>> "$OUT/taskflow-stderr.txt"
        else
          "${gosd[@]}" >> "$raw" 2>> "$OUT/taskflow-stderr.txt"; "${cpp[@]}" >> "$raw" 2>> "$OUT/taskflow-stderr.txt"
        fi
      done
    done
    echo "taskflow rep $rep/$reps done" >&2
  done
  summary taskflow "$raw"
}

for s in $SECTIONS; do
  case $s in
  launch | inst | train | taskflow) $s ;;
  *) say "unknown section $s (launch inst train taskflow)" ;;
  esac
done
rm -rf "$WORK"
say ""
say "logs and summary.txt in $OUT"
