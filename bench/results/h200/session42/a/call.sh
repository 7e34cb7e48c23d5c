# The sampler rebuilt (one call): greedy loads 32 logits a lane before the first comparison and
# meets (value, index) pairs in one tree; temperature sampling finds its top-k / top-p cut among
# at most 1024 candidates sorted in workgroup memory instead of 64 bisection passes over the
# vocabulary. The sampler's tests on this GPU, the kernel alone (sample_bench of the build
# before and this one, SmolLM2's real logits of three positions of one prompt and seeded flat /
# peaked ones), and weft bench of both builds interleaved twice (random-weight Q4_0 files,
# prompt 128 + 128, median of 3), greedy and as a page samples (temperature 0.3, top-p 0.9,
# repetition penalty 1.1), temperature 1 alone, top-k 40.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/a" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/a/ab.log"
echo "== test sampler" >>"$log"
timeout 120 "$bin/t-sampler" --nocapture 2>&1 | grep -E "^test |test result|agree" >>"$log"
for round in 1 2; do
  for b in sample_bench-base sample_bench; do
    echo "== round $round $b real" >>"$log"
    timeout 40 "$bin/$b" --logits "$bin/smollm2-logits.npy" >>"$log" 2>&1
    echo "== round $round $b random 49152" >>"$log"
    timeout 40 "$bin/$b" --vocab 49152 >>"$log" 2>&1
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
