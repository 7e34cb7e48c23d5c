# The stacked Q/K/V GEMV (with its norm) computed inside the decode attention kernel, per head
# (shaders/attention_qkv.wgsl, WEFT_QKV_ATTENTION=1 in this diagnostic build), against the
# GEMV dispatched before the attention (=0), the same binary, interleaved, three rounds.
set -uo pipefail
MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152" \
WEFT_VARIANTS="" timeout 120 bash bench/gpu/session.sh "$OUT/b" "models"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
log="$OUT/b/ab.log"
m=/tmp/weft-models/smollm2-Q4_0.gguf
for v in 0 1; do
  echo "== ids fused=$v" >>"$log"
  WEFT_QKV_ATTENTION=$v timeout 60 "$bin/weft" generate $m --prompt "t1 t2 t3 t4 t5" --max-tokens 48 --ids 2>&1 | head -1 >>"$log"
done
for round in 1 2 3; do
  for act in int8 f32; do
    flags=""; [ "$act" = int8 ] && flags="--int8-activations"
    for v in 0 1; do
      echo "== round $round fused=$v smollm2 greedy $act" >>"$log"
      # shellcheck disable=SC2086
      WEFT_QKV_ATTENTION=$v timeout 60 "$bin/weft" bench $m --prompt-len 128 --gen 128 --reps 3 $flags 2>&1 \
        | grep -E "^(decode|prefill)" >>"$log"
    done
  done
done
for v in 0 1; do
  echo "== round 4 fused=$v smollm2 greedy int8 prompt 1024" >>"$log"
  WEFT_QKV_ATTENTION=$v timeout 60 "$bin/weft" bench $m --prompt-len 1024 --gen 128 --reps 3 --int8-activations 2>&1 | grep -E "^(decode|prefill)" >>"$log"
  echo "== profile fused=$v smollm2 int8" >>"$log"
  WEFT_QKV_ATTENTION=$v timeout 60 "$bin/weft" bench $m --prompt-len 128 --gen 32 --reps 1 --int8-activations --profile 2>&1 \
    | grep -E "^(decode|step|qgemv|attention|sample|qembed|GPU)" >>"$log"
done
grep -c "^decode" "$log"
