# The subgroup statistics at long contexts: prompt 4096 + 128 generated (the decode attention over
# 16-17 chunks of 256 positions, merged by the last workgroup of each head), the build before
# (base) and bc00fd4 (new) interleaved twice, SmolLM2 and TinyLlama Q4_0, 8-bit activations.
set -uo pipefail
o=$OUT/h
. bench/gpu/setup.sh
(while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
SPECS
touch "$models/.done")
for round in 1 2; do
  for m in smollm2 tinyllama; do
    for b in base new; do
      stamp "weft-$b bench $m Q4_0 --int8-activations --prompt-len 4096 (round $round)"
      timeout 90 "$bin/weft-$b" bench "$models/$m-Q4_0.gguf" --prompt-len 4096 --gen 128 --reps 3 --max-seq 4352 --int8-activations 2>>"$o/weft.err" </dev/null \
        | grep -E "^(decode|prefill|ttft)" | tee -a "$o/session.log"
    done
  done
done
stamp done
