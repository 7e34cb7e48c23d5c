# (h) The f16 KV cache in the folded decode attention kernel (RoPE + store + split attention +
# merge in one dispatch; before, f16 caches ran them as separate dispatches): weft bench, 8-bit
# activations, prompt 128 + 128, with the f32 and f16 caches, against the build before this
# session (weft_old) with the f16 cache; the 7B twice, SmolLM2 and TinyLlama once; then the 7B
# at prompt 4096 with each cache.
set -uo pipefail
o=$OUT/h
export MODEL_SPECS="7b Q4_0 4096 14336 32 32 8 32000
tinyllama Q4_0 2048 5632 22 32 4 32000
smollm2 Q4_0 576 1536 30 9 3 49152"
. bench/gpu/setup.sh
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  rounds=1; [ "$name" = 7b ] && rounds=2
  for r in $(seq $rounds); do
    for v in "weft f32" "weft f16" "weft_old f16"; do
      set -- $v
      stamp "$1 bench $name $ty --int8-activations --kv $2"
      timeout 120 "$bin/$1" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations --kv "$2" 2>>"$o/weft.err" | grep -E "decode|step " | tee -a "$o/session.log"
    done
  done
done <<<"$MODEL_SPECS"
for kv in f16 f32; do
  stamp "weft bench 7b Q4_0 --int8-activations --kv $kv --prompt-len 4096"
  timeout 150 "$bin/weft" bench "$models/7b-Q4_0.gguf" --prompt-len 4096 --gen 128 --reps 3 --int8-activations --kv $kv 2>>"$o/weft.err" | grep -E "decode|ttft" | tee -a "$o/session.log"
done
echo "== done" | tee -a "$o/session.log"
