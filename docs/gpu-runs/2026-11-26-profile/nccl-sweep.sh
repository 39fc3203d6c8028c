export NCCL_NVLS_ENABLE=0
G=.gpu/gpugraph
M="--backend cuda --model reference"
t() { grep -h "step time" "$1" | head -1 | sed 's/.*: //'; }
for rep in 1 2; do
  $G train $M --modes graph --steps 600 --every 300 > $OUT/p.txt 2>&1; echo "plain every300 rep$rep: $(grep -h 'per step (median' $OUT/p.txt)"
  $G launch --nproc 1 train $M --steps 600 --every 300 > $OUT/d.txt 2>&1; echo "dp1 every300 rep$rep: $(t $OUT/d.txt)"
  for env in "" "NCCL_MAX_NCHANNELS=2" "NCCL_MAX_NCHANNELS=4" "NCCL_MAX_NCHANNELS=8" "NCCL_MIN_NCHANNELS=16" "NCCL_MIN_NCHANNELS=32" "NCCL_PROTO=Simple" "NCCL_PROTO=LL" "NCCL_PROTO=LL128" "CUDA_DEVICE_MAX_CONNECTIONS=1" "CUDA_DEVICE_MAX_CONNECTIONS=32"; do
    for b in 512 1024; do
      env $env $G train $M --devices 2 --batch $b --sync overlap,after > $OUT/x.txt 2>&1
      echo "dp2 batch $b ${env:-default}: $(grep -h 'step time' $OUT/x.txt | sed 's/.*: //' | tr '\n' ' ') $(grep -c verdict $OUT/x.txt) verdicts"
    done
  done
done
