#!/bin/bash
# the large model: the fused cuBLASLt step against the unfused cuBLAS step, 3 alternations
export NCCL_NVLS_ENABLE=0
for rep in 1 2 3; do
  for p in bf16 tf32 fp32; do
    st=300; [ $p = fp32 ] && st=100
    for g in cublas cublaslt; do
      echo "$p $g rep $rep: $(.gpu/gpugraph train --backend cuda --model large --modes graph --steps $st --every 50 --precision $p --gemm $g --quiet 2>&1 | grep -E '^trained|peak reserved while' | tr -s ' ' | tr '\n' ' ')"
    done
  done
done
