# (e) The decode attention with the head size a constant of the pipeline (HEAD_DIM, head-dim-constant.patch here, not kept), against the
# build before it (weft_old, attention_bench_old): attention_bench with the caches hot and
# cycled through 256 MiB, then weft bench (8-bit activations) on the SmolLM2, TinyLlama and 7B
# Q4_0 files at prompt 128 + 128, the two builds interleaved twice, and the 7B at prompt 4096
# with chunks of 64 and 256.
set -uo pipefail
o=$OUT/e
export MODEL_SPECS="smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
. bench/gpu/setup.sh
for b in attention_bench attention_bench_old; do
  stamp "$b hot"
  timeout 200 "$bin/$b" --reps 400 --contexts 1,128,192,256,384,512,768,1024,2048,4096 2>&1 | tee -a "$o/session.log"
done
for b in attention_bench attention_bench_old attention_bench attention_bench_old; do
  stamp "$b --rotate-mib 256"
  timeout 200 "$bin/$b" --reps 400 --contexts 128,192,256 --rotate-mib 256 2>&1 | tee -a "$o/session.log"
done
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
  for w in weft weft_old weft weft_old; do
    stamp "$w bench $name $ty --int8-activations"
    timeout 120 "$bin/$w" bench "$f" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>>"$o/weft.err" | grep -E "decode|prefill" | tee -a "$o/session.log"
  done
done <<<"$MODEL_SPECS"
for c in 64 256; do
  for w in weft weft_old; do
    stamp "$w bench 7b Q4_0 --int8-activations --prompt-len 4096 --attention-chunk $c"
    timeout 150 "$bin/$w" bench "$models/7b-Q4_0.gguf" --prompt-len 4096 --gen 128 --reps 3 --int8-activations --attention-chunk $c 2>>"$o/weft.err" | grep -E "decode|ttft" | tee -a "$o/session.log"
  done
done
echo "== done" | tee -a "$o/session.log"
