# The KL scores (call a's two builds) at long contexts, where a step's K/V rows no longer stay in
# the L2 cache: the kernel alone at 512-4096 positions (hot, and cycled through 1 GiB), and
# weft bench at prompts of 1024 and 4096 (+ 128 generated, median of 3), the builds interleaved
# twice. The model files written again as in call a (a fresh machine), with session.sh's own
# profiled run of the new build on each.
set -uo pipefail
MODEL_SPECS="tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 200 bash bench/gpu/session.sh "$OUT/b" "models"
bin=/tmp/weft-bin
log="$OUT/b/ab.log"
ls /tmp/weft-models >>"$log"
for rot in 0 1024; do
  for b in attention_bench-base attention_bench; do
    echo "== $b --rotate-mib $rot" >>"$log"
    timeout 90 "$bin/$b" --heads 9/3/64,32/4/64,32/8/128 --contexts 512,1024,2048,4096 --chunks 128,256 \
      --rotate-mib "$rot" >>"$log" 2>&1
  done
done
for round in 1 2; do
  for m in tinyllama 7b; do
    for len in 1024 4096; do
      for b in weft-base weft; do
        echo "== round $round $b $m prompt $len --int8-activations" >>"$log"
        timeout 90 "$bin/$b" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len $len --gen 128 --reps 3 --int8-activations 2>&1 \
          | grep -E "^(decode|prefill|ttft)" >>"$log"
      done
    done
  done
done
grep -c "^decode" "$log"
