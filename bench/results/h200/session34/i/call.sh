# The committed form of the subgroup statistics (0cae5e6: the pairs summed in subgroup order)
# against the build before it (base, the code of c80a606), interleaved twice: SmolLM2, TinyLlama
# and 7B Q4_0, 8-bit activations, prompt 128 + 128; SmolLM2 and TinyLlama also at prompt 4096.
set -uo pipefail
o=$OUT/i
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
  for mp in smollm2:128 tinyllama:128 7b:128 smollm2:4096 tinyllama:4096; do
    m=${mp%%:*}; pl=${mp#*:}; ms=""
    [ "$pl" = 4096 ] && ms="--max-seq 4352"
    for b in base new; do
      stamp "weft-$b bench $m Q4_0 --int8-activations --prompt-len $pl (round $round)"
      # shellcheck disable=SC2086
      timeout 90 "$bin/weft-$b" bench "$models/$m-Q4_0.gguf" --prompt-len "$pl" --gen 128 --reps 3 $ms --int8-activations 2>>"$o/weft.err" </dev/null \
        | grep -E "^decode" | tee -a "$o/session.log"
    done
  done
done
stamp done
