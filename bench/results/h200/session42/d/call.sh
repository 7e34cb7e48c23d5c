# The sampler of call c with its window kept reaching the largest logit while the tokens at or
# above its bottom fit (call c closed it at the next bound up, and then drew over the whole
# vocabulary: the page's settings 40-42 us in call b, 46-74 in call c), and top-p's total
# mass taken from the first counting pass instead of a pass of its own. The same measurements
# as call c.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/d" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/d/ab.log"
echo "== test sampler" >>"$log"
timeout 120 "$bin/t-sampler" --nocapture 2>&1 | grep -E "^test |test result|agree" >>"$log"
settings="greedy,0.3/0/0.9,1/0/1,1/40/1,0.7/40/0.95,1/2000/1,1.5/0/0.95"
for round in 1 2; do
  for b in sample_bench-base sample_bench; do
    echo "== round $round $b real" >>"$log"
    timeout 40 "$bin/$b" --logits "$bin/smollm2-logits.npy" --settings "$settings" --reps 100 >>"$log" 2>&1
    echo "== round $round $b random 49152" >>"$log"
    timeout 40 "$bin/$b" --vocab 49152 --settings "$settings" --reps 100 >>"$log" 2>&1
  done
done
demo="--temperature 0.3 --top-p 0.9 --repeat-penalty 1.1"
for round in 1 2; do
  for m in smollm2 tinyllama 7b; do
    for s in "greedy" "demo" "t1" "k40"; do
      [ "$m" = 7b ] && [ "$s" != greedy ] && [ "$s" != demo ] && continue
      case $s in greedy) flags="";; demo) flags="$demo";; t1) flags="--temperature 1";; k40) flags="--temperature 1 --top-k 40";; esac
      for b in weft-base weft; do
        echo "== round $round $b $m $s int8" >>"$log"
        # shellcheck disable=SC2086
        timeout 60 "$bin/$b" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations $flags 2>&1 \
          | grep -E "^(decode|prefill)" >>"$log"
      done
    done
  done
done
echo "== profile new smollm2 demo" >>"$log"
timeout 60 "$bin/weft" bench /tmp/weft-models/smollm2-Q4_0.gguf --prompt-len 128 --gen 32 --reps 1 --int8-activations $demo --profile 2>&1 | grep -E "^(decode|step|sample|GPU)" >>"$log"
echo "== profile base smollm2 demo" >>"$log"
timeout 60 "$bin/weft-base" bench /tmp/weft-models/smollm2-Q4_0.gguf --prompt-len 128 --gen 32 --reps 1 --int8-activations $demo --profile 2>&1 | grep -E "^(decode|step|sample|GPU)" >>"$log"
grep -c "^decode" "$log"
