#!/bin/bash
# issue 26: strong and weak scaling, gpugraph against PyTorch DDP (eager and whole-step graph), 5 interleaved reps
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
O=$OUT; mkdir -p $O/raw
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv; } > $O/info.txt
M="--backend cuda --model reference"
for rep in 1 2 3 4 5; do
  for spec in "1 512" "2 512" "2 1024"; do
    set -- $spec
    timeout -k 5 40 .gpu/gpugraph launch --nproc $1 train $M --batch $2 --sync overlap,after > $O/raw/gg-$1-$2-r$rep.txt 2>&1
    timeout -k 5 40 torchrun --standalone --nproc_per_node $1 tools/ddp/train_ddp.py --model reference --batch $2 --steps 300 --sweep off > $O/raw/ddp-$1-$2-r$rep.txt 2>&1
  done
  timeout -k 5 30 .gpu/gpugraph train $M --modes graph > $O/raw/plain-r$rep.txt 2>&1
  echo "rep $rep done at $SECONDS s" >> $O/info.txt
done
tar -C $O -czf $O/raw.tgz raw && rm -rf $O/raw
