#!/bin/bash
export NCCL_NVLS_ENABLE=0
G=.gpu/gpugraph
run() { # model prec gemm streams extra-env
  local mo=$1 p=$2 g=$3 st=$4; shift 4
  local steps=300; [ $mo = large ] && steps=60
  env "$@" $G train --backend cuda --model $mo --modes graph --steps $steps --every $steps --precision $p --gemm $g --streams $st --quiet 2>&1 \
   | awk -v tag="$mo $p $g s$st $*" '/^trained/{for(i=1;i<=NF;i++) if($i=="per"&&$(i+1)=="step") t=$(i-2)" "$(i-1)} /peak reserved while training/{r=$5" "$6} /kernels per step/{k=$4} /graph memory lower bound/{b=$(NF-1)" "$NF} END{print tag": "t"  kernels "k"  reserved "r"  bound "b}'
}
for rep in 1 2 3; do
  for mo in reference small; do
  for p in fp32 tf32 bf16; do
    run $mo $p cublas 1
    run $mo $p cublas 2 GPUGRAPH_SIDE_WS_KIB=4096
    run $mo $p cublas 2 GPUGRAPH_SIDE_WS_KIB=4096 GPUGRAPH_SIDE_UPDATE=end
  done
  done
  run large bf16 cublas 1
  run large bf16 cublas 2
done > $OUT/ab2.txt 2>&1
sort $OUT/ab2.txt
GPUGRAPH_SIDE_UPDATE=end $G train --backend cuda --model reference --modes graph --steps 300 --precision bf16 --streams 2 --profile 100 --quiet > $OUT/profile-bf16-s2end.txt 2>&1
$G train --backend cuda --model reference --modes graph --steps 300 --precision bf16 --streams 1 --profile 100 --quiet > $OUT/profile-bf16-s1.txt 2>&1
