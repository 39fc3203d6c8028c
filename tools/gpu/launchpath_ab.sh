#!/bin/bash
# launchpath_ab.sh: on the GPU machine, BenchmarkCUDALaunchPath of
# .gpu/base/gpugraph.test (BASE=<commit> tools/gpu/build.sh) and of this
# tree's .gpu/gpugraph.test, alternated ROUNDS times in one command (base
# first in odd rounds, new first in even ones), with
# the C loops of tools/bench/native/launchloop.c; inside each process the
# variants are interleaved round by round (-test.count). Lines of
# $OUT/lp.txt are "base|new ROUND Benchmark...". Summarize here with
# tools/gpu/launchpath_ab.py $OUT/lp.txt.
#
#	ROUNDS=4 COUNT=8 bash tools/gpu/launchpath_ab.sh
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/launchpath-ab}
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-4} COUNT=${COUNT:-8}
sha256sum .gpu/gpugraph.test .gpu/base/gpugraph.test
gcc -O2 -shared -fPIC -I/usr/local/cuda/include -o /tmp/liblaunchloop.so tools/bench/native/launchloop.c -L/usr/local/cuda/lib64/stubs -lcuda || echo "gcc failed: no c-loop rows"
# Odd rounds run base first, even rounds new first: neither side always
# runs on the machine as the first (or the second) of the pair.
for i in $(seq "$ROUNDS"); do
  order="base new"; [ $((i % 2)) = 0 ] && order="new base"
  for v in $order; do
    b=.gpu/gpugraph.test; [ $v = base ] && b=.gpu/base/gpugraph.test
    GG_LAUNCH_LOOP=/tmp/liblaunchloop.so timeout 100 $b -test.run '^$' \
      -test.bench 'CUDALaunchPath/^(api-current|raw-current|c-loop|graph-api|graph-c-loop)(#[0-9]+)?$' \
      -test.count "$COUNT" -test.benchtime 0.1s 2>&1 | grep ^Bench | sed -E "s/#[0-9]+-/-/; s/^/$v $i /" >> "$OUT/lp.txt"
  done
done
wc -l "$OUT/lp.txt"
