# The O projection epilogue with named values only (no function-local arrays; oproj2.patch),
# weights loaded after the head's output: SmolLM2 Q4_0 and Q8_0 and TinyLlama Q4_0 (whose 32
# heads x 2048 rows the rule refuses; forced on it falls back), prompt 128 + 128, epilogue off
# and on, 8-bit and f32 activations, two rounds; SmolLM2's step profile off, on, and on without
# the cross-head sum (WEFT_ODIAG=1, the diagnostic build's cut).
set -uo pipefail
o=$OUT/d
. bench/gpu/setup.sh
(while read -r name ty dim ffn layers heads kv vocab; do
  python3 bench/gpu/gen_quant_gguf.py "$models/$name-$ty.gguf" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1 </dev/null
done <<'SPECS'
smollm2 Q4_0 576 1536 30 9 3 49152
smollm2 Q8_0 576 1536 30 9 3 49152
SPECS
touch "$models/.done")
run() { # label model prompt extra...
  local label=$1 m=$2 pl=$3; shift 3
  local ms=""; [ "$pl" = 4096 ] && ms="--max-seq 4352"
  stamp "$label bench $m --prompt-len $pl $*"
  # shellcheck disable=SC2086
  timeout 90 "$bin/weft-new" bench "$models/$m.gguf" --prompt-len "$pl" --gen 128 --reps 3 $ms "$@" 2>/dev/null </dev/null \
    | grep -E "^decode" | tee -a "$o/session.log"
}
for round in 1 2; do
  for act in --int8-activations ""; do
    for m in smollm2-Q4_0 smollm2-Q8_0; do
      # shellcheck disable=SC2086
      run "off (round $round)" $m 128 --o-epilogue off $act
      # shellcheck disable=SC2086
      run "on (round $round)" $m 128 --o-epilogue on $act
    done
  done
  run "off (round $round)" smollm2-Q4_0 4096 --o-epilogue off --int8-activations
  run "on (round $round)" smollm2-Q4_0 4096 --o-epilogue on --int8-activations
done
for v in off on 1; do
  e=on; [ "$v" = off ] && e=off
  d=""; [ "$v" = 1 ] && d=1
  stamp "profile $v"
  WEFT_ODIAG=$d timeout 90 "$bin/weft-new" bench "$models/smollm2-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations --o-epilogue $e --profile 2>/dev/null </dev/null \
    | grep -E "^decode|^step|attention_decode|GPU total" | sed -E 's/attention_decode\[[^]]*(OPROJ=1|ODIAG1=1)[^]]*\]/attention_decode[\1 ...]/' | tee -a "$o/session.log"
done
stamp done
