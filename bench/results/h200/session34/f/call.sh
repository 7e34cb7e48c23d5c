# SmolLM2 and TinyLlama (heads of 64 dimensions) decode with the decode attention's chunk at 64,
# 128 and 256 positions (256 is the default for such heads, measured on an H100 in note 28), two
# rounds; then the step profile of each at the default (the build of c80a606's code, 74a5c27).
set -uo pipefail
o=$OUT/f
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
    for ch in 64 128 256; do
      stamp "weft bench $m Q4_0 --int8-activations --attention-chunk $ch (round $round)"
      timeout 60 "$bin/weft" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations --attention-chunk $ch 2>>"$o/weft.err" </dev/null \
        | grep -E "^(decode|prefill)" | tee -a "$o/session.log"
    done
  done
done
for m in smollm2 tinyllama; do
  stamp "weft bench $m Q4_0 --int8-activations --profile"
  timeout 60 "$bin/weft" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>>"$o/weft.err" </dev/null | tee -a "$o/session.log"
done
stamp done
