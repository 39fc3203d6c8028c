#!/bin/bash
# lostctx.sh: narrows a lost context of the two-GPU differential run to
# the shortest history that still loses it, in one device call (how the
# WHILE-loop fault of docs/reliability.md, "The lost context", was first
# narrowed; kept for the next one). Build here with
# `VERIFY=1 bash tools/gpu/build.sh`, carry .gpu, then there:
#
#	OUT=$OUT bash tools/gpu/lostctx.sh [TARGET] [INPUT]
#
# TARGET (default FuzzWholeGraphUpdate) and INPUT (default 914) name the
# input that lost it. The script runs TARGET's inputs 000..INPUT (each run
# a fresh process: about 12 s); when that loses the context it bisects
# the first input of the history (a start loses it if any of TRIES runs
# does: the loss is not certain), then runs the shortest losing history
# once more with every input's program logged (GPUGRAPH_DIFF_LOG=1) and
# once under compute-sanitizer. One status line per run in
# $OUT/status.txt; the logs tarred in $OUT/lostctx.tgz.
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=/usr/local/cuda/bin:$PATH
TG=${1:-FuzzWholeGraphUpdate}
IN=${2:-914}
TRIES=${TRIES:-2}
O=${OUT:-/tmp/lostctx}; L=$O/logs; mkdir -p "$L"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } >> "$O/status.txt"
# runs s e [env...]: TARGET's inputs s..e; true if the context was lost.
runs() {
  local s=$1 e=$2; shift 2
  local log=$L/$TG-$s-$e-$SECONDS.txt
  timeout -k 5 120 env GPUGRAPH_DIFF_INPUTS=3000 "$@" .gpu/gpugraph.test \
    -test.run "^TestDifferentialCUDA\$/^$TG\$/^($(seq -s '|' -f '%03g' "$s" "$e"))\$" -test.v > "$log" 2>&1
  local at; at=$(grep -o "$TG/[0-9]* left GPU" "$log" | head -1)
  echo "$TG $s..$e ${*:-}: ${at:-kept}" >> "$O/status.txt"
  [ -n "$at" ]
}
lost() { for _ in $(seq "$TRIES"); do runs "$@" && return 0; done; return 1; }
if lost 0 "$IN"; then
  lo=0; hi=$IN # lost(lo..IN) holds; find the largest start that still loses it
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    if lost "$mid" "$IN"; then lo=$mid; else hi=$mid; fi
  done
  echo "shortest losing history: $TG $lo..$IN" >> "$O/status.txt"
  runs "$lo" "$IN" GPUGRAPH_DIFF_LOG=1
  timeout -k 5 300 env GPUGRAPH_DIFF_INPUTS=3000 compute-sanitizer .gpu/gpugraph.test \
    -test.run "^TestDifferentialCUDA\$/^$TG\$/^($(seq -s '|' -f '%03g' "$lo" "$IN"))\$" -test.v > "$L/sanitizer.txt" 2>&1
  echo "compute-sanitizer: $(grep -c 'ERROR SUMMARY: 0' "$L/sanitizer.txt") clean summaries, $(grep -c 'left GPU' "$L/sanitizer.txt") lost" >> "$O/status.txt"
fi
tar -C "$O" -czf "$O/lostctx.tgz" logs && rm -rf "$L"
