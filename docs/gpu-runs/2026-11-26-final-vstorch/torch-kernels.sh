#!/bin/bash
# PyTorch's step, kernel by kernel (torch.profiler over 3 replays): best and plain graph
export NCCL_NVLS_ENABLE=0
PY=/opt/torch/.venv/bin/python
for m in reference large; do for p in fp32 tf32 bf16; do
  [ $m = large ] && [ $p = fp32 ] && continue
  for best in --best ""; do
    echo "=== $m $p ${best:-graph}"
    timeout 120 $PY tools/bench/torch_step.py --model $m --precision $p $best --kernel-times 2>&1 | grep -E "^torch_step" | head -40
  done
done; done
