#!/bin/bash
# SGD in the dW GEMMs (.gpu/gpugraph) against the separate update (.gpu/base/gpugraph), alternated
export NCCL_NVLS_ENABLE=0
for rep in 1 2 3; do
  for m in reference:fp32 reference:tf32 reference:bf16 large:bf16 large:tf32 large:fp32; do
    mo=${m%:*}; p=${m#*:}; st=300; [ $m = large:fp32 ] && st=100
    for v in base new; do
      b=.gpu/gpugraph; [ $v = base ] && b=.gpu/base/gpugraph
      echo "$mo $p $v: $($b train --backend cuda --model $mo --modes graph --steps $st --every 50 --precision $p --quiet 2>&1 | grep -E '^trained|peak reserved while|kernels per step' | tr -s ' ' | tr '\n' ' ')"
    done
  done
done
