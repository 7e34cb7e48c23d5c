# (d) The decode attention's chunk at long contexts: attention_bench (caches hot) at contexts
# 256-2048 for the three head layouts, then weft bench on the 7B Q4_0 file at prompts of 1024
# and 4096 tokens (+ 128 generated) with chunks of 64 (the default for heads of 128) and 256.
set -uo pipefail
o=$OUT/d
. bench/gpu/setup.sh
stamp "attention_bench"
timeout 200 "$bin/attention_bench" --reps 400 --contexts 256,320,384,448,512,640,768,1024,2048 --chunks 64,128,256 2>&1 | tee -a "$o/session.log"
f="$models/7b-Q4_0.gguf"
python3 bench/gpu/gen_quant_gguf.py "$f" Q4_0 4096 14336 32 32 8 32000 >>"$o/models.log" 2>&1
for p in 4096 1024; do
  for c in 64 256 64 256; do
    stamp "weft bench 7b Q4_0 --int8-activations --prompt-len $p --attention-chunk $c"
    timeout 150 "$bin/weft" bench "$f" --prompt-len $p --gen 128 --reps 3 --int8-activations --attention-chunk $c 2>>"$o/weft.err" | grep -E "decode|prefill|ttft" | tee -a "$o/session.log"
  done
done
echo "== done" | tee -a "$o/session.log"
