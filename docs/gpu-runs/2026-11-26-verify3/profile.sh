#!/bin/bash
# capture profile of the graph set (cuBLAS), and per-precision step profiles of the reference model
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=/usr/local/cuda/bin:$PATH
O=$OUT; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } >> $O/status.txt
timeout 90 .gpu/train.test -test.run XXX -test.bench 'CUDAGraphSetCapture$' -test.benchtime 100x -test.cpuprofile $O/capture.prof > $O/capture.txt 2>&1; echo "capture rc=$?" >> $O/status.txt
for p in fp32 tf32 bf16; do
  timeout 90 .gpu/gpugraph train --backend cuda --model reference --modes graph --precision $p --steps 100 --profile 100 > $O/profile-$p.txt 2>&1; echo "profile $p rc=$?" >> $O/status.txt
done
