#!/bin/bash
# Runs on the GPU machine (device tool, carry [".gpu"]) what tools/gpu/build.sh built:
# every cuda test, the demo and training, then the launch path against .gpu/base/ if present
# (tools/gpu/launchpath_ab.sh).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/gpu.txt
echo "== driver"; .gpu/driver.test -test.v > $OUT/driver.txt 2>&1; grep -E "^(--- FAIL|ok|FAIL|PASS)" $OUT/driver.txt
echo "== internal/cuda"; .gpu/cuda.test -test.v > $OUT/cuda.txt 2>&1; grep -E '^(--- |ok|FAIL|PASS)' $OUT/cuda.txt
echo "== root"; .gpu/gpugraph.test -test.run "CUDA|Conformance|LaunchAllocs" -test.v > $OUT/conformance.txt 2>&1
grep -E '^(--- FAIL|FAIL|ok|PASS)|    --- FAIL' $OUT/conformance.txt | head -20
echo "cuda scenarios passed: $(grep -c -- '--- PASS: TestConformanceCUDA/' $OUT/conformance.txt)"
grep -E 'allocations per launch' $OUT/conformance.txt
echo "== cublas"; .gpu/cublas.test -test.v > $OUT/cublas.txt 2>&1; tail -1 $OUT/cublas.txt
echo "== nccl, coll"; .gpu/nccl.test -test.v > $OUT/nccl.txt 2>&1; tail -1 $OUT/nccl.txt
.gpu/coll.test -test.run CUDA -test.v > $OUT/coll.txt 2>&1; grep -cE -- "--- PASS" $OUT/coll.txt; grep -E "^(--- FAIL|FAIL|ok)" $OUT/coll.txt
echo "== train"; .gpu/train.test -test.run CUDA -test.v > $OUT/train.txt 2>&1; tail -1 $OUT/train.txt
echo "== demo, train"; .gpu/gpugraph demo --backend cuda > $OUT/demo.txt 2>&1; tail -1 $OUT/demo.txt
.gpu/gpugraph train --backend cuda > $OUT/train-cmd.txt 2>&1; tail -3 $OUT/train-cmd.txt
.gpu/gpugraph launch --nproc 1 train --backend cuda --sync overlap,inline,after > $OUT/launch-train.txt 2>&1; tail -4 $OUT/launch-train.txt
[ -x .gpu/base/gpugraph.test ] || exit 0
# the launch path of .gpu/base against this tree's, alternating (C loops built there)
ROUNDS=3 COUNT=4 OUT=$OUT bash tools/gpu/launchpath_ab.sh
"$(command -v python3 || echo /opt/torch/.venv/bin/python)" tools/gpu/launchpath_ab.py $OUT/lp.txt
