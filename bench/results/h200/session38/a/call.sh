# (a) The q8 KV cache in the folded decode attention kernel (before, q8 caches ran the RoPE +
# store, split attention and combine as separate dispatches, which --no-fuse-attention still
# selects): weft bench, 8-bit activations, prompt 128 + 128, median of 3, q8 folded against q8
# separate, with the f16 and f32 caches (folded) beside; the 7B twice, TinyLlama and SmolLM2
# once; then the 7B at prompt 4096 with the q8 and f32 caches.
set -uo pipefail
o=$OUT/a
export MODEL_SPECS="7b Q4_0 4096 14336 32 32 8 32000
tinyllama Q4_0 2048 5632 22 32 4 32000
smollm2 Q4_0 576 1536 30 9 3 49152"
. bench/gpu/setup.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv | tee -a "$o/session.log"
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  rounds=1; [ "$name" = 7b ] && rounds=2
  for r in $(seq $rounds); do
    for v in "q8" "q8 --no-fuse-attention" "f16" "f32"; do
      stamp "weft bench $name $ty --int8-activations --kv $v"
      timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations --kv $v 2>>"$o/weft.err" | grep -E "decode|step " | tee -a "$o/session.log"
    done
  done
done <<<"$MODEL_SPECS"
for kv in q8 f32; do
  stamp "weft bench 7b Q4_0 --int8-activations --kv $kv --prompt-len 4096"
  timeout 150 "$bin/weft" bench "$models/7b-Q4_0.gguf" --prompt-len 4096 --gen 128 --reps 3 --int8-activations --kv $kv 2>>"$o/weft.err" | grep -E "decode|ttft" | tee -a "$o/session.log"
done
echo "== done" | tee -a "$o/session.log"
