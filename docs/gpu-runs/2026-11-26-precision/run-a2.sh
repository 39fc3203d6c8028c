#!/bin/bash
# issue 31: fp32 step before/after the fused step (same GPU, alternated), bench --vs torch per precision;
# issue 30: graph-set replay with cuBLAS, serving beside PyTorch
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
PY=/opt/torch/.venv/bin/python
O=$OUT; L=$O/logs; mkdir -p $L
t() { local n=$1 lim=$2; shift 2; local s=$SECONDS; timeout -k 5 $lim "$@" > $L/$n.txt 2>&1; local rc=$?; echo "$n rc=$rc $((SECONDS-s))s $(grep -c -- '--- PASS' $L/$n.txt)p $(grep -c -- '--- FAIL' $L/$n.txt)f" | tee -a $O/status.txt; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; } > $O/status.txt
for r in 1 2 3 4 5; do
  for b in base new; do g=.gpu/gpugraph; [ $b = base ] && g=.gpu/base/gpugraph
    timeout 30 $g train --backend cuda --model reference --modes graph > $L/ab-$b-$r.txt 2>&1; done; done
grep -H 'per step' $L/ab-*.txt | grep trained > $O/ab.txt
t cublas 60 .gpu/cublas.test -test.run 'Lt' -test.v
t gsreplay 60 .gpu/train.test -test.run XXX -test.bench 'CUDAGraphSet' -test.benchtime 200x
$PY tools/serve/torch_serve.py --port 8090 > $L/ts-server.txt 2>&1 &
TP=$!
t servebench 45 .gpu/serve -demo reference -backend cuda -bench -concurrency 1,16,64 -requests 1000
for i in $(seq 60); do curl -sf -o /dev/null http://127.0.0.1:8090/v1/model && break; sleep 1; done
t torchbench 45 .gpu/serve -demo reference -bench -target http://127.0.0.1:8090 -concurrency 1,16,64 -requests 1000
kill $TP; wait $TP 2>/dev/null
t vstorch 400 .gpu/gpugraph bench --backend cuda --vs torch --python $PY --model reference --precision fp32,tf32,bf16 --reps 5
tail -40 $L/vstorch.txt > $O/vstorch-tail.txt
grep -h -E -- '^--- FAIL|panic' $L/*.txt | head -30 >> $O/status.txt
tar -C $O -czf $O/logs.tgz logs && rm -rf $L
