#!/bin/bash
# Runs on the GPU machine after tools/gpu/run.sh: the cuda launch paths of
# .gpu/base (BASE=<commit> tools/gpu/build.sh) and of this tree, alternating
# in one command, for side-by-side comparisons (docs/performance-log.md).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
cd "$(dirname "$0")/../.."
[ -x .gpu/base/gpugraph.test ] || { echo "no .gpu/base: build with BASE=<commit>"; exit 1; }
for i in 1 2 3; do
  for v in base new; do
    b=.gpu/gpugraph.test; [ $v = base ] && b=.gpu/base/gpugraph.test
    for p in 'CUDALaunch$/stream-call$:2000x' 'CUDALaunch$/graph-call$/^n=1$:2000x' 'CUDALaunch$/graph-gpu$/^n=(1|1000)$:100x'; do
      $b -test.run '^$' -test.bench "${p%:*}" -test.count 2 -test.benchtime "${p##*:}" 2>&1 |
        grep ^Bench | sed "s/^/$v /" >> $OUT/split.txt
    done
  done
done
awk '{print $1, $2, $7, $6}' $OUT/split.txt | sort -k2,2 -k1,1
