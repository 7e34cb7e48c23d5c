# The L2 prefetch beside the decode step's GEMVs (note 72), as built: its tests on this GPU, then
# weft bench with --prefetch-mb 0 (off), 8, 16 and 32 interleaved, two rounds: the 7B Q4_0 at
# 8-bit activations, SmolLM2 and TinyLlama Q4_0 at 8-bit and f32; the 7B's step profile
# (each dispatch in its own pass, and the step in one) off and at 16.
set -uo pipefail
o=$OUT/b; source bench/gpu/setup.sh
timeout 60 bash bench/gpu/session.sh "$o" "copy"
tlog="$o/tests.log"
timeout 120 "$bin/t-l2_prefetch" 2>&1 | grep -E "^test |test result|panicked|assert" >>"$tlog"
timeout 120 "$bin/t-kv_cache" swiglu_in_a_gemv_and_queued_steps_keep_the_ids 2>&1 | grep -E "^test |test result|panicked" >>"$tlog"
stamp tests
while read -r name ty dim ffn layers heads kv vocab; do
  f="$models/$name-$ty.gguf"
  [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" >>"$o/models.log" 2>&1
done <<<"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000"
stamp models
blog="$o/bench.log"
run() { # file act mb
  local flags="--prefetch-mb $3"; [ "$2" = int8 ] && flags="$flags --int8-activations"
  echo "== $1 $2 prefetch $3" >>"$blog"
  # shellcheck disable=SC2086
  timeout 60 "$bin/weft" bench "$models/$1.gguf" --prompt-len 128 --gen 128 --reps 3 $flags 2>&1 | grep -E "^(decode|prefill)" >>"$blog"
}
for round in 1 2; do
  for mb in 0 8 16 32; do run 7b-Q4_0 int8 $mb; done
  stamp "7b round $round"
done
for round in 1 2; do
  for f in smollm2-Q4_0 tinyllama-Q4_0; do
    for act in int8 f32; do
      for mb in 0 16; do run $f $act $mb; done
    done
  done
  stamp "small round $round"
done
for mb in 0 16; do
  echo "== profile 7b-Q4_0 int8 prefetch $mb" >>"$blog"
  timeout 60 "$bin/weft" bench "$models/7b-Q4_0.gguf" --prompt-len 128 --gen 128 --reps 1 --int8-activations --prefetch-mb $mb --profile 2>&1 \
    | grep -v -E "^  (tuned|load)" >>"$blog"
done
stamp done
