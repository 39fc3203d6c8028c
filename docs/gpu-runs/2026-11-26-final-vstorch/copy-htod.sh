#!/bin/bash
export NCCL_NVLS_ENABLE=0
for r in 1 2; do
  .gpu/gpugraph.test -test.run XXX -test.bench CUDAMemcpyHtoD -test.benchtime 1s 2>&1 | grep -E "^Benchmark"
  /opt/torch/.venv/bin/python .gpu/h2d_torch.py
done
