#!/bin/bash
export NCCL_NVLS_ENABLE=0
for rep in 1 2 3; do
  for m in large:bf16 large:tf32 reference:bf16 reference:fp32; do
    mo=${m%:*}; p=${m#*:}
    for v in base nowait; do
      if [ $v = base ]; then E=""; else E="GPUGRAPH_EXP_NOWAIT_HTOD=1"; fi
      echo "$mo $p $v: $(env $E .gpu/gpugraph-exp train --backend cuda --model $mo --modes graph --steps 300 --every 50 --precision $p --quiet 2>&1 | grep -E '^trained|device time' | tr -s ' ' | tr '\n' ' ')"
    done
  done
done
