#!/bin/bash
# issue 31 checks, graph-set replay and serving beside PyTorch (one GPU)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
PY=/opt/torch/.venv/bin/python
O=$OUT; L=$O/logs; mkdir -p $L
t() { local n=$1 lim=$2; shift 2; local s=$SECONDS; timeout -k 5 $lim "$@" > $L/$n.txt 2>&1; local rc=$?; echo "$n rc=$rc $((SECONDS-s))s $(grep -c -- '--- PASS' $L/$n.txt)p $(grep -c -- '--- FAIL' $L/$n.txt)f $(grep -c -- '--- SKIP' $L/$n.txt)s" | tee -a $O/status.txt; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; } > $O/status.txt
( nvcc -O2 -o /tmp/tf32round tools/probe/tf32round.cu -lcublas && timeout 30 /tmp/tf32round ) > $O/tf32round.txt 2>&1
t traincuda 120 .gpu/train.test -test.run CUDA -test.v
t cublas 60 .gpu/cublas.test -test.run 'GPU' -test.v
for p in fp32 tf32 bf16; do t train-ref-$p 40 .gpu/gpugraph train --backend cuda --model reference --precision $p; done
for p in fp32 tf32 bf16; do t train-large-$p 60 .gpu/gpugraph train --backend cuda --model large --precision $p --steps 60 --every 10; done
t gsreplay 90 .gpu/train.test -test.run XXX -test.bench 'CUDAGraphSet' -test.benchtime 200x
t torchgs 60 $PY tools/serve/torch_graphset.py --repeat 5 --iters 200
$PY tools/serve/torch_serve.py --port 8090 > $L/ts-server.txt 2>&1 &
TP=$!
t servebench 60 .gpu/serve -demo reference -backend cuda -bench -concurrency 1,16,64 -requests 1000
for i in $(seq 60); do curl -sf -o /dev/null http://127.0.0.1:8090/v1/model && break; sleep 1; done
t torchbench 60 .gpu/serve -demo reference -bench -target http://127.0.0.1:8090 -concurrency 1,16,64 -requests 1000
t servebench2 60 .gpu/serve -demo reference -backend cuda -bench -concurrency 1,16,64 -requests 1000
kill $TP; wait $TP 2>/dev/null
grep -h -E -- '^--- FAIL|panic' $L/*.txt | head -30 >> $O/status.txt
tar -C $O -czf $O/logs.tgz logs && rm -rf $L
