# (f) The decode attention's chunk chosen by context length (decode_chunk_plan: heads of 128 in
# chunks of 64 up to 256 positions, 128 up to 512, 256 beyond) against the build before it
# (weft_old: chunks of 64 at every length): weft bench, 8-bit activations, on the 7B Q4_0 file
# at prompts of 4096, 1024 and 128 tokens + 128 generated, the builds interleaved.
set -uo pipefail
o=$OUT/f
. bench/gpu/setup.sh
f="$models/7b-Q4_0.gguf"
python3 bench/gpu/gen_quant_gguf.py "$f" Q4_0 4096 14336 32 32 8 32000 >>"$o/models.log" 2>&1
for p in 4096 1024 128; do
  for w in weft weft_old weft weft_old; do
    stamp "$w bench 7b Q4_0 --int8-activations --prompt-len $p"
    timeout 150 "$bin/$w" bench "$f" --prompt-len $p --gen 128 --reps 3 --int8-activations 2>>"$o/weft.err" | grep -E "decode|prefill|ttft|step " | tee -a "$o/session.log"
  done
done
echo "== done" | tee -a "$o/session.log"
