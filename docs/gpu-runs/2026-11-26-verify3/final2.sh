#!/bin/bash
# capture A/B (base = before the read-back changes) beside PyTorch's capture, then the 2-GPU check of the final build
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
PY=/opt/torch/.venv/bin/python
O=$OUT; L=$O/logs; mkdir -p $L
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } >> $O/status.txt
for r in 1 2 3 4 5; do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for w in $order; do
    b=.gpu/train.test; [ $w = base ] && b=.gpu/base/train.test
    timeout 60 $b -test.run XXX -test.bench 'CUDAGraphSetCapture$' -test.benchtime 50x 2>&1 | grep '^Benchmark' | sed "s|^|$w $r |" >> $O/capture-ab.txt
  done
done
timeout 60 $PY tools/serve/torch_graphset.py --repeat 5 --iters 50 > $O/torchgs.txt 2>&1
t() { local n=$1 lim=$2; shift 2; local s=$SECONDS; timeout -k 5 "$lim" "$@" > "$L/$n.txt" 2>&1; local rc=$?
  echo "$n rc=$rc $((SECONDS - s))s $(grep -c -- '--- PASS' "$L/$n.txt")p $(grep -c -- '--- FAIL' "$L/$n.txt")f" | tee -a "$O/status.txt"; }
t conformance 120 .gpu/gpugraph.test -test.run '^TestConformanceCUDA$' -test.v
t devices 90 .gpu/gpugraph.test -test.run '^TestDevicesCUDA$' -test.v
for tg in FuzzDifferential FuzzWholeGraphUpdate; do
  s=0; p=0
  while [ $s -lt 3000 ] && [ $p -lt 4 ]; do
    p=$((p + 1)); n=$tg-$p
    t $n 150 env GPUGRAPH_DIFF_INPUTS=3000 .gpu/gpugraph.test -test.run "^TestDifferentialCUDA\$/^$tg\$/^($(seq -s '|' -f '%03g' $s 2999))\$" -test.v
    grep -h "inputs (\|left GPU" $L/$n.txt | sed "s|^|  $n from $s: |" >> $O/status.txt
    x=$(grep -o "$tg/[0-9]* left GPU" $L/$n.txt | head -1 | grep -o '[0-9]*' | head -1)
    [ -z "$x" ] && break
    s=$((10#$x + 1))
  done
done
{ echo "# failures only"; for f in $L/Fuzz*.txt; do awk '/^=== RUN   TestDifferentialCUDA\/[A-Za-z]+\/[0-9]+$/ { if (bad) printf "%s", blk; blk = ""; bad = 0 }
      /decide differently|differs from|--- FAIL|panic|left GPU/ { bad = 1 } !/^=== (NAME|CONT|PAUSE)|--- PASS|^\s+input: / { blk = blk $0 "\n" }
      END { if (bad) printf "%s", blk }' $f; done; } > $O/diff-failures.txt
grep -h -E -- '^--- FAIL|^    --- FAIL|panic' $L/conformance.txt $L/devices.txt | head >> $O/status.txt
tar -C $O -czf $O/logs.tgz logs && rm -rf $L
