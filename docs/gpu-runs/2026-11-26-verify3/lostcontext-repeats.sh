#!/bin/bash
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=/usr/local/cuda/bin:$PATH
O=$OUT; L=$O/logs; mkdir -p $L
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } >> $O/status.txt
timeout 120 .gpu/gpugraph.test -test.run '^TestDevicesCUDA$/ExecSetParamsReenabled' -test.v > $O/reenable.txt 2>&1
echo "reenable rc=$?" >> $O/status.txt
timeout 90 bash -c 'nvcc -O2 -arch=sm_90 -o /tmp/peerreenable tools/probe/peerreenable.cu -lcuda && /tmp/peerreenable' > $O/peerreenable.txt 2>&1
echo "peerreenable rc=$?" >> $O/status.txt
rx() { seq -s '|' $1 $2; }
lost() { local tag=$1; shift; timeout 120 env GPUGRAPH_DIFF_INPUTS=3000 "$@" > $L/$tag.txt 2>&1
  if grep -q "left GPU\|lost context" $L/$tag.txt; then echo "$tag: lost" >> $O/status.txt; else echo "$tag: kept" >> $O/status.txt; fi; }
for i in 1 2 3 4 5 6; do lost alone-$i .gpu/gpugraph.test -test.run '^TestDifferentialCUDA$/^FuzzDifferential$/^2080$' -test.v; done
for i in 1 2 3 4 5 6; do lost pair-$i .gpu/gpugraph.test -test.run '^TestDifferentialCUDA$/^FuzzDifferential$/^(2079|2080)$' -test.v; done
for i in 1 2 3; do lost upto-$i .gpu/gpugraph.test -test.run "^TestDifferentialCUDA\$/^FuzzDifferential\$/^($(rx 0 2080))\$" -test.v; done
for i in 1 2 3; do lost full-$i .gpu/gpugraph.test -test.run '^TestDifferentialCUDA$' -test.v; done
for f in $L/full-*.txt $L/upto-*.txt; do grep -h "left GPU" $f | head -2 | sed "s|^|$(basename $f): |" >> $O/status.txt; done
tar -C $O -czf $O/logs.tgz logs && rm -rf $L
