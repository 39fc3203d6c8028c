export NCCL_NVLS_ENABLE=0
G=.gpu/gpugraph
M="--backend cuda --model reference"
for rep in 1 2; do
for what in plain dp1; do
  nvidia-smi -i 0 --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader -lms 50 > $OUT/clk-$what-$rep.csv &
  sp=$!
  if [ $what = plain ]; then $G train $M --modes graph --steps 600 > $OUT/$what-$rep.txt 2>&1; else $G launch --nproc 1 train $M --steps 600 > $OUT/$what-$rep.txt 2>&1; fi
  kill $sp
  echo "$what $rep: $(grep -h 'per step (median\|step time\|device time' $OUT/$what-$rep.txt | sed 's/  */ /g' | tr '\n' ' ')"
  sort $OUT/clk-$what-$rep.csv | uniq -c | sort -rn | head -4
done
done
tar czf $OUT/clk.tgz -C $OUT . 2>/dev/null; ls $OUT | head
