# How much of a decode step is the GPU's work: the step in one timed pass (`weft bench
# --profile`'s new "GPU step" line) against the decode loop's time per token, per file and
# activation width; and the loop without queueing ahead, for scale.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000" \
WEFT_VARIANTS="" timeout 240 bash bench/gpu/session.sh "$OUT/a" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/a/gap.log"
for round in 1 2; do
  for m in smollm2 tinyllama 7b; do
    for act in int8 f32; do
      flags=""; [ "$act" = int8 ] && flags="--int8-activations"
      echo "== round $round $m $act" >>"$log"
      # shellcheck disable=SC2086
      timeout 60 "$bin/weft" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $flags 2>&1 \
        | grep -E "^(decode|prefill)" >>"$log"
      echo "== round $round $m $act profile" >>"$log"
      # shellcheck disable=SC2086
      timeout 60 "$bin/weft" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 $flags --profile 2>&1 \
        | grep -E "^(decode|step|GPU)" >>"$log"
    done
  done
done
for m in smollm2 7b; do
  echo "== $m int8 no pipeline" >>"$log"
  timeout 60 "$bin/weft" bench "/tmp/weft-models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations --no-pipeline 2>&1 \
    | grep -E "^(decode)" >>"$log"
done
grep -c "^decode" "$log"
