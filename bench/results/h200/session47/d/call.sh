# The decode attention writing its output as activation records for the O projection (note 73):
# the tests of this build on the H200, then weft bench of this build (weft) against the build
# before it (weft_old, f66704b), interleaved, two rounds, 8-bit activations: the 7B Q4_0 and
# Q8_0, TinyLlama and SmolLM2 Q4_0; the 7B Q4_0's tuning lines and step profile of each.
set -uo pipefail
o=$OUT/d; source bench/gpu/setup.sh
timeout 60 bash bench/gpu/session.sh "$o" "copy"
tlog="$o/tests.log"
for t in t-attention_records t-activation_records; do
  timeout 150 "$bin/$t" 2>&1 | grep -E "^test |test result|panicked|assert" >>"$tlog"
done
timeout 120 "$bin/t-kv_cache" swiglu_in_a_gemv_and_queued_steps_keep_the_ids 2>&1 | grep -E "^test |test result|panicked" >>"$tlog"
stamp tests
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000"
stamp models
blog="$o/bench.log"
for round in 1 2; do
  for f in 7b-Q4_0 7b-Q8_0 tinyllama-Q4_0 smollm2-Q4_0; do
    for b in weft_old weft; do
      echo "== $f int8 $b" >>"$blog"
      timeout 60 "$bin/$b" bench "$models/$f.gguf" --prompt-len 128 --gen 128 --reps 3 --int8-activations 2>&1 | grep -E "^(decode|prefill)" >>"$blog"
    done
  done
  stamp "round $round"
done
for b in weft_old weft; do
  echo "== profile 7b-Q4_0 int8 $b" >>"$blog"
  timeout 60 "$bin/$b" bench "$models/7b-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --profile 2>&1 \
    | grep -v -E "^  load|Weights:" >>"$blog"
done
stamp done
