#!/bin/bash
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=/usr/local/cuda/bin:$PATH
O=$OUT; L=$O/logs; mkdir -p $L
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } >> $O/status.txt
timeout 120 .gpu/gpugraph.test -test.run '^TestDevicesCUDA$/ExecSetParamsReenabled' -test.v > $O/reenable.txt 2>&1
echo "reenable rc=$?" >> $O/status.txt
timeout 90 bash -c 'nvcc -O2 -arch=sm_90 -o /tmp/peerreenable tools/probe/peerreenable.cu -lcuda && /tmp/peerreenable' > $O/peerreenable.txt 2>&1
echo "peerreenable rc=$?" >> $O/status.txt
R="^TestDifferentialCUDA\$/^FuzzDifferential\$/^($(seq -s '|' 0 2100))\$"
for rep in 1 2 3; do
  for v in base no-exec no-graph free-after no-free no-trim no-unload; do
    s=$SECONDS
    timeout 100 env GPUGRAPH_CLOSE_VARIANT=$v GPUGRAPH_DIFF_INPUTS=3000 .gpu/variant.test -test.run "$R" -test.v > $L/$v-$rep.txt 2>&1
    echo "$v rep $rep: $(grep -o 'FuzzDifferential/[0-9]* left GPU' $L/$v-$rep.txt | head -1) $((SECONDS - s))s" >> $O/status.txt
  done
done
tar -C $O -czf $O/logs.tgz logs && rm -rf $L
