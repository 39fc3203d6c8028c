#!/bin/bash
# two.sh: every device and collective scenario, the driver probe, and
# data-parallel training against PyTorch DDP, in one command, on a machine
# with two or more GPUs (it also runs on one, and says which steps need
# two). Run from the repository root with
# .gpu/ built here by tools/gpu/build.sh and carried (device tool: carry
# [".gpu"]); every log goes under $OUT (default /tmp/two-out), the summary
# is printed at the end and kept in $OUT/summary.txt. It exits 0 even when a
# step fails, and says which.
#
#	bash tools/gpu/two.sh                 # every step
#	bash tools/gpu/two.sh tests probe     # only some: info tests kill pipeline probe train ddp bw
#
# Steps and their logs:
#   info      nvidia-smi, topology, nvcc, NCCL, torch                         info.txt
#   tests     .gpu/gpugraph.test TestDevicesCUDA|TestConformanceCUDA          conformance.txt
#             .gpu/coll.test -test.run CUDA                                   coll.txt
#   kill      .gpu/main.test -test.run KillRank: a rank killed in the middle
#             of training (host and cuda); launch must end the job        kill.txt
#   pipeline  .gpu/peer-pipeline -backend cuda (examples/peer-pipeline)       peer-pipeline.txt
#   probe     nvcc tools/probe/peer.cu, run: the driver's answers, in
#             docs/driver-peer.txt's layout                                   driver-peer.txt
#   train     gpugraph train, one GPU (eager vs graph)                       train-1gpu.txt
#             gpugraph launch --nproc 1 train (the data-parallel path, 1 GPU) dp-launch-1.txt
#             gpugraph train --devices 2 (one process)                       dp-devices-2.txt
#             gpugraph launch --nproc 2 train (a process per GPU)            dp-launch-2.txt
#             all with --model reference; the data-parallel ones with
#             --sync overlap,inline,after; nvidia-smi memory samples beside  mem-*.csv
#   ddp       torchrun tools/ddp/train_ddp.py on 1 and 2 GPUs: PyTorch DDP
#             eager and whole-step CUDA graph, and its all-reduce sweep      ddp-1.txt ddp-2.txt
#   bw        .gpu/coll.test -bench AllReduce/cuda (gpugraph's coll)          coll-bench.txt
#             tools/ddp/nccl_allreduce.cu with nvcc, where nccl.h exists     nccl-bench.txt
#   summary   tools/gpu/two_summary.py over the logs                          summary.txt
#
# NCCL_NVLS_ENABLE=0 everywhere. Each step has a time limit (TWO_TIMEOUT,
# seconds, default 180). The device tool allows 600 s a command; a whole
# run should take about 4 minutes. If it does not fit, run it in two calls
# (tests pipeline probe, then train ddp bw): each call's $OUT gets that
# call's logs and a summary of them.
cd "$(dirname "$0")/../.." || exit 0
OUT=${OUT:-/tmp/two-out}
BUILD=${TWO_BUILD:-/tmp/two-build}
LIMIT=${TWO_TIMEOUT:-180}
mkdir -p "$OUT" "$BUILD"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
VENV=/opt/torch/.venv/bin
PY=$VENV/python
[ -x "$PY" ] || PY=$(command -v python3)
TORCHRUN=$VENV/torchrun
[ -x "$TORCHRUN" ] || TORCHRUN=$(command -v torchrun)
STATUS=$OUT/status.txt
T0=$SECONDS

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(info tests kill pipeline probe train ddp bw)
want() { local s; for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
echo "two.sh: $NGPU GPU(s), logs in $OUT, steps: ${steps[*]}"
echo "# $(date -u '+%F %T UTC'): two.sh ${steps[*]} ($NGPU GPUs)" >> "$STATUS"

# status NAME WORDS... records a step's outcome for the summary.
status() { local n=$1; shift; printf '%-22s %s\n' "$n" "$*" | tee -a "$STATUS"; }

# run NAME LOG CMD...: runs CMD with the time limit, output to LOG; records
# ok, FAILED (rc) or TIMEOUT.
run() {
  local name=$1 log=$2; shift 2
  echo "== $name: $*"
  { echo "# $*"; echo "# $(date -u '+%F %T UTC'), NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; } > "$log"
  local t=$SECONDS
  timeout -k 15 "$LIMIT" "$@" >> "$log" 2>&1
  local rc=$?
  echo "# exit $rc after $((SECONDS - t)) s" >> "$log"
  # Go tests: how many passed, failed, skipped (subtests included).
  local tests=""
  if grep -q -- '--- \(PASS\|FAIL\|SKIP\)' "$log"; then
    tests=", tests: $(grep -c -- '--- PASS' "$log") pass, $(grep -c -- '--- FAIL' "$log") fail, $(grep -c -- '--- SKIP' "$log") skip"
  fi
  case $rc in
  0) status "$name" "ok ($((SECONDS - t)) s$tests)" ;;
  124 | 137) status "$name" "TIMEOUT after ${LIMIT} s (log $(basename "$log"))" ;;
  *) status "$name" "FAILED, exit $rc$tests (log $(basename "$log"))" ;;
  esac
  return $rc
}

# needs2 NAME: true when there are two GPUs, else records the step as
# needing them.
needs2() {
  [ "$NGPU" -ge 2 ] && return 0
  status "$1" "needs 2 GPUs (this machine has $NGPU): not run"
  return 1
}

# gpunames: "2 x NVIDIA H100 80GB HBM3" and the like.
gpunames() { nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *\([0-9]*\) /\1 x /' | paste -sd ';'; }

# Memory per GPU while a run goes: nvidia-smi samples every 200 ms.
memwatch() { nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/mem-$1.csv" 2>/dev/null & MEMPID=$!; }
memstop() { kill "$MEMPID" 2>/dev/null; wait "$MEMPID" 2>/dev/null; }

need_bin() {
  [ -x ".gpu/$1" ] && return 0
  status "$2" "missing .gpu/$1: run bash tools/gpu/build.sh here first"
  return 1
}

if want info; then
  {
    echo "# two.sh info, $(date -u '+%F %T UTC')"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
    echo; nvidia-smi topo -m
    echo; nvidia-smi nvlink -s 2>&1 | head -40
    echo; nvcc --version 2>&1 | tail -2
    echo; [ -x .gpu/nccl.test ] && .gpu/nccl.test -test.run TestVersion -test.v 2>&1 | grep -E 'NCCL|ok|FAIL'
    echo; "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "gpus", torch.cuda.device_count())' 2>&1 | tail -1
    echo; echo "idle memory.used MiB per GPU:"; nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
    echo; ls -la .gpu
  } > "$OUT/info.txt" 2>&1
  status info "ok: $(gpunames)"
fi

# Go's own time limit, below the step's: a hang prints every goroutine.
GOLIMIT=$((LIMIT - 20))s
if want tests; then
  if need_bin gpugraph.test conformance; then
    run conformance "$OUT/conformance.txt" .gpu/gpugraph.test -test.run 'TestDevicesCUDA|TestConformanceCUDA' -test.v -test.timeout "$GOLIMIT"
  fi
  if need_bin coll.test coll; then
    run coll "$OUT/coll.txt" .gpu/coll.test -test.run CUDA -test.v -test.timeout "$GOLIMIT"
  fi
fi

if want kill && need_bin main.test kill; then
  run kill "$OUT/kill.txt" .gpu/main.test -test.run 'KillRank' -test.v -test.timeout "$GOLIMIT"
fi

if want pipeline; then
  if need_bin peer-pipeline peer-pipeline; then
    if [ "$NGPU" -ge 2 ]; then
      run peer-pipeline "$OUT/peer-pipeline.txt" .gpu/peer-pipeline -backend cuda
    else
      # Runs anyway, to show that it refuses one GPU by name.
      .gpu/peer-pipeline -backend cuda > "$OUT/peer-pipeline.txt" 2>&1
      status peer-pipeline "needs 2 GPUs (this machine has $NGPU): $(tail -1 "$OUT/peer-pipeline.txt")"
    fi
  fi
fi

if want probe; then
  if command -v nvcc > /dev/null; then
    echo "== probe: nvcc -O2 -o $BUILD/peer tools/probe/peer.cu"
    if nvcc -O2 -o "$BUILD/peer" tools/probe/peer.cu > "$OUT/probe-build.txt" 2>&1; then
      {
        echo "# tools/probe/peer.cu on $(gpunames)," \
          "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), $(nvcc --version | grep -o 'V[0-9][0-9.]*'), run $(date -u +%F)"
      } > "$OUT/driver-peer.header"
      if [ "$NGPU" -ge 2 ]; then
        run probe "$OUT/driver-peer.run" "$BUILD/peer"
      else
        "$BUILD/peer" > "$OUT/driver-peer.run" 2>&1
        status probe "needs 2 GPUs (this machine has $NGPU); the probe says: $(tail -1 "$OUT/driver-peer.run")"
      fi
      # The probe's own lines, under a header: docs/driver-peer.txt's layout.
      grep -v '^# exit [0-9]* after\|^# .*NCCL_NVLS_ENABLE=\|^# /' "$OUT/driver-peer.run" | cat "$OUT/driver-peer.header" - > "$OUT/driver-peer.txt"
    else
      status probe "FAILED to compile (log probe-build.txt)"
    fi
  else
    status probe "no nvcc on PATH: not run"
  fi
fi

if want train && need_bin gpugraph train; then
  M=(--backend cuda --model reference)
  SYNC=(--sync overlap,inline,after)
  memwatch train-1gpu
  run train-1gpu "$OUT/train-1gpu.txt" .gpu/gpugraph train "${M[@]}"
  memstop
  memwatch dp-launch-1
  run dp-launch-1 "$OUT/dp-launch-1.txt" .gpu/gpugraph launch --nproc 1 train "${M[@]}" "${SYNC[@]}"
  memstop
  if needs2 dp-devices-2; then
    memwatch dp-devices-2
    run dp-devices-2 "$OUT/dp-devices-2.txt" .gpu/gpugraph train "${M[@]}" --devices 2 "${SYNC[@]}"
    memstop
  fi
  if needs2 dp-launch-2; then
    memwatch dp-launch-2
    run dp-launch-2 "$OUT/dp-launch-2.txt" .gpu/gpugraph launch --nproc 2 train "${M[@]}" "${SYNC[@]}"
    memstop
  fi
fi

if want ddp; then
  if [ -z "$TORCHRUN" ] || ! "$PY" -c 'import torch' 2> /dev/null; then
    status ddp "no torch/torchrun (looked in $VENV and PATH): not run"
  else
    for n in 1 2; do
      [ "$n" -eq 2 ] && ! needs2 ddp-2 && continue
      memwatch "ddp-$n"
      run "ddp-$n" "$OUT/ddp-$n.txt" "$TORCHRUN" --standalone --nproc_per_node "$n" tools/ddp/train_ddp.py --model reference --steps 300
      memstop
    done
  fi
fi

if want bw; then
  if need_bin coll.test coll-bench; then
    run coll-bench "$OUT/coll-bench.txt" .gpu/coll.test -test.run '^$' -test.bench 'AllReduce/cuda' -test.benchtime "${TWO_BENCHTIME:-100x}"
  fi
  # NCCL's own figures: a C++ program where nccl.h and libnccl.so.2 are
  # found (the system's, else the torch venv's); else train_ddp.py's sweep
  # (ddp-N.txt) is the reference.
  inc="" libdir=""
  for d in /usr/include /usr/local/cuda/include /usr/local/include; do
    [ -f "$d/nccl.h" ] && { inc=$d; break; }
  done
  if [ -n "$inc" ]; then
    lib=$(ldconfig -p 2> /dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
    [ -n "$lib" ] && libdir=$(dirname "$lib")
    for d in /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/lib64 /usr/lib; do
      [ -z "$libdir" ] && [ -e "$d/libnccl.so.2" ] && libdir=$d
    done
  else
    nv=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl 2> /dev/null | head -1)
    if [ -n "$nv" ] && [ -f "$nv/include/nccl.h" ] && [ -e "$nv/lib/libnccl.so.2" ]; then
      inc=$nv/include libdir=$nv/lib
    fi
  fi
  if [ -n "$inc" ] && [ -n "$libdir" ] && command -v nvcc > /dev/null; then
    incflag=()
    [ "$inc" != /usr/include ] && incflag=(-I"$inc")
    echo "== nccl-bench: nccl.h in $inc, libnccl.so.2 in $libdir"
    if nvcc -O2 -o "$BUILD/nccl_allreduce" tools/ddp/nccl_allreduce.cu "${incflag[@]}" -L"$libdir" -l:libnccl.so.2 > "$OUT/nccl-build.txt" 2>&1; then
      LD_LIBRARY_PATH=$libdir:$LD_LIBRARY_PATH run nccl-bench "$OUT/nccl-bench.txt" "$BUILD/nccl_allreduce" 20
      sed -i "2i # nccl.h from $inc, libnccl.so.2 from $libdir" "$OUT/nccl-bench.txt"
    else
      status nccl-bench "FAILED to compile (log nccl-build.txt); NCCL's figures: train_ddp.py's sweep"
    fi
  else
    status nccl-bench "no nccl.h (or libnccl.so.2, or nvcc): NCCL's figures come from train_ddp.py's torch sweep"
  fi
fi

# scale: strong and weak scaling beside PyTorch DDP, the plain captured
# step beside the 1-GPU data-parallel one, two "machines" over sockets, and
# where a step's time goes (nsys, where installed). Not in the default
# steps: bash tools/gpu/two.sh scale.
if want scale && need_bin gpugraph scale && needs2 scale; then
  M=(--backend cuda --model reference)
  memwatch scale-plain
  run scale-plain "$OUT/scale-plain.txt" .gpu/gpugraph train "${M[@]}" --modes graph
  memstop
  # Strong scaling: a global batch of 512 on 1 and 2 GPUs; weak: 512 per
  # GPU (the 1-GPU run is the same as strong scaling's). 1 GPU at 256 is
  # the compute of one rank of strong scaling's 2: the rest of a 2-GPU
  # step is the all-reduces and what they hold up.
  for spec in "1 512" "2 512" "2 1024" "1 256"; do
    set -- $spec
    n=$1 b=$2
    name=scale-gg-$n-$b
    memwatch "$name"
    run "$name" "$OUT/$name.txt" .gpu/gpugraph launch --nproc "$n" train "${M[@]}" --batch "$b" --sync overlap,after
    memstop
  done
  if [ -n "$TORCHRUN" ] && "$PY" -c 'import torch' 2> /dev/null; then
    for spec in "1 512" "2 512" "2 1024"; do
      set -- $spec
      name=scale-ddp-$1-$2
      memwatch "$name"
      run "$name" "$OUT/$name.txt" "$TORCHRUN" --standalone --nproc_per_node "$1" tools/ddp/train_ddp.py --model reference --batch "$2" --steps 300 --sweep off
      memstop
    done
  fi
  # Two machines, simulated: a launch per GPU, each seeing one, NCCL's
  # shared-memory and peer-to-peer transports off: the ranks talk over
  # sockets (loopback), as two machines without InfiniBand would.
  port=$((29500 + RANDOM % 1000))
  sock=(env NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo)
  memwatch scale-2nodes
  timeout -k 15 "$LIMIT" "${sock[@]}" CUDA_VISIBLE_DEVICES=1 .gpu/gpugraph launch --nnodes 2 --node-rank 1 --master 127.0.0.1:$port --nproc 1 \
    train "${M[@]}" --sync overlap,inline,after > "$OUT/scale-2nodes-node1.txt" 2>&1 &
  node1=$!
  run scale-2nodes "$OUT/scale-2nodes.txt" "${sock[@]}" CUDA_VISIBLE_DEVICES=0 .gpu/gpugraph launch --nnodes 2 --node-rank 0 --master 127.0.0.1:$port --nproc 1 \
    train "${M[@]}" --sync overlap,inline,after
  wait "$node1"
  echo "# node 1 exit $?" >> "$OUT/scale-2nodes-node1.txt"
  memstop
  if need_bin coll.test scale-sockets-bw; then
    run scale-sockets-bw "$OUT/scale-sockets-bw.txt" "${sock[@]}" .gpu/coll.test -test.run '^$' -test.bench 'AllReduce/cuda' -test.benchtime 50x
  fi
  # Where a step's time goes, per GPU: kernels by kind, and the gaps.
  NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2> /dev/null | head -1)
  if [ -n "$NSYS" ]; then
    # 1 GPU: the plain captured step; 2: a process per GPU (rank 1's GPU
    # runs the step alone; rank 0's also trains the one-device reference).
    for n in 1 2; do
      args=(train "${M[@]}" --steps 200 --modes graph)
      [ "$n" = 2 ] && args=(launch --nproc 2 train "${M[@]}" --steps 200 --sync overlap)
      run "scale-nsys-$n" "$OUT/scale-nsys-$n.txt" "$NSYS" profile -t cuda -o "$BUILD/step-$n" -f true .gpu/gpugraph "${args[@]}"
      "$NSYS" stats -q -r cuda_gpu_trace -f csv -o "$BUILD/step-$n" "$BUILD/step-$n.nsys-rep" > /dev/null 2>&1
      "$PY" tools/gpu/timeline.py "$BUILD"/step-${n}_cuda_gpu_trace.csv > "$OUT/scale-timeline-$n.txt" 2>&1 ||
        status "scale-timeline-$n" "FAILED (log scale-timeline-$n.txt)"
    done
  else
    status scale-timeline "no nsys on this machine: no timeline"
  fi
fi

echo "== summary ($((SECONDS - T0)) s)"
if [ -n "$PY" ] && "$PY" tools/gpu/two_summary.py "$OUT" > "$OUT/summary.txt" 2> "$OUT/summary-error.txt"; then
  cat "$OUT/summary.txt"
else
  echo "(tools/gpu/two_summary.py failed: $OUT/summary-error.txt; the steps' own lines:)"
  cat "$STATUS"
  grep -h -E 'verdict|step time|DDP |^--- FAIL|^(ok|FAIL|PASS)|summary  ' "$OUT"/*.txt 2> /dev/null | head -60
fi
exit 0
