# (g) What the KV cache's bytes cost the 7B's decode attention at a chat's context: weft bench on
# the 7B Q4_0 file (8-bit activations, prompt 128 + 128) with the f32 cache (the folded RoPE +
# store + attention kernel) and with f16 and q8 caches (RoPE + store, split attention and its
# combine as separate dispatches), interleaved twice, then each once with --profile.
set -uo pipefail
o=$OUT/g
. bench/gpu/setup.sh
f="$models/7b-Q4_0.gguf"
python3 bench/gpu/gen_quant_gguf.py "$f" Q4_0 4096 14336 32 32 8 32000 >>"$o/models.log" 2>&1
for r in 1 2; do
  for kv in f32 f16 q8; do
    stamp "weft bench 7b Q4_0 --int8-activations --kv $kv"
    timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations --kv $kv 2>>"$o/weft.err" | grep -E "decode|step " | tee -a "$o/session.log"
  done
done
for kv in f32 f16; do
  stamp "weft bench 7b Q4_0 --int8-activations --kv $kv --profile"
  timeout 120 "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations --kv $kv --profile 2>>"$o/weft.err" | sed -n '/^decode/p;/^step/,$p' | tee -a "$o/session.log"
done
echo "== done" | tee -a "$o/session.log"
