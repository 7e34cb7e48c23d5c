# The sampler's cut narrowed by passes over twelve bounds until at most 1024 tokens lie around
# it (flat distributions and top-k above 1024 no longer bisect over the vocabulary). The same
# measurements as calls a and b, the kernel alone also at top-k 2000 and at temperature 1.5
# with top-p 0.95.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/c" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/c/ab.log"
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
