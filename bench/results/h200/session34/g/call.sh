# The decode attention's softmax statistics by subgroup operations (one barrier for both, and
# no exchange of dots where a lane holds a position's whole dot): the build before (base, the
# code of c80a606) and this one (new) interleaved twice on SmolLM2, TinyLlama and 7B Q4_0
# files, 8-bit activations and f32, prompt 128 + 128; then the step profile of SmolLM2 with each.
set -uo pipefail
o=$OUT/g
. bench/gpu/setup.sh
(while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
SPECS
touch "$models/.done")
for round in 1 2; do
  for m in smollm2 tinyllama 7b; do
    for v in "--int8-activations" ""; do
      for b in base new; do
        stamp "weft-$b bench $m Q4_0 ${v:-(f32)} (round $round)"
        # shellcheck disable=SC2086
        timeout 60 "$bin/weft-$b" bench "$models/$m-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 $v 2>>"$o/weft.err" </dev/null \
          | grep -E "^decode" | tee -a "$o/session.log"
      done
    done
  done
done
for b in base new; do
  stamp "weft-$b bench smollm2 Q4_0 --int8-activations --profile"
  timeout 60 "$bin/weft-$b" bench "$models/smollm2-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>>"$o/weft.err" </dev/null \
    | grep -E "^(decode|step|attention|GPU)" | tee -a "$o/session.log"
done
stamp done
