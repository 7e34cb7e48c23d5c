# The O projection as the decode attention's epilogue (note 52): the build before it (base, the
# code of 0cae5e6) against this one with the epilogue off and on, interleaved, three rounds:
# SmolLM2, TinyLlama and 7B Q4_0 and SmolLM2 Q8_0 at prompt 128 + 128, 8-bit and f32
# activations; SmolLM2 and TinyLlama at prompt 4096; SmolLM2's step profile either way.
set -uo pipefail
o=$OUT/a
. bench/gpu/setup.sh
(while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
smollm2 Q8_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
SPECS
touch "$models/.done")
run() { # label binary model prompt extra...
  local label=$1 b=$2 m=$3 pl=$4; shift 4
  local ms=""; [ "$pl" = 4096 ] && ms="--max-seq 4352"
  stamp "$label bench $m --prompt-len $pl $*"
  # shellcheck disable=SC2086
  timeout 90 "$bin/weft-$b" bench "$models/$m.gguf" --prompt-len "$pl" --gen 128 --reps 3 $ms "$@" 2>>"$o/weft.err" </dev/null \
    | grep -E "^decode|^prefill|dispatch" | tee -a "$o/session.log"
}
for round in 1 2 3; do
  for act in --int8-activations ""; do
    for m in smollm2-Q4_0 smollm2-Q8_0 tinyllama-Q4_0; do
      # shellcheck disable=SC2086
      run "base (round $round)" base $m 128 $act
      # shellcheck disable=SC2086
      run "new off (round $round)" new $m 128 --o-epilogue off $act
      # shellcheck disable=SC2086
      run "new on (round $round)" new $m 128 --o-epilogue on $act
    done
  done
  run "base (round $round)" base 7b-Q4_0 128 --int8-activations
  run "new (round $round)" new 7b-Q4_0 128 --int8-activations
done
for round in 1 2; do
  for m in smollm2-Q4_0 tinyllama-Q4_0; do
    run "new off (round $round)" new $m 4096 --o-epilogue off --int8-activations
    run "new on (round $round)" new $m 4096 --o-epilogue on --int8-activations
  done
done
for e in off on; do
  stamp "profile smollm2-Q4_0 --o-epilogue $e"
  timeout 90 "$bin/weft-new" bench "$models/smollm2-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations --o-epilogue $e --profile >"$o/profile-$e.txt" 2>>"$o/weft.err" </dev/null
done
stamp done
