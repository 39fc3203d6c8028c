export NCCL_NVLS_ENABLE=0
G=.gpu/gpugraph
M="--backend cuda --model reference"
for rep in 1 2 3; do
  $G train $M --modes graph > $OUT/plain-$rep.txt 2>&1; echo "plain rep$rep: $(grep -h 'per step' $OUT/plain-$rep.txt | tr -s ' ' | tr '\n' ' ')"
  $G launch --nproc 1 train $M > $OUT/dp1-$rep.txt 2>&1; echo "dp1 rep$rep: $(grep -h 'step time\|device time' $OUT/dp1-$rep.txt | tr '\n' ' ')"
  $G launch --nproc 2 train $M > $OUT/dp2-$rep.txt 2>&1; echo "dp2 rep$rep: $(grep -h 'step time\|device time' $OUT/dp2-$rep.txt | tr '\n' ' ')"
done
mkdir -p $OUT/x && mv $OUT/*.txt $OUT/x/ && tar czf $OUT/reps6.tgz -C $OUT x && rm -rf $OUT/x
