#!/bin/bash
# verify.sh: the GPU checks this repository owes, in sections that each fit
# one device call (600 s). Build here with `VERIFY=1 bash tools/gpu/build.sh` (and
# BASE=<commit> for the ab section), carry .gpu, then there:
#
#	OUT=$OUT bash tools/gpu/verify.sh tests      # 1 GPU, ~60 s: conformance, inject, train/cublas GPU tests, tf32 probe
#	OUT=$OUT bash tools/gpu/verify.sh two        # 2 GPUs, ~60 s: devices, multidev and peerreenable probes, 3000-input differential in one process (failures in $OUT/diff-failures.txt)
#	OUT=$OUT bash tools/gpu/verify.sh ab         # 1 GPU, ~90 s: the reference fp32 step, .gpu/base against .gpu and .gpu --gemm cublaslt (the fused step), 5 alternations
#	OUT=$OUT bash tools/gpu/verify.sh torch P [M] # 1 GPU, ~140 s a precision (reference), ~230-300 s (large): bench --vs torch for precisions P (fp32, tf32 and/or bf16, comma-separated) of model M (reference or large), 5 reps
#	OUT=$OUT bash tools/gpu/verify.sh profile [M] # 1 GPU, ~60 s: train --profile, the device time of each piece of the step, per precision, for models M (default: reference large)
#	OUT=$OUT bash tools/gpu/verify.sh serve      # 1 GPU, ~300 s: graph-set capture/replay (cuBLAS and cuBLASLt), serving with each (5 alternated runs each, medians) beside PyTorch
#	OUT=$OUT bash tools/gpu/verify.sh probes     # 1 GPU, ~30 s: probes whose answers are owed (pageable.cu, disabledmid.cu, condupdate.cu, updorder.cu, freedset.cu, lostctx.cu: their outputs for docs/)
#
# Every command runs under a time limit; logs go to $OUT/logs (tarred at the
# end), one status line per command to $OUT/status.txt.
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
PY=/opt/torch/.venv/bin/python
O=${OUT:-/tmp/verify}; L=$O/logs; mkdir -p "$L"
t() { local n=$1 lim=$2; shift 2; local s=$SECONDS; timeout -k 5 "$lim" "$@" > "$L/$n.txt" 2>&1; local rc=$?
  echo "$n rc=$rc $((SECONDS - s))s $(grep -c -- '--- PASS' "$L/$n.txt")p $(grep -c -- '--- FAIL' "$L/$n.txt")f $(grep -c -- '--- SKIP' "$L/$n.txt")s" | tee -a "$O/status.txt"; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; } >> "$O/status.txt"
case $1 in
tests)
  t conformance 120 .gpu/gpugraph.test -test.run '^TestConformanceCUDA$' -test.v
  t inject 60 .gpu/gpugraph.test -test.run '^(TestInjectedDriverFailures|TestLaunchAllocs)$' -test.v
  t traincuda 120 .gpu/train.test -test.run CUDA -test.v
  t cublas 60 .gpu/cublas.test -test.run GPU -test.v
  t tf32round 60 bash -c 'nvcc -O2 -o /tmp/tf32round tools/probe/tf32round.cu -lcublas && /tmp/tf32round' ;;
two)
  t devices 90 .gpu/gpugraph.test -test.run '^TestDevicesCUDA$' -test.v
  t multidev 90 bash -c 'nvcc -O2 -o /tmp/multidev tools/probe/multidev.cu -lcuda && /tmp/multidev'
  t peerreenable 60 bash -c 'nvcc -O2 -o /tmp/peerreenable tools/probe/peerreenable.cu -lcuda -lnvrtc && /tmp/peerreenable'
  cp "$L/peerreenable.txt" "$O/driver-peerreenable.txt"
  t diff 400 env GPUGRAPH_DIFF_INPUTS=3000 .gpu/gpugraph.test -test.run '^TestDifferentialCUDA$' -test.v
  # the failures only (the full log is tens of MB), each failing input whole:
  # its runs on both backends and the changes B makes
  { echo "# failures only"; awk '/^=== RUN   TestDifferentialCUDA\/[A-Za-z]+\/[0-9]+$/ { if (bad) printf "%s", blk; blk = ""; bad = 0 }
      /decide differently|differs from|--- FAIL|panic/ { bad = 1 } !/^=== (NAME|CONT|PAUSE)|--- PASS|^\s+input: / { blk = blk $0 "\n" }
      END { if (bad) printf "%s", blk }' "$L/diff.txt"; } > "$O/diff-failures.txt" ;;
ab)
  for r in 1 2 3 4 5; do
    t "ab-base-$r" 40 .gpu/base/gpugraph train --backend cuda --model reference --modes graph
    t "ab-new-$r" 40 .gpu/gpugraph train --backend cuda --model reference --modes graph
    t "ab-fused-$r" 40 .gpu/gpugraph train --backend cuda --model reference --modes graph --gemm cublaslt
  done
  grep -H '^trained' "$L"/ab-*.txt | sed 's#.*/##' | tee "$O/ab.txt" ;;
torch)
  n="vstorch-${3:-reference}-${2:-fp32}"; n=${n//,/-}
  t "$n" 560 .gpu/gpugraph bench --backend cuda --vs torch --python "$PY" --model "${3:-reference}" --precision "${2:-fp32}" --reps 5
  cp "$L/$n.txt" "$O/$n.txt" ;;
profile)
  for m in ${2:-reference large}; do
    for p in fp32 tf32 bf16; do
      if [ "$m" = large ]; then a="--steps 40 --every 40 --profile 20"; else a="--profile 100"; fi
      t "profile-$m-$p" 120 .gpu/gpugraph train --backend cuda --model "$m" --modes graph --precision "$p" $a --quiet
      cp "$L/profile-$m-$p.txt" "$O/"
    done
  done ;;
serve)
  t gs 90 .gpu/train.test -test.run XXX -test.bench CUDAGraphSet -test.benchtime 200x
  t torchgs 60 "$PY" tools/serve/torch_graphset.py --repeat 5 --iters 200
  "$PY" tools/serve/torch_serve.py --port 8090 > "$L/torch-server.txt" 2>&1 &
  tp=$!
  t serve 150 .gpu/serve -demo reference -backend cuda -bench -concurrency 1,16,64 -requests 1000 -reps 5
  t servelt 150 .gpu/serve -demo reference -backend cuda -gemm cublaslt -bench -concurrency 1,16,64 -requests 1000 -reps 5
  for _ in $(seq 60); do curl -sf -o /dev/null http://127.0.0.1:8090/v1/model && break; sleep 1; done
  t torchserve 60 .gpu/serve -demo reference -bench -target http://127.0.0.1:8090 -concurrency 1,16,64 -requests 1000
  kill $tp; wait $tp 2> /dev/null ;;
probes)
  t pageable 60 bash -c 'nvcc -O2 -o /tmp/pageable tools/probe/pageable.cu && /tmp/pageable'
  t disabledmid 60 bash -c 'nvcc -O2 -o /tmp/disabledmid tools/probe/disabledmid.cu && /tmp/disabledmid'
  t condupdate 60 bash -c 'nvcc -O2 -o /tmp/condupdate tools/probe/condupdate.cu && /tmp/condupdate'
  t updorder 60 bash -c 'nvcc -O2 -o /tmp/updorder tools/probe/updorder.cu && /tmp/updorder'
  t freedset 60 bash -c 'nvcc -O2 -o /tmp/freedset tools/probe/freedset.cu && /tmp/freedset'
  # the driver fault loops.go avoids: "LOST" means the driver still loses the context (a new process per case)
  t lostctx 120 bash -c 'nvcc -O2 -o /tmp/lostctx tools/probe/lostctx.cu && for m in "2 0 while 3" "1 4 while 3" "2 0 while 3 chain"; do echo "mini $m: $(/tmp/lostctx iters 3000 mini $m | tail -1)"; done'
  cp "$L/updorder.txt" "$O/driver-updorder.txt"
  cp "$L/freedset.txt" "$O/driver-freedset.txt"
  cp "$L/condupdate.txt" "$O/driver-condupdate.txt"
  cp "$L/pageable.txt" "$O/driver-pageable.txt"
  cp "$L/disabledmid.txt" "$O/driver-disabledmid.txt" ;;
*) echo "verify.sh tests|two|ab|torch P|serve|probes" >&2; exit 2 ;;
esac
grep -h -E -- '^--- FAIL|panic|left GPU|nobody reported|decide differently' "$L"/*.txt | head -40 >> "$O/status.txt"
tar -C "$O" -czf "$O/logs-$1.tgz" logs && rm -rf "$L"
