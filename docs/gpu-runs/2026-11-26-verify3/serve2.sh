#!/bin/bash
# serving with the new batching default (no wait) beside the 2 ms wait, and the Python server batching the same way
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
PY=/opt/torch/.venv/bin/python
O=$OUT; mkdir -p $O
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } >> $O/status.txt
timeout 150 .gpu/serve -demo reference -backend cuda -bench -concurrency 1,16,64 -requests 1000 -reps 5 > $O/serve-nowait.txt 2>&1; echo "nowait rc=$?" >> $O/status.txt
timeout 100 .gpu/serve -demo reference -backend cuda -bench -concurrency 1,16,64 -requests 1000 -reps 3 -max-wait 2ms > $O/serve-wait2ms.txt 2>&1; echo "wait2ms rc=$?" >> $O/status.txt
$PY tools/serve/torch_serve.py --port 8090 > $O/torch-server.txt 2>&1 &
tp=$!
for _ in $(seq 60); do curl -sf -o /dev/null http://127.0.0.1:8090/v1/model && break; sleep 1; done
timeout 100 .gpu/serve -demo reference -bench -target http://127.0.0.1:8090 -concurrency 1,16,64 -requests 1000 -reps 3 > $O/torchserve-nowait.txt 2>&1; echo "torch rc=$?" >> $O/status.txt
kill $tp; wait $tp 2>/dev/null
